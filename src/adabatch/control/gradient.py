"""``gradient``: the gradient-based controller of Das et al. §3.2.2, kept to show why it fails.

Estimate the slope ``dp/dx`` of processing time over batch interval from the last ``window``
completed batches (two: the slope through the last two points, Fig. 7a; more: the
least-squares line, Fig. 7b). A steep slope means a superlinear workload near its Type-II
crossing, so the interval is reduced by ``step``; otherwise the interval moves by ``step``
towards stability: up if the last batch was above the condition line ``p = rho * x``, down
if below.

Why it fails (§3.2.2, §5.3, Fig. 18): the slope is a difference quotient of noisy
processing times over intervals that differ by only a step, so one outlier (a rate spike, a
slow task) makes the estimate huge and the controller shrinks the interval towards zero
while queue delay builds up; a fixed step is also either too slow to follow the rate or too
coarse to settle. The benchmarks run it to show exactly this.
"""

from __future__ import annotations

import math
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


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of ``p`` over ``x`` (the two-point slope for two points).

    ``None`` when undefined: fewer than two points or all intervals equal.
    """
    if len(points) < 2:
        return None
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_p = sum(p for _, p in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    if math.isclose(sxx, 0.0, abs_tol=1e-18):
        return None
    sxp = sum((x - mean_x) * (p - mean_p) for x, p in points)
    return sxp / sxx


class GradientController(StepController):
    """Step the interval by the sign of stability, or down when ``dp/dx`` is steep (§3.2.2).

    At each completed batch: if the estimated gradient is steeper than ``threshold`` (in
    magnitude: the paper's "large (i.e., very steep)"), the interval
    decreases by ``step``; else it increases by ``step`` if the batch was unstable
    (``p > rho * x``) and decreases by ``step`` if it was stable. An undefined gradient
    (one point, or equal intervals) counts as small. ``plan`` returns the current interval,
    clamped to the bounds and rounded to the granularity.
    """

    name = "gradient"
    BRANCHES = ("initial", "steep", "unstable", "stable")
    summary = "step by stability, down on a steep dp/dx estimate (Das et al. §3.2.2, fails)"
    PARAMS = (
        RHO,
        Param(
            "step",
            0.1,
            "interval change per completed batch in s (paper gives none; one 100 ms mini-batch)",
            low=0.0,
            low_open=True,
        ),
        Param(
            "threshold",
            1.0,
            "gradient above which the workload is taken as near Type-II "
            "(paper gives none; dp/dx > 1: a second more interval costs over a second more)",
            low=0.0,
        ),
        Param(
            "window",
            2,
            "completed batches in the gradient estimate (2 = last-two slope, more = least squares)",
            kind=int,
            low=2,
        ),
        *INTERVAL_PARAMS,
    )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._points: list[tuple[float, float]] = []  # (x, p), oldest first, at most `window`
        self._gradient: float | None = None

    def observe(self, report: BatchReport) -> None:
        p = self.params
        self._points = [*self._points, measured_point(report)][-p.window :]
        self._observed += 1
        self._gradient = slope(self._points)
        # "large (i.e., very steep)": steepness is the slope's magnitude. p(x) is monotone,
        # so a steep negative estimate is pure noise, and reacting to it is the failure.
        if self._gradient is not None and abs(self._gradient) > p.threshold:
            self._branch, change = "steep", -p.step
        elif is_unstable(report, p.rho):
            self._branch, change = "unstable", p.step
        else:
            self._branch, change = "stable", -p.step
        self._interval = clamp(self._interval + change, self._bounds.low, self._bounds.high)

    def state(self) -> dict[str, Any]:
        return {
            "interval": self._interval,
            "gradient": self._gradient,
            "branch": self._branch,
            "points": [list(pt) for pt in self._points],
            "observed": self._observed,
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        points = [(float(x), float(p)) for x, p in state.get("points", [])]
        gradient = state.get("gradient")
        self._restore_interval(state)
        self._points = points[-self.params.window :]
        self._gradient = None if gradient is None else float(gradient)
        self._observed = int(state.get("observed", len(points)))
