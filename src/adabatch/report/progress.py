"""The progress line of every long run (simulations, Spark runs, comparisons, sweeps, benches).

:class:`ProgressLine` shows one line of text that the caller composes. On a terminal the
line is rewritten in place (``\\r``, padded over the previous text); anywhere else (a log
file, CI) every shown step is a line of its own, throttled so a log stays short.

API
---
``ProgressLine(stream=None, *, every_s=10.0, tty_every_s=0.0, after_s=0.0, clock=time.monotonic)``
    ``stream``: where to write (``sys.stderr`` by default); a terminal if its ``isatty()``
    says so. ``every_s``: in a log, at most one line per ``every_s`` on the throttle axis
    (see ``show``). ``tty_every_s``: on a terminal, at most one rewrite per that much
    (0: every call). ``after_s``: show nothing until ``after_s`` seconds of ``clock`` have
    passed since the line was made (a short run prints nothing). ``clock``: wall clock in
    seconds, injectable for tests.
``line.show(text, at=None)``
    Show ``text`` unless throttled. ``at`` is the position on the throttle axis: the
    caller's own time (e.g. seconds of stream time) or, when ``None``, ``clock()``.
``line.end()``
    Close the line on a terminal so later output starts on its own line; call it when
    the run ends (``with ProgressLine() as line:`` does it on exit, error or not).

Example: a bench step counter in a log shows a line at most every 10 s of wall time::

    with ProgressLine(every_s=10.0, tty_every_s=0.25) as line:
        for i, step in enumerate(steps):
            line.show(f"[{i}/{len(steps)}] {step.name}")
            step.run()

Subclasses fix what a kind of run shows (``__call__`` composing the text): the simulator's
(:class:`adabatch.runs.simulated.SimProgress`), a Spark run's
(:class:`adabatch.runs.spark_job.SparkProgress`).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Self, TextIO


class ProgressLine:
    """One live progress line: rewritten in place on a terminal, one line per shown step
    (throttled) otherwise. See the module docstring for the API."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        every_s: float = 10.0,
        tty_every_s: float = 0.0,
        after_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.clock = clock
        self.every_s = tty_every_s if self.tty else every_s
        self._quiet_until = clock() + after_s
        self._next = -math.inf
        self._width = 0

    def show(self, text: str, at: float | None = None) -> None:
        """Write ``text`` unless it is too soon (see the module docstring)."""
        if self.clock() < self._quiet_until:
            return
        t = self.clock() if at is None else at
        if t < self._next:
            return
        self._next = t + self.every_s
        if self.tty:
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def end(self) -> None:
        """Close the line on a terminal (a later message starts on its own line)."""
        if self.tty and self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()
