"""``fixed-point``: dynamic batch sizing by fixed-point iteration (Das et al., §3.3–3.4).

The controller looks for the smallest batch interval ``x*`` where the processing time meets
the condition line, ``ω(x*) = ρ·x*`` (the Type-I intersection, §3.3.1), by iterating
``x_{n+1} = p_last / ρ`` on the processing times of completed batches (§3.3.2). On a
superlinear workload, the two most recent batches tell whether it sits near the second,
unstable crossing (Type-II, §3.3.3); then it cuts the interval to ``(1 - r)·x_small``.
Before any batch has completed it doubles the interval at every cut, like TCP slow start
(§3.3.4, second finer detail). Intervals are multiples of the mini-batch granularity (§4:
100 ms), kept inside ``[min_interval, max_interval]``.

This module also holds the interval parameters, the bounds and the :class:`StepController`
base shared by the two controllers of §3.2 that the paper tried first
(:mod:`adabatch.control.gradient`, :mod:`adabatch.control.binary`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from adabatch.control.base import (
    BLOCKS,
    MAX_BLOCKS,
    MAX_INTERVAL_S,
    MIN_INTERVAL_S,
    BatchPlan,
    BatchReport,
    Controller,
    check_interval_order,
    clamp,
    round_to_granularity,
)
from adabatch.errors import AdabatchError
from adabatch.params import Param, Params

# Tolerance for comparing intervals that were rounded to the granularity (float noise only).
_EPS = 1e-9

RHO = Param(
    "rho",
    0.7,
    "slack: target the crossing p = rho * x (§3.3.1, §3.4)",
    low=0.0,
    high=1.0,
    low_open=True,
    high_open=True,
)

INTERVAL_PARAMS: tuple[Param, ...] = (
    Param(
        "granularity",
        0.1,
        "mini-batch granularity in s; intervals are multiples of it (§4: 100 ms)",
        low=MIN_INTERVAL_S,
        high=MAX_INTERVAL_S,
    ),
    Param(
        "initial_interval",
        None,
        "first batch interval in s (unset = the smallest allowed interval)",
        low=MIN_INTERVAL_S,
        high=MAX_INTERVAL_S,
        optional=True,
    ),
    Param(
        "min_interval",
        None,
        "smallest interval in s (unset = granularity)",
        low=MIN_INTERVAL_S,
        high=MAX_INTERVAL_S,
        optional=True,
    ),
    Param(
        "max_interval",
        60.0,
        "largest interval in s (§3.5: without a Type-I point the interval keeps growing)",
        low=MIN_INTERVAL_S,
        high=MAX_INTERVAL_S,
    ),
    BLOCKS,
)


@dataclass(frozen=True)
class IntervalBounds:
    """The allowed batch intervals: multiples of ``granularity`` in ``[low, high]``."""

    low: float
    high: float
    granularity: float

    @classmethod
    def from_params(cls, params: Params, owner: str) -> IntervalBounds:
        """Bounds from :data:`INTERVAL_PARAMS` values, cross-checked; errors name values."""
        g = params.granularity
        low = g if params.min_interval is None else params.min_interval
        high = params.max_interval
        check_interval_order(owner, low, high, params.initial_interval)
        smallest_multiple = max(1, math.ceil(low / g - _EPS)) * g
        if smallest_multiple > high + _EPS:
            msg = (
                f"{owner} parameter 'granularity' = {g!r} has no multiple in "
                f"[{low:g}, {high:g}]: allowed a granularity with a multiple between "
                f"min_interval and max_interval"
            )
            raise AdabatchError(msg)
        return cls(low=low, high=high, granularity=g)

    def fit(self, x: float) -> float:
        """``x`` clamped to the bounds and rounded to the nearest allowed multiple."""
        g = self.granularity
        y = round_to_granularity(clamp(x, self.low, self.high), g)
        if y < self.low - _EPS:
            y = round(math.ceil(self.low / g - _EPS) * g, 9)
        elif y > self.high + _EPS:
            y = round(math.floor(self.high / g + _EPS) * g, 9)
        return y


def initial_interval(params: Params, bounds: IntervalBounds) -> float:
    """The first planned interval: ``initial_interval``, or unset the smallest allowed one."""
    raw = bounds.low if params.initial_interval is None else params.initial_interval
    return bounds.fit(raw)


def is_unstable(report: BatchReport, rho: float) -> bool:
    """The binary signal of §3.2.1/§3.3.3: the batch fell above the condition line."""
    return report.processing_s > rho * report.interval_s


def stored_interval(state: Mapping[str, Any], owner: str) -> float:
    """The ``interval`` entry of a saved controller state, checked to be a positive number."""
    value = state.get("interval")
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        msg = f"{owner} state interval = {value!r} is not allowed: allowed a positive number"
        raise AdabatchError(msg)
    return float(value)


def measured_point(report: BatchReport) -> tuple[float, float]:
    """``(interval_s, processing_s)`` of a report (BatchReport has checked both)."""
    return (report.interval_s, report.processing_s)


class StepController(Controller):
    """Base of the two §3.2 controllers (``binary``, ``gradient``): one running interval,
    kept unrounded so small steps accumulate and planned clamped to the bounds and rounded
    to the granularity; the branch that last moved it (one of ``BRANCHES``); the count of
    observed batches. Subclasses implement ``observe``, ``state`` and ``restore``."""

    BRANCHES: ClassVar[tuple[str, ...]]

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._interval = initial_interval(self.params, self._bounds)
        self._branch = "initial"
        self._observed = 0

    def _check(self, params: Params) -> None:
        self._bounds = IntervalBounds.from_params(params, self.name)

    def plan(self, now: float) -> BatchPlan:
        return BatchPlan(self._bounds.fit(self._interval), self.params.blocks)

    def _restore_interval(self, state: Mapping[str, Any]) -> None:
        """Restore the interval and branch of a saved state, both checked."""
        branch = state.get("branch", "initial")
        if branch not in self.BRANCHES:
            msg = f"{self.name} state branch = {branch!r} is not allowed: "
            msg += f"allowed {', '.join(self.BRANCHES)}"
            raise AdabatchError(msg)
        self._interval = stored_interval(state, self.name)
        self._branch = branch


class FixedPointController(Controller):
    """Fixed-point iteration towards the Type-I intersection (Das et al., Algorithm 1).

    ``plan`` runs Algorithm 1 on the two most recently observed batches, in the paper's
    branch order, with both finer details of §3.3.4:

    - no batch completed yet: slow start doubles the interval at every plan (or, with
      ``slow_start=false``, holds ``initial_interval``);
    - one batch completed: ``x = p_last / rho``;
    - the last two intervals equal: ``x = p_last / rho`` (the Type-II test is inconclusive);
    - ``p_large/x_large > p_small/x_small`` and ``p_last > rho * x_last`` (Type-II):
      ``x = (1 - r) * x_small``;
    - otherwise ``x = p_last / rho``.

    The result is clamped to ``[min_interval, max_interval]`` and rounded to the granularity.
    A batch gets ``blocks`` blocks, or with ``block_interval`` set one per block interval of
    its batch interval: the paper's receivers cut blocks on a timer (DyBBS compares against
    fixed-point at Spark's 100 ms, its §V-A "Fixed Block Interval").
    """

    name = "fixed-point"
    summary = "fixed-point iteration to p = rho*x with Type-II test (Das et al., Alg. 1)"
    PARAMS = (
        RHO,
        Param(
            "r",
            0.25,
            "reduction near a Type-II crossing: next = (1 - r) * x_small (§3.3.3, §3.4)",
            low=0.0,
            high=1.0,
            low_open=True,
            high_open=True,
        ),
        Param(
            "slow_start",
            True,
            "double the interval until the first batch completes (§3.3.4)",
            kind=bool,
        ),
        *INTERVAL_PARAMS,
        Param(
            "block_interval",
            None,
            "block interval in s: blocks = round(interval / block_interval), at least 1 "
            "(unset: 'blocks' per batch)",
            low=MIN_INTERVAL_S,
            high=MAX_INTERVAL_S,
            optional=True,
        ),
    )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._phase = "slow-start" if self.params.slow_start else "fixed-point"
        self._branch: str | None = None
        self._points: list[tuple[float, float]] = []  # (x, p), oldest first, at most two
        self._interval: float | None = None
        self._observed = 0

    def _check(self, params: Params) -> None:
        self._bounds = IntervalBounds.from_params(params, self.name)

    def plan(self, now: float) -> BatchPlan:
        x, branch = self._next_interval()
        self._interval, self._branch = x, branch
        return BatchPlan(x, self.blocks_for(x))

    def blocks_for(self, interval_s: float) -> int:
        """Blocks of a batch of ``interval_s``: ``blocks``, or with ``block_interval`` set
        the interval in block intervals, rounded (half up), in [1, MAX_BLOCKS]."""
        bl = self.params.block_interval
        if bl is None:
            return self.params.blocks
        return min(max(1, math.floor(interval_s / bl + 0.5 + _EPS)), MAX_BLOCKS)

    def _next_interval(self) -> tuple[float, str]:
        rho, fit = self.params.rho, self._bounds.fit
        if len(self._points) == 0:
            if self._interval is None:
                start = initial_interval(self.params, self._bounds)
                return start, "slow-start" if self.params.slow_start else "initial"
            if self.params.slow_start:
                return fit(2.0 * self._interval), "slow-start"
            return self._interval, "initial"
        x_last, p_last = self._points[-1]
        if len(self._points) == 1:
            return fit(p_last / rho), "single"
        x_2nd = self._points[0][0]
        if math.isclose(x_last, x_2nd, rel_tol=_EPS, abs_tol=_EPS):
            return fit(p_last / rho), "equal"
        (x_small, p_small), (x_large, p_large) = sorted(self._points)
        if p_large / x_large > p_small / x_small and p_last > rho * x_last:
            return fit((1.0 - self.params.r) * x_small), "type-ii"
        return fit(p_last / rho), "fixed-point"

    def observe(self, report: BatchReport) -> None:
        self._points = [*self._points, measured_point(report)][-2:]
        self._phase = "fixed-point"
        self._observed += 1

    def state(self) -> dict[str, Any]:
        return {
            "phase": self._phase,
            "branch": self._branch,
            "points": [list(pt) for pt in self._points],
            "interval": self._interval,
            "observed": self._observed,
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        phase = state.get("phase")
        if phase not in ("slow-start", "fixed-point"):
            msg = (
                f"fixed-point state phase = {phase!r} is not allowed: "
                "allowed slow-start, fixed-point"
            )
            raise AdabatchError(msg)
        points = [(float(x), float(p)) for x, p in state.get("points", [])]
        if len(points) > 2:
            msg = f"fixed-point state has {len(points)} points: allowed at most 2"
            raise AdabatchError(msg)
        interval = state.get("interval")
        self._phase = phase
        self._branch = state.get("branch")
        self._points = points
        self._interval = None if interval is None else float(interval)
        self._observed = int(state.get("observed", len(points)))
