"""The Python API that reads like Spark: ``adabatch.read_stream(spark, ...)``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adabatch.streaming.options import PARAM_PREFIX, parse_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


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
    **source_options: Any,
) -> DataFrame:
    """A streaming DataFrame whose micro-batches ``controller`` sizes.

    Parameters
    ----------
    spark
        The session (see :func:`adabatch.spark.get_spark`).
    source
        Record source name (``generator``).
    controller
        A controller from ``adabatch controllers``, or ``"spark-default"`` to hand Spark
        everything that has arrived at every poll (Spark's trigger decides).
    params
        Controller parameters, e.g. ``{"rho": 0.7}``.
    profile
        Rate profile of the source, e.g. ``"constant:2000"`` or ``"sine:1000:6000:60s"``.
    metrics_path
        ``metrics.jsonl`` to append one :class:`~adabatch.metrics.BatchRecord` per batch to.
    state_path
        JSON file for the controller state and cut schedule; keep it next to the query's
        checkpoint so a restarted query continues consistently.
    queue
        ``"fifo"`` (cut batches waiting while Spark is busy run one micro-batch each, the
        papers' model) or ``"coalesce"`` (merged into one).
    **source_options
        Options of the source, e.g. ``keys=1000, seed=7, distribution="zipf"``.

    Returns
    -------
    DataFrame
        The streaming DataFrame; bad options raise :class:`~adabatch.errors.AdabatchError`
        here, before Spark is involved.

    Examples
    --------
    >>> df = read_stream(spark, controller="fixed-point", params={"rho": 0.7},
    ...                  profile="constant:2000", keys=100)  # doctest: +SKIP
    """
    options: dict[str, str] = {
        "source": source,
        "controller": controller,
        "profile": absolute_trace(profile),
        "queue": queue,
    }
    options.update({PARAM_PREFIX + k: str(v) for k, v in (params or {}).items()})
    options.update({k: str(v) for k, v in source_options.items()})
    if metrics_path is not None:
        options["metrics_path"] = str(Path(metrics_path).resolve())
    if state_path is not None:
        options["state_path"] = str(Path(state_path).resolve())
    parsed = parse_options(options)

    from adabatch.streaming.source import FORMAT, register

    register(spark)
    return spark.readStream.format(FORMAT).options(**parsed.to_options()).load()
