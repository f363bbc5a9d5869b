"""The driver side of the ``adabatch`` source: clock, cutter, metrics and state together.

One :class:`StreamRuntime` lives in the Python process that the JVM starts to serve the
source's ``initialOffset`` / ``latestOffset`` / ``partitions`` / ``commit`` calls (not in
the user's process, and never pickled). It owns the stream clock:

- **stream time** is seconds since the stream started. A fresh query answers its first
  ``latestOffset`` with the initial offset, Spark runs its first (empty) micro-batch —
  seconds of JVM and Python worker warm-up — and the stream starts at the next call, so the
  warm-up is not charged to the first batches.
- After a restart the clock resumes at the stream time the state file last saw, or, with no
  state file, at the hand-out of Spark's last batch, whose end offset carries the
  controller's state and the cut schedule (at its cut if it carries none): the stream stood
  still while the query was down, so the schedule and the records continue where they
  stopped.

A live source (files, a Redis Stream: ``RecordSource.LIVE``) is read in wall-clock time:
its clock never pauses, since records keep arriving while the query is down, and its
manifest (which offset is which record) is saved in the state file with the rest.

What it decides is reproducible from Spark's checkpoint: every offset handed to Spark
carries the batch's record range, blocks and the source's start time, and with a
controller the state a restart on a fresh driver resumes from (:mod:`.state`). With a
controller that has a latency target, the offset also carries the target's status at the
hand-out, for Spark's progress (:mod:`.offsets`); :func:`saved_target` reads it at the end
of a run from the state file.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

from adabatch.batching import NO_LIMIT, BatchCutter, CutBatch, Limit, Poll
from adabatch.control.base import BatchPlan, BatchReport, TargetStatus
from adabatch.errors import AdabatchError
from adabatch.metrics import BatchRecord, MetricsWriter
from adabatch.sources.base import RecordSource
from adabatch.streaming.offsets import INITIAL, SourceOffset, to_us
from adabatch.streaming.options import StreamOptions
from adabatch.streaming.partitions import BlockPartition, batch_partitions
from adabatch.streaming.state import (
    MAX_CARRIED_CHARS,
    check_same_query,
    decode_carried,
    encode_carried,
    load_state,
    query_key,
    save_state,
)

WARM_UP_BLOCKS = 2  # Python workers warmed by Spark's first (empty) micro-batch

CUT_SLACK_S = 0.0005  # woken this much after a cut, so that the cut is due
MAX_POLL_WAIT_S = 0.9
"""Longest a ``latestOffset`` call waits for the controller's next cut before answering
"nothing new": Spark otherwise asks again every 10 ms (``pollingDelay``), and each call
costs CPU on both sides. Up to 0.9 s, a batch of a 1 s interval is cut by the first call
after the one before finishes, as many calls as Spark's processingTime trigger makes (at
0.5 s it took two or three a second, and a manual comparison gave 299 CPU s per million
records at 0.25 s, 277 at 0.9 s). ``query.stop()`` waits for the call to return, so this
bounds how late a stop can be: within a second."""


def _end_key(batch: CutBatch) -> tuple[int, int]:
    return (batch.end, to_us(batch.cut_at))


class StreamRuntime:
    """Serves Spark's calls for one ``adabatch`` stream (see the module docstring).

    Parameters
    ----------
    options
        The validated stream options.
    clock
        Unix time in seconds; injected for tests.
    max_wait_s, sleep
        How long one ``latestOffset`` call may wait for the next cut when nothing is due
        (0: answer at once, the default; the Spark reader uses :data:`MAX_POLL_WAIT_S`), and
        how it waits (injected for tests).
    """

    def __init__(
        self,
        options: StreamOptions,
        clock: Callable[[], float] = time.time,
        *,
        max_wait_s: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.options = options
        self.clock = clock
        self.max_wait_s = max_wait_s
        self.sleep = sleep
        self.controller = options.build_controller()
        self.metrics = MetricsWriter(options.metrics_path) if options.metrics_path else None
        self.start_time: float | None = None
        self.paused_s = 0.0
        self.source: RecordSource | None = None
        self.cutter: BatchCutter | None = None
        self.lost_reports = 0
        self._query_key = query_key(options.fingerprint())
        self._from_file = False  # the state came from the state file
        self._armed = False
        self._loaded = False
        self._reconciled = False
        self._replayed = False
        self._available_now = False
        self._sources: dict[int, RecordSource] = {}
        self._live = options.source_cls().LIVE

    # -- clock -----------------------------------------------------------------------------

    def now(self) -> float:
        """Current stream time (seconds since stream time 0, pauses excluded)."""
        if self.start_time is None:
            msg = "the stream has not started"
            raise RuntimeError(msg)
        return self.clock() - self.start_time - self.paused_s

    # -- Spark's calls ---------------------------------------------------------------------

    def latest_offset(self, start: Mapping[str, Any], limit: Limit = NO_LIMIT) -> dict[str, Any]:
        """Spark's ``latestOffset(start, limit)``: the end of the next batch, or ``start``."""
        self._load()
        begin = SourceOffset.from_dict(start)
        if self.cutter is None:
            if begin.start_time_us != 0:
                self._resume_from_offset(begin)
            elif not self._armed:
                self._armed = True  # Spark's first, empty micro-batch warms up now
                self._save(None)  # claims the checkpoint for this query's options
                return dict(start)
            else:
                self._start()
        if not self._reconciled:
            self._reconcile(begin)
        assert self.cutter is not None and self.start_time is not None
        self._aim()
        spark_limit = self._limit(limit)
        now, poll = self._poll(spark_limit)
        waited = 0.0
        while poll.handed is None and (wait := self._wait_s(now, spark_limit, waited)) > 0:
            self.sleep(wait)
            waited += wait
            now, poll = self._poll(spark_limit)
        if poll.handed is None:
            return dict(start)
        return SourceOffset(
            offset=poll.handed.end,
            cut_us=to_us(poll.handed.cut_at),
            blocks=poll.handed.blocks,
            start_time_us=to_us(self.start_time),
            state=self._carried(now),
            target=None if self.controller is None else self.controller.target_status(),
        ).to_dict()

    def _poll(self, limit: Limit) -> tuple[float, Poll]:
        """One poll of the cutter at stream time now, its report and state written."""
        assert self.cutter is not None
        now = self.now()
        poll = self.cutter.poll(now, limit)
        if poll.report is not None:
            self._record(poll, self._advise(poll.report))
        if poll.changed:
            self._save(now)
        return now, poll

    def _wait_s(self, now: float, limit: Limit, waited: float) -> float:
        """How long to wait for the controller's next cut before polling again (0: answer
        "nothing new" now). Only when the controller cuts on its own schedule: Spark's
        trigger, ``availableNow`` and ``minRowsPerTrigger`` decide on what arrives."""
        cutter = self.cutter
        budget = self.max_wait_s - waited
        if budget <= 0 or cutter is None or cutter.controller is None:
            return 0.0
        if self._available_now or limit.min_rows is not None:
            return 0.0
        due = cutter.next_cut_at() - now
        if not due > 0:
            return 0.0
        return min(due + CUT_SLACK_S, budget)

    def report_latest_offset(self) -> dict[str, Any] | None:
        """Spark's ``reportLatestOffset()``: everything arrived by now, for the progress.

        The offset of the records arrived up to stream time now (``cut_us``), with 0
        blocks; ``None`` before the stream started. It only reads: no cut, no report to
        the controller, no metrics or state written, and it does not start the clock.
        Spark shows it as ``latestOffset``, so ``latestOffset.offset - endOffset.offset`` is
        the backlog in records.
        """
        if self.cutter is None or self.source is None or self.start_time is None:
            return None
        now = max(self.now(), 0.0)
        return SourceOffset(
            offset=self.source.available(now),
            cut_us=to_us(now),
            blocks=0,
            start_time_us=to_us(self.start_time),
        ).to_dict()

    def prepare_available_now(self) -> None:
        """Spark's ``prepareForTriggerAvailableNow()``: drain what has arrived, then stop.

        The target is the stream time now, or, while the stream clock stands (a new query
        before its warm-up batch, a restart before its first ``latestOffset``), the stream
        time at which it starts again: nothing arrives while the clock stands. No batch is
        cut after the target; the records that arrived by it go into the controller's
        windows and a last window ending at it, and once all are handed out
        ``latestOffset`` returns ``start``, which ends Spark's query.
        """
        self._load()
        self._available_now = True
        self._aim()

    def _aim(self) -> None:
        """Fix the ``availableNow`` target once the stream clock runs (see above)."""
        cutter = self.cutter
        if not self._available_now or cutter is None or cutter.end_at is not None:
            return
        if self.start_time is not None:
            cutter.end_at = max(self.now(), cutter.last_cut_at)

    def _limit(self, limit: Limit) -> Limit:
        """Spark's read limit with ``maxTriggerDelay`` bounding how long ``minRowsPerTrigger``
        holds records back (Spark's Python ``ReadMinRows`` carries no delay)."""
        if limit.min_rows is None or limit.max_delay_s is not None:
            return limit
        return dataclasses.replace(limit, max_delay_s=self.options.max_trigger_delay_s)

    def _advise(self, report: BatchReport) -> BatchPlan | None:
        """``advise`` mode: the controller observes the batch Spark's trigger made and
        plans; its plan is the recommendation from here on (``None`` in other modes)."""
        if not self.options.advise or self.controller is None:
            return None
        self.controller.observe(report)
        return self.controller.plan(report.finished_at)

    def partitions(self, start: Mapping[str, Any], end: Mapping[str, Any]) -> list[BlockPartition]:
        """Spark's ``partitions(start, end)``: the batch's blocks (empty if no batch)."""
        if dict(start) == dict(end):
            if dict(end) == INITIAL.to_dict():
                # Spark's first micro-batch, before the stream starts: empty blocks that
                # start the Python workers and their imports now, not in the first batch
                return [BlockPartition(0, 0, i, 0.0) for i in range(WARM_UP_BLOCKS)]
            return []
        begin = SourceOffset.from_dict(start)
        finish = SourceOffset.from_dict(end)
        self._load()
        if self.cutter is None and finish.state and not self._reconciled:
            self._resume_from_offset(finish)  # Spark replays its last batch on a fresh driver
        flight = None if self.cutter is None else self.cutter.in_flight
        if not self._reconciled and flight is not None and _end_key(flight) == finish.key():
            self.cutter.restart_in_flight(self.now())  # type: ignore[union-attr]
            self._replayed = True
        start_time = finish.start_time_us / 1e6
        return batch_partitions(
            self._source_at(finish.start_time_us),
            begin.offset,
            finish.offset,
            max(finish.blocks, 1),
            start_time,
        )

    def commit(self, end: Mapping[str, Any]) -> None:
        """Spark's ``commit(end)``: a live source may forget the records below it."""
        finish = SourceOffset.from_dict(end)
        if self.source is not None and finish != INITIAL:
            self.source.commit(finish.offset)

    def stop(self) -> None:
        """Spark's ``stop()``: save the clock so a restart resumes here."""
        if self.cutter is not None and self.start_time is not None:
            self._save(self.now())
        for source in self._sources.values():
            source.close()

    # -- starting and resuming -------------------------------------------------------------

    def _source_at(self, start_time_us: int) -> RecordSource:
        if start_time_us not in self._sources:
            self._sources[start_time_us] = self.options.build_source(start_time_us / 1e6)
        return self._sources[start_time_us]

    def _new_cutter(self, start_at: float) -> BatchCutter:
        assert self.source is not None
        spark_decides = self.options.spark_default or self.options.advise
        blocks = self.options.spark_default_blocks() if spark_decides else 2
        return BatchCutter(
            None if self.options.advise else self.controller,
            self.source.available,
            queue=self.options.queue,
            blocks=blocks,
            start_at=start_at,
            arrival_time=self.source.arrival_time,
            skip_empty=self._live,
        )

    def _start(self) -> None:
        # stream time 0 lies startingBacklog before now: that span's records wait at once
        start_us = to_us(self.clock() - (0.0 if self._live else self.options.starting_backlog_s))
        self.start_time = start_us / 1e6
        self.paused_s = 0.0
        self.source = self._source_at(start_us)
        self.cutter = self._new_cutter(0.0)
        self._reconciled = True

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        path = self.options.state_path
        saved = None if path is None else load_state(path)
        if saved is None:
            return
        check_same_query(path, saved, self.options.fingerprint())  # type: ignore[arg-type]
        if saved.get("start_time") is None:
            return
        self.start_time = float(saved["start_time"])
        self.source = self._source_at(to_us(self.start_time))
        if saved.get("source") is not None:
            self.source.restore(saved["source"])
        self._from_file = True
        self._save(self._restore(saved))  # watchers see the resumed clock at once

    def _restore(self, saved: Mapping[str, Any]) -> float:
        """Clock, controller, cut schedule and lost reports from ``saved`` (the state file,
        or the state an offset carries); returns the stream time the clock resumes at."""
        assert self.start_time is not None
        last_seen = float(saved["last_seen"])
        self.paused_s = 0.0 if self._live else self.clock() - self.start_time - last_seen
        self.controller = self.options.build_controller()
        if self.controller is not None and saved.get("controller") is not None:
            self.controller.restore(saved["controller"])
        self.cutter = self._new_cutter(0.0)
        self.cutter.restore(saved["cutter"])
        self.lost_reports = int(saved.get("lost_reports", 0))
        if not self._live:
            return last_seen
        now = self.now()
        self.cutter.skip_ahead(now)  # the records of the downtime: one catch-up batch
        return now

    def _resume_from_offset(self, begin: SourceOffset) -> None:
        """A restart without a state file: the controller and schedule that ``begin``
        carries, as at its hand-out; with none, a fresh controller and the clock at its cut.
        A live source cannot: which offset is which record is only in the state file."""
        if self._live:
            msg = (
                f"the {self.options.source} source's manifest (which offset is which record) "
                f"is kept in the state file {self.options.state_path!r}, which is missing or "
                f"was replaced, but Spark's checkpoint is at offset {begin.offset}: restore "
                "the state file, or start the query on a new checkpoint"
            )
            raise AdabatchError(msg)
        self.start_time = begin.start_time_us / 1e6
        self.source = self._source_at(begin.start_time_us)
        carried = decode_carried(begin.state, self._query_key)
        if carried is not None:
            self._restore(carried)
            return
        cut_at = begin.cut_us / 1e6
        self.paused_s = self.clock() - self.start_time - cut_at
        self.cutter = self._new_cutter(cut_at)
        self.cutter.skip_to(begin.offset)

    def _reconcile(self, begin: SourceOffset) -> None:
        """First call after a restart: line the saved queue up with Spark's checkpoint."""
        self._reconciled = True
        cutter = self.cutter
        assert cutter is not None and self.start_time is not None
        if begin == INITIAL:
            if cutter.handed_count > 0 or cutter.in_flight is not None:
                msg = (
                    f"state file {self.options.state_path!r} has {cutter.handed_count} batches "
                    "handed to Spark, but Spark's checkpoint starts from the beginning: the "
                    "checkpoint was replaced; delete the state file too"
                )
                raise AdabatchError(msg)
            return
        if begin.start_time_us != to_us(self.start_time):
            msg = (
                f"state file {self.options.state_path!r} belongs to a stream started at "
                f"{self.start_time:.6f}, the checkpoint to one started at "
                f"{begin.start_time_us / 1e6:.6f}: use matching checkpoint and state"
            )
            raise AdabatchError(msg)
        carried = decode_carried(begin.state, self._query_key) if self._from_file else None
        if carried is not None and carried["cutter"]["handed_count"] > cutter.handed_count:
            self._restore(carried)  # the state file is an older copy: the checkpoint is newer
            cutter = self.cutter
        flight = cutter.in_flight
        if flight is not None:
            if _end_key(flight) > begin.key():
                cutter.requeue_in_flight()  # Spark never logged it: hand it out again
            elif not self._replayed:
                cutter.drop_in_flight()  # Spark finished it; its finish time is lost
                self.lost_reports += 1
        cutter.queue = [b for b in cutter.queue if _end_key(b) > begin.key()]
        if begin.offset > cutter.next_offset or (
            cutter.queue and cutter.queue[0].start < begin.offset
        ):
            cutter.skip_to(begin.offset)

    # -- output ----------------------------------------------------------------------------

    def _record(self, poll: Poll, advice: BatchPlan | None = None) -> None:
        report, batch = poll.report, poll.report_batch
        assert report is not None and batch is not None and self.source is not None
        if self.metrics is None:
            return
        mean_arrival = self.source.mean_arrival(batch.start, batch.end) if batch.records else None
        record = BatchRecord.from_report(
            report,
            mean_arrival_at=mean_arrival,
            max_records=batch.max_records,
            queue_len=poll.queue_len,
            controller_state=self.controller.metrics_state() if self.controller is not None else {},
            advice=advice,
        )
        self.metrics.append(record)

    def _carried(self, now: float) -> str:
        """The state a handed-out batch's end offset carries ("" without a controller):
        what :meth:`_restore` needs to resume at ``now``, the hand-out; without the
        controller's state if that makes it longer than ``MAX_CARRIED_CHARS``."""
        if self.controller is None or self.cutter is None:
            return ""
        carried = {
            "query_key": self._query_key,
            "last_seen": now,
            "controller": self.controller.state(),
            "cutter": self.cutter.state(),
            "lost_reports": self.lost_reports,
        }
        text = encode_carried(carried)
        if len(text) > MAX_CARRIED_CHARS:
            text = encode_carried({**carried, "controller": None})
        return text

    def _save(self, now: float | None) -> None:
        """Write the state file; ``now=None`` before the stream started."""
        if self.options.state_path is None:
            return
        started = self.cutter is not None and now is not None
        save_state(
            self.options.state_path,
            {
                "query": self.options.fingerprint(),
                "start_time": self.start_time if started else None,
                "paused_s": self.paused_s,
                "last_seen": now if started else 0.0,
                "controller": None
                if self.controller is None or not started
                else self.controller.state(),
                "cutter": self.cutter.state() if started else None,
                "lost_reports": self.lost_reports,
                "source": self.source.state() if started and self.source is not None else None,
                "saved_at": self.clock(),
            },
        )


def saved_target(options: StreamOptions) -> TargetStatus | None:
    """The latency target status of the controller in ``options``' state file, as the stream
    left it (a fresh controller's without one); ``None`` for a controller without a target."""
    controller = options.build_controller()
    if controller is None or controller.target_status() is None:
        return None
    saved = None if options.state_path is None else load_state(options.state_path)
    if saved is not None and saved.get("controller") is not None:
        controller.restore(saved["controller"])
    return controller.target_status()
