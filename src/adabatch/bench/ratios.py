"""Ratios within one run of an experiment and one group: to the oracle (the best static
interval in hindsight) and to Spark's default trigger."""

from __future__ import annotations

import math
from collections.abc import Sequence

from adabatch.bench.model import Outcome


def oracle(outcomes: Sequence[Outcome], group: str | None = None) -> Outcome | None:
    """The best static interval in hindsight: the stable ``static`` config with the lowest
    mean batch latency (within ``group`` if given); ``None`` if no static run was stable."""
    pool = [
        o
        for o in outcomes
        if o.config.role == "static"
        and o.stable
        and (group is None or o.config.group == group)
        and math.isfinite(o.get("mean_latency_s"))
    ]
    return min(pool, key=lambda o: o.get("mean_latency_s"), default=None)


def spark_default(outcomes: Sequence[Outcome], group: str | None = None) -> Outcome | None:
    """The ``spark-default`` run of ``group`` (the first, if several)."""
    return next(
        (
            o
            for o in outcomes
            if o.config.role == "spark-default" and (group is None or o.config.group == group)
        ),
        None,
    )


def _ratio(value: float, ref: float) -> float:
    ok = math.isfinite(value) and math.isfinite(ref) and ref > 0
    return value / ref if ok else math.nan


def ratios(outcome: Outcome, outcomes: Sequence[Outcome]) -> dict[str, float]:
    """Mean-latency and CPU ratios of ``outcome`` to its group's oracle and spark-default
    (NaN where the reference is missing)."""
    group = outcome.config.group
    best, default = oracle(outcomes, group), spark_default(outcomes, group)
    out = {}
    for tag, ref in (("oracle", best), ("default", default)):
        for key, short in (("mean_latency_s", "latency"), ("cpu_s_per_million_records", "cpu")):
            ref_v = ref.get(key) if ref is not None else math.nan
            out[f"{short}_to_{tag}"] = _ratio(outcome.get(key), ref_v)
    return out
