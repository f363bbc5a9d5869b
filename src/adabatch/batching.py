"""The batching component and batch queue of the papers' model, on an injected clock.

::

    records ──▶ batching ──▶ batch queue ──▶ processing (Spark, one batch at a time)
                (cut every x s)                      │
                     ▲                               │
                     └─────── controller ◀── report ─┘

:class:`BatchCutter` is pure: it reads no clock and does no I/O, so one model serves two
drivers. The Spark reader (:mod:`adabatch.streaming.runtime`) calls :meth:`BatchCutter.poll`
with the wall-clock stream time of each ``latestOffset`` call; the simulator
(:mod:`adabatch.sim.engine`) calls the same steps at the instants of its events on a virtual
clock. A poll

1. cuts every batch whose cut time has come before ``now`` (``plan(t)`` at each cut ``t``,
   the next cut at ``t + plan.interval_s``; with ``plan.max_records`` only that many of the
   waiting records enter the batch, the rest stay for later batches — admission control,
   nothing dropped);
2. completes the batch handed out at the previous call: Spark runs one micro-batch at a
   time and calls ``latestOffset`` again only after it has finished (measured on PySpark
   4.3: ``commit(end)`` arrives one batch late, after the next ``latestOffset``), so the
   processing time is the time from hand-out to this call, and the queue delay is the time
   from the cut to the hand-out (ARCHITECTURE.md). The controller observes the report;
3. cuts a batch due at exactly ``now``: a batch that finishes at the instant of a cut is
   observed first, so the controller plans the next interval knowing it (ties resolve as
   in the simulator's event heap);
4. hands out the next batch: the head of the queue (``fifo``, the papers' model) or all
   waiting batches merged into one (``coalesce``), limited by Spark's ``ReadLimit``.

Without a controller (``spark-default``) a batch is cut at every call that finds Spark
idle and new records arrived: everything that has arrived goes into the next micro-batch,
so Spark's trigger alone decides the batches, as in a plain Structured Streaming query.

A plan with ``when_free`` follows Spark's processingTime trigger instead of the papers'
queue: its cut comes at the end of its interval or, if a batch is still processing or
waiting then, as soon as the last one finishes, and takes what has arrived by that moment
(up to ``max_records``). Nothing is cut ahead to wait in the queue, and such a plan made
before a report is made again once the controller has observed it (its window is not cut
yet), so a controller planning that way decides every batch knowing the one before; a stream
that starts behind (or a backlog under a cap) is read in batches planned one after
another, not in the windows that fell due before any report. A plan with ``replan`` is
made again the same way, on the papers' schedule otherwise: a report that shows the
processing cost changed moves the next cut at once, not one batch later.

A plan with ``cut_when_full`` is also cut when its window holds ``max_records``: at the
arrival of that record (``arrival_time``), if that comes before the interval's end. A
source whose future arrivals are known (the generator, the simulator's profile) is cut
at that instant; a live one (files, Redis) once a poll has seen the record arrive, which
for a plan the reader waits on can be up to its longest wait later.

``stop_at`` ends the stream: no batch is cut or handed out after it (a simulation's
duration; Spark runs until the query stops).

``end_at`` ends the *input* instead (Spark's ``Trigger.AvailableNow``): no cut after it,
and once ``now`` reaches it the records that arrived by it and are not yet in a batch go
into a last cut at ``end_at``. Batches keep being handed out until the queue is empty, so
the backlog as it stood at ``end_at`` drains in the windows the controller planned.

A ``min_rows`` read limit holds batches back until they hold that many records; with
``max_delay_s`` it releases them once the oldest waiting record has waited that long
(Kafka's ``minOffsetsPerTrigger`` with ``maxTriggerDelay``), and after ``end_at`` it
holds nothing back (no more records will come).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from adabatch.control.base import BatchPlan, BatchReport, Controller
from adabatch.errors import AdabatchError

# A poll that finds more due cuts than this stopped making progress (interval too small
# for the time Spark was away); fail loudly rather than spin.
MAX_CUTS_PER_POLL = 1_000_000


QUEUE_MODES = ("fifo", "coalesce")
"""How batches that wait are served: one at a time, or merged into the next one."""


@dataclass(frozen=True)
class CutBatch:
    """A batch cut from the stream: records ``start .. end-1``, cut at stream time
    ``cut_at`` after an interval of ``interval_s``; ``cuts`` counts the cuts merged in."""

    seq: int
    start: int
    end: int
    cut_at: float
    interval_s: float
    blocks: int
    max_records: int | None = None
    cuts: int = 1

    @property
    def records(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Limit:
    """Spark's read limit for one ``latestOffset`` call (``None``: no limit).

    ``max_delay_s`` bounds how long ``min_rows`` may hold records back: a batch is released
    once its oldest record has waited that long, however few records it holds."""

    max_rows: int | None = None
    min_rows: int | None = None
    max_delay_s: float | None = None


NO_LIMIT = Limit()


@dataclass(frozen=True)
class Poll:
    """What one call did: the finished batch's report (if any) with the queue length at
    its completion, and the batch handed to Spark now (if any)."""

    report: BatchReport | None = None
    report_batch: CutBatch | None = None
    queue_len: int = 0
    handed: CutBatch | None = None
    changed: bool = False


def merge(batches: list[CutBatch]) -> CutBatch:
    """Consecutive cut batches as one: all their records, the span of their intervals,
    the last cut's time and blocks. One batch stays as it was cut (its planned interval,
    not one recomputed from the cut times)."""
    if len(batches) == 1:
        return batches[0]
    first, last = batches[0], batches[-1]
    return CutBatch(
        seq=last.seq,
        start=first.start,
        end=last.end,
        cut_at=last.cut_at,
        interval_s=last.cut_at - (first.cut_at - first.interval_s),
        blocks=last.blocks,
        max_records=last.max_records,
        cuts=sum(b.cuts for b in batches),
    )


class BatchCutter:
    """Cuts, queues and hands out batches for a controller (or for ``spark-default``).

    Parameters
    ----------
    controller
        The controller to run, or ``None`` for ``spark-default``.
    available
        Records arrived by a stream time (the source's ``available``); called at each cut
        time, in increasing order.
    queue
        ``fifo`` or ``coalesce``.
    blocks
        Blocks per batch in ``spark-default`` mode.
    start_at
        Stream time at which the first interval starts.
    stop_at
        Stream time after which no batch is cut or handed out.
    arrival_time
        Stream time at which a record arrives (the source's ``arrival_time``), for
        ``Limit.max_delay_s``; without it a record counts as arrived at the start of its
        batch's window, the earliest it can have.
    peek
        Records arrived by a stream time without taking them (a report's
        ``left_records``); default ``available``, which the simulator's arrivals may not
        be asked out of turn.
    skip_empty
        Never hand out a batch without records (a live source's idle intervals): it is
        dropped unreported, as Spark runs no micro-batch when no source has new data.
    """

    def __init__(
        self,
        controller: Controller | None,
        available: Callable[[float], int],
        *,
        queue: str = "fifo",
        blocks: int = 2,
        start_at: float = 0.0,
        stop_at: float = math.inf,
        arrival_time: Callable[[int], float] | None = None,
        skip_empty: bool = False,
        peek: Callable[[float], int] | None = None,
    ) -> None:
        if queue not in QUEUE_MODES:
            msg = f"queue = {queue!r}: allowed {', '.join(QUEUE_MODES)}"
            raise AdabatchError(msg)
        self.controller = controller
        self.available = available
        self.peek = available if peek is None else peek
        self.queue_mode = queue
        self.blocks = blocks
        self.stop_at = stop_at
        self.arrival_time = arrival_time
        self.skip_empty = skip_empty
        self.end_at: float | None = None  # Trigger.AvailableNow: no input after it
        self.next_offset = 0  # first record not yet in a cut batch
        self.next_seq = 0
        self.handed_count = 0  # batch ids of handed-out batches
        self.last_cut_at = start_at
        self.queue: list[CutBatch] = []
        self.in_flight: CutBatch | None = None
        self.started_at: float | None = None  # hand-out time of in_flight
        self.in_flight_id = -1
        self.plan_start = start_at
        self.plan: BatchPlan | None = None  # the plan of the interval starting at plan_start
        self.free_at = start_at  # when the last batch finished with none waiting

    # -- one latestOffset call -------------------------------------------------------------

    def poll(self, now: float, limit: Limit = NO_LIMIT) -> Poll:
        """One ``latestOffset`` call at stream time ``now`` (see the module docstring)."""
        if self.plan is not None and self.plan.cut_when_full:
            self.peek(now)  # a live source learns what arrived, so a full window is seen
        changed = bool(self.cut_due(now, before=True))
        report = None
        report_batch = None
        queue_len = 0
        if self.in_flight is not None:
            report_batch = self.in_flight
            report = self.complete(now)
            queue_len = len(self.queue)
            changed = True
        changed = bool(self.cut_due(now)) or changed
        if self.end_at is not None and now >= self.end_at:
            changed = bool(self.cut_rest()) or changed
        elif (
            self.controller is None
            and self.in_flight is None
            # what min_rows holds back keeps growing with what arrives meanwhile
            and (not self.queue or limit.min_rows is not None)
        ):
            changed = self._cut_idle(now) or changed
        handed = self.hand_out(now, limit)
        return Poll(report, report_batch, queue_len, handed, changed or handed is not None)

    # -- the steps of a poll, which the simulator calls at its events ----------------------

    def next_cut_at(self) -> float:
        """Stream time of the next cut (``math.inf``: none by ``stop_at``, or no controller).

        Asks the controller for the plan of the current interval if it has none yet."""
        if self.controller is None:
            return math.inf
        if self.plan is None:
            self.plan = self.controller.plan(self.plan_start)
        cut_at = min(self.plan_start + self.plan.interval_s, self._full_at())
        if self.plan.when_free:
            if self.in_flight is not None or self.queue:
                return math.inf  # cut when the batch finishes (complete, then cut_due)
            cut_at = max(cut_at, self.free_at)
        last = self.stop_at if self.end_at is None else min(self.stop_at, self.end_at)
        return cut_at if cut_at <= last else math.inf

    def _full_at(self) -> float:
        """When the current plan's window holds its ``max_records`` (``cut_when_full``):
        the arrival of its last record, not before the window opened; ``math.inf`` when the
        plan does not cut when full or that record's arrival is not known yet."""
        plan = self.plan
        if plan is None or not plan.cut_when_full or self.arrival_time is None:
            return math.inf
        assert plan.max_records is not None
        return max(self.plan_start, self.arrival_time(self.next_offset + plan.max_records - 1))

    def cut_due(self, now: float, *, before: bool = False) -> list[CutBatch]:
        """Cut every batch due by ``now`` (strictly before it with ``before``), asking the
        controller for the next plan at each cut; return the batches cut."""
        cut: list[CutBatch] = []
        while True:
            cut_at = self.next_cut_at()
            if cut_at > now or (before and cut_at == now):
                return cut
            assert self.plan is not None
            plan = self.plan
            interval = plan.interval_s
            if cut_at != self.plan_start + interval:  # cut when free, or when full
                interval = cut_at - self.plan_start
            cut.append(self._cut(cut_at, interval, plan.blocks, plan.max_records))
            self.plan_start = cut_at
            self.plan = self.controller.plan(cut_at)  # type: ignore[union-attr]
            if len(cut) > MAX_CUTS_PER_POLL:
                msg = (
                    f"more than {MAX_CUTS_PER_POLL} batches fell due at once (interval "
                    f"{self.plan.interval_s:g} s); the controller's interval is too small"
                )
                raise AdabatchError(msg)

    def complete(self, now: float, block_processing_s: tuple[float, ...] = ()) -> BatchReport:
        """The handed-out batch finished at ``now``: its report, which the controller
        observes. ``block_processing_s``: each block's busy time, where the driver knows it
        (the simulator's cost models; Spark's reader does not)."""
        batch, started = self.in_flight, self.started_at
        if batch is None or started is None:
            msg = "no batch in progress to complete"
            raise RuntimeError(msg)
        report = BatchReport(
            batch_id=self.in_flight_id,
            interval_s=batch.interval_s,
            blocks=batch.blocks,
            records=batch.records,
            processing_s=now - started,
            queue_delay_s=started - batch.cut_at,
            cut_at=batch.cut_at,
            started_at=started,
            finished_at=now,
            block_processing_s=block_processing_s,
            left_records=self.waiting_records(now, self.peek),
            queued_records=sum(b.records for b in self.queue),
        )
        self.in_flight = None
        self.started_at = None
        if not self.queue:
            self.free_at = now
        if self.controller is not None:
            self.controller.observe(report)
            replan = self.plan is not None and (self.plan.replan or self.plan.when_free)
            if replan and not self.queue:
                # its window is not cut yet and was planned before this report: again
                self.plan = self.controller.plan(self.plan_start)
        return report

    def cut_rest(self) -> list[CutBatch]:
        """Cut the records that arrived by ``end_at`` and are in no batch yet, at ``end_at``.

        The last window runs from the current plan's start to ``end_at`` with the plan's
        blocks; where the plan caps the records (``max_records``), further cuts at
        ``end_at`` take the rest, each with the controller's next plan, so nothing that
        arrived by ``end_at`` is left out."""
        if self.end_at is None:
            msg = "cut_rest needs end_at"
            raise RuntimeError(msg)
        end_at, cut = self.end_at, []
        while self.available(end_at) > self.next_offset:
            if self.controller is None:
                interval, blocks, cap = end_at - self.last_cut_at, self.blocks, None
            else:
                self.next_cut_at()  # the current plan
                assert self.plan is not None
                interval = end_at - self.plan_start
                if interval <= 0:  # a cut fell on end_at: the rest goes in planned windows
                    interval = self.plan.interval_s
                blocks, cap = self.plan.blocks, self.plan.max_records
            cut.append(self._cut(end_at, interval, blocks, cap))
            if self.controller is not None:
                self.plan_start = end_at
                self.plan = self.controller.plan(end_at)
            if len(cut) > MAX_CUTS_PER_POLL:
                msg = f"more than {MAX_CUTS_PER_POLL} batches cut at the end of the input"
                raise AdabatchError(msg)
        return cut

    def hand_out(self, now: float, limit: Limit = NO_LIMIT) -> CutBatch | None:
        """Start the next batch at ``now`` (see the module docstring, step 4); ``None`` if
        one is in progress, none waits, the read limit holds it back or the stream ended."""
        if self.skip_empty and self.in_flight is None:
            self.queue = [b for b in self.queue if b.records > 0]
        if self.in_flight is not None or not self.queue or now > self.stop_at:
            return None
        take = len(self.queue) if self.queue_mode == "coalesce" else 1
        if limit.min_rows is not None:
            total, take = 0, 0
            for take, b in enumerate(self.queue, start=1):  # noqa: B007
                total += b.records
                if total >= limit.min_rows:
                    break
            if total < limit.min_rows and not self._release(now, limit):
                return None
            if self.queue_mode == "coalesce":
                take = len(self.queue)
        batch = merge(self.queue[:take])
        rest = self.queue[take:]
        if limit.max_rows is not None and batch.records > limit.max_rows:
            cut_point = batch.start + limit.max_rows
            rest = [dataclasses.replace(batch, start=cut_point), *rest]
            batch = dataclasses.replace(batch, end=cut_point)
        self.queue = rest
        self.in_flight = batch
        self.started_at = now
        self.in_flight_id = self.handed_count
        self.handed_count += 1
        return batch

    def skip_ahead(self, now: float) -> CutBatch | None:
        """Cut everything due by ``now`` as one batch cut at ``now``, the schedule going on
        from there (``None`` if nothing is due). A live stream that was down for a while
        catches up in one batch (split only by ``max_records`` and Spark's read limit), not
        in one batch per interval it missed."""
        if self.controller is None or self.next_cut_at() > now:
            return None
        assert self.plan is not None
        batch = self._cut(now, now - self.plan_start, self.plan.blocks, self.plan.max_records)
        self.plan_start = now
        self.plan = self.controller.plan(now)
        return batch

    def _release(self, now: float, limit: Limit) -> bool:
        """Whether batches that ``min_rows`` holds back go out anyway: no more input will
        come (``end_at`` reached), or the oldest waiting record has waited
        ``max_delay_s``."""
        if self.end_at is not None and now >= self.end_at:
            return True
        if limit.max_delay_s is None:
            return False
        oldest = self.oldest_waiting_arrival()
        return oldest is not None and now - oldest >= limit.max_delay_s

    def oldest_waiting_arrival(self) -> float | None:
        """Arrival time of the first record in the queue (``None``: no record waits)."""
        first = next((b for b in self.queue if b.records > 0), None)
        if first is None:
            return None
        if self.arrival_time is not None:
            return self.arrival_time(first.start)
        return first.cut_at - first.interval_s

    def _cut(
        self, cut_at: float, interval_s: float, blocks: int, max_records: int | None
    ) -> CutBatch:
        end = max(self.available(cut_at), self.next_offset)
        if max_records is not None:
            end = min(end, self.next_offset + max_records)
        batch = CutBatch(
            seq=self.next_seq,
            start=self.next_offset,
            end=end,
            cut_at=cut_at,
            interval_s=interval_s,
            blocks=blocks,
            max_records=max_records,
        )
        self.queue.append(batch)
        self.next_seq += 1
        self.next_offset = end
        self.last_cut_at = cut_at
        return batch

    def _cut_idle(self, now: float) -> bool:
        if now > self.stop_at:
            return False
        arrived = self.available(now)
        if arrived <= self.next_offset or now <= self.last_cut_at:
            return False
        self._cut(now, now - self.last_cut_at, self.blocks, None)
        return True

    # -- restarts --------------------------------------------------------------------------

    def requeue_in_flight(self) -> None:
        """Put the handed-out batch back at the head of the queue (Spark never got it)."""
        if self.in_flight is not None:
            self.queue.insert(0, self.in_flight)
            self.in_flight = None
            self.started_at = None
            self.handed_count -= 1

    def drop_in_flight(self) -> CutBatch | None:
        """Forget the handed-out batch (Spark finished it, its finish time is lost)."""
        batch, self.in_flight, self.started_at = self.in_flight, None, None
        return batch

    def restart_in_flight(self, now: float) -> None:
        """Spark replays the handed-out batch from its checkpoint: it starts again now."""
        if self.in_flight is not None:
            self.started_at = now

    def skip_to(self, offset: int) -> None:
        """Records before ``offset`` are already in Spark's batches (state was behind)."""
        self.queue = [b for b in self.queue if b.end > offset]
        if self.queue and self.queue[0].start < offset:
            self.queue[0] = dataclasses.replace(self.queue[0], start=offset)
        self.next_offset = max(self.next_offset, offset)

    # -- state -----------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The cut schedule, queue and in-flight batch as a JSON-able dict."""
        return {
            "next_offset": self.next_offset,
            "next_seq": self.next_seq,
            "handed_count": self.handed_count,
            "last_cut_at": self.last_cut_at,
            "plan_start": self.plan_start,
            "plan": None if self.plan is None else dataclasses.asdict(self.plan),
            "queue": [dataclasses.asdict(b) for b in self.queue],
            "in_flight": None if self.in_flight is None else dataclasses.asdict(self.in_flight),
            "in_flight_id": self.in_flight_id,
            "started_at": self.started_at,
            "free_at": self.free_at,
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state` wrote."""
        self.next_offset = int(state["next_offset"])
        self.next_seq = int(state["next_seq"])
        self.handed_count = int(state["handed_count"])
        self.last_cut_at = float(state["last_cut_at"])
        self.plan_start = float(state["plan_start"])
        plan = state.get("plan")
        self.plan = None if plan is None else BatchPlan(**plan)
        self.queue = [CutBatch(**b) for b in state.get("queue", [])]
        flight = state.get("in_flight")
        self.in_flight = None if flight is None else CutBatch(**flight)
        self.in_flight_id = int(state.get("in_flight_id", -1))
        started = state.get("started_at")
        self.started_at = None if started is None else float(started)
        self.free_at = float(state.get("free_at", self.last_cut_at))

    def waiting_records(self, now: float, count: Callable[[float], int] | None = None) -> int:
        """Records arrived but not yet handed to Spark (queued or not yet cut); ``count``
        gives the records arrived by ``now`` (default ``available``)."""
        queued = sum(b.records for b in self.queue)
        arrived = (count or self.available)(now)
        return queued + max(arrived - self.next_offset, 0)

    def __repr__(self) -> str:
        nxt = math.nan if self.plan is None else self.plan_start + self.plan.interval_s
        return (
            f"BatchCutter(queue={len(self.queue)}, in_flight={self.in_flight is not None}, "
            f"next_offset={self.next_offset}, next_cut={nxt:g})"
        )
