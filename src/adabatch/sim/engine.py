"""Discrete-event simulation of the batched stream model (fixed-point §2.1, DyBBS §II-A).

::

    records --> batching (cut every x s) --> batch queue --> processing --> results
                    ^ plan(now) at each cut                 one batch at a time |
                    +---------------- controller <-- observe(report) -----------+

Batching and the batch queue are :class:`adabatch.batching.BatchCutter`, the model the Spark
source runs on the wall clock; here it runs on a virtual clock. The simulator only adds the
two kinds of event the cutter cannot see: a cut falls due (the next cut time the cutter
names) and the batch in progress finishes (its start plus the cost model's processing
time). Events are taken in time order, and a batch that finishes at the same instant as a
cut is observed first (SimPy's ``(time, priority, sequence)`` order), so the controller
plans the next interval knowing it; the cutter's :meth:`~adabatch.batching.BatchCutter.poll`
resolves ties the same way.

Records arrive as an :class:`Arrivals` says. :class:`ProfileArrivals` counts a rate
profile's records by offset: ``floor(profile.cumulative(t))`` records have arrived by ``t``
(with ``poisson=True`` each interval's count is instead a Poisson draw with the profile's
mean). Within an interval the records are spread like the profile's density, so a batch's
mean arrival time is exact for every profile (treating records as a fluid: half an
inter-arrival time, ``1 / (2 rate)``, from counting records one by one). A plan's
``max_records`` admits only the oldest that many waiting records; the rest stay in the
source for later batches, and their arrival times are kept so record latency stays right.

Stopping: no cut is made after ``duration_s``; batches cut but not started when the batch
in progress at ``duration_s`` finishes are counted as ``final_queue_len`` and not processed.
A run whose oldest waiting batch has waited more than ``diverge_delay_s`` (default
``max(300 s, 10 x the latest interval)``) or whose queue holds more than
``max_queue_batches`` batches is stopped there and marked ``diverged``: its queue grows
without bound, and simulating it further says nothing new.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from adabatch.batching import BatchCutter, CutBatch
from adabatch.control.base import Controller
from adabatch.errors import AdabatchError
from adabatch.metrics import BatchRecord
from adabatch.profiles import RateProfile
from adabatch.sim.workloads import Cost, CostModel, Resources

# Most batches one simulation may cut: about a minute of simulation, and a bound on the
# memory its records take. A duration that implies more is refused before it starts.
MAX_BATCHES = 1_000_000
# Events between two calls of the progress callback.
PROGRESS_EVERY = 5_000

# ``on_progress(now, duration_s, finished)``: stream time reached, the stream time the run
# stops at, and the batches finished so far.
ProgressFn = Callable[[float, float, int], None]


def check_batches(duration_s: float, smallest_interval_s: float) -> None:
    """Refuse a run whose duration, cut at its smallest interval, means more than
    ``MAX_BATCHES`` batches."""
    implied = duration_s / smallest_interval_s
    if implied > MAX_BATCHES:
        msg = (
            f"a duration of {duration_s:g} s with intervals down to {smallest_interval_s:g} s "
            f"means up to {implied:.3g} batches: allowed at most {MAX_BATCHES:,} "
            "(a shorter --duration or a longer smallest interval)"
        )
        raise AdabatchError(msg)


@dataclass(frozen=True)
class SimOutcome:
    """What a simulation produced: one record per finished batch and how it ended."""

    records: tuple[BatchRecord, ...]
    final_queue_len: int
    diverged: bool
    end_s: float  # stream time at which the simulation stopped
    cuts: int  # batches cut (finished, queued or in progress)


class Arrivals(Protocol):
    """Where the simulated records come from: the questions the simulator asks of a
    source (a :class:`~adabatch.sources.base.RecordSource` answers them too)."""

    def arrival_time(self, offset: int) -> float:
        """Stream time at which record ``offset`` arrives (a plan cut when full)."""
        ...

    def available(self, now: float) -> int:
        """Records arrived by stream time ``now`` (asked at cut times, in order)."""
        ...

    def mean_arrival(self, start: int, end: int) -> float:
        """Mean arrival time of records ``start .. end-1`` (asked once per batch, in order)."""
        ...


class ProfileArrivals:
    """A rate profile's records as offsets, for the cutter on a virtual clock.

    Each call of :meth:`available` at a later time adds the records of the interval since
    the previous call as a chunk ``[count, t_lo, t_hi, c_lo, c_hi]``: ``count`` records
    spread over ``(t_lo, t_hi]`` with the profile's density, ``c = profile.cumulative(t)``
    at both ends. :meth:`mean_arrival` takes the oldest records; taking part of a chunk
    splits it where the cumulative count reaches the same fraction.

    Parameters
    ----------
    profile
        The rate profile.
    rng
        Draw each interval's count from a Poisson distribution with the profile's mean;
        ``None``: ``floor(profile.cumulative(t))`` records by ``t``.
    """

    def __init__(self, profile: RateProfile, rng: np.random.Generator | None = None) -> None:
        self.profile = profile
        self.rng = rng
        self.arrived = 0
        self.taken = 0  # records whose mean arrival was asked for
        self.t_last, self.c_last = 0.0, 0.0
        self.chunks: deque[list[float]] = deque()

    def available(self, now: float) -> int:
        """Records arrived by ``now``; times must not decrease from call to call."""
        if now == self.t_last:
            return self.arrived
        if now < self.t_last:
            msg = f"arrivals asked at {now!r} after {self.t_last!r}: the clock runs forward"
            raise ValueError(msg)
        c_now = self.profile.cumulative(now)
        if self.rng is not None:
            count = int(self.rng.poisson(max(c_now - self.c_last, 0.0)))
        else:
            count = math.floor(c_now) - self.arrived
        if count > 0:
            self.chunks.append([count, self.t_last, now, self.c_last, c_now])
        self.arrived += count
        self.t_last, self.c_last = now, c_now
        return self.arrived

    def arrival_time(self, offset: int) -> float:
        """When the profile's cumulative count reaches record ``offset`` (with Poisson
        counts, when it is expected: a cut at that time takes what arrived by then)."""
        return self.profile.arrival_time(offset + 1)

    def peek(self, now: float) -> int:
        """About the records arrived by ``now``, without recording their arrival (a Poisson
        count is not drawn: the profile's expectation is added)."""
        if now <= self.t_last:
            return self.arrived
        extra = max(self.profile.cumulative(now) - self.c_last, 0.0)
        if self.rng is None:
            return max(self.arrived, math.floor(self.profile.cumulative(now)))
        return self.arrived + math.floor(extra)

    def mean_arrival(self, start: int, end: int) -> float:
        """Mean arrival time of records ``start .. end-1``, the oldest not yet taken."""
        if start != self.taken or not start < end <= self.arrived:
            msg = f"records {start}..{end} asked for; next untaken {self.taken}"
            raise ValueError(msg)
        m, taken, weighted = end - start, 0, 0.0
        while taken < m:
            chunk = self.chunks[0]
            count, t_lo, t_hi, c_lo, c_hi = chunk
            k = min(int(count), m - taken)
            if k == count:
                t_mid, c_mid = t_hi, c_hi
                self.chunks.popleft()
            else:
                c_mid = c_lo + (c_hi - c_lo) * k / count
                t_mid = min(max(self.profile.arrival_time(c_mid), t_lo), t_hi)
                chunk[:] = [count - k, t_mid, t_hi, c_mid, c_hi]
            weighted += k * self._fluid_mean(t_lo, t_mid, c_lo, c_mid)
            taken += k
        self.taken = end
        return weighted / taken

    def _fluid_mean(self, t_lo: float, t_hi: float, c_lo: float, c_hi: float) -> float:
        if c_hi <= c_lo:  # a Poisson count where the profile expected almost nothing
            return 0.5 * (t_lo + t_hi)
        mean = self.profile.first_moment(t_lo, t_hi) / (c_hi - c_lo)
        return min(max(mean, t_lo), t_hi)


@dataclass(frozen=True)
class _Running:
    """The batch in progress: what the cutter handed out, its cost and records' mean
    arrival time."""

    batch: CutBatch
    cost: Cost
    finishes_at: float
    mean_arrival_at: float | None


class _Simulation:
    """One run's moving parts around the cutter: the server, the records, the stop rules."""

    def __init__(
        self,
        cutter: BatchCutter,
        model: CostModel,
        arrivals: Arrivals,
        rng: np.random.Generator,
        resources: Resources | None,
    ) -> None:
        self.cutter = cutter
        self.controller: Controller = cutter.controller  # type: ignore[assignment]
        self.model = model
        self.arrivals = arrivals
        self.rng = rng
        self.resources = resources
        self.running: _Running | None = None
        self.records: list[BatchRecord] = []
        self.final_queue_len: int | None = None

    def next_event(self) -> tuple[float, bool]:
        """The next event's time and whether it is a finish (finishes first at a tie)."""
        finish = math.inf if self.running is None else self.running.finishes_at
        cut = self.cutter.next_cut_at()
        return min(finish, cut), finish <= cut

    def finish(self, now: float) -> None:
        """The batch in progress finishes: the controller observes it, it is recorded."""
        assert self.running is not None
        running, self.running = self.running, None
        report = self.cutter.complete(now, block_processing_s=running.cost.block_s)
        self.records.append(
            BatchRecord.from_report(
                report,
                mean_arrival_at=running.mean_arrival_at,
                max_records=running.batch.max_records,
                queue_len=len(self.cutter.queue),
                controller_state=self.controller.metrics_state(),
            )
        )
        if now > self.cutter.stop_at and self.final_queue_len is None:
            self.final_queue_len = len(self.cutter.queue)

    def start(self, now: float) -> None:
        """Process the batch the cutter hands out now, if any."""
        batch = self.cutter.hand_out(now)
        if batch is None:
            return
        cost = self.model.cost(
            batch.records, batch.interval_s, batch.blocks, now, self.rng, self.resources
        )
        mean = self.arrivals.mean_arrival(batch.start, batch.end) if batch.records else None
        self.running = _Running(batch, cost, now + cost.processing_s, mean)

    def outcome(self, now: float, diverged: bool) -> SimOutcome:
        final = self.final_queue_len
        if final is None or diverged:
            final = len(self.cutter.queue)
        return SimOutcome(tuple(self.records), final, diverged, now, self.cutter.next_seq)


def _diverges(
    cutter: BatchCutter,
    now: float,
    cut: CutBatch,
    diverge_delay_s: float | None,
    max_queue_batches: int,
) -> bool:
    """After a cut: the queue holds too many batches, or its oldest waited too long."""
    limit = diverge_delay_s if diverge_delay_s is not None else max(300.0, 10.0 * cut.interval_s)
    queue = cutter.queue
    return len(queue) > max_queue_batches or (bool(queue) and now - queue[0].cut_at > limit)


def simulate_arrivals(
    controller: Controller,
    model: CostModel,
    arrivals: Arrivals,
    duration_s: float,
    *,
    rng: np.random.Generator,
    resources: Resources | None = None,
    queue: str = "fifo",
    diverge_delay_s: float | None = None,
    max_queue_batches: int = 100_000,
    on_progress: ProgressFn | None = None,
    behind_s: float = 0.0,
) -> SimOutcome:
    """Simulate ``duration_s`` seconds of records from ``arrivals`` through ``model`` under
    ``controller``, batched by a :class:`~adabatch.batching.BatchCutter` in ``queue`` mode.

    ``rng`` draws the processing noise. ``behind_s``: processing starts that long after
    the stream (a query started behind it, the source's ``startingBacklog``): nothing
    happens before, and what fell due meanwhile is cut at that instant, as by Spark's
    first call. See :func:`run_simulation` for the rest.
    """
    if not 0.0 <= behind_s < duration_s:
        msg = f"behind_s = {behind_s!r}: allowed 0 <= behind_s < the duration {duration_s:g} s"
        raise AdabatchError(msg)
    # a RecordSource answers available() without side effects, so it is its own peek
    peek = getattr(arrivals, "peek", None)
    cutter = BatchCutter(
        controller,
        arrivals.available,
        queue=queue,
        stop_at=duration_s,
        peek=peek,
        arrival_time=arrivals.arrival_time,
    )
    sim = _Simulation(cutter, model, arrivals, rng, resources)
    now, events, diverged = 0.0, 0, False
    while True:
        at, is_finish = sim.next_event()
        if math.isinf(at):
            break
        now = max(at, behind_s)
        events += 1
        if on_progress is not None and events % PROGRESS_EVERY == 0:
            on_progress(now, duration_s, len(sim.records))
        if is_finish:
            sim.finish(now)
        cut = cutter.cut_due(now)
        sim.start(now)
        if cut:
            if cutter.next_seq > MAX_BATCHES:  # a controller planned below its smallest_interval
                check_batches(duration_s, duration_s / cutter.next_seq)
            if _diverges(cutter, now, cut[-1], diverge_delay_s, max_queue_batches):
                diverged = True
                break
    if on_progress is not None:
        on_progress(now, duration_s, len(sim.records))
    return sim.outcome(now, diverged)


def run_simulation(
    controller: Controller,
    model: CostModel,
    profile: RateProfile,
    duration_s: float,
    *,
    seed: int = 0,
    resources: Resources | None = None,
    poisson: bool = False,
    queue: str = "fifo",
    diverge_delay_s: float | None = None,
    max_queue_batches: int = 100_000,
    on_progress: ProgressFn | None = None,
    behind_s: float = 0.0,
) -> SimOutcome:
    """Simulate ``duration_s`` seconds of ``profile`` through ``model`` under ``controller``.

    Deterministic for ``seed`` (processing noise and Poisson counts come from separate
    streams spawned from it). The controller is driven in place. ``queue`` is the batch
    queue's mode, ``fifo`` (the papers' model) or ``coalesce`` (Spark's own: waiting
    batches merge into the next one). ``on_progress`` is called every ``PROGRESS_EVERY``
    events and once at the end.
    """
    if not (duration_s > 0 and math.isfinite(duration_s)):
        msg = f"duration {duration_s!r} must be a positive finite number of seconds"
        raise AdabatchError(msg)
    check_batches(duration_s, controller.smallest_interval())
    noise_seq, arrival_seq = np.random.SeedSequence(seed).spawn(2)
    arrivals = ProfileArrivals(profile, np.random.default_rng(arrival_seq) if poisson else None)
    return simulate_arrivals(
        controller,
        model,
        arrivals,
        duration_s,
        rng=np.random.default_rng(noise_seq),
        resources=resources,
        queue=queue,
        diverge_delay_s=diverge_delay_s,
        max_queue_batches=max_queue_batches,
        on_progress=on_progress,
        behind_s=behind_s,
    )
