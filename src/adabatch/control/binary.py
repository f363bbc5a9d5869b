"""``binary``: the binary-signal (AIMD) controller of Das et al. §3.2.1, kept as a foil.

One bit per completed batch, "was it above the condition line ``p = rho * x``", steers the
interval: additive increase by ``step`` when unstable, multiplicative decrease by the
factor ``decrease`` when stable, as AIMD does for a congestion window.

Why it fails (§3.2.1): the rule assumes that a larger interval always buys stability. On a
superlinear workload (join, Fig. 3b) past the Type-II crossing a larger interval makes
``p / x`` worse, every batch stays unstable, and the interval grows until ``max_interval``.
The acceptance tests and benchmarks run it to show that divergence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adabatch.control.base import BatchPlan, BatchReport, Controller, clamp
from adabatch.control.fixed_point import (
    INTERVAL_PARAMS,
    RHO,
    IntervalBounds,
    initial_interval,
    is_unstable,
    measured_point,
    stored_interval,
)
from adabatch.errors import AdabatchError
from adabatch.params import Param, Params

_BRANCHES = ("initial", "unstable", "stable")


class BinaryController(Controller):
    """Additive increase on ``p > rho * x``, multiplicative decrease otherwise (§3.2.1).

    At each completed batch: ``x += step`` if it was unstable, else ``x *= decrease``.
    ``plan`` returns the current interval, clamped to the bounds and rounded to the
    granularity; the unrounded value is kept so small decreases accumulate.
    """

    name = "binary"
    summary = "AIMD on the one-bit signal p > rho*x (Das et al. §3.2.1, fails superlinear)"
    PARAMS = (
        RHO,
        Param(
            "step",
            0.1,
            "additive increase in s when unstable (paper gives none; one 100 ms mini-batch)",
            low=0.0,
            low_open=True,
        ),
        Param(
            "decrease",
            0.9,
            "multiplicative factor applied when stable (paper gives none)",
            low=0.0,
            high=1.0,
            low_open=True,
            high_open=True,
        ),
        *INTERVAL_PARAMS,
    )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._interval = initial_interval(self.params, self._bounds)
        self._branch = "initial"
        self._observed = 0

    def _check(self, params: Params) -> None:
        self._bounds = IntervalBounds.from_params(params, self.name)

    def plan(self, now: float) -> BatchPlan:
        return BatchPlan(self._bounds.fit(self._interval), self.params.blocks)

    def observe(self, report: BatchReport) -> None:
        p = self.params
        measured_point(report)
        if is_unstable(report, p.rho):
            self._branch, x = "unstable", self._interval + p.step
        else:
            self._branch, x = "stable", self._interval * p.decrease
        self._interval = clamp(x, self._bounds.low, self._bounds.high)
        self._observed += 1

    def state(self) -> dict[str, Any]:
        return {"interval": self._interval, "branch": self._branch, "observed": self._observed}

    def restore(self, state: Mapping[str, Any]) -> None:
        branch = state.get("branch", "initial")
        if branch not in _BRANCHES:
            msg = f"binary state branch = {branch!r} is not allowed: "
            msg += f"allowed {', '.join(_BRANCHES)}"
            raise AdabatchError(msg)
        self._interval = stored_interval(state, self.name)
        self._branch = branch
        self._observed = int(state.get("observed", 0))
