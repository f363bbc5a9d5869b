"""``isotonic``: DyBBS, dynamic block and batch sizing with isotonic regression.

Q. Zhang, Y. Song, R. R. Routray, W. Shi, "Adaptive Block and Batch Sizing for Batched
Stream Processing System", ICAC 2016 (seeds/dybbs-isotonic-block-batch-sizing.txt).

The controller keeps the paper's two structures (§III-D):

- **Stats**: one entry per (discretised rate, block interval, batch interval) holding the
  processing time as a weighted sliding average of the batches observed with that triple
  (:class:`~adabatch.control.isotonic_model.Stats`, with the isotonic fit IsoR);
- **DR_to_BL**: the current block interval of each discretised rate.

Every plan runs Algorithm 1 for the rate of the latest observed batch (the paper assumes
the rate holds for the next interval): fit an isotonic regression of processing time on
batch interval over the Stats entries of (rate, current block interval), take the
smallest batch interval x with ``IsoR(x) + c < x`` (§III-B), and once that interval is
measured stable (line 6) move the block interval (§III-C, lines 7-11:
:class:`~adabatch.control.isotonic_blocks.BlockSearch`). One stated deviation moves the
block interval before line 6 when no batch interval can become stable
(:class:`IsotonicController`); slow start is
:class:`~adabatch.control.isotonic_start.SlowStart`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from adabatch.control.base import (
    MAX_BLOCKS,
    MAX_INTERVAL_S,
    MIN_INTERVAL_S,
    BatchPlan,
    BatchReport,
    Controller,
    check_interval_order,
    check_not_above,
)
from adabatch.control.isotonic_blocks import BlockSearch
from adabatch.control.isotonic_model import (
    Entry,
    Grid,
    InFlight,
    Key,
    Stats,
    blocks_for,
    first_stable,
    quantise,
)
from adabatch.control.isotonic_reuse import RateHistory
from adabatch.control.isotonic_start import SlowStart, out_of_reach
from adabatch.errors import AdabatchError
from adabatch.params import Param

# A step up of the block interval (line 8) that has not converged after this many times
# min_points batches planned with it failed (step iii).
PROBE_POINTS = 3
# A queue a batch reports is drained over about this many batches (added to the slack).
DRAIN_BATCHES = 4


class IsotonicController(RateHistory, Controller):
    """DyBBS (Zhang et al., ICAC 2016, Algorithm 1) behind the controller contract.

    Parameters follow §IV: ``c`` = 50 ms, ``block_step`` = 100 ms. Choices the paper leaves
    open, and ours:

    - ``alpha``, the weight of a new sample in Stats' "weighted sliding average" (§III-D
      gives no weight): 0.5, so a changed operating condition dominates an entry after
      two or three batches at that triple while one noisy batch moves it only half way.
    - Rate discretisation. The paper bins rates by 0.2 MB/s, 3-13 % of its 1.5-6.5 MB/s
      rates, and notes (§VI) that other scales need another step. ``rate_step`` gives such
      an absolute step in records/s; unset (the default), bins are relative: bin ``i``
      holds rates around ``(1 + rate_ratio)^i - 1``, ``rate_ratio`` = 0.1, so any rate
      scale gets the paper's resolution, several times wider than the Poisson noise of a
      measured rate (3 % at 1,000 records per batch): a steady stream spans one or two
      bins.
    - Isotonic fit: ``scipy.optimize.isotonic_regression`` (PAV), one point per distinct
      batch interval, read between points by linear interpolation and held constant
      beyond the outer points. The paper does not weight the points; we weight each by
      ``(1 - alpha) ** age`` (age = newer samples of the same rate and block interval),
      as the sliding average weights samples. Weights only matter when PAV pools points
      that violate monotonicity, so monotone data fit the same; but after a condition
      change, stale low entries at large intervals no longer pool a freshly measured
      unstable interval down to "stable".
    - Batch-interval grid. The paper rounds the batch interval to a multiple of the block
      interval because Spark Streaming's receiver cuts blocks on a timer. Our source splits
      any batch into any number of partitions, so intervals are multiples of
      ``granularity`` (0.05 s) and ``blocks = round(x / block_interval)`` in
      [1, ``max_blocks``]: the block interval stays the search variable, up to rounding,
      without coarsening x to steps of 0.25-0.5 s. ``granularity`` unset is the paper's
      grid. The smallest grid interval with ``IsoR(x) + c < x`` wins, the largest if none
      does; IsoR is linear between points, so the search solves the inequality once per
      piece instead of testing every candidate.
    - Slow start (§III-D, ref. [24]) while fewer than ``min_points`` distinct batch
      intervals are known for (rate, block interval). ``slow_start=double`` is the literal
      reading: the intervals x0, 2 x0, 4 x0, ... not yet known or planned. Ref. [24] (RFC
      2001) doubles only up to a threshold and then grows slowly; ``slow_start=tcp``
      (default) starts at x0 and, while no interval is stable, grows the largest one
      measured by twice its shortfall ``p + c - x`` (where a line of slope 1/2 through
      the point crosses ``p + c = x``), at most doubling it. Once an interval is stable it
      follows IsoR on the points known so far: IsoR holds its value below the smallest
      point, so this walks down toward the crossing like a fixed-point iteration with
      slack c; when IsoR's choice is measured already it probes one grid step below it if
      nothing below is measured (IsoR cannot see a crossing below its smallest point),
      else adds the next larger unmeasured interval. The points gather around the
      crossing instead of at 16 x0. x0 is ``initial_interval`` or a seed (next item).
      On the simulated reduce workload under
      a 100k-300k records/s sine, the previous tcp reading (double to the first stable
      interval from ``initial_interval``, then add one block interval) restarted every
      new rate near 0.25 s and queued to 33 s mean latency with 500 records/s rate bins;
      this reading stays at 1.4 s with them.
    - History reuse (``reuse``; our reading of §III-C "restarting from scratch slows down
      the convergence" applied across rates): x0 for a (rate, block interval) is the
      rate's own converged interval when the search moved it to another block interval,
      else the reference interval of the nearest rate bin (its converged interval, or
      the smallest it measured stable), scaled by the rate ratio when the new rate is
      higher (the same records per batch, which took less than that interval to
      process), unscaled when it is lower; else ``initial_interval``. The batch that
      reveals a new rate was planned with the previous rate's interval, so its point
      seeds the new rate's Stats too. A rate bin seen before resumes from its own Stats:
      the paper's Fig. 8 effect. A new rate bin starts its block-interval search where
      the nearest rate bin that converged has its best local optimum (else at the current
      block interval of the nearest bin seen), not at the minimal block interval: with the
      per-block cost Spark measures, every bin restarting at 100 ms re-learns the same
      trap (below) while the queue grows.
    - Block-interval search (§III-C): the search starts at ``block_interval`` (the paper's
      "minimal block interval"; 0.1 s reproduces the paper) and, each time the batch
      interval converges (line 6), records the local optimum (x, x + p) of the block
      interval; its latency is the mean over its first three convergences, then a moving
      average (one sliding average of p is ~6 % noisy at 10 % noise per batch), and the
      count restarts whenever the search returns to it, so it is judged on fresh data.
      While the current block interval holds the best one it steps up by ``block_step``
      (line 8),
      skipping block intervals that give the current x the same number of blocks (no
      new parallelism to learn). A step that does not lower the latency by more than
      ``block_tolerance`` (relative, 5 %) ends the search (step iii) and returns to the
      block interval it stepped from: we then stay there, where the literal line 8 would
      alternate between the two block intervals forever. A settled block interval is left
      only when another local optimum beats it by twice the tolerance (its own latency is
      fresh, the others' as old as their last visit): the condition changed, and the
      search restarts from that best sub-optimal point (line 10).
    - Moving to a block interval that has a local optimum resumes at that optimum's batch
      interval (line 10's "point"); to a new one carries the batch interval (rounded *up*
      on the paper's grid: keeps the measured stability margin).
    - ``cores``: no batch gets more blocks than the cores Spark runs them on (more tasks
      than cores only add per-task cost on local[2]: join at 10k records/s ran p = 0.27 s
      with 1 block, 1.16 s with 10). Unset (the default: the controller cannot ask Spark),
      only ``max_blocks`` bounds them. The fixed variant (``block_sizing=false``) ignores
      it: that is the paper's baseline, ``x / block_interval`` blocks.

    Deviation from the paper: leaving a block interval that has no stable batch interval.
    Line 6 moves the block interval only once the batch interval converged. When each
    block costs what Spark charges (0.04-0.07 s on local[2]) and blocks = x / 0.1 s, the
    processing time grows at least as fast as the interval: no x is stable, line 6 never
    holds and slow start keeps growing x, adding blocks (on Spark, join-sine spent 41 of
    42 batches in slow start at 10 blocks on average). So, before Algorithm 1:

    - a (rate, block interval) with at least three intervals measured, none stable
      (``p + c < x``), and a least-squares slope of p on x of at least 1 is left
      (:func:`~adabatch.control.isotonic_start.out_of_reach`): back to the block interval
      a step up came from, else up the search's lattice (``block_interval + n *
      block_step``) to at most half the blocks at its interval closest to stable, else,
      with one block there already, down to at least twice the blocks (not below
      ``block_interval``); block intervals found the same way are passed over. Slow start
      at the new block interval begins at that interval. While ``cores`` is unset, a
      block interval left that way is left by every rate that never converged at it
      (the per-block cost is paid at every rate);
    - a step up (line 8) whose first batch, at the optimum's batch interval, is unstable
      and more than twice ``block_tolerance`` slower than the optimum cannot converge to
      a lower latency (p is monotone in x): the search returns at once, as step iii
      would, instead of waiting for a convergence that may never come; so does a step up
      that has not converged after ``3 * min_points`` of its batches.

    Deviation from the paper: draining a queue. Algorithm 1 picks the smallest x with
    ``IsoR(x) + c < x``, as if every batch started when cut. On Spark, processing time
    varies by 30-40 % from batch to batch and a batch that ran over leaves a queue; with
    the slack at ``c`` it drains slowly, and reports arrive as late as the queue is long
    (a 10-minute reduce-sine run on local[2] kept a queue of 8-18 s). So the slack of the
    next choice is ``c + max(0, q - c) / DRAIN_BATCHES``, ``q`` the latest report's
    queue delay: the queue drains in about that many batches, then the slack is ``c``
    again. Measured (``benchmarks/dybbs_sim.py --models default --workload reduce --sigma
    0.4``, three seeds, latency after learning): reduce sine 60k-300k/30 s, isotonic 5.71
    s before, 2.42 s with it, fixed-point 2.35 s; sine 100k-300k/60 s, 8.25 s before, 2.55
    s with it, fixed-point 2.72 s; the two Markov profiles 2.00 and 2.17 s (fixed-point 2.32
    and 2.77 s). With ``--sigma 0.2`` isotonic is below fixed-point on all four.

    Measured (``.venv/bin/python benchmarks/dybbs_sim.py --seeds 0 1 2 3 4``: 10-minute
    runs, mean latency x + q + p after a 3-minute learning phase; the simulator's Join and
    Reduce charging Spark's 0.073 and 0.044 s per block; every controller from the paper's
    100 ms block interval, isotonic told the model's 2 cores as ``read_stream`` tells it
    Spark's). Trapped, the paper's rules never move the block interval, as its fixed 100
    ms variant: that diverges in 5 of 5 seeds on Join Markov 4k/7k/10k records/s (41
    blocks on average) and Join sine 4k-10k. Fixed-point with 2 blocks: 1.37 and 1.36 s;
    isotonic with these deviations: 1.06 and 1.07 s. Reduce sine 60k-300k: fixed-point
    1.97 s, the fixed variant 2.85 s, isotonic 1.66 s. Isotonic is below fixed-point on
    all eight profiles of the script with both cost models (Join Markov with the whole
    local[2] fit: 0.61 s against 0.82 s).

    ``block_sizing=false`` is the paper's "Fixed Block Interval" variant (§V-A): the block
    interval never moves, not even out of a trap. The paper fixes 100 ms on 16 executors;
    our default ``block_interval`` of 0.25 s suits a ``local[2]`` Spark, where a groupBy
    batch costs ~0.4 s whatever its size: intervals converge around 0.5-1 s and get 2-4
    blocks, about one per core, instead of 5-10 tasks of per-task overhead.

    Examples
    --------
    >>> from adabatch.control.base import BatchReport
    >>> ctrl = IsotonicController(block_sizing=False)
    >>> plan = ctrl.plan(0.0)
    >>> (plan.interval_s, plan.blocks)
    (0.25, 1)
    >>> ctrl.observe(BatchReport(0, 0.25, 1, 500, 0.4, 0.0, 0.25, 0.25, 0.65))
    >>> ctrl.plan(0.25).interval_s  # slow start: nothing stable yet, double
    0.5
    """

    name = "isotonic"
    summary = (
        "DyBBS: isotonic regression per discretised rate, constant slack c, "
        "block-interval search (Zhang et al. ICAC 2016)"
    )
    PARAMS = (
        Param("c", 0.05, "constant slack in IsoR(x) + c < x, seconds (§III-B, §IV)", low=0.0),
        Param(
            "alpha",
            0.5,
            "weight of a new sample in Stats' sliding average of processing time",
            low=0.0,
            high=1.0,
            low_open=True,
        ),
        Param(
            "rate_step",
            None,
            "absolute rate discretisation step, records/s (§IV); unset: relative bins",
            low=0.0,
            low_open=True,
            optional=True,
        ),
        Param(
            "rate_ratio",
            0.1,
            "relative width of a rate bin when rate_step is unset",
            low=0.0,
            low_open=True,
        ),
        Param(
            "min_points",
            5,
            "distinct batch intervals needed before the fit; slow start until then",
            kind=int,
            low=1,
        ),
        Param(
            "slow_start",
            "tcp",
            "below min_points: double the interval, or (tcp) double until an interval is "
            "stable, then follow the fit on the points known",
            kind=str,
            choices=("double", "tcp"),
        ),
        Param(
            "reuse",
            True,
            "start a new rate from the nearest converged rate (false: from scratch)",
            kind=bool,
        ),
        Param("block_sizing", True, "search the block interval (false: fixed)", kind=bool),
        Param(
            "block_interval",
            0.25,
            "block interval in seconds: fixed, or where the search starts",
            low=MIN_INTERVAL_S,
            high=MAX_INTERVAL_S,
        ),
        Param(
            "block_step",
            0.1,
            "block interval search step, seconds (§IV)",
            low=MIN_INTERVAL_S,
            high=MAX_INTERVAL_S,
        ),
        Param(
            "block_tolerance",
            0.05,
            "relative latency gain a block interval needs to beat another",
            low=0.0,
            high=1.0,
            high_open=True,
        ),
        Param(
            "max_blocks",
            64,
            "most blocks (Spark tasks) per batch",
            kind=int,
            low=1,
            high=MAX_BLOCKS,
        ),
        Param(
            "cores",
            None,
            "cores Spark runs the blocks on; with block sizing no batch gets more blocks "
            "(unset: unknown)",
            kind=int,
            low=1,
            high=MAX_BLOCKS,
            optional=True,
        ),
        Param(
            "granularity",
            0.05,
            "batch intervals are multiples of this, seconds (unset: of the block interval)",
            low=MIN_INTERVAL_S,
            high=MAX_INTERVAL_S,
            optional=True,
        ),
        Param(
            "initial_interval",
            0.25,
            "first slow-start interval in seconds (rounded up to the grid)",
            low=MIN_INTERVAL_S,
            high=MAX_INTERVAL_S,
        ),
        Param(
            "min_interval",
            0.1,
            "smallest batch interval, seconds",
            low=MIN_INTERVAL_S,
            high=MAX_INTERVAL_S,
        ),
        Param(
            "max_interval",
            60.0,
            "largest batch interval, seconds",
            low=MIN_INTERVAL_S,
            high=MAX_INTERVAL_S,
        ),
    )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        p = self.params
        self._c, self._alpha, self._start_bl = p.c, p.alpha, quantise(p.block_interval)
        self._log_ratio = math.log1p(p.rate_ratio)
        self._grid = Grid(p.min_interval, p.max_interval, p.granularity)
        # the cores bound belongs to block sizing: the fixed variant is the paper's
        bounded = p.cores is not None and p.block_sizing
        self._max_blocks = min(p.max_blocks, p.cores) if bounded else p.max_blocks
        self._reset()

    def _check(self, params: Any) -> None:
        high = params.max_interval
        check_interval_order(self.name, params.min_interval, high, params.initial_interval)
        for name in ("block_interval", "granularity"):
            if params[name] is not None:
                check_not_above(self.name, name, params[name], high)

    def _reset(self) -> None:
        self._stats = Stats(self._alpha)
        self._dr_to_bl: dict[int, float] = {}
        self._search = BlockSearch(self.params, self._max_blocks)
        self._settled: dict[int, float] = {}  # rate bin -> latest converged batch interval
        self._escaped: dict[int, float] = {}  # rate bin -> x judged at a block interval left
        self._floor = 0.0  # the largest block interval an escape left
        self._in_flight = InFlight()
        self._slow_start = SlowStart(self.params, self._grid, self._in_flight)
        self._fits: dict[Key, tuple[float, float]] = {}  # slack, IsoR's choice with it
        self._queue = 0.0  # queue delay of the latest report
        self._rate_bin: int | None = None
        self._interval: float | None = None
        self._block_interval = self._start_bl
        self._blocks: int | None = None
        self._phase = "slow-start"
        self._converged = False
        self._observed = 0

    # ----------------------------------------------------------------- the contract

    def plan(self, now: float) -> BatchPlan:
        if self._rate_bin is None:
            bl = self._start_bl
            x = self._grid.carry(self.params.initial_interval, bl)
            phase, converged = "slow-start", False
        else:
            bl, x, phase, converged = self._dybbs(self._rate_bin)
        blocks = self.blocks_for(x, bl)
        self._interval, self._block_interval, self._blocks = x, bl, blocks
        self._phase, self._converged = phase, converged
        self._in_flight.add(x, blocks, bl, self._rate_bin)
        return BatchPlan(x, blocks)

    def observe(self, report: BatchReport) -> None:
        self._observed += 1
        rate_bin = self.rate_bin(report.rate_rps)
        bl = self._block_interval_of(report)
        step = self._grid.step(bl)
        x = self._grid.candidate(step, round(report.interval_s / step))
        key = (rate_bin, bl)
        self._stats.add(key, x, report.processing_s)
        self._fits.pop(key, None)
        self._rate_bin = rate_bin
        self._queue = max(0.0, report.queue_delay_s)

    # ----------------------------------------------------------------- Algorithm 1

    def _dybbs(self, rate_bin: int) -> tuple[float, float, str, bool]:
        """Algorithm 1 for ``rate_bin``: (block interval, batch interval, phase, converged)."""
        curr_bl = self._dr_to_bl.get(rate_bin)  # line 2
        if curr_bl is None:  # a new rate: where the nearest converged rate's search is
            curr_bl = self._dr_to_bl[rate_bin] = self._first_block_interval(rate_bin)
        key = (rate_bin, curr_bl)
        table = self._stats.table(key)  # line 3
        new_bl = self._leave(key, table) if self.params.block_sizing else None
        if new_bl is not None:  # our deviation: see the class docstring
            self._dr_to_bl[rate_bin] = new_bl
            key = (rate_bin, new_bl)
            return new_bl, self._isor(key, self._stats.table(key))[0], "block-sizing", False
        new_x, slow = self._isor(key, table)  # line 4
        if slow:
            return curr_bl, new_x, "slow-start", False
        entry = table.get(new_x)  # line 5
        converged = entry is not None and entry[0] + self._c < new_x  # line 6
        if converged:
            self._settled[rate_bin] = new_x
        new_bl = curr_bl  # line 13
        if converged and self.params.block_sizing:
            new_bl = self._search.step(rate_bin, curr_bl, new_x, new_x + entry[0])
        if new_bl == curr_bl:
            return curr_bl, new_x, "batch-sizing", converged
        self._dr_to_bl[rate_bin] = new_bl  # line 15
        known_x = self._search.revisit(rate_bin, new_bl)
        if known_x is not None:  # back to a known point: its own batch interval
            return new_bl, known_x, "block-sizing", converged
        return new_bl, self._grid.carry(new_x, new_bl), "block-sizing", converged

    def _leave(self, key: Key, table: Mapping[float, Entry]) -> float | None:
        """The block interval to move to before Algorithm 1 runs, or None (our deviation,
        see the class docstring): away from one with no stable batch interval in reach
        (:meth:`_trapped`), judged at its interval closest to stable; back from a step up
        (line 8) whose first batch did worse than the optimum it left, or that has not
        converged in ``PROBE_POINTS * min_points`` of its batches."""
        rate_bin, bl = key
        if self._trapped(key):
            x = min(table, key=lambda x: table[x][0] - x) if table else self._seed(key)
            new_bl = self._search.escape(rate_bin, bl, x, lambda b: self._trapped((rate_bin, b)))
            if new_bl == bl:
                return None
            self._escaped[rate_bin] = x
            if new_bl > bl:
                self._floor = max(self._floor, bl)
            return new_bl
        if self._search.has_optimum(rate_bin, bl):
            return None
        probe = self._search.probe(rate_bin)
        if probe is None:
            return None
        x_opt, p_opt, batches = probe
        x_first = self._grid.carry(x_opt, bl)
        first = table.get(x_first)
        worse = 1.0 + 2.0 * self.params.block_tolerance
        if batches > PROBE_POINTS * self.params.min_points or (
            first is not None and first[0] + self._c >= x_first and first[0] > worse * p_opt
        ):
            return self._search.back_from_probe(rate_bin)
        return None

    def _trapped(self, key: Key) -> bool:
        """Whether ``key``'s block interval has no stable batch interval in reach: its own
        points say so (:func:`~.isotonic_start.out_of_reach`), or, while the cores are
        unknown, an escape at another rate left this block interval or a larger one and
        this rate never converged at it."""
        rate_bin, bl = key
        if out_of_reach(self._stats.table(key), self._c):
            return True
        return (
            self.params.cores is None
            and bl <= self._floor
            and not self._search.has_optimum(rate_bin, bl)
        )

    def _isor(self, key: Key, table: Mapping[float, Entry]) -> tuple[float, bool]:
        """IsoR of Algorithm 1 line 4: (new batch interval, whether slow start chose it)."""
        if len(table) < self.params.min_points:
            x = self._slow_start.interval(key, table, self._seed, self._fit)
            if x is not None:
                return x, True
        return self._fit(key), False

    def _fit(self, key: Key) -> float:
        """The smallest grid interval with ``IsoR(x) + c < x`` over ``key``'s Stats (§III-B)."""
        # our deviation: a queue beyond the slack is drained over DRAIN_BATCHES batches
        c = self._c + max(0.0, self._queue - self._c) / DRAIN_BATCHES
        cached = self._fits.get(key)
        if cached is not None and cached[0] == c:
            return cached[1]
        xs, fit = self._stats.fit(key)
        step = self._grid.step(key[1])
        new_x = self._grid.candidate(step, first_stable(step, xs, fit, c, self._k_range(step)))
        self._fits[key] = (c, new_x)
        return new_x

    def blocks_for(self, interval_s: float, block_interval: float) -> int:
        """Blocks of a batch: ``round(x / block interval)`` in [1, max_blocks], and at most
        ``cores`` when set."""
        return blocks_for(interval_s, block_interval, self._max_blocks)

    def _k_range(self, step: float) -> tuple[int, int]:
        """Candidate batch intervals on grid ``step``: k * step, k in [k_min, k_max]."""
        return self._grid.k_range(step)

    def _block_interval_of(self, report: BatchReport) -> float:
        """The block interval a report's batch was planned with.

        The oldest unreported plan with the report's interval and blocks; otherwise
        interval / blocks, snapped to the block intervals the search can reach
        (``block_interval + n * block_step``, n >= 0).
        """
        planned = self._in_flight.take(quantise(report.interval_s), report.blocks)
        if planned is not None:
            bl, planned_for = planned
            if planned_for is not None and self._dr_to_bl.get(planned_for) == bl:
                self._search.count_probe_batch(planned_for)
            return bl
        if not self.params.block_sizing:
            return self._start_bl
        step = self.params.block_step
        n = max(0, round((report.interval_s / max(report.blocks, 1) - self._start_bl) / step))
        bl = quantise(self._start_bl + n * step)
        while bl > self.params.max_interval and n > 0:
            n -= 1
            bl = quantise(self._start_bl + n * step)
        return bl

    # ----------------------------------------------------------------- state

    def _summary(self) -> dict[str, Any]:
        rate = None if self._rate_bin is None else self.bin_rate(self._rate_bin)
        return {
            "phase": self._phase,
            "converged": self._converged,
            "interval": self._interval,
            "block_interval": self._block_interval,
            "blocks": self._blocks,
            "rate_bin": self._rate_bin,
            "rate_bin_rps": rate,
            "observed": self._observed,
            "stats_entries": self._stats.entries(),
        }

    def state(self) -> dict[str, Any]:
        return {
            **self._summary(),
            "stats": self._stats.to_json(),
            "dr_to_bl": {str(rb): bl for rb, bl in self._dr_to_bl.items()},
            **self._search.to_json(),
            "settled": {str(rb): x for rb, x in self._settled.items()},
            "escaped": {str(rb): x for rb, x in self._escaped.items()},
            "floor": self._floor,
            "in_flight": self._in_flight.to_json(),
        }

    def metrics_state(self) -> dict[str, Any]:
        """:meth:`state` without its tables, for per-batch metrics records.

        Stats grows to hundreds of entries (~10 KB of JSON after a simulated hour of a
        varying rate): too much to write with every batch. ``searching`` is the current
        rate's block-interval search.
        """
        out = self._summary()
        if self._rate_bin is not None:
            out["searching"] = self._search.searching(self._rate_bin)
        return out

    def restore(self, state: Mapping[str, Any]) -> None:
        self._reset()
        try:
            self._stats.load(state.get("stats", {}))
            self._dr_to_bl = {int(rb): float(bl) for rb, bl in state.get("dr_to_bl", {}).items()}
            self._search.load(state)
            self._settled = {int(rb): float(x) for rb, x in state.get("settled", {}).items()}
            self._escaped = {int(rb): float(x) for rb, x in state.get("escaped", {}).items()}
            self._floor = float(state.get("floor", 0.0))
            self._in_flight.load(state.get("in_flight", []))
            rate_bin = state.get("rate_bin")
            self._rate_bin = None if rate_bin is None else int(rate_bin)
            interval = state.get("interval")
            self._interval = None if interval is None else float(interval)
            self._block_interval = float(state.get("block_interval", self._start_bl))
            blocks = state.get("blocks")
            self._blocks = None if blocks is None else int(blocks)
            self._phase = str(state.get("phase", "slow-start"))
            self._converged = bool(state.get("converged", False))
            self._observed = int(state.get("observed", 0))
        except (TypeError, ValueError, AttributeError) as exc:
            msg = f"isotonic state is malformed ({exc}): restore only what state() wrote"
            raise AdabatchError(msg) from None
