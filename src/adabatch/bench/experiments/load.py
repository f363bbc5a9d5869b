"""A real background CPU load for the ``resources`` experiment (fixed-point Fig. 20,
DyBBS Fig. 10): worker processes spinning on the CPU, started and stopped on stream time.

The papers take resources away from the streaming job in the middle of a run; on one
machine we do it with busy processes of ours competing for the cores. The workers are
deliberately *outside* our process tree (a launcher double-forks them and exits), so
:mod:`adabatch.runs.cpu` does not charge their CPU to Spark's run. They stop when:

- :meth:`BackgroundLoad.stop` closes the pipe they watch (the normal way), or
- our process ends in any way, even ``SIGKILL``: the pipe's write end closes with it, the
  workers read end-of-file and exit within one spin slice (``SLICE_S``).

``stop`` also sends ``SIGTERM`` to any worker still alive after a grace period (matching
pid *and* start time, so a reused pid is never signalled).
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from adabatch.errors import AdabatchError

SLICE_S = 0.02  # a worker spins this long between checks of its pipe
STOP_GRACE_S = 2.0

# The launcher: forks the workers, prints their pids, exits (so they are re-parented away
# from our tree). Each worker spins, checking stdin (our pipe) for end-of-file.
_LAUNCHER = r"""
import os, select, sys, time
n, slice_s = int(sys.argv[1]), float(sys.argv[2])
pids = []
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        x = 0
        while True:
            end = time.perf_counter() + slice_s
            while time.perf_counter() < end:
                x = (x * 1103515245 + 12345) & 0x7FFFFFFF
            ready, _, _ = select.select([0], [], [], 0)
            if ready and not os.read(0, 4096):
                os._exit(0)
    pids.append(pid)
print(" ".join(map(str, pids)), flush=True)
os._exit(0)
"""


def _start_time(pid: int) -> int | None:
    """Start time (clock ticks since boot) of ``pid``, or None if it is gone."""
    try:
        text = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


class BackgroundLoad:
    """``workers`` processes spinning on the CPU while started.

    Examples
    --------
    >>> load = BackgroundLoad(1)
    >>> load.start(); load.running
    True
    >>> load.stop(); load.running
    False
    """

    def __init__(self, workers: int) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            msg = f"background load workers = {workers!r} must be an integer >= 1"
            raise AdabatchError(msg)
        self.workers = workers
        self._pipe_w: int | None = None
        self._pids: list[tuple[int, int]] = []  # (pid, start time)

    @property
    def pids(self) -> list[int]:
        return [pid for pid, _ in self._pids]

    @property
    def running(self) -> bool:
        return any(_start_time(pid) == started for pid, started in self._pids)

    def start(self) -> None:
        """Start the workers (no-op if already running)."""
        if self._pipe_w is not None:
            return
        read_end, write_end = os.pipe()
        try:
            proc = subprocess.run(
                [sys.executable, "-c", _LAUNCHER, str(self.workers), str(SLICE_S)],
                stdin=read_end,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        finally:
            os.close(read_end)
        if proc.returncode != 0:
            os.close(write_end)
            msg = f"background load launcher failed: {proc.stderr.strip()[:300]}"
            raise AdabatchError(msg)
        pids = [int(p) for p in proc.stdout.split()]
        self._pids = [(p, s) for p in pids if (s := _start_time(p)) is not None]
        self._pipe_w = write_end
        atexit.register(self.stop)

    def stop(self) -> None:
        """Stop the workers and wait until they are gone (no-op if not running)."""
        if self._pipe_w is None:
            return
        os.close(self._pipe_w)
        self._pipe_w = None
        deadline = time.monotonic() + STOP_GRACE_S
        while self.running and time.monotonic() < deadline:
            time.sleep(SLICE_S)
        for pid, started in self._pids:
            if _start_time(pid) == started:
                os.kill(pid, signal.SIGTERM)
        self._pids = []
        atexit.unregister(self.stop)

    def __enter__(self) -> BackgroundLoad:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True)
class LoadWindow:
    """``workers`` busy processes from stream time ``start_s`` to ``end_s``."""

    start_s: float
    end_s: float
    workers: int

    def __post_init__(self) -> None:
        if not (0 <= self.start_s < self.end_s):
            msg = f"load window {self.start_s!r}..{self.end_s!r} s: need 0 <= start < end"
            raise AdabatchError(msg)


class LoadSchedule:
    """A run hook (:class:`adabatch.bench.model.RunHook`): turns the background load on and
    off as the run's stream time enters and leaves each window; ``events`` records the
    stream times at which it actually did."""

    def __init__(self, windows: Sequence[LoadWindow]) -> None:
        self.windows = tuple(windows)
        self.events: list[tuple[float, str, int]] = []  # (stream s, "on"/"off", workers)
        self._active: LoadWindow | None = None
        self._load: BackgroundLoad | None = None

    def update(self, stream_s: float) -> None:
        want = next((w for w in self.windows if w.start_s <= stream_s < w.end_s), None)
        if want is self._active:
            return
        self._switch_off(stream_s)
        if want is not None:
            self._load = BackgroundLoad(want.workers)
            self._load.start()
            self._active = want
            self.events.append((stream_s, "on", want.workers))

    def _switch_off(self, stream_s: float | None) -> None:
        if self._load is not None and self._active is not None:
            self._load.stop()
            if stream_s is not None:
                self.events.append((stream_s, "off", self._active.workers))
        self._load, self._active = None, None

    def close(self) -> None:
        self._switch_off(None)

    def spans(self, end_s: float) -> list[tuple[float, float]]:
        """The stream-time spans the load was actually on (open span closed at ``end_s``)."""
        out, on = [], None
        for t, what, _ in self.events:
            if what == "on":
                on = t
            elif on is not None:
                out.append((on, t))
                on = None
        if on is not None:
            out.append((on, end_s))
        return out
