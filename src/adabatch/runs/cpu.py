"""The CPU meter (:class:`CpuMeter`): CPU seconds that Spark used, from the operating
system's accounting (Linux ``/proc``).

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
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from adabatch.errors import AdabatchError

PROC = Path("/proc")


@dataclass(frozen=True)
class ProcessCpu:
    """One process: identity (pid and start time) and CPU seconds so far."""

    pid: int
    ppid: int
    started: int  # start time in clock ticks since boot (tells reused pids apart)
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


def snapshot(root: int | None = None) -> CpuSnapshot:
    """CPU times of ``root`` (default: this process) and all its descendants."""
    if not PROC.is_dir():
        msg = "CPU accounting needs Linux /proc, which this system does not have"
        raise AdabatchError(msg)
    root = os.getpid() if root is None else root
    ticks = float(os.sysconf("SC_CLK_TCK"))
    at = time.time()
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

    def __init__(self, root: int | None = None, interval_s: float = 0.5) -> None:
        self.first = self.last = snapshot(root)
        self.interval_s = interval_s
        self.cpu_s = 0.0

    @property
    def wall_s(self) -> float:
        """Seconds from the first to the latest sample."""
        return self.last.at - self.first.at

    def sample(self, *, force: bool = False) -> float:
        """Take a snapshot if ``interval_s`` has passed (or ``force``); the CPU so far."""
        if force or time.time() - self.last.at >= self.interval_s:
            current = snapshot(self.last.root)
            self.cpu_s += cpu_seconds(self.last, current)
            self.last = current
        return self.cpu_s


def cost_summary(cpu_s: float, records: int, wall_s: float) -> dict[str, float | None]:
    """The cost fields of a run summary: CPU seconds, per million records, cores used."""
    return {
        "cpu_s": cpu_s,
        "cpu_s_per_million_records": cpu_s / records * 1e6 if records > 0 else None,
        "cpu_cores_used": cpu_s / wall_s if wall_s > 0 else None,
    }
