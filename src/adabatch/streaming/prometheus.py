"""Live gauges of ``adabatch`` queries for Prometheus (the ``adabatch[prometheus]`` extra).

:class:`PrometheusExporter` is a ``StreamingQueryListener`` in the driver: after each
micro-batch it reads Spark's progress report (:func:`~adabatch.streaming.progress.
source_batches`) and sets one gauge per quantity, labelled by the query's name (its id if it
has none) and, for the source's gauges, the source's position in the query (a query may
read the source twice). Its HTTP server runs in the driver, the user's process; never in
the reader process Spark starts for the source.

Gauges (the last finished batch):

- ``adabatch_interval_seconds``: the batch's interval, ``endOffset.cut_us -
  startOffset.cut_us``;
- ``adabatch_blocks``: its blocks (input partitions);
- ``adabatch_batch_records``: the records in it;
- ``adabatch_queue_records``: the backlog, records arrived but not yet handed to Spark
  when Spark took the batch (``latestOffset.offset - endOffset.offset``);
- ``adabatch_queue_delay_seconds``: how long after its cut Spark took the batch, in
  stream time (``latestOffset.cut_us - endOffset.cut_us``: Spark asks for the latest
  offset right after taking the batch);
- ``adabatch_processing_seconds``: Spark's ``durationMs.triggerExecution`` of the batch;
- ``adabatch_target_seconds`` and ``adabatch_target_met`` (1 or 0): only for a controller
  with a latency target (``slo``): the target and the controller's verdict on it when it
  handed out the batch, as the batch's end offset carries them (``endOffset.target``,
  :meth:`PrometheusExporter.target`). A verdict, not one batch's latency: ``slo`` says met
  when its plan is predicted to meet the target and the batch latency at the target's
  percentile over its recent batches did.

A query's series are removed when it terminates.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming import StreamingQueryListener

from adabatch.errors import AdabatchError
from adabatch.params import Param
from adabatch.streaming.progress import SourceBatch, attach, detach, source_batches

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_PORT = 9108
PORT = Param(
    "port",
    DEFAULT_PORT,
    "port of the metrics endpoint (0: a free one)",
    kind=int,
    low=0,
    high=65535,
)

_SOURCE_GAUGES = {
    "interval": ("adabatch_interval_seconds", "Interval of the last batch (stream seconds)"),
    "blocks": ("adabatch_blocks", "Blocks (input partitions) of the last batch"),
    "records": ("adabatch_batch_records", "Records in the last batch"),
    "queue_records": (
        "adabatch_queue_records",
        "Records arrived but not yet handed to Spark when it took the last batch",
    ),
    "queue_delay": (
        "adabatch_queue_delay_seconds",
        "How long after its cut Spark took the last batch (stream seconds)",
    ),
}
_QUERY_GAUGES = {
    "processing": ("adabatch_processing_seconds", "Spark's triggerExecution of the last batch"),
    "target": ("adabatch_target_seconds", "The controller's latency target"),
    "target_met": (
        "adabatch_target_met",
        "1 if the controller meets its latency target (its verdict at the last batch), else 0",
    ),
}


@dataclass(frozen=True)
class Target:
    """A controller's latency target and whether the controller meets it."""

    seconds: float
    met: bool


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ImportError:
        msg = (
            "live metrics need prometheus-client, which is not installed: "
            "pip install 'adabatch[prometheus]'"
        )
        raise AdabatchError(msg) from None
    return prometheus_client


def query_label(progress: Mapping[str, Any]) -> str:
    """The ``query`` label of a progress report: the query's name, or its id."""
    name = progress.get("name")
    return str(name) if name else str(progress.get("id"))


class PrometheusExporter(StreamingQueryListener):
    """Sets the gauges (module docstring) from each progress report; serves them with
    :meth:`serve`. Gauges live in the exporter's own registry, so two exporters in one
    process do not clash."""

    def __init__(self) -> None:
        client = _prometheus()
        self.registry = client.CollectorRegistry()
        source, query = ("query", "source"), ("query",)
        self.gauges = {
            key: client.Gauge(name, text, source, registry=self.registry)
            for key, (name, text) in _SOURCE_GAUGES.items()
        } | {
            key: client.Gauge(name, text, query, registry=self.registry)
            for key, (name, text) in _QUERY_GAUGES.items()
        }
        self.server: Any = None
        self.port: int | None = None
        self._thread: threading.Thread | None = None
        self._series: dict[str, set[tuple[str, ...]]] = {}  # query id -> its label sets
        self._lock = threading.Lock()

    # -- the gauges --------------------------------------------------------------------

    def update(self, progress: Mapping[str, Any]) -> None:
        """Set the gauges from one progress report (Spark's JSON as a dict)."""
        batches = source_batches(progress)
        if not batches:
            return  # another source, or Spark's warm-up batch
        query = query_label(progress)
        with self._lock:
            series = self._series.setdefault(str(progress.get("id")), set())
            for b in batches:
                self._set_source(query, b, series)
            trigger_ms = (progress.get("durationMs") or {}).get("triggerExecution")
            if trigger_ms is not None:
                self.gauges["processing"].labels(query).set(float(trigger_ms) / 1000.0)
                series.add((query,))
            target = self.target(progress, batches)
            if target is not None:
                self.gauges["target"].labels(query).set(target.seconds)
                self.gauges["target_met"].labels(query).set(1.0 if target.met else 0.0)

    def _set_source(self, query: str, b: SourceBatch, series: set[tuple[str, ...]]) -> None:
        labels = (query, str(b.index))
        series.add(labels)
        self.gauges["interval"].labels(*labels).set(b.interval_s)
        self.gauges["blocks"].labels(*labels).set(b.blocks)
        self.gauges["records"].labels(*labels).set(b.records)
        if b.backlog_records is not None and b.queue_delay_s is not None:
            self.gauges["queue_records"].labels(*labels).set(b.backlog_records)
            self.gauges["queue_delay"].labels(*labels).set(b.queue_delay_s)

    def target(self, progress: Mapping[str, Any], batches: list[SourceBatch]) -> Target | None:
        """The controller's latency target and verdict that the batch's end offset carries
        (the first source's that has one); ``None`` when the controller has no target."""
        for b in batches:
            if b.target is not None:
                return Target(b.target.target_s, b.target.met)
        return None

    def forget(self, query_id: str) -> None:
        """Remove every series of the query with id ``query_id``."""
        with self._lock:
            for labels in self._series.pop(str(query_id), set()):
                names = _SOURCE_GAUGES if len(labels) == 2 else _QUERY_GAUGES
                for key in names:
                    with contextlib.suppress(KeyError):  # that gauge was never set for them
                        self.gauges[key].remove(*labels)

    # -- Spark's listener calls --------------------------------------------------------

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        self.update(json.loads(event.progress.json))

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        self.forget(str(event.id))

    # -- the endpoint ------------------------------------------------------------------

    def serve(self, port: int = DEFAULT_PORT, addr: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` on ``addr:port`` from a daemon thread; returns the port
        (a free one for ``port=0``)."""
        port = PORT.parse(port, owner="prometheus exporter")
        if self.server is not None:
            msg = f"the prometheus exporter already serves on port {self.port}"
            raise AdabatchError(msg)
        try:
            server, thread = _prometheus().start_http_server(port, addr, registry=self.registry)
        except OSError as exc:
            msg = (
                f"prometheus exporter port {port} on {addr!r} cannot be used: {exc.strerror or exc}"
            )
            raise AdabatchError(msg) from None
        self.server, self._thread = server, thread
        self.port = int(server.server_port)
        return self.port

    def close(self) -> None:
        """Stop serving and free the port."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            if self._thread is not None:
                self._thread.join()
            self.server = self._thread = None


@dataclass
class Exporting:
    """A running exporter attached to a session; :meth:`stop` ends both."""

    spark: SparkSession
    exporter: PrometheusExporter

    @property
    def port(self) -> int:
        assert self.exporter.port is not None
        return self.exporter.port

    def stop(self) -> None:
        """Unregister the listener (after Spark delivered its events) and stop serving."""
        try:
            detach(self.spark, self.exporter)
        finally:
            self.exporter.close()


def export_prometheus(
    spark: SparkSession, port: int = DEFAULT_PORT, addr: str = "127.0.0.1"
) -> Exporting:
    """Export the gauges of every ``adabatch`` query of ``spark`` at
    ``http://addr:port/metrics`` (in this, the driver's, process) until ``stop()``."""
    exporter = PrometheusExporter()
    exporter.serve(port, addr)
    try:
        attach(spark, exporter)
    except BaseException:
        exporter.close()
        raise
    return Exporting(spark, exporter)
