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

from adabatch.control.base import BatchReport, clamp
from adabatch.control.fixed_point import (
    INTERVAL_PARAMS,
    RHO,
    StepController,
    is_unstable,
    measured_point,
)
from adabatch.params import Param


class BinaryController(StepController):
    """Additive increase on ``p > rho * x``, multiplicative decrease otherwise (§3.2.1).

    At each completed batch: ``x += step`` if it was unstable, else ``x *= decrease``.
    ``plan`` returns the current interval, clamped to the bounds and rounded to the
    granularity; the unrounded value is kept so small decreases accumulate.
    """

    name = "binary"
    BRANCHES = ("initial", "unstable", "stable")
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
        self._restore_interval(state)
        self._observed = int(state.get("observed", 0))
