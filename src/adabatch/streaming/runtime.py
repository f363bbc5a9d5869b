"""The driver side of the ``adabatch`` source: clock, cutter, metrics and state together.

One :class:`StreamRuntime` lives in the Python process that the JVM starts to serve the
source's ``initialOffset`` / ``latestOffset`` / ``partitions`` / ``commit`` calls (not in
the user's process, and never pickled). It owns the stream clock:

- **stream time** is seconds since the stream started. A fresh query answers its first
  ``latestOffset`` with the initial offset, Spark runs its first (empty) micro-batch —
  seconds of JVM and Python worker warm-up — and the stream starts at the next call, so the
  warm-up is not charged to the first batches.
- After a restart the clock resumes at the stream time the state file last saw (or, with no
  state file, at the cut of Spark's last batch): the stream stood still while the query was
  down, so the schedule and the records continue where they stopped.

What it decides is reproducible from Spark's checkpoint: every offset handed to Spark
carries the batch's record range, blocks and the source's start time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from adabatch.batching import NO_LIMIT, BatchCutter, CutBatch, Limit, Poll
from adabatch.errors import AdabatchError
from adabatch.metrics import BatchRecord, MetricsWriter
from adabatch.sources.base import RecordSource
from adabatch.streaming.offsets import INITIAL, SourceOffset, to_us
from adabatch.streaming.options import StreamOptions
from adabatch.streaming.partitions import BlockPartition, batch_partitions
from adabatch.streaming.state import check_same_query, load_state, save_state

WARM_UP_BLOCKS = 2  # Python workers warmed by Spark's first (empty) micro-batch


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
    """

    def __init__(self, options: StreamOptions, clock: Callable[[], float] = time.time) -> None:
        self.options = options
        self.clock = clock
        self.controller = options.build_controller()
        self.metrics = MetricsWriter(options.metrics_path) if options.metrics_path else None
        self.start_time: float | None = None
        self.paused_s = 0.0
        self.source: RecordSource | None = None
        self.cutter: BatchCutter | None = None
        self.lost_reports = 0
        self._armed = False
        self._loaded = False
        self._reconciled = False
        self._replayed = False
        self._sources: dict[int, RecordSource] = {}

    # -- clock -----------------------------------------------------------------------------

    def now(self) -> float:
        """Current stream time (seconds since stream time 0, pauses excluded)."""
        if self.start_time is None:
            msg = "the stream has not started"
            raise RuntimeError(msg)
        return self.clock() - self.start_time - self.paused_s

    # -- Spark's calls ---------------------------------------------------------------------

    def latest_offset(self, start: Mapping[str, Any], limit: Limit = NO_LIMIT) -> dict[str, int]:
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
        now = self.now()
        poll = self.cutter.poll(now, limit)
        if poll.report is not None:
            self._record(poll)
        if poll.changed:
            self._save(now)
        if poll.handed is None:
            return dict(start)
        return SourceOffset(
            offset=poll.handed.end,
            cut_us=to_us(poll.handed.cut_at),
            blocks=poll.handed.blocks,
            start_time_us=to_us(self.start_time),
        ).to_dict()

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
        """Spark's ``commit(end)``: nothing to release (the source is replayable)."""
        SourceOffset.from_dict(end)

    def stop(self) -> None:
        """Spark's ``stop()``: save the clock so a restart resumes here."""
        if self.cutter is not None and self.start_time is not None:
            self._save(self.now())

    # -- starting and resuming -------------------------------------------------------------

    def _source_at(self, start_time_us: int) -> RecordSource:
        if start_time_us not in self._sources:
            self._sources[start_time_us] = self.options.build_source(start_time_us / 1e6)
        return self._sources[start_time_us]

    def _new_cutter(self, start_at: float) -> BatchCutter:
        assert self.source is not None
        blocks = self.options.spark_default_blocks() if self.options.spark_default else 2
        return BatchCutter(
            self.controller,
            self.source.available,
            queue=self.options.queue,
            blocks=blocks,
            start_at=start_at,
        )

    def _start(self) -> None:
        start_us = to_us(self.clock())
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
        last_seen = float(saved["last_seen"])
        self.paused_s = self.clock() - self.start_time - last_seen
        if self.controller is not None and saved.get("controller") is not None:
            self.controller.restore(saved["controller"])
        self.cutter = self._new_cutter(0.0)
        self.cutter.restore(saved["cutter"])
        self.lost_reports = int(saved.get("lost_reports", 0))
        self._save(last_seen)  # watchers see the resumed clock at once

    def _resume_from_offset(self, begin: SourceOffset) -> None:
        """A restart without a state file: a fresh controller, the clock at the last cut."""
        self.start_time = begin.start_time_us / 1e6
        self.source = self._source_at(begin.start_time_us)
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

    def _record(self, poll: Poll) -> None:
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
            controller_state=self.controller.state() if self.controller is not None else {},
        )
        self.metrics.append(record)

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
                "saved_at": self.clock(),
            },
        )
