"""A Spark standalone cluster on this machine, from the installed pyspark: what
``adabatch cluster up | down | status`` does.

:func:`up` starts a master and ``workers`` workers with pyspark's own
``sbin/spark-daemon.sh`` (``SPARK_HOME`` is the pyspark package directory; it ships the
daemon script and ``bin/spark-class`` but no ``start-master.sh``), bound to 127.0.0.1 only,
and waits until every worker has registered with the master (the master's web UI JSON on
loopback). Workers run Python with this interpreter (``PYSPARK_PYTHON``), so executors
import the same adabatch as the driver.

Everything lives in one directory (``--dir``): ``cluster.json`` (what was started and
created: the marker that :func:`down` reads), and ``pids/``, ``logs/``, ``work/``
(executors' working directories), ``local/`` (their scratch space) and ``conf/``.
:func:`down` stops the daemons it started (identified by pid and start time, never by
name) and their executors, and removes only what :func:`up` created.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from adabatch.errors import AdabatchError, shown
from adabatch.outputs import MARKER, is_marked, mark_dir, write_atomic

HOST = "127.0.0.1"
DEFAULT_DIR = Path("~/.adabatch/cluster")
STATE_FILE = "cluster.json"
SUBDIRS = ("conf", "pids", "logs", "work", "local")
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
IDENT = "adabatch"  # SPARK_IDENT_STRING: part of the pid and log file names
DAEMON_MEMORY = "512m"  # heap of the master and worker daemons (not of the executors)
# The daemons only schedule: the client compiler and the serial collector start them
# faster and leave the cores to the executors (not the executors' own settings).
DAEMON_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# spark-daemon.sh waits up to 7 s for a daemon's JVM; the JVM needs a few more to bind.
LAUNCH_TIMEOUT_S = 60.0
DEFAULT_TIMEOUT_S = 90.0  # longest wait for the master and every worker to be up
STOP_TIMEOUT_S = 20.0  # SIGTERM, then SIGKILL after this long
MAX_WORKERS = 64
MAX_CORES = 256
POLL_S = 0.25
NOT_UP = 3  # the exit status of ``status`` when no cluster is up (as LSB init scripts do)


@dataclass(frozen=True)
class ClusterSpec:
    """What :func:`up` starts: ``workers`` workers of ``cores`` cores and ``memory``
    (Spark's notation, e.g. ``1g``) each, a master on ``port`` with its web UI on
    ``webui_port``, everything in ``directory``."""

    workers: int = 2
    port: int = 7077
    webui_port: int = 8080
    cores: int = 1
    memory: str = "1g"
    directory: Path = DEFAULT_DIR

    def check(self) -> None:
        """Every value in range, one line naming a bad one."""
        checks = (
            ("--workers", self.workers, 1, MAX_WORKERS),
            ("--port", self.port, 1, 65535),
            ("--webui-port", self.webui_port, 1, 65535),
            ("--cores", self.cores, 1, MAX_CORES),
        )
        for flag, value, low, high in checks:
            if not (low <= value <= high):
                msg = f"{flag} {value}: allowed an integer from {low} to {high}"
                raise AdabatchError(msg)
        if self.port == self.webui_port:
            msg = f"--port and --webui-port are both {self.port}: allowed two different ports"
            raise AdabatchError(msg)
        memory = self.memory.strip().lower()
        if not (memory[:-1].isdigit() and memory[-1:] in ("m", "g") and int(memory[:-1]) > 0):
            msg = f"--memory {shown(self.memory)} is not allowed: allowed e.g. 512m or 2g"
            raise AdabatchError(msg)


@dataclass(frozen=True)
class Daemon:
    """A daemon :func:`up` started: its role, instance number, pid and start time (Unix
    time, so a reused pid is never taken for it)."""

    role: str
    instance: int
    pid: int
    started: float

    def process(self) -> Any | None:
        """The running process (a ``psutil.Process``), ``None`` if it is gone."""
        import psutil

        try:
            proc = psutil.Process(self.pid)
            same = abs(proc.create_time() - self.started) < 0.5
            if same and proc.status() != psutil.STATUS_ZOMBIE:
                return proc
        except psutil.Error:
            pass
        return None


@dataclass(frozen=True)
class ClusterState:
    """``cluster.json``: the cluster :func:`up` started and what it created."""

    master: str
    web_ui: str
    workers: int
    cores: int
    memory: str
    python: str
    spark_home: str
    daemons: tuple[Daemon, ...] = ()
    made: tuple[str, ...] = ()  # subdirectories up created
    made_dir: bool = False  # up created the directory itself
    made_marker: bool = False  # up wrote the directory's adabatch marker

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def read(cls, directory: Path) -> ClusterState | None:
        """The state in ``directory``, ``None`` if there is none."""
        path = directory / STATE_FILE
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            daemons = tuple(Daemon(**d) for d in data.pop("daemons"))
            made = tuple(data.pop("made"))
            return cls(**data, daemons=daemons, made=made)
        except (ValueError, TypeError, KeyError) as exc:
            msg = f"{shown(str(path))} is not a cluster state file ({exc}): remove it by hand"
            raise AdabatchError(msg) from None

    def alive(self) -> list[Daemon]:
        """The daemons still running."""
        return [d for d in self.daemons if d.process() is not None]


@dataclass(frozen=True)
class ClusterStatus:
    """What runs: the state (``None``: no cluster here), the daemons alive, and what the
    master's web UI says (``None`` when it does not answer)."""

    directory: Path
    state: ClusterState | None
    alive: tuple[Daemon, ...] = ()
    master_info: dict[str, Any] | None = field(default=None)

    @property
    def up(self) -> bool:
        """Whether the master and every worker run and have registered."""
        if self.state is None or self.master_info is None:
            return False
        workers = int(self.master_info.get("aliveworkers", 0))
        return len(self.alive) == 1 + self.state.workers and workers >= self.state.workers

    def lines(self) -> list[str]:
        """What ``adabatch cluster status`` prints."""
        where = shown(str(self.directory))
        if self.state is None:
            return [f"no cluster in {where}"]
        s = self.state
        head = "cluster up" if self.up else "cluster NOT fully up"
        out = [f"{head}: master {s.master}, web UI {s.web_ui} ({where})"]
        for d in s.daemons:
            state = "running" if d in self.alive else "NOT running"
            out.append(f"  {d.role} {d.instance}: pid {d.pid} {state}")
        if self.master_info is None:
            out.append("  the master's web UI does not answer")
        else:
            info = self.master_info
            out.append(
                f"  workers registered {info.get('aliveworkers', 0)} of {s.workers} "
                f"({s.cores} core(s) and {s.memory} each); applications running "
                f"{len(info.get('activeapps', []))}"
            )
        return out


def spark_home() -> Path:
    """The installed pyspark package directory, which holds Spark's jars and scripts."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        msg = "the cluster needs pyspark, which is not installed: pip install 'adabatch[spark]'"
        raise AdabatchError(msg)
    home = Path(spec.origin).parent
    if not (home / "sbin" / "spark-daemon.sh").is_file():
        msg = f"pyspark in {shown(str(home))} has no sbin/spark-daemon.sh: reinstall pyspark"
        raise AdabatchError(msg)
    return home


def check_java() -> str:
    """The ``java`` that spark-class will run (``$JAVA_HOME/bin/java`` or the one on the
    PATH); an error when there is none."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        java = Path(java_home) / "bin" / "java"
        if not os.access(java, os.X_OK):
            msg = f"JAVA_HOME={shown(java_home)} has no bin/java: set it to a JDK 17 or newer"
            raise AdabatchError(msg)
        return str(java)
    found = shutil.which("java")
    if found is None:
        msg = "java is not installed (no java on the PATH, JAVA_HOME unset): Spark needs Java 17+"
        raise AdabatchError(msg)
    return found


def check_port_free(port: int, flag: str) -> None:
    """An error when something listens on ``HOST:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            why = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be used ({exc})"
            msg = f"{flag} {port}: port {port} on {HOST} {why}: choose another {flag}"
            raise AdabatchError(msg) from None


def free_port() -> int:
    """A port on ``HOST`` that nothing listens on now (for tests and scripts)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def master_info(web_ui: str, timeout_s: float = 2.0) -> dict[str, Any] | None:
    """The master web UI's JSON (``/json/``), ``None`` when it does not answer."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
    try:
        with opener.open(f"{web_ui}/json/", timeout=timeout_s) as resp:
            return dict(json.loads(resp.read().decode("utf-8")))
    except (OSError, ValueError, urllib.error.URLError):
        return None


def status(directory: Path | str = DEFAULT_DIR) -> ClusterStatus:
    """What runs in ``directory``'s cluster."""
    root = Path(directory).expanduser()
    state = ClusterState.read(root)
    if state is None:
        return ClusterStatus(root, None)
    alive = tuple(state.alive())
    info = master_info(state.web_ui) if any(d.role == "master" for d in alive) else None
    return ClusterStatus(root, state, alive, info)


def _environment(root: Path, home: Path, spec: ClusterSpec) -> dict[str, str]:
    """The daemons' environment: Spark's own variables pointing into ``root``, loopback
    only, workers running this Python."""
    env = dict(os.environ)
    env.update(
        {
            "SPARK_HOME": str(home),
            "SPARK_CONF_DIR": str(root / "conf"),
            "SPARK_PID_DIR": str(root / "pids"),
            "SPARK_LOG_DIR": str(root / "logs"),
            "SPARK_WORKER_DIR": str(root / "work"),
            "SPARK_LOCAL_DIRS": str(root / "local"),
            "SPARK_IDENT_STRING": IDENT,
            "SPARK_LOCAL_IP": HOST,
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            "SPARK_DAEMON_JAVA_OPTS": os.environ.get("SPARK_DAEMON_JAVA_OPTS", "")
            + f" {DAEMON_JAVA_OPTS}",
            # no REST submission server, and no silent move to the next port when taken
            "SPARK_MASTER_OPTS": os.environ.get("SPARK_MASTER_OPTS", "")
            + " -Dspark.master.rest.enabled=false -Dspark.port.maxRetries=0",
            "PYSPARK_PYTHON": sys.executable,
        }
    )
    env.pop("SPARK_ENV_LOADED", None)
    return env


def _pid_file(root: Path, cls: str, instance: int) -> Path:
    return root / "pids" / f"spark-{IDENT}-{cls}-{instance}.pid"


def _launch(
    home: Path, env: dict[str, str], cls: str, instances: Sequence[int], args: Sequence[str]
) -> list[subprocess.Popen[bytes]]:
    """``spark-daemon.sh start CLS I ARGS`` for every instance, all at once. The script
    writes the pid file at once but then sleeps a few seconds before it returns: the
    launchers are returned, to be reaped by :func:`_reap` once the daemons are up."""
    script = home / "sbin" / "spark-daemon.sh"
    return [
        subprocess.Popen(
            ["bash", str(script), "start", cls, str(i), *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        for i in instances
    ]


def _reap(launchers: Sequence[subprocess.Popen[bytes]]) -> None:
    for run in launchers:
        try:
            run.wait(timeout=LAUNCH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            run.kill()
            run.wait()


def _daemons(
    root: Path,
    role: str,
    cls: str,
    instances: Sequence[int],
    launchers: Sequence[subprocess.Popen[bytes]],
) -> list[Daemon]:
    """The daemons the launchers started, from their pid files (written as each starts;
    the pid stays the daemon's through nohup, nice and spark-class, which exec)."""
    import psutil

    deadline = time.monotonic() + LAUNCH_TIMEOUT_S
    found: dict[int, Daemon | None] = {}
    while len(found) < len(instances) and time.monotonic() < deadline:
        for i, run in zip(instances, launchers, strict=True):
            if i in found:
                continue
            try:
                pid = int(_pid_file(root, cls, i).read_text().strip())
                found[i] = Daemon(role, i, pid, psutil.Process(pid).create_time())
            except (OSError, ValueError, psutil.Error):
                if run.poll() is not None:  # the launcher ended without a running daemon
                    found[i] = None
        time.sleep(0.05)
    return [d for d in found.values() if d is not None]


def _log_hint(root: Path, cls: str, instance: int) -> str:
    """Why a daemon failed, from its log: a port in use, else where the log is."""
    logs = sorted((root / "logs").glob(f"spark-{IDENT}-{cls}-{instance}-*.out"))
    text = logs[-1].read_text(errors="replace") if logs else ""
    if "BindException" in text or "Address already in use" in text:
        return "a port it needs is in use"
    return f"see {shown(str(logs[-1]))}" if logs else "it wrote no log"


def _check_not_up(root: Path) -> ClusterState | None:
    """An error when a cluster of ``root`` runs; its stale state (or ``None``) if not."""
    old = ClusterState.read(root)
    if old is not None and old.alive():
        msg = (
            f"a cluster is already up in {shown(str(root))} (master {old.master}): "
            f"adabatch cluster down --dir {shown(str(root))} first"
        )
        raise AdabatchError(msg)
    return old


def _prepare(root: Path, spec: ClusterSpec) -> tuple[bool, bool, tuple[str, ...]]:
    """Create the directory and its subdirectories: (made the directory, wrote its
    marker, subdirectories made). A directory with files adabatch did not make, or with a
    cluster still running, is refused."""
    old = _check_not_up(root)
    if old is not None:
        _remove(root, old)  # a stale one: its daemons are gone
    made_dir = not root.exists()
    if not made_dir and not is_marked(root) and any(root.iterdir()):
        msg = (
            f"--dir {shown(str(root))} holds files adabatch did not make: "
            "use an empty or new directory"
        )
        raise AdabatchError(msg)
    made_marker = made_dir or not is_marked(root)
    mark_dir(root, what="--dir")
    made = []
    for name in SUBDIRS:
        sub = root / name
        if sub.exists() or sub.is_symlink():
            msg = f"{shown(str(sub))} exists and was not made by adabatch cluster: remove it"
            raise AdabatchError(msg)
        sub.mkdir()
        made.append(name)
    return made_dir, made_marker, tuple(made)


def up(
    spec: ClusterSpec,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    echo: Callable[[str], None] | None = None,
) -> ClusterState:
    """Start the master and the workers and wait until every worker has registered;
    the state written to ``cluster.json``. On failure everything started is stopped."""
    spec.check()
    home = spark_home()
    check_java()
    root = spec.directory.expanduser().absolute()
    _check_not_up(root)
    check_port_free(spec.port, "--port")
    check_port_free(spec.webui_port, "--webui-port")
    made_dir, made_marker, made = _prepare(root, spec)
    state = ClusterState(
        master=f"spark://{HOST}:{spec.port}",
        web_ui=f"http://{HOST}:{spec.webui_port}",
        workers=spec.workers,
        cores=spec.cores,
        memory=spec.memory.strip().lower(),
        python=sys.executable,
        spark_home=str(home),
        made=made,
        made_dir=made_dir,
        made_marker=made_marker,
    )
    write_atomic(root / STATE_FILE, state.to_json().encode())
    try:
        state = _start(root, home, spec, state, timeout_s, echo or (lambda _: None))
    except BaseException:
        _stop(_read_or(root, state))
        raise
    return state


def _read_or(root: Path, state: ClusterState) -> ClusterState:
    with contextlib.suppress(AdabatchError):
        return ClusterState.read(root) or state
    return state


def _start(
    root: Path,
    home: Path,
    spec: ClusterSpec,
    state: ClusterState,
    timeout_s: float,
    echo: Callable[[str], None],
) -> ClusterState:
    env = _environment(root, home, spec)
    deadline = time.monotonic() + timeout_s
    master_args = ["--host", HOST, "--port", str(spec.port), "--webui-port", str(spec.webui_port)]
    echo(f"starting the master on {state.master} ...")
    launchers = _launch(home, env, MASTER_CLASS, [1], master_args)
    try:
        state = _record(root, state, _daemons(root, "master", MASTER_CLASS, [1], launchers))
        _wait(root, state, 0, deadline, lambda: _failed(root, state, MASTER_CLASS, [1]))
        echo(f"starting {spec.workers} worker(s) ...")
        worker_args = ["--host", HOST, "--cores", str(spec.cores), "--memory", state.memory]
        worker_args += ["--webui-port", "0", "--work-dir", str(root / "work"), state.master]
        instances = list(range(1, spec.workers + 1))
        more = _launch(home, env, WORKER_CLASS, instances, worker_args)
        launchers += more
        workers = _daemons(root, "worker", WORKER_CLASS, instances, more)
        state = _record(root, state, [*state.daemons, *workers])
        _wait(
            root,
            state,
            spec.workers,
            deadline,
            lambda: _failed(root, state, WORKER_CLASS, instances),
        )
    finally:
        _reap(launchers)
    return state


def _record(root: Path, state: ClusterState, daemons: Sequence[Daemon]) -> ClusterState:
    """``state`` with the daemons that started, written to ``cluster.json`` at once (so
    ``down`` finds them whatever happens next)."""
    state = replace(state, daemons=tuple(daemons))
    write_atomic(root / STATE_FILE, state.to_json().encode())
    return state


def _failed(root: Path, state: ClusterState, cls: str, instances: Sequence[int]) -> str | None:
    """Why a daemon of ``cls`` is not running, ``None`` while they all run."""
    role = "master" if cls == MASTER_CLASS else "worker"
    running = {d.instance for d in state.alive() if d.role == role}
    for i in instances:
        if i not in running:
            name = role if role == "master" else f"worker {i}"
            return f"the {name} did not start: {_log_hint(root, cls, i)}"
    return None


def _wait(
    root: Path,
    state: ClusterState,
    workers: int,
    deadline: float,
    failed: Callable[[], str | None],
) -> None:
    """Wait until the master is ALIVE with ``workers`` registered workers."""
    while True:
        info = master_info(state.web_ui)
        alive = info is not None and info.get("status") == "ALIVE"
        if alive and int(info.get("aliveworkers", 0)) >= workers:
            return
        why = failed()
        if why is not None:
            raise AdabatchError(why)
        if time.monotonic() > deadline:
            what = "the master" if workers == 0 else f"{workers} workers"
            msg = f"{what} did not come up in time: see the logs in {shown(str(root / 'logs'))}"
            raise AdabatchError(msg)
        time.sleep(POLL_S)


def _stop(state: ClusterState, timeout_s: float = STOP_TIMEOUT_S) -> list[Daemon]:
    """Stop the daemons of ``state`` that still run, and the executors under them:
    SIGTERM, then SIGKILL after ``timeout_s``. Returns the daemons that were running."""
    import psutil

    running = [(d, d.process()) for d in state.daemons]
    running = [(d, p) for d, p in running if p is not None]
    procs = []
    for _, proc in sorted(running, key=lambda dp: dp[0].role == "master"):  # workers first
        with contextlib.suppress(psutil.Error):
            procs.extend(proc.children(recursive=True))  # executors and their Python
            procs.append(proc)
            proc.terminate()
    _, left = psutil.wait_procs(procs, timeout=timeout_s)
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(left, timeout=5.0)
    return [d for d, _ in running]


def _remove(root: Path, state: ClusterState) -> None:
    """Remove what ``up`` created in ``root`` (its subdirectories, the state file, the
    marker and the directory itself when up made them), nothing else."""
    for name in state.made:
        if name in SUBDIRS and (root / name).is_dir() and not (root / name).is_symlink():
            shutil.rmtree(root / name)
    with contextlib.suppress(FileNotFoundError):
        (root / STATE_FILE).unlink()
    if state.made_marker:
        with contextlib.suppress(FileNotFoundError):
            (root / MARKER).unlink()
    if state.made_dir:
        with contextlib.suppress(OSError):
            root.rmdir()  # only if empty: a file someone else put there stays


def down(directory: Path | str = DEFAULT_DIR) -> tuple[ClusterState | None, list[Daemon]]:
    """Stop ``directory``'s cluster and remove what :func:`up` created: (its state, the
    daemons that were running); ``(None, [])`` when there is no cluster."""
    root = Path(directory).expanduser().absolute()
    state = ClusterState.read(root)
    if state is None:
        return None, []
    stopped = _stop(state)
    _remove(root, state)
    return state, stopped
