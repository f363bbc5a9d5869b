"""The Python API that reads like Spark: ``adabatch.read_stream(spark, ...)``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adabatch.streaming.options import PARAM_PREFIX, parse_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from adabatch.streaming.prometheus import Exporting


PATH_OPTIONS = frozenset({"path", "dead_letter_path", "deadLetterPath"})
"""Source options that name a file or directory (made absolute)."""


def _with_cores(spark: SparkSession, controller: str, params: Mapping[str, Any]) -> dict:
    """``params`` with ``cores`` set to Spark's default parallelism when the controller has
    that parameter and the caller did not give it (isotonic bounds its blocks by it)."""
    from adabatch.control import registry

    def parallelism() -> int | None:
        try:
            return int(spark.sparkContext.defaultParallelism)
        except Exception:  # Spark Connect has no SparkContext: leave it unset
            return None

    return registry.with_cores(controller, params, parallelism)


def _absolute_paths(options: Mapping[str, Any]) -> dict[str, str]:
    """``options`` as strings, paths made absolute as the caller means them (Spark's Python
    workers do not share its working directory)."""
    return {
        k: str(Path(v).expanduser().resolve()) if k in PATH_OPTIONS else str(v)
        for k, v in options.items()
    }


def absolute_trace(profile: str) -> str:
    """``trace:PATH`` with ``PATH`` made absolute: Spark's Python workers, which parse the
    profile again, do not share the caller's working directory."""
    kind, sep, rest = profile.strip().partition(":")
    if kind.strip().lower() != "trace" or not sep:
        return profile
    path, mode = rest, ""
    head, colon, tail = rest.rpartition(":")
    if colon and tail.strip().lower() in ("step", "linear"):
        path, mode = head, ":" + tail.strip()
    return f"trace:{Path(path.strip()).expanduser().resolve()}{mode}"


def read_stream(
    spark: SparkSession,
    source: str = "generator",
    controller: str = "fixed-point",
    params: Mapping[str, Any] | None = None,
    profile: str = "constant:2000",
    metrics_path: str | Path | None = None,
    state_path: str | Path | None = None,
    queue: str = "fifo",
    *,
    mode: str = "control",
    max_rows_per_trigger: int | None = None,
    min_rows_per_trigger: int | None = None,
    max_trigger_delay: str | float | None = None,
    starting_backlog: str | float | None = None,
    **source_options: Any,
) -> DataFrame:
    """A streaming DataFrame whose micro-batches ``controller`` sizes.

    The keywords are the source's options (:mod:`adabatch.streaming.options`) in Python's
    spelling; Spark gets them under their camelCase names (``maxRowsPerTrigger``, ...).

    Parameters
    ----------
    spark
        The session (see :func:`adabatch.spark.get_spark`).
    source, profile
        Record source name (``generator``) and its rate profile (``"constant:2000"``).
    controller, params
        A controller from ``adabatch controllers`` and its parameters (``{"rho": 0.7}``),
        or ``"spark-default"``; ``cores`` (isotonic) defaults to Spark's parallelism.
    metrics_path, state_path
        ``metrics.jsonl`` to append one :class:`~adabatch.metrics.BatchRecord` per batch
        to; JSON file for the controller state and cut schedule (next to the checkpoint).
    queue
        ``"fifo"`` (cut batches waiting while Spark is busy run one micro-batch each, the
        papers' model) or ``"coalesce"`` (merged into one).
    mode
        ``"control"`` (the controller cuts the batches) or ``"advise"`` (Spark's trigger
        decides; the metrics carry the controller's ``advised_interval_s``/``_blocks``).
    max_rows_per_trigger, min_rows_per_trigger, max_trigger_delay
        Spark's read limits per micro-batch; ``max_trigger_delay`` (``"5 seconds"``,
        default 15 minutes as Kafka's) releases a batch ``min_rows_per_trigger`` holds
        once its oldest record has waited that long.
    starting_backlog
        A new query's stream starts this long before the query (``"30s"``): the records
        of that span wait at once, as after downtime.
    **source_options
        Options of the source, e.g. ``keys=1000, seed=7``.

    Returns
    -------
    DataFrame
        The streaming DataFrame (bad options raise :class:`~adabatch.errors.AdabatchError`).
    """
    options: dict[str, str] = {
        "source": source,
        "controller": controller,
        "profile": absolute_trace(profile),
        "queue": queue,
        "mode": mode,
    }
    params = _with_cores(spark, controller, params or {})
    options.update({PARAM_PREFIX + k: str(v) for k, v in params.items()})
    options.update(_absolute_paths(source_options))
    named = {
        "metricsPath": None if metrics_path is None else Path(metrics_path).resolve(),
        "statePath": None if state_path is None else Path(state_path).resolve(),
        "maxRowsPerTrigger": max_rows_per_trigger,
        "minRowsPerTrigger": min_rows_per_trigger,
        "maxTriggerDelay": max_trigger_delay,
        "startingBacklog": starting_backlog,
    }
    options.update({k: str(v) for k, v in named.items() if v is not None})
    parsed = parse_options(options)
    from adabatch.streaming.source import FORMAT, register

    register(spark)  # also refuses a processingTime or realTime trigger with a controller
    return spark.readStream.format(FORMAT).options(**parsed.to_options()).load()


def export_prometheus(spark: SparkSession, port: int = 9108, addr: str = "127.0.0.1") -> Exporting:
    """Serve live gauges of every ``adabatch`` query of ``spark`` (interval, blocks, queue,
    processing time, labelled by query name) at ``http://addr:port/metrics``, from this
    driver process, until ``.stop()`` on the returned handle. Needs the
    ``adabatch[prometheus]`` extra; ``port=0`` picks a free port (``.port``)."""
    from adabatch.streaming.prometheus import export_prometheus as start

    return start(spark, port=port, addr=addr)
