"""Numbers as text, one way for every table the tool prints or writes.

:func:`fmt` is a table cell (``-`` for a missing or NaN value, yes/NO for a verdict),
:func:`fmt_ratio` a ratio to a reference (``1.25x``), :func:`fmt_value` a value in a given
pattern, :func:`fmt_cost` a CPU figure (``not measured`` where the run could not measure
it); :func:`summary_rows` is a run summary as (label, text) rows, the table ``simulate``
and ``run`` print, and :func:`target_line` the line they add for a latency target.
"""

from __future__ import annotations

import math
from typing import Any

from adabatch.metrics import RunSummary

MISSING = "-"
# A run's CPU figures are not measured when the process tree the meter sees does not hold
# the job (executors on a cluster): ``cpu_measured`` is false and ``cpu_scope`` says why.
NOT_MEASURED = "not measured"
COST_KEYS = frozenset({"cpu_s", "cpu_s_per_million_records", "cpu_cores_used"})


def is_missing(value: Any) -> bool:
    """``None`` or a float NaN: a value a table shows as ``-``."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt_value(value: Any, pattern: str = "{}") -> str:
    """``pattern.format(value)``, or ``-`` for a missing value."""
    return MISSING if is_missing(value) else pattern.format(value)


def fmt(value: Any, digits: int = 3, *, compact: bool = True) -> str:
    """A table cell: ``-`` for missing/NaN, yes/NO for booleans, floats to ``digits``
    decimals (with ``compact``, ``inf`` for an infinity and no decimals from 1000 on),
    anything else as ``str``."""
    if is_missing(value):
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        if compact and math.isinf(value):
            return "inf"
        return f"{value:.0f}" if compact and abs(value) >= 1000 else f"{value:.{digits}f}"
    return str(value)


def fmt_ratio(value: float) -> str:
    """A ratio to a reference, ``1.25x``; ``-`` when it is not finite."""
    return MISSING if not math.isfinite(value) else f"{value:.2f}x"


def not_measured(summary: RunSummary, key: str) -> bool:
    """Whether ``key`` is a CPU figure that ``summary``'s run did not measure (as opposed
    to one that is merely missing, such as the cost per record of a run without records)."""
    return (
        key in COST_KEYS and is_missing(summary.get(key)) and summary.get("cpu_measured") is False
    )


def fmt_cost(summary: RunSummary, key: str, digits: int = 1) -> str:
    """A cost cell: :func:`fmt` of the value, ``not measured`` where it was not."""
    return NOT_MEASURED if not_measured(summary, key) else fmt(summary.get(key), digits)


# How a summary is shown (simulate and run print the same table); rows whose key a
# summary lacks (cost for simulations, "diverged" for Spark runs) are left out.
SUMMARY_ROWS: tuple[tuple[str, str, str], ...] = (
    ("batches", "batches", "{:d}"),
    ("records", "records", "{:d}"),
    ("mean_interval_s", "mean interval (s)", "{:.3f}"),
    ("cv_interval", "interval CV", "{:.3f}"),
    ("mean_blocks", "mean blocks", "{:.2f}"),
    ("mean_processing_s", "mean processing (s)", "{:.3f}"),
    ("mean_queue_delay_s", "mean queue delay (s)", "{:.3f}"),
    ("max_queue_delay_s", "max queue delay (s)", "{:.3f}"),
    ("mean_latency_s", "mean batch latency x+q+p (s)", "{:.3f}"),
    ("p95_latency_s", "p95 batch latency (s)", "{:.3f}"),
    ("mean_record_latency_s", "mean record latency (s)", "{:.3f}"),
    ("throughput_rps", "throughput (records/s)", "{:.1f}"),
    ("busy_fraction", "busy fraction", "{:.3f}"),
    ("cpu_s_per_million_records", "CPU s per million records", "{:.1f}"),
    ("cpu_cores_used", "CPU cores used", "{:.2f}"),
    ("cpu_scope", "CPU scope", "{}"),
    ("overloaded_fraction", "batches with p > x", "{:.3f}"),
    ("final_queue_len", "final queue (batches)", "{:d}"),
    ("stable", "stable", "{}"),
    ("diverged", "diverged (stopped early)", "{}"),
)


def summary_rows(summary: RunSummary) -> list[tuple[str, str]]:
    """(label, text) of every :data:`SUMMARY_ROWS` entry the summary has; ``-`` for NaN,
    ``not measured`` for a CPU figure the run could not measure (``CPU scope`` says why)."""
    return [
        (
            label,
            NOT_MEASURED if not_measured(summary, key) else fmt_value(summary.get(key), pattern),
        )
        for key, label, pattern in SUMMARY_ROWS
        if summary.has(key)
    ]


def target_line(summary: RunSummary) -> str | None:
    """The line on a run's latency target (``None`` for a run without one): the target,
    the controller's final verdict, and what the batches after the warm-up did. A verdict
    of met that the run's own batches contradict says so rather than only "met"."""
    target = summary.get("target_s")
    if is_missing(target):
        return None
    pct = summary.get("target_percentile")
    head = f"latency target {target:g} s" + ("" if is_missing(pct) else f" at p{pct:g}")
    if not summary.get("slo_met"):
        achievable, reason = summary.get("achievable_latency_s"), summary.get("target_reason")
        text = "NOT met" + ("" if is_missing(achievable) else f", achievable {achievable:.2f} s")
        return f"{head}: {text}" + ("" if reason is None else f" ({reason})")
    seen = summary.get("target_percentile_latency_s")
    if is_missing(seen):
        return f"{head}: met"
    shown = f"p{95.0 if is_missing(pct) else pct:g} batch latency {seen:.2f} s"
    if seen <= target:
        return f"{head}: met ({shown})"
    over = summary.get("fraction_over_target")
    return (
        f"{head}: met at the end of the run, not over all of it ({shown}, "
        f"{fmt_value(over, '{:.1%}')} of the batches over the target)"
    )
