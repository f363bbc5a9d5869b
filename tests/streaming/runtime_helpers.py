"""Helpers shared by the stream runtime tests: a clock set by hand and a runtime on it."""

from __future__ import annotations

from adabatch.streaming.options import parse_options
from adabatch.streaming.runtime import StreamRuntime


class Clock:
    """Unix time that moves only when a test sets ``t``."""

    def __init__(self, t: float = 1_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make(tmp_path, clock, **extra):
    """A runtime of a static 1 s, 3-block controller at 100 records/s; ``extra`` overrides
    options (``None`` removes one)."""
    opts = {
        "controller": "static",
        "param.interval": "1.0",
        "param.blocks": "3",
        "profile": "constant:100",
        "metricsPath": str(tmp_path / "metrics.jsonl"),
        "statePath": str(tmp_path / "state.json"),
    }
    opts.update(extra)
    opts = {k: v for k, v in opts.items() if v is not None}
    return StreamRuntime(parse_options(opts), clock=clock)
