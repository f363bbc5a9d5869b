"""Spark's own per-batch progress of a query, kept as it comes and read in our vocabulary.

:class:`ProgressLog` is a ``StreamingQueryListener``: Spark calls it in the driver after
every micro-batch, and it appends that batch's progress (Spark's ``StreamingQueryProgress``
JSON, one compact line) to a file at once. Nothing accumulates in Spark or in memory, a
crash keeps every finished batch, and the session's conf is left alone (no
``spark.sql.streaming.numRecentProgressUpdates``).

Spark delivers listener events asynchronously, from its listener bus; after
``query.stop()`` call :func:`drain_events` before reading the log, so every batch's event
has arrived.

The ``adabatch`` source's offsets carry the batch itself (:mod:`~adabatch.streaming.offsets`),
so a progress report says, in the papers' vocabulary (:func:`source_batches`):

- interval: ``endOffset.cut_us - startOffset.cut_us`` (stream time, microseconds);
- blocks: ``endOffset.blocks``;
- backlog in records: ``latestOffset.offset - endOffset.offset`` (``reportLatestOffset``);
- queue delay: ``latestOffset.cut_us - endOffset.cut_us``: Spark asks for the latest
  offset right after taking the batch, so this is how long after its cut the batch was
  taken (stream time, so it is right across restarts, when the wall clock is not);
- latency target: ``endOffset.target``, the controller's target and whether it meets it
  at the batch's hand-out (only for a controller with a latency target).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming import StreamingQueryListener

from adabatch.control.base import TargetStatus
from adabatch.errors import AdabatchError
from adabatch.outputs import append_text
from adabatch.streaming.offsets import INITIAL, SourceOffset

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DRAIN_TIMEOUT_S = 60.0  # longest wait for Spark's listener bus to deliver its events


def compact(progress_json: str) -> str:
    """Spark's progress JSON as one compact line."""
    return json.dumps(json.loads(progress_json), separators=(",", ":"))


class ProgressLog(StreamingQueryListener):
    """Appends each finished micro-batch's progress of one query to ``path``, a line each.

    Parameters
    ----------
    path
        JSON-lines file to append to (created if missing; a symlink there is refused);
        ``None`` writes nothing.
    keep
        Also keep the progress dicts in memory (:meth:`progress`), for a caller that
        follows the query as it runs.

    Events of the query come from the moment it starts, before :meth:`follow` can name
    it: they are held until :meth:`follow` says which query is ours; events of other
    queries are dropped.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, keep: bool = False) -> None:
        self.path = None if path is None else Path(path)
        self.keep = keep
        self.query_id: str | None = None
        self.count = 0
        self.error: str | None = None
        self._events: list[dict[str, Any]] = []
        self._pending: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def follow(self, query_id: object) -> None:
        """Log the query with this id (``query.id``); earlier events of it are written now."""
        with self._lock:
            self.query_id = str(query_id)
            pending, self._pending = self._pending, []
            for qid, line in pending:
                if qid == self.query_id:
                    self._write(line)

    def progress(self) -> list[dict[str, Any]]:
        """The progress dicts kept so far (``keep=True``), oldest first."""
        with self._lock:
            return list(self._events)

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        qid = str(event.progress.id)
        if self.query_id is not None and qid != self.query_id:
            return
        line = compact(event.progress.json)
        with self._lock:
            if self.query_id is None:
                self._pending.append((qid, line))
            elif qid == self.query_id:
                self._write(line)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    def _write(self, line: str) -> None:
        """Append one line (flushed: the file is closed after each); a failure is kept
        in :attr:`error` (Spark's listener bus would only log it) and stops the writing."""
        if self.error is not None:
            return
        try:
            if self.path is not None:
                append_text(self.path, line + "\n")
            if self.keep:
                self._events.append(json.loads(line))
        except OSError as exc:
            self.error = f"{self.path}: {exc.strerror or type(exc).__name__}"
            return
        self.count += 1

    def check(self) -> None:
        """Raise if a progress line could not be written."""
        if self.error is not None:
            msg = f"Spark's progress could not be written to {self.error}"
            raise AdabatchError(msg)


def attach(spark: SparkSession, listener: StreamingQueryListener) -> None:
    """Register ``listener`` with the session's streaming queries."""
    spark.streams.addListener(listener)


def drain_events(spark: SparkSession, timeout_s: float = DRAIN_TIMEOUT_S) -> bool:
    """Wait until Spark's listener bus has delivered every event posted so far (so a
    stopped query's last progress has reached the listeners); ``False`` on timeout.

    Spark's ``LiveListenerBus.waitUntilEmpty``: a listener's Python method has returned
    when the JVM's call to it has, so an empty bus means every call has finished.
    """
    from py4j.protocol import Py4JJavaError

    bus = spark.sparkContext._jsc.sc().listenerBus()  # type: ignore[union-attr]
    try:
        bus.waitUntilEmpty(round(timeout_s * 1000))
    except Py4JJavaError as exc:
        if "TimeoutException" in str(exc.java_exception):
            return False
        raise
    return True


def detach(
    spark: SparkSession, listener: StreamingQueryListener, timeout_s: float = DRAIN_TIMEOUT_S
) -> bool:
    """Deliver the pending events (:func:`drain_events`), then unregister ``listener``;
    ``False`` if the events did not all arrive within ``timeout_s``."""
    drained = drain_events(spark, timeout_s)
    spark.streams.removeListener(listener)
    return drained


def read_progress(path: str | os.PathLike[str], since: int = 0) -> list[dict[str, Any]]:
    """The progress lines of ``path`` from byte ``since`` on (an unfinished last line is
    left out); ``[]`` if there is no file."""
    p = Path(path)
    if not p.is_file():
        return []
    with p.open("rb") as fh:
        fh.seek(since)
        data = fh.read()
    complete = data[: data.rfind(b"\n") + 1].decode("utf-8")
    return [json.loads(line) for line in complete.splitlines() if line.strip()]


@dataclass(frozen=True)
class SourceBatch:
    """One ``adabatch`` source's batch in a progress report (see the module docstring).

    ``backlog_records`` and ``queue_delay_s`` are ``None`` when Spark reported no latest
    offset; ``target`` is ``None`` for a controller without a latency target."""

    index: int  # position in the report's ``sources``
    interval_s: float
    blocks: int
    records: int
    backlog_records: int | None
    queue_delay_s: float | None
    target: TargetStatus | None = None


def _offset(value: Any) -> SourceOffset | None:
    """An ``adabatch`` offset from a progress field (dict or JSON text); ``None`` if the
    field is empty or another source's."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, Mapping):
        return None
    try:
        return SourceOffset.from_dict(value)
    except AdabatchError:
        return None


def source_batches(progress: Mapping[str, Any]) -> list[SourceBatch]:
    """The ``adabatch`` sources' batches in one progress report (a query may read the
    source more than once); Spark's warm-up batch, before the stream starts, is left out."""
    out = []
    sources: Sequence[Mapping[str, Any]] = progress.get("sources") or []
    for i, src in enumerate(sources):
        end = _offset(src.get("endOffset"))
        if end is None or end.start_time_us == 0:
            continue
        start = _offset(src.get("startOffset")) or INITIAL
        latest = _offset(src.get("latestOffset"))
        out.append(
            SourceBatch(
                index=i,
                interval_s=(end.cut_us - start.cut_us) / 1e6,
                blocks=end.blocks,
                records=end.offset - start.offset,
                backlog_records=None if latest is None else latest.offset - end.offset,
                queue_delay_s=None if latest is None else (latest.cut_us - end.cut_us) / 1e6,
                target=end.target,
            )
        )
    return out
