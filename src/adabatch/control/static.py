"""``static``: a fixed batch interval and number of blocks, what a DStream user configures.

The baseline of every paper (fixed-point §5, DyBBS FixBI) and the oracle's search space.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adabatch.control.base import (
    BLOCKS,
    MAX_INTERVAL_S,
    MAX_RECORDS,
    MIN_INTERVAL_S,
    BatchPlan,
    BatchReport,
    Controller,
)
from adabatch.params import Param


class StaticController(Controller):
    """Always the same interval and blocks; ``observe`` only counts batches."""

    name = "static"
    summary = "fixed interval and blocks (the papers' static baseline)"
    PARAMS = (
        Param(
            "interval",
            1.0,
            "batch interval in seconds",
            low=MIN_INTERVAL_S,
            high=MAX_INTERVAL_S,
        ),
        BLOCKS,
        Param(
            "max_records",
            None,
            "cap on records admitted per batch (admission control)",
            kind=int,
            low=1,
            high=MAX_RECORDS,
            optional=True,
        ),
    )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._observed = 0

    def plan(self, now: float) -> BatchPlan:
        return BatchPlan(self.params.interval, self.params.blocks, self.params.max_records)

    def observe(self, report: BatchReport) -> None:
        self._observed += 1

    def state(self) -> dict[str, Any]:
        return {"observed": self._observed}

    def restore(self, state: Mapping[str, Any]) -> None:
        self._observed = int(state.get("observed", 0))
