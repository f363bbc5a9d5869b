"""Cost models measured on Spark: ``adabatch deadline profile`` (paper Sec. 6.2, Fig. 3-4).

The paper runs each query over increasing input sizes, fits a piecewise-linear model of
batch cost versus batch size, and models the final aggregation's cost by the number of
batches. :func:`profile_query` does both in one sweep that is also the paper's Sec. 7.2
experiment (cost versus number of batches, Fig. 4): for every batch size ``s`` (in landing
slots) the whole input, already landed, is processed back to back in batches of ``s``
slots, then the final aggregation combines the partials. Each sweep step yields

- batch cost samples at ``s`` slots (their median is one point of the batch-cost fit,
  in tuples of the query's primary stream),
- the final aggregation's cost at that number of batches (a point of the agg fit),
- the total cost of processing the window in that many batches (Fig. 4).

The fitted :class:`~adabatch.deadline.core.cost.PiecewiseLinearCost` and
:class:`~adabatch.deadline.core.cost.AggregationCost` are written as the JSON file the spec loader
reads (``cost: path/to/profile.json``): ``{"cost": {...}, "agg_cost": {...}, ...}``.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adabatch.deadline.core.cost import (
    AggregationCost,
    LinearCost,
    MonotoneCost,
    PiecewiseLinearCost,
    QueryCost,
    agg_cost_from_json,
    cost_from_json,
)
from adabatch.deadline.core.numbers import check_number
from adabatch.deadline.spark.executor import SparkJob
from adabatch.deadline.spark.queries import get_query
from adabatch.deadline.spark.runner import QueryRun, run_in_batches, run_slot_batches
from adabatch.deadline.spark.tpch import Manifest
from adabatch.errors import AdabatchError
from adabatch.outputs import write_atomic
from adabatch.params import Param

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MARGIN = Param("margin", 1.25, "a finite factor", low=1.0)
"""Planning slack on a measured cost model: every cost times this factor."""


@dataclass(frozen=True)
class SweepPoint:
    """The window processed in ``batches`` batches of ``slots`` slots each (the last may
    be smaller): per-batch seconds, the final aggregation's seconds and the total."""

    slots: int
    batches: int
    tuples: tuple[int, ...]
    batch_seconds: tuple[float, ...]
    final_seconds: float
    total_seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "slots": self.slots,
            "batches": self.batches,
            "tuples": list(self.tuples),
            "batch_seconds": list(self.batch_seconds),
            "final_seconds": self.final_seconds,
            "total_seconds": self.total_seconds,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SweepPoint:
        return cls(
            int(data["slots"]),
            int(data["batches"]),
            tuple(int(t) for t in data["tuples"]),
            tuple(float(s) for s in data["batch_seconds"]),
            float(data["final_seconds"]),
            float(data["total_seconds"]),
        )


@dataclass(frozen=True)
class CostProfile:
    """A query's measured sweep and the models fitted to it."""

    query: str
    primary: str
    scale_factor: float
    slots: int
    total: int
    sweep: tuple[SweepPoint, ...]
    cost: PiecewiseLinearCost
    agg_cost: AggregationCost
    small: tuple[tuple[int, float], ...] = ()

    @property
    def single_batch_cost(self) -> float:
        """Measured cost of the whole window in one batch (the paper's D): the median of
        the sweep's one-batch runs."""
        ones = [p.total_seconds for p in self.sweep if p.batches == 1]
        return statistics.median(ones) if ones else self.cost.cost(self.total)

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "primary": self.primary,
            "scale_factor": self.scale_factor,
            "slots": self.slots,
            "total": self.total,
            "cost": self.cost.to_json(),
            "agg_cost": self.agg_cost.to_json(),
            "single_batch_cost": self.single_batch_cost,
            "sweep": [p.to_json() for p in self.sweep],
            "small": [list(s) for s in self.small],
        }

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_atomic(path, (json.dumps(self.to_json(), indent=1) + "\n").encode("utf-8"))


def load_cost_profile(path: str | Path) -> CostProfile:
    """Read a profile JSON written by :meth:`CostProfile.save`."""
    path = Path(path)
    if not path.is_file():
        msg = f"profile file {str(path)!r} does not exist: run `adabatch deadline profile`"
        raise AdabatchError(msg)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        msg = f"{path} is not a profile file ({exc!r}): rerun `adabatch deadline profile`"
        raise AdabatchError(msg) from None
    return cost_profile_from_json(data, str(path))


def cost_profile_from_json(data: Any, where: str = "profile") -> CostProfile:
    """The :class:`CostProfile` of :meth:`CostProfile.to_json` output (``where`` names it
    in errors)."""
    try:
        cost = cost_from_json(data["cost"])
        if not isinstance(cost, PiecewiseLinearCost):
            msg = f"{where}: cost kind {data['cost'].get('kind')!r}: allowed piecewise"
            raise AdabatchError(msg)
        return CostProfile(
            query=str(data["query"]),
            primary=str(data["primary"]),
            scale_factor=float(data["scale_factor"]),
            slots=int(data["slots"]),
            total=int(data["total"]),
            sweep=tuple(SweepPoint.from_json(p) for p in data["sweep"]),
            cost=cost,
            agg_cost=agg_cost_from_json(data["agg_cost"]),
            small=tuple((int(t), float(x)) for t, x in data.get("small", [])),
        )
    except (KeyError, TypeError, ValueError) as exc:
        msg = f"{where} is not a profile file ({exc!r}): rerun `adabatch deadline profile`"
        raise AdabatchError(msg) from None


def default_sizes(slots: int) -> list[int]:
    """Batch sizes in slots: all, 1/2, 1/4, ... down to about 1/32 of the window."""
    sizes = []
    for divisor in (1, 2, 4, 8, 16, 32):
        size = max(1, math.ceil(slots / divisor))
        if size not in sizes:
            sizes.append(size)
    return sizes


def sweep_point(run: QueryRun, slots: int) -> SweepPoint:
    """The :class:`SweepPoint` of a :func:`~adabatch.deadline.spark.runner.run_in_batches` run."""
    batches = [j for j in run.jobs if j.kind in ("partial", "whole")]
    finals = [j for j in run.jobs if j.kind == "final"]
    return SweepPoint(
        slots=slots,
        batches=len(batches),
        tuples=tuple(j.tuples for j in batches),
        batch_seconds=tuple(j.seconds for j in batches),
        final_seconds=sum(j.seconds for j in finals),
        total_seconds=run.cost,
    )


def fit_models(
    sweep: Sequence[SweepPoint],
    segments: int = 2,
    small: Sequence[tuple[int, float]] = (),
) -> tuple[PiecewiseLinearCost, AggregationCost]:
    """Fit the batch cost (median seconds at each batch size, in tuples; ``small`` adds
    ``(tuples, seconds)`` samples of one-slot batches that anchor the per-batch overhead)
    and the final aggregation cost (seconds versus number of batches, sweeps of > 1 batch).
    """
    by_size: dict[int, list[float]] = {}
    for point in sweep:
        # batches of one sweep differ by at most a slot: one point at their median size
        key = int(statistics.median(point.tuples))
        by_size.setdefault(key, []).extend(point.batch_seconds)
    if small:
        key = int(statistics.median(t for t, _ in small))
        by_size.setdefault(key, []).extend(s for _, s in small)
    sizes = sorted(by_size)
    medians = [statistics.median(by_size[s]) for s in sizes]
    segments = max(1, min(segments, len(sizes) - 1))
    fitted = PiecewiseLinearCost.fit(sizes, medians, segments, relative=True)
    # Below the smallest measured batch the fit only extrapolates (often to a zero
    # overhead); price smaller batches like the smallest one, the per-batch overhead. A
    # least-squares line through batches of 0.1-4 s may pass below the small batches'
    # own median (CQ1 at SF 1: 0.027 s fitted, 0.057 s measured), and the last batch of
    # a tight deadline is such a batch: the model never prices one below its measurement.
    smallest = float(sizes[0])
    floor = max(fitted.cost(int(smallest)), medians[0])
    points = [(0.0, floor), (smallest, floor)]
    points += [(x, max(y, floor)) for x, y in fitted.breakpoints if x > smallest]
    if len(points) == 2 or points[-1][1] <= points[-2][1]:
        x = points[-1][0] + smallest
        points.append((x, max(fitted.cost(int(x)), points[-1][1] * (1 + 1e-3) + 1e-9)))
    cost = PiecewiseLinearCost(tuple(points))
    multi = [(p.batches, p.final_seconds) for p in sweep if p.batches > 1]
    if len({b for b, _ in multi}) >= 2:
        agg = AggregationCost.fit([b for b, _ in multi], [s for _, s in multi], segments=1)
    elif multi:
        # one measured point: a constant cost (a tiny slope keeps the model rising)
        seconds = max(s for _, s in multi)
        agg = AggregationCost(PiecewiseLinearCost(((0.0, seconds), (1e6, seconds + 1e-3))))
    else:
        agg = AggregationCost()
    return cost, agg


def refit(profile: CostProfile, segments: int = 2) -> CostProfile:
    """``profile`` with its models fitted again to its own measurements by this code (a
    resumed bench keeps measurements, not the models an earlier version fitted)."""
    cost, agg = fit_models(profile.sweep, segments, profile.small)
    return replace(profile, cost=cost, agg_cost=agg)


def profile_query(
    spark: SparkSession,
    manifest: Manifest,
    query: str,
    workdir: str | Path,
    *,
    sizes: Sequence[int] | None = None,
    segments: int = 2,
    warmup: int = 1,
    small_batches: int = 3,
    single_repeats: int = 3,
    on_point: Callable[[SweepPoint], None] | None = None,
    on_job: Callable[[SparkJob], None] | None = None,
) -> CostProfile:
    """Measure ``query`` on Spark at each batch size in ``sizes`` (slots; default
    :func:`default_sizes`) and fit its cost models (see the module docstring).

    ``warmup`` unmeasured runs of the query over two batches come first: the first jobs
    of a session pay for JIT compilation that later batches do not. The whole window in
    one batch (``D``, which sets the deadlines) runs ``single_repeats`` times, spread over
    the sweep, and its median counts. ``small_batches``
    one-slot batches measure the cost of the smallest batch (the per-batch overhead that
    a fit through large batches alone can miss).
    """
    qdef = get_query(query)
    n = len(manifest.slots)
    sizes = list(default_sizes(n) if sizes is None else sizes)
    bad = [s for s in sizes if isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= n]
    if bad or len(sizes) < 2:
        msg = (
            f"profile sizes = {sizes!r}: allowed at least two batch sizes in slots, "
            f"each from 1 to {n}"
        )
        raise AdabatchError(msg)
    workdir = Path(workdir)
    for i in range(warmup):
        run_in_batches(spark, manifest, qdef.name, 1 if n == 1 else 2, workdir / f"warmup-{i}")
    sweep = []
    order = sorted(set(sizes), reverse=True)
    if order[0] == n and single_repeats > 1:
        rest = order[1:]
        cuts = [round(i * len(rest) / (single_repeats - 1)) for i in range(single_repeats)]
        order = [n]
        for a, b in pairwise(cuts):
            order += [*rest[a:b], n]
    for size in order:
        batches = math.ceil(n / size)
        run = run_in_batches(
            spark, manifest, qdef.name, batches, workdir / f"size-{size}", on_job=on_job
        )
        point = sweep_point(run, size)
        sweep.append(point)
        if on_point is not None:
            on_point(point)
    small: list[tuple[int, float]] = []
    if small_batches > 0:
        ranges = [(i, i) for i in range(min(small_batches, n))]
        jobs = run_slot_batches(
            spark, manifest, qdef.name, ranges, workdir / "small", on_job=on_job
        )
        small = [(j.tuples, j.seconds) for j in jobs]
    cost, agg = fit_models(sweep, segments, small)
    return CostProfile(
        query=qdef.name,
        primary=qdef.primary,
        scale_factor=manifest.scale_factor,
        slots=n,
        total=manifest.total(qdef.primary),
        sweep=tuple(sweep),
        cost=cost,
        agg_cost=agg,
        small=tuple(small),
    )


def with_margin(model: QueryCost, factor: float) -> QueryCost:
    """``model`` with every cost multiplied by ``factor`` (planning slack for the noise
    of measured batch times; ``factor = 1`` returns ``model``)."""
    check_number(MARGIN, factor, "cost margin", text=False)
    if factor == 1.0:
        return model
    if isinstance(model, PiecewiseLinearCost):
        return PiecewiseLinearCost(tuple((x, y * factor) for x, y in model.breakpoints))
    if isinstance(model, LinearCost):
        return LinearCost(model.per_tuple * factor, model.overhead * factor)
    if isinstance(model, MonotoneCost) and model.expr is not None:
        return MonotoneCost(expr=f"{factor!r} * ({model.expr})")
    return MonotoneCost(fn=lambda n: factor * model.cost(int(n)))


def agg_with_margin(agg: AggregationCost, factor: float) -> AggregationCost:
    """The final-aggregation model with its costs multiplied by ``factor``."""
    model = None if agg.model is None else with_margin(agg.model, factor)
    return AggregationCost(model, agg.per_group * factor, agg.groups)
