"""``slo``: a batch latency target instead of an interval; the cheapest interval that meets it.

A Spark user states the latency they need (``target``, at ``percentile``); the controller
learns online how processing time depends on the records and blocks of a batch and picks,
at every cut, the *longest* interval whose predicted batch latency still meets the target:
a longer interval means fewer batches, so less fixed overhead per record, so less CPU.
Where no interval meets the target it runs at the lowest latency that is still stable and
says so; where no interval is stable at all it caps the records per batch so the queue and
memory stay bounded (nothing is dropped: the records wait in the source).

The model (:mod:`adabatch.control.slo_model`)::

    p̂(n, k) = a + b·n + c·n² + d·k          a, b, c, d >= 0, weighted NNLS over a memory of
                                             (n, k) bins, recent bins weighted most
    m_q = quantile of p_observed / p̂_predicted over the last ``window`` batches at
          ``plan_percentile`` (halfway from ``percentile`` to 100 unless set: planned at
          the percentile itself, 4 in 10 runs of a hundred batches end just over it),
          and at least the latest such ratio: a cost that just rose (CPU taken away)
          counts at once, not after 5 % of the window (at least ``initial_margin`` until
          MIN_RATIOS were predicted);
    m_u = their mean (the fit's bias; at least 1 until MIN_RATIOS were predicted);
          a batch of fewer than a quarter of the fewest records measured gives no ratio:
          it was predicted with no evidence of the fixed cost per batch, which the fit
          learns from it, so its miss is the fit's error, not noise (on Spark, window at
          300,000 records/s: a 14,564-record probe after batches of 150,000 and 198,874
          took 0.81 s against 0.07 s predicted, and as a ratio it set m_q to 11 for 40
          batches, which planned a 9.8 s overload window against a 1 s target);
    δ   = max(0, quantile at ``plan_percentile`` of (x + p')_observed - L̂ over the last
          ``window`` batches planned by the rule; not a window cut at once because the
          batch before ran past it, whose latency is that batch's miss), L̂ = x + m_q·p̂
          as predicted when the batch was planned, p' = min(p, m_q·p̂(n)) with that
          plan's m_q and the batch's own n: what the model misses besides a cost over the
          margin (the rate changing under a planned batch, a window cut late), learnt
          from what happened. A cost over the margin is in the ratios already: counted in
          δ too, one batch at a load's onset (Spark, window at a 5 s target, ratio 4.1)
          put 1.7 s into δ for the rest of the run. Only that error feeds δ, never δ
          itself, so at most about 1 - plan_percentile of the batches end over the target
          in a steady state. Queue delay is left out: no batch waits in a queue (below).

The decision, for the arrival rate ``r`` = records / interval of the latest batch that was
not capped, blocks ``k`` and every allowed interval ``x`` (multiples of ``granularity`` in
``[min_interval, max_interval]``)::

    P(x) = p̂(r·x, k)
    L(x) = x + 0 + m_q·P(x) + δ         batch latency x + q + p at the percentile; q = 0
                                        because only stable intervals are candidates
    S    = {x : m_u·P(x) <= u·x,        stable: mean processing at most ``utilisation``
            r·x <= 4·n_max}             of the interval (room for noise, no queue), and
                                        a batch at most 4 times the largest measured
                                        (``n_max``): the fit is not trusted further out
    x_cpu = the longest x in S with the least P(x)/x: past it p grows faster than x, a
            longer interval costs more CPU per record and runs toward the Type-II crossing
            (fixed-point §3.3.3), so no interval past it is chosen. Only x whose batch
            holds at least a quarter of the smallest measured count (below, the fit
            has no evidence of the fixed cost per batch)
    F    = {x in S : x <= x_cpu, L(x) <= target}
    R(x) = c·max(0, x - m_q·P(x))       the reserve: a share c (``idle_reserve``) of the
                                        interval the batch leaves idle, kept back for a
                                        rise in cost no batch has shown yet
    F_R  = {x in F : L(x) + R(x) <= target}

    F_R not empty -> x = max F_R                               mode "target"
    F not empty   -> x = max F          (the reserve alone does not put the target out
                                        of reach)              mode "target"
                     (if F is empty only because of the latest ratio, the rule runs
                     without it: one slow batch is not a lasting loss of reach)
    S not empty  ->  x = argmin_S L, the target is out of reach mode "floor"
                     (where that L is over FLOOR_SPREAD (1.5) times the least L of
                     any x with m_u·P(x) <= x, the longest such x within that bound)
    S empty      ->  overload: for each x the most records n_cap(x) with
                     m_u·p̂(n) <= u·x, or if more, the latest batch's n_l·u·x/p_l (at
                     most GREW·n_l: what that batch shows fits); x maximises the
                     throughput n_cap(x)/x among the x whose capped latency x + m_q·p̃ + δ
                     meets the target (else is within twice the least; p̃ the least of
                     p̂(n_cap) and p_l·n_cap/n_l), ties within OVERLOAD_TIE broken toward
                     the longest x, no cap below a quarter of the fewest records measured
                     while a larger one is usable; the plan caps the batch at n_cap(x)
                     records                                   mode "overload"

The reserve is for the batches a change of cost reaches before any ratio shows it: a
plan aimed at the target itself lands them over it. It is taken from the idle part of the
interval, so it is large where batches are long against their processing (a long target,
few batches, where the misses of one load's onset are a large share of them) and next to
nothing where processing fills the interval (a short target, where an interval cut
shorter costs the most CPU per record). On Spark, join at 9,000 records/s and a 5 s
target, the three batches at a background CPU load's onset ran to 5.04-5.22 s (processing
0.37 s before it, 0.59-1.12 s after): a p95 of 5.075 s over the run's 27 batches, where
the 2 s trigger met 5 s. Replayed closed loop through the slowdowns six such Spark runs
measured (``benchmarks/slo_trace_sim.py``), c = 0.1 took join's p95 at 5 s from 4.82-5.08
s to 4.50-4.83 s, and at 2 s met the target on the three runs where the 1 s trigger met
it (1.90-1.99 s, against 1.99-2.05 s without it); over the 1-hour sine and Markov
simulations (``benchmarks/slo_sim.py``) it cost 1-5 % more processing per record, at
most 1.05x the best static interval's.

Overload caps rise with what the latest batch shows because a load's slow batches bend
the fit past every interval and no capped batch reaches their record counts to refresh
them (simulated, window at 150,000 records/s and a 5 s target while a load leaves 0.2 of
the cores for 40 s: batches of 140,000 records took 0.8 s after it, yet the fit held
``6e-6`` s per record and no fixed cost, overload to the end with the backlog growing).
Ties go to the longest interval and small caps are left out because a fit without a fixed
cost gives every interval the same records/s: the shortest, 0.1 s, made batches of a few
thousand records whose fixed cost read as ratios of 5-10 (on Spark, window under a CPU
load: margin 7, overload 40 s after the load had gone).

The floor gives up part of its headroom where keeping it all would cost latency: with
little fixed cost in the fit and ``m_u·b·r`` near ``u``, the shortest interval with
headroom lies far out (on Spark, window under a CPU load on a slow boot, a 2 s target:
a floor of 8.9 s and batches at 15.3 and 10.2 s of latency). Simulated, window at
150,000 records/s and a 5 s target under a load that leaves about 0.95 of an interval to
the work, ten seeds (``benchmarks/slo_load_sim.py``): p95 under the load 5.8-18.3 s with
the whole headroom, 5.8-9.2 s with the bound (without the reserve above, at a 4.85 s
target: 5.9-26.2 s and 5.9-9.2 s).

The floor is the shortest interval with headroom, not batches cut back to back (Spark's
default trigger), though the model predicts less latency there: on Spark they share the
two cores with the background work they leave no idle time for, and cost more per record.
(Window at 300,000 records/s, two rounds of 60 s: processingTime 1 s p95 2.30 / 1.93 s
at 270 / 202 ms of ``addBatch`` per 100k records; slo cutting back to back 2.33 / 2.21 s
at 282 / 281 ms; Spark's default trigger 2.40 / 2.08 s at 285 / 279 ms.)

With records waiting in the source (backlog ``B > 0``) and an x that meets the target for
the arrivals alone, ``P(x) = p̂(r·x + B, k)``: the next batch takes them as well. If then
no x meets the target (or the fit is not in use yet), the backlog is drained first, mode
"catch-up"; so it is when no x meets the target for the arrivals alone though some is
stable, once more than the largest batch measured waits (and until the backlog is gone): a
floor plan would drain it only at the pace of its cap. Catch-up batches hold ``n_c``
records, the smallest n whose ``n / (m_u·p̂(n))`` comes within 95 % of the best of any
batch predicted to take at most 10 s and at most 4 times the largest batch measured, or
what that batch's records/s read in 10 s if more, and no more than the largest measured
once a step stopped raising the records/s, yet never fewer than ``CATCH_UP_DRAIN`` (1.25)
times the records that arrived while the latest batch ran, or the backlog would not shrink
(:func:`~adabatch.control.slo_model.catch_up_records`); each is cut as soon as the one
before finishes. A stream that starts minutes behind is read at the machine's speed in
batches of bounded size, not as one batch (Spark's default) nor in target-sized ones; the
target applies again once the backlog is gone. Where ``n_c`` is at least what waits (the
backlog and what arrives while the latest batch runs: the batch would take it all), the
batch holds at most the records with ``P + m_q·p̂(r·P) + δ`` within the target, ``P =
m_q·p̂(n)``: the window open while it runs is cut when it finishes, so a long last batch
made the first window after it miss (simulated, reduce at 50,000 records/s 5 min behind,
1 s target: 2.4 and 2.9 s; on Spark, window at 2 s: 2.61 s); the rest goes in the next
catch-up batches.

Every plan is cut when processing is free (``BatchPlan.when_free``, Spark's
processingTime rule): at the end of its interval, or when the batch before finishes if
that is later. No batch is cut ahead of a report to wait in a queue, so one slow batch
delays the next one only, instead of every batch cut while it ran (measured on Spark,
join at 9,000 records/s under a background CPU load: a queue of 0.7-1.1 s behind one
1.4 s batch put five batches in a row over a 2 s target). So q is not predicted.

A plan of mode "target" caps its batch at ``n_full(x)``, the most records with ``x +
m_q·p̂(n) + δ <= target`` (at least what it expects), and is cut as soon as its window
holds them (``BatchPlan.cut_when_full``): a rate that rises within a long window ends the
window early instead of making a batch that misses. (Simulated, join at 9,000 records/s
quadrupling for 8 s under 4.2 s windows of a 5 s target: the window open when the burst
began took 151,200 records and ended 5.23 s after it opened; cut when full it takes 68,286
and ends after 2.6 s.)

While records wait in the source (estimated backlog > 0) every plan caps its batch at
``n_cap(x)`` (or ``n_full(x)`` if less). A batch is *capped* when it holds exactly the cap
planned; its records/interval is then not the arrival rate, nor is a catch-up batch's
that took all that waited (on Spark, reduce 5 min behind: 883,522 records over 2.12 s
read as 416,000 records/s, and a 4.9 s floor window followed). Where the report says how many
records the source still holds (``left_records``: the batching model fills it in Spark and
in the simulator), the arrival rate between two reports is ``(records + left -
left_before) / (time between)``, so a rate that changes under caps is seen at once, and
the backlog is ``left`` outside queued batches minus what arrived within one interval of
the batch's cut. Without it the backlog is estimated: the rate keeps its last uncapped
value, the backlog grows by ``r·x - records`` per capped batch, and an uncapped batch
means it is gone.

A report that arrives before the open window is cut asks for its plan again
(``BatchPlan.replan``). An uncapped plan of mode "target" or "floor" is replaced only
when it is now predicted to miss the target and a shorter interval of mode "target"
meets it (capped or not: a burst seen in the report caps the next batch at once); the
cut then comes at the shorter interval's end, or at once if that has passed. So a batch
that shows the cost or the rate rose moves the next cut, instead of one more batch
planned before it missing as well. The plans of modes start, catch-up and overload, and
capped plans, are always made again: they are planned batch by batch.

Until the fit has two record-count bins the model is the latest batch scaled in
proportion (:class:`~adabatch.control.slo_model.ProcessingFit`), and a plan it cannot
place (no interval meets the target under it) probes ``max(p_last / u, 1.5·x_last)`` to
learn the slope: mode "start". Before any report the plan is ``initial_interval``
(default ``target / 2``).

Rate steps: the rate is the latest report's, so the plan made after the first report
that shows a new rate uses it. History reuse: the model is a function of the records per
batch, not of the rate, and the memory keeps every record-count bin it has seen (at weight
``memory`` when old): a rate seen before is predicted from its own measurements.

``target`` has no default: a user names the latency they need (``EXAMPLE_PARAMS`` has one
for generic code that builds every controller).

Reporting: ``metrics_state()`` (written with every batch) carries ``out_of_reach``,
``slo_met`` (not out of reach, the decision of mode "target", "floor" or a "start"
predicted to meet the target, and the observed batch latency at the percentile over the
last ``window`` batches within it), ``achievable_latency_s`` (the floor's predicted
latency; the capped batch latency in overload), the mode, the rate, the estimated
backlog and the margin. The target is out of reach in overload, and under floor
decisions once ``CONFIRM`` batches of a run of them ended over the target: a floor plan
alone comes from the margin, which keeps a load's onset for up to ``window`` batches
after the fit has learnt the load (on Spark, window at 300,000 records/s and a 5 s target
under a background CPU load: 18 floor plans at a predicted 6.7-8.4 s while their batches
ran to 2.9-4.8 s, p95 4.78 s over the run). The first time it is out of reach
(``CONFIRM`` overload decisions in a row, or the floor confirmed) one warning line goes
to the ``adabatch.control.slo`` logger, naming the target, the best achievable latency
and why; once it is met again (``CONFIRM`` reports in a row with ``slo_met``) a second
line takes the warning back, and it may come again.

Size: this docstring states the whole model and decision rule (about 200 lines) so that
the code (about 750 lines, the model apart in slo_model) can be read against it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from adabatch.control.base import (
    BLOCKS,
    MAX_INTERVAL_S,
    MAX_RECORDS,
    MIN_INTERVAL_S,
    BatchPlan,
    BatchReport,
    Controller,
    TargetStatus,
)
from adabatch.control.fixed_point import IntervalBounds
from adabatch.control.slo_model import (
    CATCH_UP_GROWTH,
    GREW,
    Decision,
    Margins,
    ProcessingFit,
    Window,
    catch_up_records,
    interval_grid,
    ratio,
)
from adabatch.errors import AdabatchError
from adabatch.params import Param, Params

log = logging.getLogger(__name__)

# One-step-ahead ratios needed before the margin is their quantile alone.
MIN_RATIOS = 10
# Observed batches in a row with the target out of reach before the warning.
CONFIRM = 3
# A backlog below this fraction of the latest batch's records is counted as none.
BACKLOG_NOISE = 0.05
# Modes whose plans are made again after every report (batch by batch, knowing the last).
REDECIDED = ("start", "catch-up", "overload")
# Modes in which the target is out of reach.
OUT_OF_REACH = ("floor", "overload")
# A catch-up batch takes at least this many times what arrived while the latest one ran.
CATCH_UP_DRAIN = 1.25
# Caps remembered to recognise a capped batch in its report.
CAPS_KEPT = 8
# Plans remembered until their batch is reported (for the latency error behind δ).
PENDING_KEPT = 64
# The floor keeps the utilisation headroom only while it costs at most this factor of
# the least latency of an interval whose mean processing fits in it.
FLOOR_SPREAD = 1.5
# The margin is kept in this range (a window of wild ratios must not make plans absurd).
MARGIN_RANGE = (0.5, 100.0)
# Overload intervals within this share of the most records/s are ties, broken toward the
# longest: with no fixed cost in the fit the records/s are equal at every interval, and the
# shortest would make batches whose fixed cost then reads as noise.
OVERLOAD_TIE = 0.01
_EPS = 1e-9


def _seconds(name: str, default: float | None, help_text: str, **kw: Any) -> Param:
    """An interval parameter of this controller: a duration in [MIN_INTERVAL_S,
    MAX_INTERVAL_S] seconds."""
    return Param(
        name, default, help_text, low=MIN_INTERVAL_S, high=MAX_INTERVAL_S, duration=True, **kw
    )


class SloController(Controller):
    """The longest interval whose predicted batch latency at ``percentile`` meets ``target``.

    See the module docstring for the model and the decision rule, in the order the code
    runs them.

    Examples
    --------
    >>> from adabatch.control.base import BatchReport
    >>> ctrl = SloController(target="2 seconds")
    >>> ctrl.plan(0.0).interval_s  # nothing learnt yet: target / 2
    1.0
    >>> ctrl.observe(BatchReport(0, 1.0, 2, 1000, 0.4, 0.0, 1.0, 1.0, 1.4))
    >>> ctrl.plan(1.0).interval_s  # p in proportion to n: x + 1.3 * 0.4 * x <= 2
    1.3
    """

    name = "slo"
    EXAMPLE_PARAMS: ClassVar[Mapping[str, Any]] = {"target": 2.0}
    summary = (
        "latency target: the longest interval whose predicted batch latency at a "
        "percentile meets it (online least squares, residual quantiles)"
    )
    PARAMS = (
        Param(
            "target",
            None,
            "batch latency target x + q + p at the percentile, seconds (required)",
            low=0.0,
            low_open=True,
            high=MAX_INTERVAL_S,
            duration=True,
        ),
        Param(
            "percentile",
            95.0,
            "percentile of batch latency the target applies to",
            low=50.0,
            high=100.0,
            high_open=True,
        ),
        Param(
            "plan_percentile",
            None,
            "percentile of latency the plans aim at (unset: halfway from percentile to "
            "100: a run of a hundred batches then meets the target at percentile with "
            "probability 0.96 rather than 0.62)",
            low=50.0,
            high=100.0,
            high_open=True,
            optional=True,
        ),
        _seconds("granularity", 0.05, "intervals are multiples of this, seconds"),
        _seconds("min_interval", 0.1, "shortest interval, seconds"),
        _seconds("max_interval", 60.0, "longest interval, seconds"),
        _seconds(
            "initial_interval",
            None,
            "interval until the first batch is reported (unset: target / 2)",
            optional=True,
        ),
        BLOCKS,
        Param(
            "forget",
            0.98,
            "weight a bin of the model keeps per batch it is not updated (forgetting)",
            low=0.0,
            high=1.0,
            low_open=True,
        ),
        Param(
            "memory",
            0.02,
            "least weight of an old bin: what was learnt at a rate seen before",
            low=0.0,
            high=1.0,
        ),
        Param(
            "bin_ratio",
            0.1,
            "relative width of a record-count bin of the model",
            low=0.001,
            high=1.0,
        ),
        Param(
            "utilisation",
            0.9,
            "most mean processing time per interval a plan may have: p <= utilisation * x",
            low=0.0,
            high=1.0,
            low_open=True,
        ),
        Param(
            "window",
            100,
            "batches whose prediction errors and latencies give the percentiles",
            kind=int,
            low=10,
            high=100_000,
        ),
        Param(
            "idle_reserve",
            0.1,
            "share of the interval a batch leaves idle (x - m_q * p) kept back from the "
            "target, for a rise in cost no batch has shown yet (0: none)",
            low=0.0,
            high=1.0,
        ),
        Param(
            "initial_margin",
            1.3,
            f"margin on predicted processing time until {MIN_RATIOS} batches were predicted",
            low=1.0,
            high=MARGIN_RANGE[1],
        ),
    )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        p = self.params
        self._grid = interval_grid(self._bounds)
        self._n_short = int(np.searchsorted(self._grid, p.target + _EPS, side="right"))
        raw = p.target / 2.0 if p.initial_interval is None else p.initial_interval
        self._x0 = self._bounds.fit(raw)
        self._reset()

    def _check(self, params: Params) -> None:
        self._bounds = IntervalBounds.from_params(params, self.name)
        aim = params.plan_percentile
        if aim is not None and aim < params.percentile:
            msg = (
                f"{self.name}: plan_percentile {aim:g} is below percentile "
                f"{params.percentile:g}: plans must aim at least at the target's percentile"
            )
            raise AdabatchError(msg)
        self._aim = (100.0 + params.percentile) / 2.0 if aim is None else float(aim)

    def _reset(self) -> None:
        p = self.params
        self._fit = ProcessingFit(p.forget, p.memory, p.bin_ratio)
        self._ratios = Window(p.window)  # p_observed / p̂
        self._latencies = Window(p.window)  # observed batch latencies
        self._errors = Window(p.window)  # (x + p')_observed - L̂
        # cut time -> (L̂, m_q) of batches planned by the rule
        self._pending: dict[float, tuple[float, float | None]] = {}
        self._rate: float | None = None  # records/s of the latest uncapped batch
        self._backlog = 0.0  # estimated records waiting in the source
        self._left: tuple[int, float] | None = None  # (left_records, finished_at) last seen
        self._caps: list[int] = []  # recent caps planned, oldest first
        self._last_x: float | None = None  # interval of the latest report
        self._finished: float | None = None  # when the latest reported batch finished
        # window start, its latest plan, whether that plan stands when asked again
        self._plan: tuple[float, BatchPlan, bool] | None = None
        self._queue_delay = 0.0
        self._draining = False  # the latest decision was a catch-up
        self._streak = 0  # overload decisions in a row
        self._misses = 0  # batches over the target in this run of out-of-reach decisions
        self._met_streak = 0  # reports in a row with the target met
        self._warned: list[str] = []
        self._observed = 0
        self._decision: Decision | None = None
        self._margins: dict[tuple[bool, bool], Margins] = {}

    # ----------------------------------------------------------------- the contract

    def plan(self, now: float) -> BatchPlan:
        d, last = self._current(), self._plan
        if last is not None and last[0] == now and last[2]:
            # asked again after a report, the window still open: the plan stands unless
            # the report shows it would now miss the target and a shorter one meets it
            if d.mode != "target" or d.interval_s >= last[1].interval_s:
                return last[1]
            if self._meets_at(last[1].interval_s):
                return last[1]
        x = d.interval_s
        if self._finished is not None and now + x < self._finished:
            x = self._finished - now  # made again after a report: cut now, not in the past
        elif self._draining and d.mode != "catch-up" and (self._finished or 0.0) > now:
            # the backlog is read: the window open since the last catch-up cut waited
            # through that batch already, so it is cut now
            x = min(x, self._finished - now)  # type: ignore[operator]
        cap, full = d.max_records, False
        if d.mode == "target":
            n_full = self._full_records(d.interval_s)
            if n_full is not None and (cap is None or n_full < cap):
                cap, full = n_full, True
        if cap is not None:
            self._caps = [c for c in self._caps if c != cap][-(CAPS_KEPT - 1) :]
            self._caps.append(cap)
        if d.model_latency_s is not None and x == d.interval_s:
            # a window cut at once because the batch before ran past it was not the
            # rule's plan: its latency is that batch's miss, counted in its ratio already
            self._pending[round(now + x, 6)] = (round(d.model_latency_s, 6), d.margin)
            while len(self._pending) > PENDING_KEPT:
                del self._pending[next(iter(self._pending))]
        plan = BatchPlan(
            x, self.params.blocks, cap, when_free=True, replan=True, cut_when_full=full
        )
        # a capped plan, or one of a mode that plans batch by batch, is made again after
        # every report; the others stand unless predicted to miss (above)
        stands = d.mode not in REDECIDED and d.max_records is None
        self._plan = (now, plan, stands)
        return plan

    def observe(self, report: BatchReport) -> None:
        self._observed += 1
        # a catch-up batch that took all that waited is not capped, nor is n / x its rate
        catching_up = self._decision is not None and self._decision.mode == "catch-up"
        n, k, x = report.records, report.blocks, report.interval_s
        r = None
        if self._fit.last is not None and self._fit.knows_fixed_cost(n, k):
            r = ratio(report.processing_s, self._fit.predict_one(n, k))
            if r is not None:
                self._ratios.add(r)
        self._fit.add(n, k, report.processing_s)
        self._latencies.add(round(report.latency_s, 4))
        planned = self._pending.pop(round(report.cut_at, 6), None)
        if planned is not None:
            self._errors.add(self._latency_error(report, planned, r))
        capped = n > 0 and n in self._caps and self._rate is not None
        if report.left_records is not None:
            self._count_backlog(report, capped or catching_up)
        elif capped:
            self._backlog += max(0.0, self._rate * x - n)  # type: ignore[operator]
        else:
            self._rate, self._backlog = n / x, 0.0
        self._last_x, self._queue_delay = x, report.queue_delay_s
        self._finished = report.finished_at
        self._draining = catching_up
        self._decision, self._margins = None, {}
        self._verdict(self._current())

    @staticmethod
    def _latency_error(
        report: BatchReport, planned: tuple[float, float | None], r: float | None
    ) -> float:
        """``(x + p')_observed - L̂`` for δ: the processing beyond the plan's margin
        (ratio ``r`` over its ``m_q``) is left out, the ratios count it already."""
        model, margin = planned
        p = report.processing_s
        if r is not None and margin is not None and r > margin:
            p *= margin / r
        return round(report.interval_s + p - model, 4)

    def _count_backlog(self, report: BatchReport, capped: bool) -> None:
        """Rate and backlog from a report that says what the source holds: the records
        that arrived between two reports are the batch's plus the change in those left,
        so the rate is known under caps too; the backlog is what is left beyond what
        arrived since the batch's cut."""
        n, left, now = report.records, report.left_records, report.finished_at
        assert left is not None
        seen = None
        if self._left is not None and now > self._left[1]:
            seen = max(0.0, n + left - self._left[0]) / (now - self._left[1])
        self._left = (left, now)
        if not capped:
            self._rate = n / report.interval_s
        elif seen is not None:
            self._rate = seen
        assert self._rate is not None
        # not in a queued batch and beyond one interval since the cut: more than the next
        # batch would take on its own (a batch that waited, as when a stream starts behind)
        uncut = left - (report.queued_records or 0)
        backlog = uncut - self._rate * min(now - report.cut_at, report.interval_s)
        # below a twentieth of the batch it is the clock's and the arrivals' jitter
        self._backlog = backlog if backlog > BACKLOG_NOISE * n else 0.0

    # ----------------------------------------------------------------- the decision

    def _current(self) -> Decision:
        if self._decision is None:
            self._decision = self._decide()
        return self._decision

    def margins(self, *, latest: bool = True, aim: bool = True) -> Margins:
        """``m_q``, ``m_u`` and ``δ`` for the next decision (module docstring); ``latest``
        counts the latest ratio in ``m_q``; ``aim``: quantiles at ``plan_percentile``,
        else at ``percentile``."""
        key = (latest, aim)
        if key not in self._margins:
            pct = self._aim if aim else self.params.percentile
            early = len(self._ratios) < MIN_RATIOS
            m_q, m_u = self._ratios.quantile(pct), self._ratios.mean()
            if latest and m_q is not None:
                m_q = max(m_q, self._ratios.values[-1])
            if early:
                m_q = max(self.params.initial_margin, m_q or 0.0)
                m_u = max(1.0, m_u or 0.0)
            lo, hi = MARGIN_RANGE
            delta = self._errors.quantile(pct) if len(self._errors) >= MIN_RATIOS else 0.0
            self._margins[key] = Margins(
                min(max(float(m_q), lo), hi),  # type: ignore[arg-type]
                min(max(float(m_u), lo), hi),  # type: ignore[arg-type]
                max(0.0, float(delta or 0.0)),
            )
        return self._margins[key]

    def _decide(self) -> Decision:
        """The decision rule of the module docstring, for the current model and rate.

        The latest ratio shortens the interval where the target allows it, but does not
        alone put the target out of reach: one slow batch is not a lasting loss. Nor does
        the headroom of ``plan_percentile``: the target is out of reach only when no
        interval meets it at ``percentile``."""
        if self._rate is None:
            return Decision("start", self._x0)
        d, tried = self._decide_at(self.margins()), [self.margins()]
        for latest, aim in ((False, True), (True, False), (False, False)):
            if d.mode not in OUT_OF_REACH:
                return d
            m = self.margins(latest=latest, aim=aim)
            if m not in tried:
                tried.append(m)
                plain = self._decide_at(m)
                d = plain if plain.mode not in OUT_OF_REACH else d
        return d

    def _decide_at(self, m: Margins) -> Decision:
        """The rule at margins ``m``. The intervals up to the target are tried first: no
        longer one can meet it, and ``P/x`` has one minimum on the model's curve
        (``a/x + b·r + c·r²·x``), so a choice among them is the choice among all. Only a
        target out of reach looks at the whole grid."""
        short = self._grid[: max(1, self._n_short)]
        d = self._rule(short, m)
        if d.mode == "target" or len(short) == len(self._grid):
            return d
        return self._rule(self._grid, m)

    def _rule(self, xs: np.ndarray, m: Margins) -> Decision:
        """The decision rule over the candidate intervals ``xs`` at margins ``m``."""
        assert self._rate is not None
        k, target = self.params.blocks, self.params.target
        u = self.params.utilisation
        arriving = self._fit.predict(self._rate * xs, k)
        if self._backlog and not self._fit.fitted(k):
            return self._catch_up(m, xs, arriving)
        if not self._fit.fitted(k):
            lat = xs + m.q * arriving + m.delta
            return self._start(xs, arriving, lat, m.u * arriving <= u * xs + _EPS)
        # the next batch takes what waits in the source as well (up to its cap)
        p = arriving
        if self._backlog and self._meets(xs, arriving, m):
            p = self._fit.predict(self._rate * xs + self._backlog, k)
            # the arrivals alone would meet the target; the fit is not trusted far out
            if self._backlog > self._trusted() or not self._meets(xs, p, m):
                return self._catch_up(m, xs, arriving)
        elif self._backlog and self._stable(xs, arriving, m).any() and self._drain():
            # the arrivals are kept up with but miss the target anyway: no plan absorbs a
            # backlog of more than a batch at the target, so it is read at full speed
            return self._catch_up(m, xs, arriving)
        model = xs + m.q * p
        lat = model + m.delta
        # an interval whose batch holds more than the fit is trusted with is not a candidate
        stable = self._stable(xs, p, m)
        if not stable.any():
            return self._overload(m)
        # the cheapest interval among batches the fit has seen the like of: below a quarter
        # of the smallest measured it knows no fixed cost (a fit through the origin with
        # a curve would call the shortest interval cheapest); past it, one probe teaches it
        seen = self._rate * xs >= self._fit.fewest_known(k)
        cost = np.where(stable & seen, p / xs, np.inf)
        if not np.isfinite(cost).any():
            cost = np.where(stable, p / xs, np.inf)
        i_cpu = int(np.flatnonzero(cost <= cost.min())[-1])
        held = self.params.idle_reserve * np.maximum(0.0, xs - m.q * p)
        meets = stable & (lat <= target + _EPS) & (np.arange(len(xs)) <= i_cpu)
        ok = meets & (lat + held <= target + _EPS)
        if not ok.any():
            ok = meets
        i_floor = self._floor(xs, p, lat, stable, m)
        achievable = float(lat[i_floor])
        if ok.any():
            i, mode = int(np.flatnonzero(ok)[-1]), "target"
        else:
            i, mode = i_floor, "floor"
        x = float(xs[i])
        cap = self._backlog_cap(x, m) if self._backlog > 0 else None
        pq = float(m.q * p[i])
        model_i = float(model[i])
        return Decision(mode, x, cap, float(lat[i]), achievable, pq, None, model_i, m.q)

    def _floor(
        self, xs: np.ndarray, p: np.ndarray, lat: np.ndarray, stable: np.ndarray, m: Margins
    ) -> int:
        """The floor's interval: the least latency among the stable ``xs``, unless that
        is more than ``FLOOR_SPREAD`` times the least of any interval whose mean
        processing fits in it; then the longest such interval within that bound."""
        assert self._rate is not None
        i = int(np.argmin(np.where(stable, lat, np.inf)))
        keeps_up = self._stable(xs, p, m, utilisation=1.0)
        bound = FLOOR_SPREAD * float(lat[keeps_up].min())
        if lat[i] <= bound + _EPS:
            return i
        return int(np.flatnonzero(keeps_up & (lat <= bound + _EPS))[-1])

    def _drain(self) -> bool:
        """Whether a backlog the target cannot absorb is read at full speed: more than the
        largest batch measured waits, or the decision before was a catch-up already (it
        goes on until the backlog is gone)."""
        return self._draining or self._backlog > self._fit.largest(self.params.blocks)

    def _stable(
        self, xs: np.ndarray, p: np.ndarray, m: Margins, utilisation: float | None = None
    ) -> np.ndarray:
        """Which intervals ``xs`` with processing ``p`` are stable (mean processing within
        ``utilisation`` of the interval, by default the parameter) with a batch the fit is
        trusted with."""
        assert self._rate is not None
        u = self.params.utilisation if utilisation is None else utilisation
        return (m.u * p <= u * xs + _EPS) & (self._rate * xs <= self._trusted())

    def _meets_at(self, x: float) -> bool:
        """Whether an interval of ``x`` at the current rate is predicted to meet the
        target."""
        if self._rate is None:
            return True
        xs = np.array([x])
        p = self._fit.predict(self._rate * xs, self.params.blocks)
        return self._meets(xs, p, self.margins())

    def _meets(self, xs: np.ndarray, p: np.ndarray, m: Margins) -> bool:
        """Whether some interval of ``xs`` with processing ``p`` is stable and meets the
        target."""
        stable = m.u * p <= self.params.utilisation * xs + _EPS
        return bool((stable & (xs + m.q * p + m.delta <= self.params.target + _EPS)).any())

    def _start(
        self, xs: np.ndarray, p: np.ndarray, lat: np.ndarray, stable: np.ndarray
    ) -> Decision:
        """Before the fit: the rule on the proportional model, else a probe."""
        ok = stable & (lat <= self.params.target + _EPS)
        if ok.any():
            i = int(np.flatnonzero(ok)[-1])
            return Decision("start", float(xs[i]), None, float(lat[i]))
        assert self._fit.last is not None and self._last_x is not None
        probe = max(self._fit.last[2] / self.params.utilisation, 1.5 * self._last_x)
        return Decision("start", self._bounds.fit(probe))

    def _overload(self, m: Margins) -> Decision:
        """No stable interval: cap the records so that a batch is processed within its
        interval, at the most records/s among the intervals that meet the target (or come
        within twice the least capped latency), the longest of those within
        ``OVERLOAD_TIE`` of the most; none below a quarter of the fewest records measured
        while a larger batch is usable (its fixed cost the fit may not know)."""
        k, xs = self.params.blocks, self._grid
        budget = self.params.utilisation * xs / m.u
        n_cap = np.minimum(self._fit.records_within(budget, k), min(MAX_RECORDS, self._trusted()))
        usable = n_cap >= 1.0
        if not usable.any():  # even one record takes longer than any interval
            x = float(xs[-1])
            lat = x + m.q * float(self._fit.predict(1.0, k)) + m.delta
            return Decision("overload", x, 1, lat, lat, lat - x, 1.0 / x)
        n_cap, p_cap = self._seen_caps(xs, n_cap)
        known = usable & (n_cap >= self._fit.fewest_known(k))
        usable = known if known.any() else usable
        thr = np.where(usable, n_cap / xs, -1.0)
        lat = xs + m.q * p_cap + m.delta
        within = usable & (lat <= self.params.target + _EPS)
        if not within.any():
            within = usable & (lat <= 2.0 * float(lat[usable].min()))
        best = float(thr[within].max())
        i = int(np.flatnonzero(within & (thr >= (1.0 - OVERLOAD_TIE) * best))[-1])
        cap = max(1, math.floor(n_cap[i]))
        return Decision(
            "overload",
            float(xs[i]),
            cap,
            float(lat[i]),
            float(lat[i]),
            float(lat[i] - xs[i]),
            float(thr.max()),
        )

    def _seen_caps(self, xs: np.ndarray, n_cap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Caps at ``xs`` raised to what the latest batch shows fits: its records scaled
        in proportion to ``utilisation·x`` (pessimistic for a cost with a fixed part), at
        most ``GREW`` times them; and the processing predicted at each cap, the least of
        the fit and that proportion. Bins a load left bend the fit past every interval;
        capped batches that run within their intervals raise the caps, and the bins they
        refresh free the fit."""
        k = self.params.blocks
        last = self._fit.last
        if last is None or last[1] != k or min(last[0], last[2]) <= 0:
            return n_cap, self._fit.predict(n_cap, k)
        n0, _, p0 = last
        seen = np.minimum(GREW * n0, n0 * self.params.utilisation * xs / p0)
        n = np.maximum(n_cap, np.floor(seen))
        return n, np.minimum(self._fit.predict(n, k), p0 * np.maximum(n / n0, 1.0))

    def _catch_up(self, m: Margins, xs: np.ndarray, arriving: np.ndarray) -> Decision:
        """A backlog the target cannot absorb: batches at the most records/s the model
        gives, bounded in size (:func:`catch_up_records`), each cut as soon as the one
        before finishes; the achievable latency is the arrivals' alone, once drained."""
        k = self.params.blocks
        # more than arrives while a batch runs (each is cut when the one before finishes),
        # or the backlog never shrinks: a fit that stopped rising holds the batches still
        last_p = 0.0 if self._fit.last is None else self._fit.last[2]
        arrive = CATCH_UP_DRAIN * (self._rate or 0.0) * last_p
        n = catch_up_records(self._fit, k, m.u, MAX_RECORDS, at_least=arrive)
        if self._fit.fitted(k):
            waiting = self._backlog + (self._rate or 0.0) * last_p
            if n >= waiting:  # the last catch-up batch: it takes all that waits
                n = max(min(n, self._last_drain(waiting, m)), min(n, math.ceil(arrive)))
        p = m.q * self._fit.predict_one(n, k)
        lat = xs + m.q * arriving + m.delta
        stable = m.u * arriving <= self.params.utilisation * xs + _EPS
        achievable = float(lat[stable].min()) if stable.any() else None
        x, thr = float(xs[0]), n / max(m.u * self._fit.predict_one(n, k), _EPS)
        return Decision("catch-up", x, n, x + p + m.delta, achievable, p, thr)

    def _last_drain(self, waiting: float, m: Margins) -> int:
        """The records of a catch-up batch that would take all ``waiting`` records: the
        window open while it runs is cut when it finishes, so it holds what arrives in the
        batch's processing ``P`` and ends ``P`` after it opened; the most records with
        ``P + m_q·p̂(r·P) + δ`` within the target (all where none or all of them do). What
        it leaves is read by the next catch-up batches, each bounded the same way."""
        k, rate = self.params.blocks, self._rate or 0.0
        ns = np.geomspace(1.0, max(waiting, 1.0), 256)
        run = m.q * self._fit.predict(ns, k)
        after = run + m.q * self._fit.predict(rate * run, k) + m.delta
        ok = after <= self.params.target + _EPS
        if ok[-1] or not ok.any():
            return math.ceil(waiting)
        return max(1, math.floor(ns[int(np.flatnonzero(ok)[-1])]))

    def _backlog_cap(self, x: float, m: Margins) -> int | None:
        """The most records a stable batch of ``x`` takes while a backlog waits."""
        budget = np.array([self.params.utilisation * x / m.u])
        n = float(self._fit.records_within(budget, self.params.blocks)[0])
        n = min(n, self._trusted())
        if not math.isfinite(n) or n >= MAX_RECORDS:
            return None
        return max(1, math.floor(n))

    def _full_records(self, x: float) -> int | None:
        """The most records a batch planned at ``x`` may take and still meet the target
        (``x + m_q·p̂(n) + δ <= target``), at least what the plan expects (arrivals and
        backlog); its window is cut once it holds them (``cut_when_full``). ``None``: no
        bound below ``MAX_RECORDS``."""
        assert self._rate is not None
        m = self.margins()
        budget = np.array([(self.params.target - x - m.delta) / m.q])
        n = min(float(self._fit.records_within(budget, self.params.blocks)[0]), self._trusted())
        n = max(n, math.ceil(self._rate * x + self._backlog))
        if not math.isfinite(n) or n >= MAX_RECORDS:
            return None
        return max(1, math.floor(n))

    def _trusted(self) -> float:
        """The most records the fit is trusted to predict: a few times the most measured."""
        return CATCH_UP_GROWTH * max(self._fit.largest(self.params.blocks), 1.0)

    # ----------------------------------------------------------------- the verdict

    def observed_latency(self) -> float | None:
        """Batch latency at ``percentile`` over the last ``window`` reports (what
        happened), ``None`` before the first."""
        return self._latencies.quantile(self.params.percentile)

    def out_of_reach(self) -> bool:
        """The target is reported out of reach: overload, or a floor decision once
        ``CONFIRM`` batches of its run of floor or overload decisions ended over the
        target (a floor whose batches meet it is the margin's error: module docstring)."""
        mode = self._current().mode
        return mode == "overload" or (mode == "floor" and self._misses >= CONFIRM)

    def slo_met(self) -> bool:
        """The observed batch latency at the percentile over the window is within the
        target, and the plan is predicted to meet it or is a floor its batches have not
        confirmed."""
        d = self._current()
        if self.out_of_reach():
            return False
        predicted = d.mode in ("target", "floor") or (
            d.mode == "start"
            and d.predicted_latency_s is not None
            and d.predicted_latency_s <= self.params.target + _EPS
        )
        seen = self.observed_latency()
        return predicted and seen is not None and seen <= self.params.target + _EPS

    def _verdict(self, d: Decision) -> None:
        """Count overload decisions in a row, batches over the target in a run of floor or
        overload decisions, and reports in a row met: warn once per kind when the target
        is out of reach, and take the warning back once it is met again (an early verdict
        from few batches, or a load that fell, is not left standing on the console)."""
        latest = self._latencies.values[-1]
        over = int(latest > self.params.target + _EPS)
        self._misses = self._misses + over if d.mode in OUT_OF_REACH else 0
        self._streak = self._streak + 1 if d.mode == "overload" else 0
        met = self.slo_met()
        self._met_streak = self._met_streak + 1 if met else 0
        confirmed = self._streak >= CONFIRM or self._misses >= CONFIRM
        if confirmed and d.mode not in self._warned:
            self._warned.append(d.mode)
            log.warning(self.explain(d))
        elif self._warned and self._met_streak >= CONFIRM:
            self._warned = []
            log.warning(self._met_again(d))

    def _met_again(self, d: Decision) -> str:
        """One line: the target reported out of reach is met again, and how."""
        seen = self.observed_latency()
        assert seen is not None  # met means observed
        return (
            f"{self._head()} is met again: the observed p{self.params.percentile:g} batch "
            f"latency is {seen:.2f} s at interval {d.interval_s:g} s"
        )

    def _head(self) -> str:
        t, pct = self.params.target, self.params.percentile
        rate = 0.0 if self._rate is None else self._rate
        return f"slo: latency target {t:g} s (p{pct:g}) at {rate:,.0f} records/s"

    def explain(self, d: Decision | None = None) -> str:
        """One line: whether the target is met, and if not the best achievable latency
        and why."""
        d, head = d or self._current(), self._head()
        if d.mode == "floor":
            return (
                f"{head} cannot be met: the best achievable is {d.achievable_latency_s:.2f} s "
                f"at interval {d.interval_s:g} s; the processing floor there is "
                f"{d.processing_s:.2f} s"
            )
        if d.mode == "overload":
            lo, hi = self._bounds.low, self._bounds.high
            return (
                f"{head} cannot be met: processing exceeds the interval at every interval "
                f"from {lo:g} to {hi:g} s (at most {d.capacity_rps:,.0f} records/s fit); "
                f"batches are capped at {d.max_records:,} records every {d.interval_s:g} s "
                f"(batch latency {d.achievable_latency_s:.2f} s) and the backlog grows"
            )
        return f"{head}: planned interval {d.interval_s:g} s ({d.mode})"

    # ----------------------------------------------------------------- state

    def metrics_state(self) -> dict[str, Any]:
        """The verdict and the decision, without the model's memory (see :meth:`state`)."""
        d, m = self._current(), self.margins()
        coef = self._fit.coefficients(self.params.blocks)
        return {
            "mode": d.mode,
            "interval": d.interval_s,
            "max_records": d.max_records,
            "slo_met": self.slo_met(),
            "out_of_reach": self.out_of_reach(),
            "target_s": self.params.target,
            "achievable_latency_s": d.achievable_latency_s,
            "predicted_latency_s": d.predicted_latency_s,
            "observed_latency_s": self.observed_latency(),
            "rate_rps": self._rate,
            "backlog_records": round(self._backlog),
            "queue_delay_s": self._queue_delay,
            "margin": m.q,
            "latency_slack_s": m.delta,
            "coefficients": None if coef is None else list(coef),
            "warned": list(self._warned),
            "observed": self._observed,
        }

    def target_status(self) -> TargetStatus:
        """The verdict of :meth:`metrics_state`; when not met, why in a few words."""
        d, p, seen = self._current(), self.params, self.observed_latency()
        why = "still learning" if d.mode == "start" else "no interval is predicted to meet it"
        if d.mode == "floor" and self.out_of_reach() and d.processing_s is not None:
            why = f"the processing floor is {d.processing_s:.2f} s"
        elif d.mode == "overload" and d.capacity_rps is not None:
            why = f"at most {d.capacity_rps:,.0f} records/s fit in any interval"
        elif d.mode == "catch-up" and self._backlog >= 1:
            why = f"a backlog of {self._backlog:,.0f} records is being drained"
        elif seen is None:
            why = "no batch has finished yet"
        elif seen > p.target + _EPS:
            why = f"the observed p{p.percentile:g} batch latency is {seen:.2f} s"
        met = self.slo_met()
        achievable = d.achievable_latency_s
        return TargetStatus(p.target, met, achievable, d.mode, None if met else why, p.percentile)

    def state(self) -> dict[str, Any]:
        return {
            **self.metrics_state(),
            "backlog": self._backlog,
            "left": None if self._left is None else list(self._left),
            "last_interval": self._last_x,
            "finished": self._finished,
            "fit": self._fit.to_json(),
            "ratios": list(self._ratios.values),
            "latencies": list(self._latencies.values),
            "errors": list(self._errors.values),
            "pending": [[t, *v] for t, v in self._pending.items()],
            "caps": list(self._caps),
            "streak": self._streak,
            "misses": self._misses,
            "met_streak": self._met_streak,
            "draining": self._draining,
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        self._reset()
        try:
            self._fit.load(state.get("fit", {}))
            self._ratios.load(state.get("ratios", []))
            self._latencies.load(state.get("latencies", []))
            self._errors.load(state.get("errors", []))
            self._pending = {
                float(t): (float(v), None if not m or m[0] is None else float(m[0]))
                for t, v, *m in state.get("pending", [])
            }
            rate, last_x = state.get("rate_rps"), state.get("last_interval")
            self._rate = None if rate is None else float(rate)
            self._last_x = None if last_x is None else float(last_x)
            finished = state.get("finished")
            self._finished = None if finished is None else float(finished)
            self._backlog = float(state.get("backlog", 0.0))
            left = state.get("left")
            self._left = None if left is None else (int(left[0]), float(left[1]))
            self._queue_delay = float(state.get("queue_delay_s", 0.0))
            self._caps = [int(c) for c in state.get("caps", [])][-CAPS_KEPT:]
            self._streak = int(state.get("streak", 0))
            self._misses = int(state.get("misses", 0))
            self._met_streak = int(state.get("met_streak", 0))
            self._draining = bool(state.get("draining", False))
            self._warned = [str(w) for w in state.get("warned", [])]
            self._observed = int(state.get("observed", 0))
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            msg = f"slo state is malformed ({exc}): restore only what state() wrote"
            raise AdabatchError(msg) from None
