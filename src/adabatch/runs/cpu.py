"""The CPU meter (:class:`CpuMeter`): CPU seconds that Spark used, from the operating
system's accounting (Linux ``/proc``, or psutil where there is no ``/proc``).

A local Spark run is a process tree under our Python process: the JVM that py4j started
(driver and executors), the Python workers and daemon the JVM forks, and our own process
(which runs ``foreachBatch`` functions). :func:`snapshot` reads the CPU time (user +
system) of every process in the tree, including what each has collected from its
finished, reaped children; :func:`cpu_seconds` is the CPU spent between two snapshots and
:class:`CpuMeter` adds it up over samples taken while a run goes on.

A process that ends between two snapshots is counted through its parent's reaped-children
time when its parent waits for it. PySpark's worker daemon does not: it ignores SIGCHLD,
so the kernel reaps its workers and their CPU time reaches nobody. Such a process's CPU
after the last snapshot that saw it is lost, so runs are sampled every half second
(:class:`CpuMeter`): comparing only a start and an end snapshot would lose a recycled
worker's whole lifetime (measured: whole runs reported as 0 CPU seconds). Processes
outside the tree (another user's Spark) are never counted.

What the tree covers depends on the master (:func:`run_scope`). Under a ``local`` master
it is the whole job. Under any other master (``spark://``, ``yarn``, ``k8s://``) the
executors run under the cluster's daemons, outside the tree: the tree would hold only the
driver's share, so :class:`RunMeter` reports the CPU as not measured, and says why.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adabatch.errors import AdabatchError
from adabatch.urls import redact_url

PROC = Path("/proc")
# Where CPU times come from: Linux /proc, psutil (macOS, Windows, BSD), or nowhere.
BACKENDS = ("proc", "psutil")
AUTO = "auto"
NONE = "none"
NOT_MEASURED = "not measured"
# Spark's local masters (SparkContext's LOCAL_N_REGEX, LOCAL_N_FAILURES_REGEX): the
# executors run inside the driver's JVM, a child of this process.
LOCAL_MASTER = re.compile(r"local(\[\s*(\*|\d+)\s*(,\s*\d+\s*)?\])?")


@dataclass(frozen=True)
class ProcessCpu:
    """One process: identity (pid and start time) and CPU seconds so far."""

    pid: int
    ppid: int
    started: float  # start time (/proc: clock ticks since boot; psutil: Unix time)
    name: str
    own_s: float  # utime + stime
    children_s: float  # cutime + cstime: reaped children

    @property
    def total_s(self) -> float:
        return self.own_s + self.children_s


@dataclass(frozen=True)
class CpuSnapshot:
    """CPU times of a process tree at one moment (``at``: Unix time)."""

    root: int
    at: float
    processes: tuple[ProcessCpu, ...]

    @property
    def total_s(self) -> float:
        """CPU seconds of the tree's live processes and their reaped children."""
        return sum(p.total_s for p in self.processes)


def default_backend() -> str:
    """``"proc"`` where ``/proc`` has this process, else ``"psutil"`` if it imports, else
    ``"none"``."""
    if (PROC / str(os.getpid()) / "stat").is_file():
        return "proc"
    try:
        import psutil  # noqa: F401
    except ImportError:
        return NONE
    return "psutil"


def _backend(name: str) -> str:
    """The backend ``name`` stands for; an error if it cannot measure here."""
    if name not in (*BACKENDS, AUTO):
        msg = f"CPU backend {name!r} is not allowed: allowed {', '.join(BACKENDS)} or {AUTO}"
        raise AdabatchError(msg)
    chosen = default_backend() if name == AUTO else name
    if chosen == NONE:
        msg = "CPU accounting needs /proc or psutil; this system has neither: pip install psutil"
        raise AdabatchError(msg)
    if chosen == "psutil":
        try:
            import psutil  # noqa: F401
        except ImportError:
            msg = "CPU backend 'psutil' needs psutil, which is not installed: pip install psutil"
            raise AdabatchError(msg) from None
    return chosen


def _read_stat(pid: int, ticks: float) -> ProcessCpu | None:
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None  # gone meanwhile
    # the command name is in parentheses and may contain spaces or parentheses itself
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state) of proc(5): ppid is 4, utime..cstime 14..17, start 22
    return ProcessCpu(
        pid=pid,
        ppid=int(fields[1]),
        started=int(fields[19]),
        name=name,
        own_s=(int(fields[11]) + int(fields[12])) / ticks,
        children_s=(int(fields[13]) + int(fields[14])) / ticks,
    )


def _proc_tree(root: int) -> list[ProcessCpu]:
    if not PROC.is_dir():
        msg = "CPU accounting from /proc needs Linux /proc, which this system does not have"
        raise AdabatchError(msg)
    ticks = float(os.sysconf("SC_CLK_TCK"))
    everyone = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            proc = _read_stat(int(entry.name), ticks)
            if proc is not None:
                everyone[proc.pid] = proc
    children: dict[int, list[int]] = {}
    for proc in everyone.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in everyone:
            tree.append(everyone[pid])
            todo.extend(children.get(pid, []))
    return tree


def _psutil_tree(root: int) -> list[ProcessCpu]:
    """The tree through psutil. Reaped-children times exist on Linux only; elsewhere they
    are 0 and a process's CPU after the last sample that saw it is lost."""
    import psutil

    try:
        top = psutil.Process(root)
        procs = [top, *top.children(recursive=True)]
    except psutil.Error as exc:
        msg = f"CPU accounting through psutil failed for process {root}: {exc}"
        raise AdabatchError(msg) from None
    tree = []
    for p in procs:
        try:
            with p.oneshot():
                times = p.cpu_times()
                tree.append(
                    ProcessCpu(
                        pid=p.pid,
                        ppid=p.ppid(),
                        started=p.create_time(),
                        name=p.name(),
                        own_s=times.user + times.system,
                        children_s=getattr(times, "children_user", 0.0)
                        + getattr(times, "children_system", 0.0),
                    )
                )
        except psutil.Error:
            continue  # gone meanwhile, or not ours to read
    return tree


def snapshot(root: int | None = None, backend: str = AUTO) -> CpuSnapshot:
    """CPU times of ``root`` (default: this process) and all its descendants, read by
    ``backend`` (``"proc"``, ``"psutil"`` or ``"auto"``: :func:`default_backend`)."""
    chosen = _backend(backend)
    root = os.getpid() if root is None else root
    at = time.time()
    tree = _proc_tree(root) if chosen == "proc" else _psutil_tree(root)
    return CpuSnapshot(root=root, at=at, processes=tuple(sorted(tree, key=lambda p: p.pid)))


def cpu_seconds(before: CpuSnapshot, after: CpuSnapshot) -> float:
    """CPU seconds the tree used between two snapshots of the same root.

    A process seen in both counts its own CPU time's growth; a new one all of it. A parent
    seen in both adds the growth of its reaped-children time, less what was counted
    before of its children that are gone (they are in that growth when it waited for
    them). A gone child nobody accounted for loses its CPU since ``before``.
    """
    if before.root != after.root:
        msg = f"snapshots of different process trees ({before.root} and {after.root})"
        raise AdabatchError(msg)
    old = {(p.pid, p.started): p for p in before.processes}
    new = {(p.pid, p.started): p for p in after.processes}
    gone_by_parent: dict[int, float] = {}
    for key, proc in old.items():
        if key not in new:
            gone_by_parent[proc.ppid] = gone_by_parent.get(proc.ppid, 0.0) + proc.total_s
    total = 0.0
    for key, proc in new.items():
        prev = old.get(key)
        if prev is None:  # born since ``before``: so were the children it reaped
            total += proc.total_s
            continue
        total += proc.own_s - prev.own_s
        reaped = proc.children_s - prev.children_s
        total += max(0.0, reaped - gone_by_parent.get(proc.pid, 0.0))
    return total


class CpuMeter:
    """CPU seconds of a process tree while it runs: :meth:`sample` it often (every
    ``interval_s`` at most; extra calls are free) and read :attr:`cpu_s`."""

    def __init__(
        self, root: int | None = None, interval_s: float = 0.5, backend: str = AUTO
    ) -> None:
        self.backend = _backend(backend)
        self.first = self.last = snapshot(root, self.backend)
        self.interval_s = interval_s
        self.cpu_s = 0.0

    @property
    def wall_s(self) -> float:
        """Seconds from the first to the latest sample."""
        return self.last.at - self.first.at

    def sample(self, *, force: bool = False) -> float:
        """Take a snapshot if ``interval_s`` has passed (or ``force``); the CPU so far."""
        if force or time.time() - self.last.at >= self.interval_s:
            current = snapshot(self.last.root, self.backend)
            self.cpu_s += cpu_seconds(self.last, current)
            self.last = current
        return self.cpu_s


@dataclass(frozen=True)
class CpuScope:
    """What a run's CPU figure covers (``measured``), or why there is none (``text``)."""

    measured: bool
    text: str
    backend: str = NONE


def is_local_master(master: str) -> bool:
    """Whether ``master`` runs the executors inside the driver (``local``, ``local[4]``,
    ``local[*]``, ``local[2,3]``)."""
    return LOCAL_MASTER.fullmatch(str(master).strip()) is not None


def run_scope(master: str | None, backend: str = AUTO) -> CpuScope:
    """What this process tree's CPU covers for a Spark job on ``master`` (``None``: a
    remote session, e.g. Spark Connect) with ``backend``."""
    if master is None:
        return CpuScope(False, f"{NOT_MEASURED}: Spark runs outside this process (remote session)")
    if not is_local_master(master):
        return CpuScope(
            False,
            f"{NOT_MEASURED}: executors run outside this process (master {redact_url(master)})",
        )
    chosen = default_backend() if backend == AUTO else backend
    if chosen not in BACKENDS:
        return CpuScope(False, f"{NOT_MEASURED}: this system has neither /proc nor psutil")
    where = "/proc" if chosen == "proc" else "psutil"
    return CpuScope(True, f"driver process tree (local master, {where})", chosen)


def cost_summary(cpu_s: float | None, records: int, wall_s: float) -> dict[str, float | None]:
    """The cost fields of a run summary: CPU seconds, per million records, cores used
    (all ``None`` when the CPU was not measured)."""
    if cpu_s is None:
        return {"cpu_s": None, "cpu_s_per_million_records": None, "cpu_cores_used": None}
    return {
        "cpu_s": cpu_s,
        "cpu_s_per_million_records": cpu_s / records * 1e6 if records > 0 else None,
        "cpu_cores_used": cpu_s / wall_s if wall_s > 0 else None,
    }


BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def host_boot() -> str | None:
    """This boot of this machine (Linux's boot id), ``None`` where there is none. A bench
    that spans sessions may resume on another host: CPU figures compare only within one."""
    try:
        return BOOT_ID.read_text(encoding="ascii").strip() or None
    except OSError:
        return None


class RunMeter:
    """The wall time of a Spark run and, where this process tree holds the whole job
    (:func:`run_scope`), its CPU; :meth:`cost` gives the summary's cost fields with
    ``cpu_measured`` and ``cpu_scope`` saying what the figures cover, and ``host_boot``
    where they were measured."""

    def __init__(
        self,
        master: str | None,
        *,
        backend: str = AUTO,
        interval_s: float = 0.5,
        root: int | None = None,
    ) -> None:
        self.started = self.last_at = time.time()
        self.scope = run_scope(master, backend)
        self.meter: CpuMeter | None = None
        if self.scope.measured:
            try:
                self.meter = CpuMeter(root, interval_s, self.scope.backend)
            except AdabatchError as exc:
                self._lost(str(exc))
        if self.meter is not None and not any(_is_jvm(p) for p in self.meter.first.processes):
            # a local master whose JVM is not our child (spark-submit started this process)
            self._lost("the Spark JVM is not a child of this process")

    def _lost(self, why: str) -> None:
        self.meter = None
        self.scope = CpuScope(False, f"{NOT_MEASURED}: {why}")

    @property
    def wall_s(self) -> float:
        """Seconds from the start to the latest sample."""
        return self.last_at - self.started

    @property
    def cpu_s(self) -> float | None:
        """CPU seconds so far, ``None`` when not measured."""
        return None if self.meter is None else self.meter.cpu_s

    def sample(self, *, force: bool = False) -> float | None:
        """Sample the meter (see :meth:`CpuMeter.sample`); the CPU so far or ``None``."""
        self.last_at = time.time()
        if self.meter is not None:
            try:
                self.meter.sample(force=force)
            except AdabatchError as exc:  # a partial figure would understate the cost
                self._lost(str(exc))
        return self.cpu_s

    def cost(self, records: int) -> dict[str, Any]:
        """The cost fields for a run that processed ``records`` records."""
        return {
            **cost_summary(self.cpu_s, records, self.wall_s),
            "cpu_measured": self.scope.measured,
            "cpu_scope": self.scope.text,
            "host_boot": host_boot(),
        }


def _is_jvm(proc: ProcessCpu) -> bool:
    return proc.name == "java" or proc.name.startswith("java")


def session_master(spark: Any) -> str | None:
    """The master of a SparkSession's executors (``spark.sparkContext.master``); ``None``
    for a session without a local SparkContext (Spark Connect: Spark runs elsewhere)."""
    try:
        return str(spark.sparkContext.master)
    except Exception:  # Connect sessions raise on sparkContext (a PySpark error or more)
        return None
