"""Helpers shared by the batching tests: a constant-rate stream and a scripted controller."""

from __future__ import annotations

import math

from adabatch.control.base import BatchPlan, BatchReport, Controller


def constant(rate: float):
    """``available(t)`` of a constant-rate stream (records arrive at k / rate)."""
    return lambda t: max(math.floor(t * rate + 1e-9), 0)


def arrival(rate: float):
    """Arrival time of record ``n`` in :func:`constant` (its inverse)."""
    return lambda n: (n + 1) / rate


class Scripted(Controller):
    """Plans the intervals it is given (then repeats the last); records what it saw."""

    name = "scripted"
    summary = "test helper"

    def __init__(
        self, intervals, blocks=2, max_records=None, *, when_free=False, replan=False, full=False
    ):
        super().__init__()
        self.replan = replan
        self.full = full
        self.intervals = list(intervals)
        self.blocks = blocks
        self.max_records = max_records
        self.when_free = when_free
        self.plans: list[float] = []
        self.reports: list[BatchReport] = []

    def plan(self, now: float) -> BatchPlan:
        self.plans.append(now)
        x = self.intervals[min(len(self.plans) - 1, len(self.intervals) - 1)]
        return BatchPlan(
            x, self.blocks, self.max_records, self.when_free, self.replan, cut_when_full=self.full
        )

    def observe(self, report: BatchReport) -> None:
        self.reports.append(report)

    def state(self):
        return {"plans": len(self.plans)}

    def restore(self, state):
        pass
