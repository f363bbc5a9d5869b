"""What ``adabatch bench slo`` measures on each run, from its per-batch records: whether a
latency target was met, at what CPU, against the hindsight-best processingTime trigger,
and how a query that starts behind catches up."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from adabatch.bench.model import Outcome

# A target is met when the p95 batch latency after the warm-up is within it (1 % for the
# clock's rounding) and the run stayed stable.
MET_TOLERANCE = 1.01


def kept(o: Outcome) -> list:
    """The batches cut after the run's warm-up (what its summary's means cover)."""
    skip = o.summary.skip_s
    return [r for r in o.records if r.cut_at >= skip]


def p95(values: Sequence[float]) -> float:
    return float(np.percentile(values, 95)) if len(values) else math.nan


def p95_batch_latency(o: Outcome) -> float:
    return p95([r.latency_s for r in kept(o)])


def p95_record_latency(o: Outcome) -> float:
    return p95([r.record_latency_s for r in kept(o)])


def over_target(o: Outcome, target: float) -> float:
    """Fraction of the batches after the warm-up whose batch latency exceeds ``target``."""
    batches = kept(o)
    if not batches:
        return math.nan
    return sum(r.latency_s > target for r in batches) / len(batches)


def meets(o: Outcome, target: float) -> bool:
    """The run met ``target``: stable, and its p95 batch latency within it."""
    lat = p95_batch_latency(o)
    return o.stable and math.isfinite(lat) and lat <= target * MET_TOLERANCE


def cpu(o: Outcome) -> float:
    """CPU seconds per million records (NaN where not measured)."""
    return o.get("cpu_s_per_million_records")


def best_trigger(outcomes: Sequence[Outcome], target: float) -> Outcome | None:
    """The processingTime trigger that met ``target`` at the least CPU per record (the
    setting a user would pick in hindsight), or None when none met it."""
    met = [o for o in outcomes if o.config.role == "trigger" and meets(o, target)]
    met = [o for o in met if math.isfinite(cpu(o))]
    return min(met, key=cpu, default=None)


def ratio(a: float, b: float) -> float:
    """``a / b``; NaN unless both are finite and ``b > 0``."""
    if math.isfinite(a) and math.isfinite(b) and b > 0:
        return a / b
    return math.nan


@dataclass(frozen=True)
class CatchUp:
    """How a run that started ``behind_s`` behind caught up."""

    caught_up_s: float  # seconds from the query start to its last late batch's end (NaN: never)
    largest_batch: int  # most records in one batch
    met_after: bool  # after catching up, its batches met the target (p95)


def catch_up(o: Outcome, behind_s: float, target: float) -> CatchUp:
    """A run is caught up when the last batch whose records waited longer than ``target``
    ends: from then on every record it reads is within the target. Its time is counted
    from the query's start (stream time ``behind_s``); ``met_after`` says whether the
    batches from there on meet ``target`` at the p95.

    The first batch on target does not count towards the catch-up: how long it runs is the
    controller's choice of interval at the target (slo plans a long, cheap one; a record
    cap cuts at once), not time spent behind."""
    records = list(o.records)
    largest = max((r.records for r in records), default=0)
    start = len(records)
    for i in range(len(records) - 1, -1, -1):
        if records[i].record_latency_s > target:
            break
        start = i
    if start >= len(records):
        return CatchUp(math.nan, largest, False)
    caught = records[start - 1].finished_at - behind_s if start else 0.0
    after = [r.latency_s for r in records[start:]]
    return CatchUp(caught, largest, p95(after) <= target * MET_TOLERANCE)


def infeasible_within(o: Outcome) -> int | None:
    """The 1-based batch at which the ``slo`` controller first reported its target out of
    reach; None if it never did."""
    for i, r in enumerate(o.records, start=1):
        if r.controller_state.get("out_of_reach"):
            return i
    return None


def achievable(o: Outcome) -> float:
    """The latency the ``slo`` controller reported as achievable at the end of the run."""
    for r in reversed(o.records):
        value = r.controller_state.get("achievable_latency_s")
        if value is not None:
            return float(value)
    return math.nan
