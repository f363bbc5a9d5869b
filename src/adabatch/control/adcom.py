"""``adcom``: AdCom's PI controller on buffer utilisation (seed adcom-adaptive-combiner, §3.1–3.2).

AdCom sizes Flink's pre-aggregation mini-batch so that the send buffers stay below full
(utilisation ``rho < 1``, no back pressure) at a desired utilisation ``rho_d`` (50–80%).
Here the "buffer" is Spark's batch processing capacity: see :class:`AdComController`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adabatch.control.base import (
    BLOCKS,
    MAX_GAIN,
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

WINDOW = 3  # §3.2: "the integral factor based [on] the three last values of e(t)"


class AdComController(Controller):
    """PI control of the batch interval on utilisation (AdCom §3.1–3.2, Eq. 1–2).

    Mapping to our model. The utilisation of batch ``n`` is ``u = processing_s /
    interval_s``: ``p > x`` means batches arrive faster than Spark finishes them, the
    batch queue grows, which is AdCom's back pressure ``rho > 1``. When the report gives
    each block's busy time, block ``i`` is AdCom instance ``A_i``. A block's own time
    leaves out the batch's serial part (scheduling, driver work, the fixed overhead that
    dominates small batches), which holds up every instance alike, so instance ``i`` is
    busy for ``s + b_i`` with ``s = max(processing_s - max(b), 0)``::

        u_i = (s + block_processing_s[i]) / interval_s

    The slowest block then has ``u = p / x``; skew lowers the mean, not the maximum.
    (``block_processing_s[i] / interval_s`` alone would read an overhead-bound batch
    with ``p`` near ``x`` as nearly idle.) Without block times the batch is the one
    instance, ``u = p / x``.

    Error (§3.2)::

        e(t) = setpoint - mean(u_i)   if no instance has u_i >= 1
        e(t) = setpoint - 1           otherwise (the skew rule)

    Sign convention. A longer interval amortises the fixed cost of a batch, so
    utilisation falls as the interval grows (for ``p(x) = a + b*x``, ``u = a/x + b``).
    Utilisation above the setpoint (``e < 0``) must therefore lengthen the interval, and
    below it (``e > 0``) shorten it, for lower latency. The paper (§3.2) words the sign the
    other way: "When e(t) > 0, the ρ signals are too high [...] This materializes by
    increasing the pre-aggregating time", and "when e(t) < 0 [...] This leads to 'less
    aggregation'". With its own definition ``e = setpoint - u`` that would lengthen the
    interval when the buffers are idle, so the code follows the utilisation, not the
    sentence::

        x(t+1) = x(t) - kp*e(t) - ki*(e(t) + e(t-1) + e(t-2))

    then clamped to ``[min_interval, max_interval]``. The plan uses ``x`` rounded to
    ``granularity`` (clamped again if rounding left the range); the unrounded ``x`` is
    kept as the state, so corrections smaller than one granule add up instead of being
    lost in a dead band.

    Default gains (seconds of interval per unit of utilisation error). Reference
    workload: the overhead-bound groupBy measured on this machine, ``p(x) = 0.4 + 0.1*x``
    seconds. At ``setpoint = 0.7`` its fixed point is ``x* = 0.4 / (0.7 - 0.1) = 0.67 s``
    and the loop gain is ``g = de/dx = (0.7 - 0.1) / x* = 0.9`` per second. The report of
    batch ``n`` arrives after batch ``n+1`` has been planned, so (ignoring ``ki``) the
    deviation ``d = x - x*`` follows ``d(n+1) = d(n) - kp*g*d(n-1)``, whose roots are
    real (no oscillation) iff ``kp*g <= 1/4``, i.e. ``kp <= 0.28 s``. ``kp = 0.2 s``
    gives ``kp*g = 0.18`` (roots 0.76 and 0.24: a quarter of the deviation gone per
    batch); ``ki = 0.01 s`` adds ``3*ki*g = 0.027`` of lagged gain, total 0.21 < 1/4.
    Simulated on that workload (with and without the one-batch delay), starting at 0.2 s
    or 2 s, the interval comes within 2% of ``x*`` in 10–30 batches without overshoot.
    The gains are absolute, so a workload with a fixed point near ``x*`` seconds should
    scale them by about ``x* / 0.67``: with ``p = 1 + 0.3*x`` (``x* = 2.5 s``,
    ``g = 0.16``) the defaults still converge without overshoot but take 55–90 batches;
    with ``p = 0.4`` s flat (``g = 1.2``) they overshoot by at most 3%.
    """

    name = "adcom"
    summary = "PI control of utilisation p/x toward a setpoint (AdCom, adaptive combiner §3.2)"
    PARAMS = (
        Param("setpoint", 0.7, "desired utilisation rho_d = p/x (§3.2: 50-80%)", low=0.5, high=0.8),
        Param(
            "kp",
            0.2,
            "proportional gain, seconds per unit of utilisation error",
            low=0,
            high=MAX_GAIN,
        ),
        Param(
            "ki",
            0.01,
            "integral gain over the last three errors, seconds per unit",
            low=0,
            high=MAX_GAIN,
        ),
        Param(
            "initial_interval",
            1.0,
            "first batch interval, seconds",
            low=MIN_INTERVAL_S,
            high=MAX_INTERVAL_S,
        ),
        Param(
            "min_interval",
            0.1,
            "smallest interval, seconds",
            low=MIN_INTERVAL_S,
            high=MAX_INTERVAL_S,
        ),
        Param(
            "max_interval",
            30.0,
            "largest interval, seconds",
            low=MIN_INTERVAL_S,
            high=MAX_INTERVAL_S,
        ),
        Param(
            "granularity",
            0.05,
            "planned intervals are multiples of this, seconds",
            low=MIN_INTERVAL_S,
            high=MAX_INTERVAL_S,
        ),
        BLOCKS,
    )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._x = float(self.params.initial_interval)
        self._errors: list[float] = []

    def _check(self, params: Params) -> None:
        check_interval_order(
            self.name, params.min_interval, params.max_interval, params.initial_interval
        )

    def error(self, report: BatchReport) -> float:
        """``e(t)`` of a finished batch (§3.2): setpoint minus mean utilisation, or
        ``setpoint - 1`` if any instance is at 100% or more."""
        if not report.interval_s > 0:
            msg = f"adcom got a report with interval_s = {report.interval_s!r}: must be > 0"
            raise AdabatchError(msg)
        if len(report.block_processing_s) > 0:
            blocks = report.block_processing_s
            serial = max(report.processing_s - max(blocks), 0.0)
            busy = tuple(serial + b for b in blocks)
        else:
            busy = (report.processing_s,)
        utilisation = [b / report.interval_s for b in busy]
        if any(u >= 1.0 for u in utilisation):
            return self.params.setpoint - 1.0
        return self.params.setpoint - sum(utilisation) / len(utilisation)

    def plan(self, now: float) -> BatchPlan:
        p = self.params
        interval = clamp(
            round_to_granularity(self._x, p.granularity), p.min_interval, p.max_interval
        )
        return BatchPlan(interval, p.blocks)

    def observe(self, report: BatchReport) -> None:
        p = self.params
        e = self.error(report)
        self._errors = [*self._errors, e][-WINDOW:]
        x = self._x - p.kp * e - p.ki * sum(self._errors)
        self._x = clamp(x, p.min_interval, p.max_interval)

    def state(self) -> dict[str, Any]:
        return {"interval_s": self._x, "errors": list(self._errors)}

    def restore(self, state: Mapping[str, Any]) -> None:
        try:
            x = float(state["interval_s"])
            errors = [float(e) for e in state["errors"]]
        except (KeyError, TypeError, ValueError) as exc:
            msg = f"adcom state {dict(state)!r} is not an adcom state: {exc!r}"
            raise AdabatchError(msg) from None
        p = self.params
        self._x = clamp(x, p.min_interval, p.max_interval)
        self._errors = errors[-WINDOW:]
