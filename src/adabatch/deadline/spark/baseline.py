"""The baseline: the same queries as Structured Streaming file-source queries (Sec. 7.2).

What a Spark user runs today for a windowed aggregate with a deadline: a streaming query
over the landing directory, with

- ``default``: the default trigger (the next micro-batch starts as soon as the previous
  one ends, with every file that has landed);
- ``processing:DURATION``: a fixed processing-time trigger interval;
- ``available-now``: one shot once the whole window has landed (the paper's "one-shot",
  Trigger.AvailableNow).

Files land at the same rate as for the scheduler (:class:`~adabatch.deadline.spark.tpch.Feeder`).
The streaming query is the query's partial aggregation over streaming DataFrames
(:func:`~adabatch.deadline.spark.queries.partial_frame`): a stateful streaming aggregation in
update mode, with stream-stream joins of ``orders`` and ``lineitem`` bounded by a
watermark on the slots' ``ts`` (the paper's watermark and event-time constraint, Sec. 7.2).
A ``foreachBatch`` sink keeps the latest value of every group; when all input has been
processed the final aggregation over those rows gives the answer, compared with DuckDB's.

Total compute cost is the sum of the micro-batches' durations
(``durationMs.triggerExecution`` of each executed batch in the query progress). Failures
(an out-of-memory error or any failed query) are caught and reported, not raised.
"""

from __future__ import annotations

import datetime as dt
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adabatch.deadline.spark.jobs import (
    CheckedAnswer,
    answer_differences,
    answer_rows,
    answer_table,
    final_frame,
    partial_frame,
    reference_answer,
    static_frames,
    stream_schema,
)
from adabatch.deadline.spark.queries import QueryDef, get_query
from adabatch.deadline.spark.tpch import Feeder, Manifest, StreamClock
from adabatch.errors import AdabatchError
from adabatch.outputs import dumps_json, mark_dir, remove_tree, write_atomic
from adabatch.profiles import parse_duration
from adabatch.streaming.progress import ProgressLog, attach, detach

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TRIGGER_KINDS = ("default", "processing", "available-now")


@dataclass(frozen=True)
class Trigger:
    """A Structured Streaming trigger: ``kind`` and, for ``processing``, its interval."""

    kind: str
    interval_s: float | None = None

    @classmethod
    def parse(cls, text: str) -> Trigger:
        """``default``, ``available-now`` or ``processing:DURATION`` (``5``, ``5s``,
        ``"5 seconds"``)."""
        raw = str(text).strip().lower()
        if raw in ("default", "available-now"):
            return cls(raw)
        head, sep, tail = raw.partition(":")
        if head == "processing" and sep:
            try:
                seconds = parse_duration(tail)
            except AdabatchError:
                seconds = math.nan
            if math.isfinite(seconds) and seconds > 0:
                return cls("processing", seconds)
        msg = (
            f"trigger {text!r} is not allowed: allowed default, available-now or "
            "processing:DURATION (e.g. processing:5, processing:5s, processing:5 seconds)"
        )
        raise AdabatchError(msg)

    @property
    def label(self) -> str:
        if self.kind == "processing":
            return f"processing:{self.interval_s:g}s"
        return self.kind


MEASURED = ("query", "trigger", "batches", "data_batches", "cost", "wall_s", "completion",
            "deadline", "met", "failure", "memory_failure", "max_state_bytes")  # fmt: skip
"""What a streaming run measured, in the order its JSON lists it (then its answer check,
:meth:`~adabatch.deadline.spark.jobs.CheckedAnswer.answer_json`)."""


@dataclass(frozen=True)
class StreamingRun(CheckedAnswer):
    """One query under one trigger: micro-batches, cost, wall time, deadline, answer."""

    query: str
    trigger: str
    batches: int
    data_batches: int
    cost: float
    wall_s: float | None
    completion: float | None
    deadline: float | None
    met: bool | None
    failure: str | None
    memory_failure: bool
    max_state_bytes: int
    answer: list[tuple[Any, ...]] | None
    differences: list[str] | None
    progress: tuple[dict[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        return {**{k: getattr(self, k) for k in MEASURED}, **self.answer_json()}


def _executed(progress: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One progress event per executed micro-batch (idle reports have no ``addBatch``)."""
    seen: dict[int, dict[str, Any]] = {}
    for p in progress:
        if "addBatch" in p.get("durationMs", {}):
            seen.setdefault(int(p["batchId"]), p)
    return [seen[k] for k in sorted(seen)]


def _state_bytes(p: dict[str, Any]) -> int:
    return sum(int(op.get("memoryUsedBytes", 0)) for op in p.get("stateOperators", []))


def _is_memory_error(text: str) -> bool:
    return any(s in text for s in ("OutOfMemory", "Java heap space", "GC overhead limit"))


def _wall_to_monotonic(stamp: str, wall0: float, mono0: float) -> float:
    when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    return mono0 + (when - wall0)


class _LatestRows:
    """The ``foreachBatch`` sink of the update-mode partial aggregate: the latest row per
    grouping key (the rows of the partial aggregate over everything seen so far)."""

    def __init__(self, key_index: list[int]) -> None:
        self.rows: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._key_index = key_index
        self._lock = threading.Lock()

    def merge(self, batch_df: Any, batch_id: int) -> None:
        rows = batch_df.collect()
        with self._lock:
            for row in rows:
                values = tuple(row)
                self.rows[tuple(values[i] for i in self._key_index)] = values


def _writer(
    spark: SparkSession,
    manifest: Manifest,
    qdef: QueryDef,
    trig: Trigger,
    workdir: Path,
    watermark_s: float | None,
) -> tuple[Any, Any, _LatestRows]:
    """The streaming partial aggregate over the landing directory, ready to start: its
    writer, the partial's schema and the sink that collects its rows."""
    if watermark_s is None:
        watermark_s = max(2.0, 5.0 / manifest.rate)
    schemas = {s: stream_schema(spark, manifest, s) for s in qdef.streams}
    frames: dict[str, Any] = {}
    for stream in qdef.streams:
        frame = spark.readStream.schema(schemas[stream]).parquet(str(manifest.landing_dir / stream))
        if len(qdef.streams) > 1:
            frame = frame.withWatermark("ts", f"{math.ceil(watermark_s * 1000)} milliseconds")
        frames[stream] = frame
    frames.update(static_frames(spark, manifest, qdef))
    partial = partial_frame(spark, qdef, frames)
    schema = partial.schema
    sink = _LatestRows([schema.names.index(k) for k in qdef.keys])
    writer = (
        partial.writeStream.outputMode("update")
        .foreachBatch(sink.merge)
        .option("checkpointLocation", str(workdir / "checkpoint"))
        .queryName(f"adabatch_baseline_{qdef.name}")
    )
    if trig.kind == "processing":
        writer = writer.trigger(processingTime=f"{trig.interval_s:g} seconds")
    elif trig.kind == "available-now":
        writer = writer.trigger(availableNow=True)
    return writer, schema, sink


def _watch(
    spark: SparkSession,
    writer: Any,
    feeder: Feeder,
    give_up: float,
    trig: Trigger,
    totals: int,
    timeout_s: float,
    on_batch: Callable[[dict[str, Any]], None] | None,
) -> tuple[list[dict[str, Any]], str | None, float | None]:
    """Start the feeder and the query, follow its progress until every input row is
    processed (or it fails, or the monotonic time ``give_up`` passes), stop both.
    Returns the progress events, the failure (``None``: none) and when the query started
    (monotonic). The events come from a listener (:class:`ProgressLog`), so the session's
    conf is left as it was."""
    from pyspark.errors import PySparkException
    from pyspark.sql.utils import StreamingQueryException

    failure: str | None = None
    stream = None
    started_at: float | None = None
    reported = 0
    wake = threading.Event()
    log = ProgressLog(keep=True)
    attach(spark, log)
    try:
        feeder.start()
        if trig.kind == "available-now":
            # one shot over the whole window: start once the last slot has landed
            while not feeder.done:
                feeder.check()
                wake.wait(0.05)
        started_at = time.monotonic()
        stream = writer.start()
        log.follow(stream.id)
        while True:
            feeder.check()
            progress = log.progress()
            executed = _executed(progress)
            if on_batch is not None:
                for p in executed[reported:]:
                    on_batch(p)
                reported = len(executed)
            done_rows = sum(int(p.get("numInputRows", 0)) for p in executed)
            if done_rows >= totals and feeder.done:
                break
            if trig.kind == "available-now" and not stream.isActive:
                break
            if stream.exception() is not None:
                failure = str(stream.exception()).splitlines()[0]
                break
            if time.monotonic() > give_up:
                failure = f"timeout: {done_rows} of {totals} input rows after {timeout_s:g} s"
                break
            wake.wait(0.05)
    except (StreamingQueryException, PySparkException) as exc:
        failure = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    finally:
        if stream is not None:
            try:
                stream.stop()
            except (StreamingQueryException, PySparkException) as exc:
                failure = failure or str(exc).splitlines()[0]
        try:
            detach(spark, log)  # the stopped query's last events have arrived
        finally:
            feeder.stop()
    return log.progress(), failure, started_at


def _final_answer(
    spark: SparkSession, qdef: QueryDef, sink: _LatestRows, schema: Any
) -> list[tuple[Any, ...]]:
    """The query's answer: its final aggregation over the partial rows the stream left."""
    rows = sorted(sink.rows.values(), key=repr)
    frame = spark.createDataFrame(rows, schema)
    return answer_rows(answer_table(final_frame(spark, qdef, frame)))


def run_streaming(
    spark: SparkSession,
    manifest: Manifest,
    query: str,
    trigger: str | Trigger,
    workdir: str | Path,
    *,
    deadline: float | None = None,
    time_scale: float = 1.0,
    watermark_s: float | None = None,
    check: bool = True,
    timeout_s: float | None = None,
    lead_s: float = 1.0,
    on_batch: Callable[[dict[str, Any]], None] | None = None,
) -> StreamingRun:
    """Run ``query`` as a Structured Streaming query while the landing data arrives.

    ``watermark_s`` bounds the stream-stream join state (default: 2 s of stream time or
    five slots, whichever is longer, like the paper's 2 s). The run gives up
    ``timeout_s`` real seconds after the window end (default: twice the window length plus
    a minute) and reports a failure.
    """
    qdef = get_query(query)
    trig = trigger if isinstance(trigger, Trigger) else Trigger.parse(trigger)
    workdir = Path(workdir)
    # an earlier run's directory is replaced only if adabatch made it (it carries a marker)
    remove_tree(workdir, inside=workdir.parent, what="baseline work directory")
    mark_dir(workdir, what="baseline work directory")
    if timeout_s is None:
        timeout_s = 2 * (manifest.window_end - manifest.window_start) * time_scale + 60.0
    references = reference_answer(manifest, qdef) if check else None
    writer, schema, sink = _writer(spark, manifest, qdef, trig, workdir, watermark_s)
    totals = sum(manifest.total(s) for s in qdef.streams)
    clock = StreamClock(manifest.window_start, time.monotonic() + lead_s, time_scale)
    feeder = Feeder(manifest, clock)
    feeder.reset()
    wall0, mono0 = time.time(), time.monotonic()
    give_up = clock.real(manifest.window_end) + timeout_s
    progress, failure, started_at = _watch(
        spark, writer, feeder, give_up, trig, totals, timeout_s, on_batch
    )
    executed = _executed(progress)
    cost_ms = sum(float(p["durationMs"].get("triggerExecution", 0)) for p in executed)
    data_batches = [p for p in executed if int(p.get("numInputRows", 0)) > 0]
    completion = wall = None
    if executed and failure is None:
        last = data_batches[-1] if data_batches else executed[-1]
        end_real = (
            _wall_to_monotonic(last["timestamp"], wall0, mono0)
            + float(last["durationMs"]["triggerExecution"]) / 1000.0
        )
        completion = clock.spec(end_real)
        wall = end_real - (started_at if started_at is not None else mono0)
    answer = differences = None
    if failure is None:
        answer = _final_answer(spark, qdef, sink, schema)
        if references is not None:
            differences = answer_differences(answer, references, ordered=qdef.ordered)
    run = StreamingRun(
        query=qdef.name,
        trigger=trig.label,
        batches=len(executed),
        data_batches=len(data_batches),
        cost=cost_ms / 1000.0 / time_scale,
        wall_s=wall,
        completion=completion,
        deadline=deadline,
        met=None if deadline is None else completion is not None and completion <= deadline,
        failure=failure,
        memory_failure=failure is not None and _is_memory_error(failure),
        max_state_bytes=max((_state_bytes(p) for p in executed), default=0),
        answer=answer,
        differences=differences,
        progress=tuple(executed),
    )
    lines = "".join(dumps_json(p, separators=(",", ":")) + "\n" for p in executed)
    write_atomic(workdir / "progress.jsonl", lines.encode("utf-8"))
    write_atomic(workdir / "run.json", (dumps_json(run.to_json(), indent=1) + "\n").encode())
    return run
