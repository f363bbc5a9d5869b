"""Run ``adabatch`` on hostile input inside a sentinel tree, and check what it promises.

Every case runs in a fresh case root ``R`` (a temporary directory) with the working
directory ``R/work`` and a sentinel tree around it: files and directories with known
content, a symlink planted in a previous output directory (``prior/summary.json ->
../../victim.txt``), a symlinked spec name, a FIFO, siblings that look like targets
(``results/``, ``staging/``, ``docs/results-figures/``), and ``HOME`` and ``TMPDIR``
pointing inside ``R``. After the run :func:`check` asserts the promises of
docs/reliability.md:

- the exit status is 0 or 2 (not 1, not a signal, not the wall or CPU limit);
- stderr holds no traceback, and on status 2 it is exactly one line
  ``adabatch: error: ...``;
- nothing under ``R`` changed except inside the output the case named (a snapshot of
  paths, types, sizes, hashes, mtimes and symlink targets); inside it, files adabatch did
  not create survive, and a planted symlink's target is never written;
- on status 0 every JSON output parses as RFC 8259 JSON (no NaN or Infinity), and a
  simulation run ends with its ``summary.json``.

Two ways to run a case, with the same limits (address space, CPU seconds, file size, and
a wall-clock timeout that kills the process group):

- :func:`run_subprocess`: ``python -m adabatch.cli ARGV`` in a new process, limits set by
  ``preexec_fn``. Faithful, but the interpreter start and imports cost about 1.5-2.5 s on
  the 2-core CI machine, so a few thousand cases cannot fit in 3 minutes this way.
- :class:`ForkServer`: one interpreter imports ``adabatch.cli`` once (forkserver.py), then
  forks a child per case, which sets the limits and calls ``main(argv)`` exactly as the
  console script does (about 10 ms per fork). Two children run at once to use both cores.
  The bulk of the suite uses this; a test checks both paths agree on sample cases.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MEM_BYTES = int(os.environ.get("FUZZ_MEM_BYTES", 2 << 30))
CPU_S = int(os.environ.get("FUZZ_CPU_S", 20))
WALL_S = float(os.environ.get("FUZZ_WALL_S", 30))
FSIZE_BYTES = 512 << 20
HASHED_BYTES = 1 << 20

# Names adabatch writes into an output directory: a file of that name left there by an
# earlier run (or a planted symlink) may be replaced or removed; any other file may not.
OUTPUT_NAMES = frozenset(
    {
        "summary.json",
        "metrics.jsonl",
        "timeline.png",
        "sweep.json",
        "cases.csv",
        "toxic.csv",
        "trajectories.png",
        "INCOMPLETE",
    }
)

DIR = object()  # a file entry that is a directory
FIFO = object()  # a file entry that is a named pipe


def _symlink(target: str) -> tuple[str, str]:
    return ("symlink", target)


# The sentinel tree, relative to the case root R (cwd is R/work).
SENTINELS: dict[str, Any] = {
    "victim.txt": b"victim: must never change\n",
    "victim2.txt": b"second victim\n",
    "etc/passwd": b"root:x:0:0:root:/root:/bin/sh\n",
    "home/thesis/chapter1.txt": b"years of work\n",
    "home/staging/keep.bin": b"\x00\x01",
    "tmp": DIR,
    "work/keep/a.txt": b"keep a\n",
    "work/keep/sub/b.txt": b"keep b\n",
    "work/results/index.md": b"# someone else's results\n",
    "work/staging/part-0.csv": b"x\n1\n",
    "work/landing/part-0.csv": b"y\n2\n",
    "work/docs/results.md": b"# results\n",
    "work/docs/results-figures/f.png": b"\x89PNG not really\n",
    "work/docs/results-raw/r.json": b"{}\n",
    "work/existing.json": b'{"not": "adabatch"}\n',
    "work/notes.txt": b"a user's notes\n",
    "work/prior/summary.json": _symlink("../../victim.txt"),
    "work/prior/metrics.jsonl": _symlink("../../victim2.txt"),
    "work/prior/sweep.json": b'{"stale": true}\n',
    "work/prior/notes.txt": b"the user's own file in an old output directory\n",
    "work/link-out": _symlink("keep"),
    "work/link.yaml": _symlink("../victim.txt"),
    "work/link-dir.yaml": _symlink("keep"),
    "work/passwd.yaml": _symlink("../etc/passwd"),
    "work/pipe.yaml": FIFO,
    "work/pipe.json": FIFO,
    "work/dir.yaml": DIR,
    "work/specs": DIR,
}


@dataclass
class Case:
    """One invocation: ``argv`` (``{root}`` stands for the case root), input files to create
    (relative to R; bytes, ``DIR``, ``FIFO`` or ``_symlink``), the output it names."""

    command: str
    argv: list[str]
    files: dict[str, Any] = field(default_factory=dict)
    out: str | None = None  # as given on the command line (relative to R/work)
    out_kind: str | None = None  # "dir", "file" or None (writes nothing)
    must_refuse: str | None = None  # why status 2 is the only right answer, if it is

    def resolved_argv(self, root: Path) -> list[str]:
        return [a.replace("{root}", str(root)) for a in self.argv]

    def describe(self, limit: int = 600) -> str:
        text = "adabatch " + " ".join(_quote(a) for a in self.argv)
        if self.files:
            sizes = {k: (len(v) if isinstance(v, bytes) else str(v)) for k, v in self.files.items()}
            text += f"  [files: {sizes}]"
        return text if len(text) <= limit else text[: limit - 3] + "..."


def _quote(arg: str) -> str:
    import shlex

    clipped = arg if len(arg) <= 120 else arg[:100] + f"...<{len(arg)} chars>"
    return shlex.quote(clipped)


@dataclass
class Outcome:
    """What a run did: exit status (``None`` if killed by a signal), output text, time."""

    status: int | None
    signal: int | None
    timed_out: bool
    stdout: str
    stderr: str
    wall_s: float


@dataclass
class Failure:
    """A broken promise: its class (for counting) and the details to route it."""

    klass: str
    detail: str


# ---------------------------------------------------------------- sandbox and snapshot


def fuzz_base() -> Path:
    """A fresh directory for case roots: in RAM (/dev/shm) when there is one, since a case
    root is built and removed per case (60 ms on this machine's disk, 3 ms in RAM)."""
    shm = Path("/dev/shm")
    where = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="adabatch-fuzz-", dir=where))


def make_root(base: Path, case: Case) -> Path:
    """A fresh case root under ``base`` with the sentinel tree and the case's input files."""
    root = Path(tempfile.mkdtemp(prefix="case-", dir=base)) / "R"
    root.mkdir()
    for rel, value in [*SENTINELS.items(), *case.files.items()]:
        if isinstance(value, bytes):  # input files may name paths in the case root
            value = value.replace(b"{root}", str(root).encode())
        _create(root / rel, value)
    return root


def _create(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if value is DIR:
        path.mkdir(exist_ok=True)
    elif value is FIFO:
        os.mkfifo(path)
    elif isinstance(value, tuple) and value[0] == "symlink":
        path.symlink_to(value[1])
    else:
        path.write_bytes(value)


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under ``root``: type, and size, hash, mtime (files) or target (links)."""
    entries: dict[str, tuple] = {}
    for path in _walk(root):
        st = path.lstat()
        rel = str(path.relative_to(root))
        if stat.S_ISLNK(st.st_mode):
            entries[rel] = ("link", os.readlink(path))
        elif stat.S_ISDIR(st.st_mode):
            entries[rel] = ("dir",)
        elif stat.S_ISREG(st.st_mode):
            with path.open("rb") as fh:
                digest = hashlib.sha256(fh.read(HASHED_BYTES)).hexdigest()
            entries[rel] = ("file", st.st_size, digest, st.st_mtime_ns)
        else:
            entries[rel] = ("other", stat.S_IFMT(st.st_mode))
    return entries


def _walk(root: Path) -> Iterator[Path]:
    try:
        children = list(os.scandir(root))
    except OSError:
        return
    for entry in children:
        path = Path(entry.path)
        yield path
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(path)


# ---------------------------------------------------------------- running


def limits() -> None:
    """In the child before exec: a new process group and the resource limits of a case."""
    os.setsid()
    resource.setrlimit(resource.RLIMIT_AS, (MEM_BYTES, MEM_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_S, CPU_S + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_BYTES, FSIZE_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def case_env(root: Path) -> dict[str, str]:
    """Environment of a case: HOME and TMPDIR inside the sentinel tree, no GUI backend."""
    return {
        "HOME": str(root / "home"),
        "TMPDIR": str(root / "tmp"),
        "MPLBACKEND": "Agg",
        "COLUMNS": "120",
    }


# matplotlib's font cache is matplotlib's, not adabatch's: keep it out of the case's HOME
MPLCONFIGDIR = Path(tempfile.gettempdir()) / "adabatch-fuzz-mplconfig"


def _server_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"})
    env["MPLCONFIGDIR"] = str(MPLCONFIGDIR)
    return env


def run_subprocess(case: Case, root: Path) -> Outcome:
    """Run ``case`` as ``python -m adabatch.cli`` in a new, limited process group."""
    env = _server_env()
    env.update(case_env(root))
    proc = subprocess.Popen(
        [sys.executable, "-m", "adabatch.cli", *case.resolved_argv(root)],
        cwd=root / "work",
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=limits,
    )
    timed_out = False
    try:
        out, err = proc.communicate(timeout=WALL_S)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    code = proc.returncode
    return Outcome(
        status=code if code >= 0 else None,
        signal=-code if code < 0 else None,
        timed_out=timed_out,
        stdout=out.decode("utf-8", "replace"),
        stderr=err.decode("utf-8", "replace"),
        wall_s=0.0,
    )


class ForkServer:
    """One ``forkserver.py`` process; :meth:`run_many` runs cases ``jobs`` at a time."""

    def __init__(self, jobs: int = 2) -> None:
        self.jobs = jobs
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("forkserver.py"))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=_server_env(),
        )
        self._next = 0

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=WALL_S + 10)

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run_many(self, jobs: Iterable[tuple[Case, Path]]) -> list[Outcome]:
        """Outcomes of ``(case, root)`` pairs, in order; ``jobs`` children at a time."""
        items = list(jobs)
        outcomes: list[Outcome | None] = [None] * len(items)
        ids: dict[int, int] = {}
        queue = list(enumerate(items))
        active = 0
        assert self.proc.stdin is not None and self.proc.stdout is not None
        while queue or active:
            while queue and active < self.jobs:
                index, (case, root) = queue.pop(0)
                self._next += 1
                ids[self._next] = index
                self._send(self._next, case, root)
                active += 1
            line = self.proc.stdout.readline()
            if not line:
                msg = f"fork server died (status {self.proc.poll()})"
                raise RuntimeError(msg)
            reply = json.loads(line)
            index = ids.pop(reply["id"])
            active -= 1
            case, root = items[index]
            outcomes[index] = Outcome(
                status=reply["status"],
                signal=reply["signal"],
                timed_out=reply["timed_out"],
                stdout=_read_text(root.parent / "stdout"),
                stderr=_read_text(root.parent / "stderr"),
                wall_s=reply["wall_s"],
            )
        return [o for o in outcomes if o is not None]

    def _send(self, ident: int, case: Case, root: Path) -> None:
        req = {
            "id": ident,
            "argv": case.resolved_argv(root),
            "cwd": str(root / "work"),
            "stdout": str(root.parent / "stdout"),
            "stderr": str(root.parent / "stderr"),
            "env": case_env(root),
            "wall_s": WALL_S,
            "cpu_s": CPU_S,
            "mem_bytes": MEM_BYTES,
            "fsize_bytes": FSIZE_BYTES,
        }
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(req) + "\n").encode("utf-8", "surrogateescape"))
        self.proc.stdin.flush()


def _read_text(path: Path) -> str:
    with path.open("rb") as fh:
        data = fh.read(1 << 20)
    return data.decode("utf-8", "replace")


# ---------------------------------------------------------------- checks


def _named_dirs(case: Case, root: Path) -> set[Path]:
    """Directories the output path names on its way (``a/../b`` names ``a``): they may be
    created."""
    if case.out is None or case.out_kind is None or case.out == "":
        return set()
    raw = case.out.replace("{root}", str(root))
    parts = Path(raw).parts[:-1] if case.out_kind == "file" else Path(raw).parts
    dirs, path = set(), root / "work"
    for part in parts:
        path = path / part
        dirs.add(Path(os.path.realpath(path)))
    return dirs


def named_output(case: Case, root: Path) -> Path | None:
    """The absolute, symlink-resolved path of the output the case names (``None``: none)."""
    if case.out is None or case.out_kind is None or case.out == "":
        return None
    raw = case.out.replace("{root}", str(root))
    path = Path(os.path.normpath(root / "work" / raw))
    if case.out_kind == "file":
        # a file output names a path: a symlink there must not be followed
        return Path(os.path.realpath(path.parent)) / path.name
    return Path(os.path.realpath(path))


def check(case: Case, root: Path, before: dict[str, tuple], outcome: Outcome) -> list[Failure]:
    """Every broken promise of this run (empty: all held)."""
    failures: list[Failure] = []
    tail = "\n".join(outcome.stderr.strip().splitlines()[-4:])
    if outcome.timed_out:
        failures.append(Failure("timeout", f"killed after {WALL_S:g} s wall"))
    elif outcome.signal is not None:
        name = signal.Signals(outcome.signal).name
        klass = "cpu-limit" if outcome.signal == signal.SIGXCPU else f"signal {name}"
        failures.append(Failure(klass, f"ended by {name}; stderr: {tail}"))
    elif outcome.status not in (0, 2):
        klass = "traceback" if "Traceback" in outcome.stderr else f"exit {outcome.status}"
        exc = _exception_line(outcome.stderr)
        failures.append(Failure(klass, f"exit {outcome.status}: {exc or tail}"))
    elif "Traceback (most recent call last)" in outcome.stderr:
        failures.append(Failure("traceback", f"exit {outcome.status} with a traceback: {tail}"))
    if outcome.status == 2:
        lines = outcome.stderr.splitlines()
        if "usage:" in outcome.stderr:
            failures.append(Failure("usage-text", f"argparse usage text: {tail}"))
        elif len(lines) != 1 or not lines[0].startswith("adabatch: error: "):
            failures.append(
                Failure("not-one-line", f"{len(lines)} stderr lines: {outcome.stderr[:400]!r}")
            )
    if case.must_refuse and outcome.status == 0:
        failures.append(Failure("accepted-bad-input", f"exit 0 although {case.must_refuse}"))
    failures += _changes(case, root, before, snapshot(root))
    if outcome.status == 0:
        failures += _outputs(case, root)
    return failures


def _exception_line(stderr: str) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln and not ln.startswith(" ")]
    return lines[-1][:300] if lines else ""


def _inside(path: Path, top: Path) -> bool:
    return path == top or top in path.parents


def _changes(
    case: Case, root: Path, before: dict[str, tuple], after: dict[str, tuple]
) -> list[Failure]:
    out = named_output(case, root)
    named_dirs = _named_dirs(case, root)
    problems = []
    for rel, old in before.items():
        path = root / rel
        new = after.get(rel)
        if new == old:
            continue
        inside = out is not None and _inside(path, out)
        replaceable = old[0] == "link" or path.name in OUTPUT_NAMES
        if case.out_kind == "file" and inside:
            replaceable = True  # the file the user named (a symlink there: only the link)
        if inside and replaceable:
            continue
        what = "removed" if new is None else f"changed {old[:2]} -> {new[:2]}"
        problems.append(f"{rel} {what}")
    for rel, new in after.items():
        if rel in before:
            continue
        path = root / rel
        if out is not None and _inside(path, out):
            continue
        if new[0] == "dir" and Path(os.path.realpath(path)) in named_dirs:
            continue
        problems.append(f"{rel} created ({new[0]})")
    if not problems:
        return []
    shown = "; ".join(problems[:6]) + (f"; ... {len(problems)} in all" if len(problems) > 6 else "")
    klass = (
        "wrote-outside"
        if any("created" in p or "changed" in p for p in problems)
        else ("deleted-outside")
    )
    return [Failure(klass, f"outside {out}: {shown}")]


def _strict_json(text: str) -> None:
    def refuse(token: str) -> Any:
        msg = f"non-RFC JSON constant {token}"
        raise ValueError(msg)

    json.loads(text, parse_constant=refuse)


def _outputs(case: Case, root: Path) -> list[Failure]:
    out = named_output(case, root)
    if out is None:
        return []
    problems = []
    files = [out] if case.out_kind == "file" else [p for p in _walk(out) if p.is_file()]
    for path in files:
        if path.is_symlink() or not path.is_file():
            continue
        try:
            if path.suffix == ".json":
                _strict_json(path.read_text(encoding="utf-8"))
            elif path.suffix == ".jsonl":
                for line in path.read_text(encoding="utf-8").splitlines():
                    _strict_json(line)
            elif path.suffix in (".yaml", ".yml"):
                yaml.safe_load(path.read_text(encoding="utf-8"))
        except (ValueError, yaml.YAMLError) as exc:
            problems.append(Failure("invalid-output", f"{path.relative_to(root)}: {exc}"[:400]))
    if case.command == "simulate" and case.out_kind == "dir" and out.is_dir():
        if not (out / "summary.json").is_file() or (out / "summary.json").is_symlink():
            problems.append(Failure("incomplete-output", f"exit 0 but no summary.json in {out}"))
        if (out / "INCOMPLETE").exists():
            problems.append(Failure("incomplete-output", f"exit 0 but {out}/INCOMPLETE"))
    return problems


# ---------------------------------------------------------------- one batch, end to end


@dataclass
class Result:
    """A case, what it did and which promises it broke."""

    case: Case
    outcome: Outcome
    failures: list[Failure]

    def report(self) -> str:
        lines = [self.case.describe(), f"  status {self.outcome.status}"]
        if self.outcome.signal:
            lines[-1] += f", signal {self.outcome.signal}"
        if self.outcome.timed_out:
            lines[-1] += ", timed out"
        lines += [f"  [{f.klass}] {f.detail}" for f in self.failures]
        return "\n".join(lines)


def run_batch(server: ForkServer | None, cases: list[Case], base: Path) -> list[Result]:
    """Run ``cases`` (through ``server``, or as subprocesses if ``None``) and check each."""
    prepared = []
    for case in cases:
        root = make_root(base, case)
        prepared.append((case, root, snapshot(root)))
    if server is None:
        outcomes = [run_subprocess(case, root) for case, root, _ in prepared]
    else:
        outcomes = server.run_many((case, root) for case, root, _ in prepared)
    results = []
    for (case, root, before), outcome in zip(prepared, outcomes, strict=True):
        results.append(Result(case, outcome, check(case, root, before, outcome)))
        shutil.rmtree(root.parent, ignore_errors=True)
    return results
