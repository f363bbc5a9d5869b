"""The simulated mode: multi-query scenarios priced by their cost models (paper Sec. 7.4).

:class:`SimulatedExecutor` implements the executor interface on a virtual clock: input
arrives by each query's actual arrival model, a batch costs what its cost model says
(optionally with seeded multiplicative noise), and time jumps instead of passing, so a
4500-second scenario (Fig. 7-11) runs in well under a second.

:func:`generate_scenario` draws random scenarios the way Sec. 7.4 does: random window
starts, window ends from rate and total, and deadlines ``windEnd + δ·minCompCost + C_max``
staggered after the previous query's deadline when windows overlap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from adabatch.deadline.core.cost import AggregationCost, LinearCost
from adabatch.deadline.core.executor import query_entry
from adabatch.deadline.core.feasibility import Feasibility, check_feasibility
from adabatch.deadline.core.multi import MultiQueryScheduler, MultiResult
from adabatch.deadline.core.numbers import check_number
from adabatch.deadline.core.spec import STRATEGIES, DeadlineScenario, QuerySpec, query_spec
from adabatch.params import Param

NOISE = Param("noise", 0.0, "a finite number", low=0.0)
"""Standard deviation of the lognormal factor on every simulated cost (0 = exact)."""
N_QUERIES = Param("n_queries", 12, "queries", kind=int, low=1)
DELTA = Param("delta", 1.0, "a finite number", low=0.0, low_open=True)
"""The deadline factor δ of Sec. 7.4 (1 = 1D: deadline one single-batch cost after C_max)."""
STAGGER_C_MAX = Param("c_max", 30.0, "a finite number of seconds", low=0.0)


class SimulatedExecutor:
    """Executor on a virtual clock; batch cost = cost model (times ``noise`` factor).

    ``noise`` is the standard deviation of a multiplicative lognormal factor on every
    batch and final aggregation (0 = exact models), drawn from ``seed``.
    """

    def __init__(
        self,
        specs: Sequence[QuerySpec],
        start: float | None = None,
        noise: float = 0.0,
        seed: int = 0,
    ) -> None:
        self._specs = {s.id: s for s in specs}
        if start is None:
            start = min((s.added_at for s in specs), default=0.0)  # type: ignore[type-var]
        self._now = float(start)  # type: ignore[arg-type]
        self._noise = check_number(NOISE, noise, text=False)
        self._rng = np.random.default_rng(seed)

    def _spec(self, query_id: str) -> QuerySpec:
        return query_entry(self._specs, query_id)

    def _factor(self) -> float:
        if self._noise == 0.0:
            return 1.0
        return float(self._rng.lognormal(0.0, self._noise))

    def now(self) -> float:
        return self._now

    def wait_until(self, t: float) -> None:
        self._now = max(self._now, t)

    def available(self, query_id: str, at: float) -> int:
        return self._spec(query_id).actual_arrivals.arrived(at)

    def arrival_time(self, query_id: str, n: int) -> float | None:
        return self._spec(query_id).actual_arrivals.input_time(n)

    def run_batch(self, query_id: str, offset: int, tuples: int, at: float) -> float:
        seconds = self._spec(query_id).cost.cost(tuples) * self._factor()
        self._now = max(self._now, at) + seconds
        return seconds

    def run_final(self, query_id: str, batches: int, at: float) -> float:
        seconds = self._spec(query_id).agg_cost.cost(batches) * self._factor()
        self._now = max(self._now, at) + seconds
        return seconds


def simulate_schedule(
    scenario: DeadlineScenario,
    *,
    strategy: str | None = None,
    noise: float = 0.0,
    seed: int = 0,
) -> MultiResult:
    """Run ``scenario`` in simulation with its (or the given) strategy."""
    if strategy is not None:
        scenario = replace(scenario, strategy=strategy)
    scheduler = MultiQueryScheduler.for_scenario(scenario)
    return scheduler.run(SimulatedExecutor(scenario.queries, noise=noise, seed=seed))


@dataclass(frozen=True)
class Comparison:
    """One scenario under several strategies, with its schedulability verdict."""

    feasibility: Feasibility
    results: dict[str, MultiResult]

    def to_json(self) -> dict[str, Any]:
        return {
            "feasibility": self.feasibility.to_json(),
            "results": {k: v.to_json() for k, v in self.results.items()},
        }


def compare(
    scenario: DeadlineScenario,
    strategies: Sequence[str] = STRATEGIES,
    *,
    min_batch: bool | None = None,
    noise: float = 0.0,
    seed: int = 0,
) -> Comparison:
    """Simulate ``scenario`` under each strategy (the paper's Fig. 7 bars)."""
    if min_batch is not None:
        scenario = replace(scenario, min_batch=min_batch)
    feasibility = check_feasibility(scenario.queries, scenario.rsf, scenario.c_max)
    results = {
        s: simulate_schedule(scenario, strategy=s, noise=noise, seed=seed) for s in strategies
    }
    return Comparison(feasibility, results)


def generate_scenario(
    n_queries: int,
    delta: float,
    *,
    seed: int,
    rsf: float = 0.5,
    c_max: float = 30.0,
    strategy: str = "llf",
    same_window: bool = False,
    duration: tuple[float, float] = (600.0, 4500.0),
    rate: tuple[float, float] = (1.0, 10.0),
    per_tuple: tuple[float, float] = (0.0005, 0.01),
    overhead: tuple[float, float] = (0.5, 5.0),
    agg_per_batch: tuple[float, float] = (0.0, 0.2),
) -> DeadlineScenario:
    """A random scenario in the style of Sec. 7.4.

    Each query gets a linear cost model and a linear final-aggregation cost (per batch),
    a rate and a window length drawn uniformly from the given ranges, a random window start
    (or one shared window when ``same_window``), and the deadlines of
    :func:`paper_deadlines`. Deterministic for ``seed``.
    """
    check_number(N_QUERIES, n_queries, text=False)
    check_number(DELTA, delta, text=False)
    rng = np.random.default_rng(seed)
    shared_start = float(rng.uniform(0.0, 1000.0))
    shared_len = float(rng.uniform(*duration))
    drafts = []
    for i in range(n_queries):
        r = float(rng.uniform(*rate))
        length = shared_len if same_window else float(rng.uniform(*duration))
        start = shared_start if same_window else float(rng.uniform(0.0, 1000.0))
        total = math.floor(length * r) + 1
        cost = LinearCost(float(rng.uniform(*per_tuple)), float(rng.uniform(*overhead)))
        agg = AggregationCost(LinearCost(max(float(rng.uniform(*agg_per_batch)), 1e-9)))
        drafts.append((f"q{i + 1}", start, start + (total - 1) / r, r, total, cost, agg))
    queries = [
        query_spec(
            qid,
            window_start=start,
            window_end=end,
            deadline=end,  # replaced by paper_deadlines
            rate=r,
            total=total,
            cost=cost,
            agg_cost=agg,
        )
        for qid, start, end, r, total, cost, agg in drafts
    ]
    queries = paper_deadlines(queries, delta, c_max)
    return DeadlineScenario(tuple(queries), strategy=strategy, rsf=rsf, c_max=c_max)


def paper_deadlines(specs: Sequence[QuerySpec], delta: float, c_max: float) -> list[QuerySpec]:
    """The specs with the deadlines of Sec. 7.4, in window-end order.

    The first query is due at ``windEnd + δ·minCompCost + C_max``; each next one at the
    same if its window ends after the previous deadline, else at ``previous deadline +
    δ·minCompCost`` (staggered, so overlapping queries have room to finish).
    """
    check_number(DELTA, delta, text=False)
    check_number(STAGGER_C_MAX, c_max, text=False)
    out = []
    previous = -math.inf
    for spec in sorted(specs, key=lambda q: (q.window_end, q.id)):
        single = spec.single_batch_cost
        if spec.window_end > previous:
            deadline = spec.window_end + delta * single + c_max
        else:
            deadline = previous + delta * single
        previous = deadline
        out.append(replace(spec, deadline=deadline))
    return out


def result_table(result: MultiResult) -> list[str]:
    """Plain-text lines: one per query, then the totals."""
    lines = [
        f"strategy {result.strategy}  rsf {result.rsf:g}  c_max {result.c_max:g}  "
        f"min-batch {'on' if result.min_batch else 'off'}"
        + (f"  time-trigger {result.time_trigger}" if result.min_batch else ""),
        f"{'query':<12} {'deadline':>10} {'completion':>11} {'met':>4} {'batches':>8} "
        f"{'minbatch':>9} {'cost_s':>9} {'single_s':>9}",
    ]
    for o in result.outcomes:
        completion = "removed" if o.removed else f"{o.completion:.2f}"
        mb = (
            "-" if o.min_batch is None else f"{o.min_batch.size}{'*' if o.min_batch.capped else ''}"
        )
        lines.append(
            f"{o.query:<12} {o.deadline:>10.2f} {completion:>11} {'yes' if o.met else 'NO':>4} "
            f"{o.batches:>8} {mb:>9} {o.cost:>9.2f} {o.single_batch_cost:>9.2f}"
        )
    if any(o.min_batch is not None and o.min_batch.capped for o in result.outcomes):
        lines.append("* MinBatch capped by c_max: smaller than rsf allows, so it costs more")
    lines.append(
        f"total: cost {result.total_cost:.2f} s over {result.batches} batches; single-batch "
        f"sum {result.single_batch_cost:.2f} s; normalised {result.normalised_cost:.3f}; "
        f"deadlines {'all met' if result.all_met else 'missed by ' + ', '.join(result.missed)}"
    )
    return lines
