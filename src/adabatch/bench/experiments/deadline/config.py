"""What a deadline bench run depends on: :class:`BenchConfig`, built from the command
line by :func:`bench_config`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from adabatch.deadline.spark.queries import QUERY_NAMES, get_query
from adabatch.deadline.spark.tpch import DEFAULT_RATE, DEFAULT_SCALE_FACTOR, DEFAULT_SLOTS
from adabatch.errors import AdabatchError
from adabatch.urls import redact_url

PAPER_FACTORS = (1.0, 0.8, 0.6, 0.4, 0.2, 0.1)
"""Deadline levels of Fig. 6 and Fig. 7 (fractions of D after the window end)."""

SECTIONS = ("single", "baseline", "multi")
"""The sections ``--skip`` may leave out (the profiles always run)."""

RESUME_KEYS = ("scale_factor", "slots", "rate_slots_per_s", "margin", "sizes", "quick")
"""Config entries a resumed bench must share with the results it keeps."""


@dataclass(frozen=True)
class BenchConfig:
    """Everything a bench run depends on (written into the report)."""

    out: Path
    docs: Path | None = None
    data: Path = Path("runs/deadline-data")
    scale_factor: float = DEFAULT_SCALE_FACTOR
    slots: int = DEFAULT_SLOTS
    rate: float = DEFAULT_RATE
    master: str = "local[2]"
    queries: tuple[str, ...] = QUERY_NAMES
    factors: tuple[float, ...] = PAPER_FACTORS
    sizes: tuple[int, ...] | None = None
    margin: float = 1.25
    triggers: tuple[str, ...] = ("default", "processing:5", "available-now")
    sim_deltas: tuple[float, ...] = PAPER_FACTORS
    sim_window_s: float = 4500.0
    sim_c_max: float | None = None  # None: the smallest C_max that caps no MinBatch
    sim_rsf: float = 0.5
    spark_multi: tuple[str, ...] = ("cq1", "q6", "q14")
    skip: frozenset[str] = field(default_factory=frozenset)
    quick: bool = False
    resume: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "data": str(self.data),
            "scale_factor": self.scale_factor,
            "slots": self.slots,
            "rate_slots_per_s": self.rate,
            "master": redact_url(self.master),
            "queries": list(self.queries),
            "factors": list(self.factors),
            "sizes": None if self.sizes is None else list(self.sizes),
            "margin": self.margin,
            "triggers": list(self.triggers),
            "sim_deltas": list(self.sim_deltas),
            "sim_window_s": self.sim_window_s,
            "sim_c_max": self.sim_c_max,
            "sim_rsf": self.sim_rsf,
            "spark_multi": list(self.spark_multi),
            "skip": sorted(self.skip),
            "quick": self.quick,
        }


def _quick(base: BenchConfig, args: argparse.Namespace) -> BenchConfig:
    """The CI smoke version of ``base``: SF 0.01, two queries, two factors."""
    return replace(
        base,
        data=base.data if args.data != "runs/deadline-data" else base.out / "data",
        scale_factor=0.01,
        slots=16,
        rate=2.0,
        queries=base.queries if args.queries else ("cq2", "q6"),
        factors=(2.0, 1.0),
        sizes=(16, 8, 4),
        triggers=("default",),
        sim_deltas=(1.0, 0.4, 0.1),
        spark_multi=(),
        quick=True,
    )


def bench_config(args: argparse.Namespace) -> BenchConfig:
    """The configuration of ``adabatch deadline bench`` arguments (``--quick``: a CI smoke
    version at SF 0.01 with two queries)."""
    skip = frozenset(s.strip() for s in str(args.skip or "").split(",") if s.strip())
    unknown = sorted(skip - set(SECTIONS))
    if unknown:
        msg = f"--skip {unknown[0]!r}: allowed a comma-separated subset of {', '.join(SECTIONS)}"
        raise AdabatchError(msg)
    queries = QUERY_NAMES
    if args.queries:
        queries = tuple(get_query(q).name for q in args.queries.split(",") if q.strip())
    base = BenchConfig(
        out=Path(args.out),
        docs=None if args.docs is None else Path(args.docs),
        data=Path(args.data),
        scale_factor=args.sf,
        slots=args.slots,
        rate=args.rate,
        master=args.master,
        queries=queries,
        skip=skip,
        resume=bool(getattr(args, "resume", False)),
    )
    if args.quick:
        base = _quick(base, args)
    if args.factors is not None:
        base = replace(base, factors=tuple(args.factors))
    if args.margin is not None:
        base = replace(base, margin=args.margin)
    return base
