"""Discrete-event simulation of the batched stream model (fixed-point §2.1, DyBBS §II-A).

::

    records --> batching (cut every x s) --> FIFO batch queue --> processing --> results
                    ^ plan(now) at each cut                    one batch at a time |
                    +---------------- controller <-- observe(report) --------------+

The clock is explicit and the event heap is ordered by ``(time, priority, sequence)`` as in
SimPy, so ties resolve deterministically: a batch that finishes at the same instant as a cut
is observed first, and the controller plans the next interval knowing it.

Records are counted by offset: ``floor(profile.cumulative(t))`` records have arrived by
``t`` (with ``poisson=True`` each interval's count is instead a Poisson draw with the
profile's mean). Within an interval the records are spread like the profile's density, so
a batch's mean arrival time is exact for every profile (treating records as a fluid: half an
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

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from adabatch.control.base import BatchPlan, BatchReport, Controller
from adabatch.errors import AdabatchError
from adabatch.metrics import BatchRecord
from adabatch.profiles import RateProfile
from adabatch.sim.workloads import CostModel, Resources

# Event priorities at equal times: finishing batches before cuts.
_DONE, _CUT = 0, 1

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


@dataclass
class _Batch:
    batch_id: int
    cut_at: float
    plan: BatchPlan
    records: int
    mean_arrival_at: float | None


class _Backlog:
    """Records that arrived but are not yet in a batch, oldest first, as chunks
    ``[count, t_lo, t_hi, c_lo, c_hi]``: ``count`` records spread over ``(t_lo, t_hi]`` with
    the profile's density, ``c = profile.cumulative(t)`` at both ends. Taking part of a chunk
    splits it where the cumulative count reaches the same fraction."""

    def __init__(self, profile: RateProfile) -> None:
        self.profile = profile
        self.chunks: deque[list[float]] = deque()
        self.count = 0

    def add(self, count: int, t_lo: float, t_hi: float, c_lo: float, c_hi: float) -> None:
        if count > 0:
            self.chunks.append([count, t_lo, t_hi, c_lo, c_hi])
            self.count += count

    def take(self, m: int) -> tuple[int, float | None]:
        """Remove the oldest ``m`` records; return how many and their mean arrival time."""
        m = min(m, self.count)
        taken, weighted = 0, 0.0
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
            weighted += k * self._mean_arrival(t_lo, t_mid, c_lo, c_mid)
            taken += k
        self.count -= taken
        return taken, (weighted / taken if taken > 0 else None)

    def _mean_arrival(self, t_lo: float, t_hi: float, c_lo: float, c_hi: float) -> float:
        if c_hi <= c_lo:  # a Poisson count where the profile expected almost nothing
            return 0.5 * (t_lo + t_hi)
        mean = self.profile.first_moment(t_lo, t_hi) / (c_hi - c_lo)
        return min(max(mean, t_lo), t_hi)


def run_simulation(
    controller: Controller,
    model: CostModel,
    profile: RateProfile,
    duration_s: float,
    *,
    seed: int = 0,
    resources: Resources | None = None,
    poisson: bool = False,
    diverge_delay_s: float | None = None,
    max_queue_batches: int = 100_000,
    on_progress: ProgressFn | None = None,
) -> SimOutcome:
    """Simulate ``duration_s`` seconds of ``profile`` through ``model`` under ``controller``.

    Deterministic for ``seed`` (processing noise and Poisson counts come from separate
    streams spawned from it). The controller is driven in place. ``on_progress`` is
    called every ``PROGRESS_EVERY`` events and once at the end.
    """
    if not (duration_s > 0 and math.isfinite(duration_s)):
        msg = f"duration {duration_s!r} must be a positive finite number of seconds"
        raise AdabatchError(msg)
    check_batches(duration_s, controller.smallest_interval())
    noise_seq, arrival_seq = np.random.SeedSequence(seed).spawn(2)
    noise_rng = np.random.default_rng(noise_seq)
    arrival_rng = np.random.default_rng(arrival_seq)

    heap: list[tuple[float, int, int, object]] = []
    seq = 0

    def push(t: float, priority: int, payload: object) -> None:
        nonlocal seq
        heapq.heappush(heap, (t, priority, seq, payload))
        seq += 1

    backlog = _Backlog(profile)
    queue: deque[_Batch] = deque()
    records: list[BatchRecord] = []
    running: tuple[_Batch, float] | None = None  # (batch, started_at)
    arrived = 0  # records arrived up to the last cut (deterministic mode)
    t_last, c_last = 0.0, 0.0  # the last cut and profile.cumulative there
    cuts = 0
    diverged = False
    final_queue_len: int | None = None
    now = 0.0

    def start_next() -> None:
        nonlocal running
        if running is not None or not queue or now > duration_s:
            return
        batch = queue.popleft()
        cost = model.cost(
            batch.records, batch.plan.interval_s, batch.plan.blocks, now, noise_rng, resources
        )
        running = (batch, now)
        push(now + cost.processing_s, _DONE, cost)

    first = controller.plan(0.0)
    if first.interval_s <= duration_s:
        push(first.interval_s, _CUT, first)

    events = 0
    while heap:
        now, priority, _, payload = heapq.heappop(heap)
        events += 1
        if on_progress is not None and events % PROGRESS_EVERY == 0:
            on_progress(now, duration_s, len(records))
        if priority == _CUT:
            plan: BatchPlan = payload  # type: ignore[assignment]
            c_now = profile.cumulative(now)
            if poisson:
                count = int(arrival_rng.poisson(max(c_now - c_last, 0.0)))
            else:
                total = math.floor(c_now)
                count, arrived = total - arrived, total
            backlog.add(count, t_last, now, c_last, c_now)
            t_last, c_last = now, c_now
            cap = backlog.count if plan.max_records is None else plan.max_records
            n, mean_arrival = backlog.take(cap)
            queue.append(_Batch(cuts, now, plan, n, mean_arrival))
            cuts += 1
            if cuts > MAX_BATCHES:  # a controller planned below its smallest_interval
                check_batches(duration_s, duration_s / cuts)
            limit = (
                diverge_delay_s
                if diverge_delay_s is not None
                else max(300.0, 10.0 * plan.interval_s)
            )
            if len(queue) > max_queue_batches or now - queue[0].cut_at > limit:
                diverged = True
                break
            nxt = controller.plan(now)
            if now + nxt.interval_s <= duration_s:
                push(now + nxt.interval_s, _CUT, nxt)
            start_next()
        else:
            assert running is not None
            batch, started_at = running
            running = None
            cost = payload
            report = BatchReport(
                batch_id=batch.batch_id,
                interval_s=batch.plan.interval_s,
                blocks=batch.plan.blocks,
                records=batch.records,
                processing_s=now - started_at,
                queue_delay_s=started_at - batch.cut_at,
                cut_at=batch.cut_at,
                started_at=started_at,
                finished_at=now,
                block_processing_s=cost.block_s,  # type: ignore[attr-defined]
            )
            controller.observe(report)
            records.append(
                BatchRecord.from_report(
                    report,
                    mean_arrival_at=batch.mean_arrival_at,
                    max_records=batch.plan.max_records,
                    queue_len=len(queue),
                    controller_state=controller.metrics_state(),
                )
            )
            if now > duration_s and final_queue_len is None:
                final_queue_len = len(queue)
            start_next()
    if final_queue_len is None or diverged:
        final_queue_len = len(queue)
    if on_progress is not None:
        on_progress(now, duration_s, len(records))
    return SimOutcome(tuple(records), final_queue_len, diverged, now, cuts)
