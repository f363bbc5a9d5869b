"""Per-batch metrics and run summaries, shared by the simulator and the Spark path.

One :class:`BatchRecord` per finished batch, written as one JSON object per line to
``metrics.jsonl``; :func:`summarize` turns a list of them into a :class:`RunSummary`,
written as ``summary.json`` (:meth:`RunSummary.to_json`, read back with
:meth:`RunSummary.from_json`). Both the simulator and the Spark data source write these
records, so one summary and one plot serve both (ARCHITECTURE.md, "Measuring").

Latency definitions (never mixed in one table):
- batch latency ``latency_s = interval_s + queue_delay_s + processing_s`` (the papers');
- record latency ``record_latency_s = finished_at - mean arrival time`` of the batch's
  records (≈ x/2 + q + p for even arrival).

A run of a controller with a latency target (``slo``) adds the target's fields to its
summary (:func:`target_fields`): the controller's final verdict next to what happened.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from adabatch.control.base import BatchPlan, BatchReport, TargetStatus
from adabatch.errors import AdabatchError
from adabatch.outputs import OutputDir, append_text, dumps_json, open_output

REQUIRED_SUMMARY_FIELDS = (
    "controller",
    "workload",
    "profile",
    "batches",
    "mean_interval_s",
    "mean_processing_s",
    "mean_queue_delay_s",
    "mean_latency_s",
    "p95_latency_s",
    "mean_record_latency_s",
    "throughput_rps",
    "stable",
)


@dataclass(frozen=True)
class BatchRecord:
    """One finished batch as written to ``metrics.jsonl``.

    ``advised_interval_s`` and ``advised_blocks`` are set in the source's ``advise`` mode
    only: Spark's trigger made the batch, and the controller, having observed it, recommends
    this interval and these blocks from here on. Records written before these fields
    existed read back with them unset.
    """

    batch_id: int
    interval_s: float
    blocks: int
    records: int
    processing_s: float
    queue_delay_s: float
    cut_at: float
    started_at: float
    finished_at: float
    latency_s: float
    record_latency_s: float
    rate_rps: float
    max_records: int | None = None
    queue_len: int = 0  # batches waiting (cut, not started) when this one finished
    left_records: int | None = None  # records arrived and not yet handed out, then
    controller_state: dict[str, Any] = field(default_factory=dict)
    advised_interval_s: float | None = None
    advised_blocks: int | None = None

    @classmethod
    def from_report(
        cls,
        report: BatchReport,
        *,
        mean_arrival_at: float | None = None,
        max_records: int | None = None,
        queue_len: int = 0,
        controller_state: dict[str, Any] | None = None,
        advice: BatchPlan | None = None,
    ) -> BatchRecord:
        """The record of a finished batch; ``mean_arrival_at`` defaults to the interval's
        midpoint (even arrival); ``advice`` is the controller's plan in ``advise`` mode."""
        if mean_arrival_at is None:
            mean_arrival_at = report.cut_at - report.interval_s / 2
        return cls(
            batch_id=report.batch_id,
            interval_s=report.interval_s,
            blocks=report.blocks,
            records=report.records,
            processing_s=report.processing_s,
            queue_delay_s=report.queue_delay_s,
            cut_at=report.cut_at,
            started_at=report.started_at,
            finished_at=report.finished_at,
            latency_s=report.latency_s,
            record_latency_s=report.finished_at - mean_arrival_at,
            rate_rps=report.rate_rps,
            max_records=max_records,
            queue_len=queue_len,
            left_records=report.left_records,
            controller_state=dict(controller_state or {}),
            advised_interval_s=None if advice is None else advice.interval_s,
            advised_blocks=None if advice is None else advice.blocks,
        )

    def to_json(self) -> str:
        """One line of ``metrics.jsonl`` (RFC-valid: a non-finite value becomes null)."""
        return dumps_json(asdict(self), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BatchRecord:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


class MetricsWriter:
    """Appends records to ``metrics.jsonl``, one line each, flushed at once (crash-safe).

    The run that owns the directory made it and holds its lock; a symlink at ``path`` is
    refused rather than followed."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, record: BatchRecord) -> None:
        append_text(self.path, record.to_json() + "\n")


def write_jsonl(out: str | Path | OutputDir, records: Iterable[BatchRecord]) -> None:
    """Write all ``records`` to ``metrics.jsonl`` of ``out`` (an :class:`OutputDir`, or a
    file path whose directory is opened as one), replacing it by a rename."""
    if not isinstance(out, OutputDir):
        path = Path(out)
        with open_output(path.parent, what="metrics directory") as od:
            _write_jsonl(od, path.name, records)
        return
    _write_jsonl(out, "metrics.jsonl", records)


def _write_jsonl(out: OutputDir, name: str, records: Iterable[BatchRecord]) -> None:
    with out.open_write(name, text=True) as fh:
        for rec in records:
            fh.write(rec.to_json() + "\n")


def read_jsonl(path: str | Path) -> list[BatchRecord]:
    """Read ``metrics.jsonl`` written by the simulator or by a Spark run."""
    path = Path(path)
    if not path.is_file():
        msg = f"metrics file {str(path)!r} does not exist"
        raise AdabatchError(msg)
    out = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                out.append(BatchRecord.from_dict(json.loads(line)))
    return out


def queue_slope(records: Sequence[BatchRecord]) -> float:
    """Least-squares slope of queue delay over cut time in the second half of the run (at
    least its last three batches): seconds of extra delay per second of stream. Positive
    and large means a growing queue. A run that finished only a few long batches before it
    was stopped still gets a slope from them."""
    half = records[min(len(records) // 2, max(len(records) - 3, 0)) :]
    if len(half) < 2:
        return 0.0
    t = np.array([r.cut_at for r in half])
    q = np.array([r.queue_delay_s for r in half])
    if float(np.ptp(t)) <= 0:
        return 0.0
    return float(np.polyfit(t, q, 1)[0])


# A queue that grows by more than 2% of elapsed time in the second half of a run, and
# holds several batches (or more than two intervals of delay) at its end, is diverging.
DIVERGING_SLOPE = 0.02
DIVERGING_QUEUE_BATCHES = 3


def overloaded_tail(records: Sequence[BatchRecord], n: int = DIVERGING_QUEUE_BATCHES) -> bool:
    """Whether each of the last ``n`` batches took longer than its interval while the queue
    delay grew from one to the next: the queue is growing when the run ends. This catches
    a run of a few long batches (a Type-II static interval) that is stopped before its
    backlog counts several batches."""
    tail = records[-n:]
    if len(tail) < n:
        return False
    grew = all(b.queue_delay_s > a.queue_delay_s for a, b in pairwise(tail))
    return grew and all(r.processing_s > r.interval_s for r in tail)


def source_backlog_grows(records: Sequence[BatchRecord]) -> bool:
    """Whether the records waiting in the source, not yet in any batch (``left_records``),
    grew over the second half of the run and at its end hold more than
    ``DIVERGING_QUEUE_BATCHES`` typical batches: the query reads less than arrives. A
    controller that caps its batches keeps the batch queue short while this grows."""
    half = records[len(records) // 2 :]
    points = [(r.finished_at, r.left_records) for r in half if r.left_records is not None]
    if len(points) < 2:
        return False
    t, left = np.array(points, dtype=float).T
    typical = max(float(np.median([r.records for r in half])), 1.0)
    if left[-1] <= DIVERGING_QUEUE_BATCHES * typical or float(np.ptp(t)) <= 0:
        return False
    return float(np.polyfit(t, left, 1)[0]) > 0


def is_stable(records: Sequence[BatchRecord], final_queue_len: int) -> bool:
    """Whether the batch queue stayed bounded (see ``DIVERGING_SLOPE``) and the source's
    backlog did not grow (:func:`source_backlog_grows`).

    A run that finished too few batches for a slope is judged on its backlog: with fewer
    than two finished, any batch left waiting behind one that ran over its interval (or
    behind none) means the queue grew; with fewer than ``DIVERGING_QUEUE_BATCHES``
    finished and one left waiting, every finished batch running over its interval while
    the queue delay grew does (a slow host's static join: two 14 s batches that took 33 s
    each, two cut batches waiting); and a run that left at least as many batches waiting
    as it finished (several) processed far less than it cut, whatever the slope of the
    few it finished."""
    if final_queue_len >= max(DIVERGING_QUEUE_BATCHES, len(records)):
        return False
    if source_backlog_grows(records):
        return False
    if len(records) < 2:
        if final_queue_len <= 0:
            return True
        only = records[0] if records else None
        return only is not None and only.processing_s <= only.interval_s
    slope = queue_slope(records)
    half = records[len(records) // 2 :]
    median_x = float(np.median([r.interval_s for r in half]))
    last_q = records[-1].queue_delay_s
    backlog = final_queue_len >= DIVERGING_QUEUE_BATCHES or last_q > 2 * median_x
    tail = DIVERGING_QUEUE_BATCHES
    if len(records) < tail and final_queue_len > 0:
        tail = len(records)  # stopped after a few long batches: all of them
    return not (slope > DIVERGING_SLOPE and (backlog or overloaded_tail(records, tail)))


def busy_fraction(records: Sequence[BatchRecord], duration_s: float) -> float:
    """Processing time over the span it fell in: the offered duration, or longer when the
    last batches finished after it (so the fraction never exceeds 1)."""
    if not records:
        return 0.0 if duration_s > 0 else math.nan
    start = records[0].cut_at - records[0].interval_s
    span = max(duration_s, max(r.finished_at for r in records) - start)
    return sum(r.processing_s for r in records) / span if span > 0 else math.nan


@dataclass(frozen=True)
class RunSummary:
    """The summary of one run, written as ``summary.json``.

    One field per key :func:`summarize` computes, in the order of the file; ``extra`` holds
    what the caller adds (mode, seed, model, CPU cost, source, ...), written after them.
    Float fields may be NaN (written as ``null``)."""

    controller: str
    workload: str
    profile: str
    duration_s: float
    batches: int
    records: int
    mean_interval_s: float
    cv_interval: float
    mean_blocks: float
    mean_processing_s: float
    mean_queue_delay_s: float
    max_queue_delay_s: float
    mean_latency_s: float
    p95_latency_s: float
    mean_record_latency_s: float
    p95_record_latency_s: float
    throughput_rps: float
    overloaded_fraction: float
    busy_fraction: float
    final_queue_len: int
    queue_slope: float
    stable: bool
    skip_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The ``summary.json`` dict: the fields in order, then ``extra``."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunSummary:
        """A summary read back from a ``summary.json`` dict: ``null`` in a float field is
        NaN again, a key that is not a field goes to ``extra``; ``nonfinite_fields``
        (added when the file is written) is left out."""
        missing = [k for k in REQUIRED_SUMMARY_FIELDS if k not in data]
        if missing:
            msg = f"summary lacks the fields {', '.join(missing)}"
            raise AdabatchError(msg)
        values = {
            k: (math.nan if data.get(k) is None and k in _FLOAT_FIELDS else data.get(k))
            for k in _FIELDS
        }
        extra = {k: v for k, v in data.items() if k not in _FIELDS and k != "nonfinite_fields"}
        return cls(**values, extra=extra)

    def get(self, key: str, default: Any = None) -> Any:
        """The value of a field or ``extra`` key named at run time (table columns, a
        sweep metric), ``default`` when the summary has none."""
        if key in _FIELDS:
            return getattr(self, key)
        return self.extra.get(key, default)

    def has(self, key: str) -> bool:
        """Whether the summary has a field or ``extra`` key ``key``."""
        return key in _FIELDS or key in self.extra

    def with_values(self, **values: Any) -> RunSummary:
        """A copy with ``values`` set: a field by its name, any other key in ``extra``."""
        changes = {k: v for k, v in values.items() if k in _FIELDS}
        extra = {**self.extra, **{k: v for k, v in values.items() if k not in _FIELDS}}
        return replace(self, **changes, extra=extra)


_FIELDS = tuple(f.name for f in fields(RunSummary) if f.name != "extra")
_FLOAT_FIELDS = frozenset(f.name for f in fields(RunSummary) if f.type == "float")


def summarize(
    records: Sequence[BatchRecord],
    *,
    controller: str,
    workload: str,
    profile: str,
    duration_s: float,
    final_queue_len: int = 0,
    skip_s: float = 0.0,
    extra: dict[str, Any] | None = None,
    target: TargetStatus | None = None,
) -> RunSummary:
    """The run summary written to ``summary.json``.

    ``skip_s`` leaves out batches cut in the first seconds (warm-up) from the means;
    stability is judged on every batch. ``duration_s`` is the span of stream offered.
    A key of ``extra`` that names a field (``stable`` of a diverged run) sets it.
    ``target`` is the controller's latency target status at the end of the run (``None``
    without one): :func:`target_fields` over the batches after the warm-up are added.
    """
    kept = after_warmup(records, skip_s)

    def mean(values: list[float]) -> float:
        return float(np.mean(values)) if values else math.nan

    def p95(values: list[float]) -> float:
        return float(np.percentile(values, 95)) if values else math.nan

    lat = [r.latency_s for r in kept]
    rec_lat_w = sum(r.record_latency_s * r.records for r in kept)
    n_rec = sum(r.records for r in kept)
    intervals = [r.interval_s for r in kept]
    mean_x = mean(intervals)
    summary = RunSummary(
        controller=controller,
        workload=workload,
        profile=profile,
        duration_s=duration_s,
        batches=len(records),
        records=int(sum(r.records for r in records)),
        mean_interval_s=mean_x,
        cv_interval=float(np.std(intervals) / mean_x) if kept and mean_x > 0 else math.nan,
        mean_blocks=mean([r.blocks for r in kept]),
        mean_processing_s=mean([r.processing_s for r in kept]),
        mean_queue_delay_s=mean([r.queue_delay_s for r in kept]),
        max_queue_delay_s=max((r.queue_delay_s for r in kept), default=math.nan),
        mean_latency_s=mean(lat),
        p95_latency_s=p95(lat),
        mean_record_latency_s=rec_lat_w / n_rec
        if n_rec
        else mean([r.record_latency_s for r in kept]),
        p95_record_latency_s=p95([r.record_latency_s for r in kept]),
        throughput_rps=(sum(r.records for r in records) / duration_s)
        if duration_s > 0
        else math.nan,
        overloaded_fraction=mean([1.0 if r.processing_s > r.interval_s else 0.0 for r in kept]),
        busy_fraction=busy_fraction(records, duration_s),
        final_queue_len=final_queue_len,
        queue_slope=queue_slope(records),
        stable=is_stable(records, final_queue_len),
        skip_s=skip_s,
    )
    added = {**(extra or {}), **({} if target is None else target_fields(target, kept))}
    return summary.with_values(**added) if added else summary


def after_warmup(records: Sequence[BatchRecord], skip_s: float) -> list[BatchRecord]:
    """The batches cut ``skip_s`` or more after the run's first interval began (every batch
    when none was): what a summary's means are over."""
    if not records:
        return []
    begin = records[0].cut_at - records[0].interval_s
    kept = [r for r in records if r.cut_at - begin >= skip_s]
    return kept or list(records)


def fraction_over(records: Sequence[BatchRecord], limit_s: float) -> float:
    """The fraction of ``records`` whose batch latency ``x + q + p`` exceeds ``limit_s``
    (NaN for no records)."""
    if not records:
        return math.nan
    return sum(1 for r in records if r.latency_s > limit_s) / len(records)


def target_fields(status: TargetStatus, kept: Sequence[BatchRecord]) -> dict[str, Any]:
    """The summary keys of a run with a latency target: the controller's final verdict
    (``slo_met``, ``achievable_latency_s``, ``target_mode``, ``target_reason``) and, over
    the batches ``kept`` after the warm-up, the fraction whose batch latency exceeded the
    target and the batch latency at the target's percentile (95 when it names none)."""
    pct = 95.0 if status.percentile is None else status.percentile
    latencies = [r.latency_s for r in kept]
    return {
        "target_s": status.target_s,
        "target_percentile": status.percentile,
        "slo_met": status.met,
        "achievable_latency_s": status.achievable_s,
        "target_mode": status.mode,
        "target_reason": status.reason,
        "fraction_over_target": fraction_over(kept, status.target_s),
        "target_percentile_latency_s": float(np.percentile(latencies, pct))
        if latencies
        else math.nan,
    }


def write_summary(out: str | Path | OutputDir, summary: RunSummary) -> None:
    """Write ``summary.json`` into ``out`` (an :class:`OutputDir`, or a file path whose
    directory is opened as one): NaN and infinities become null, listed in
    ``nonfinite_fields``."""
    if isinstance(out, OutputDir):
        out.write_summary(summary.to_json())
        return
    path = Path(out)
    with open_output(path.parent, what="summary directory") as od:
        od.write_summary(summary.to_json(), path.name)
