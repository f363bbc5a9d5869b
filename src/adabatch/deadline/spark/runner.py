"""The Spark runner: the Custom Query Scheduler's schedules on Spark (paper Sec. 6.1).

The single-query plans (Sec. 3, :func:`run_single`) and the multi-query loop (Sec. 4,
:func:`run_multi`) run unchanged on the TPC-H landing data of
:mod:`adabatch.deadline.spark.tpch` through the
:class:`~adabatch.deadline.spark.executor.SparkExecutor` while the input lands in real
time; each answer is compared with DuckDB's. :func:`run_in_batches` and
:func:`run_slot_batches` measure batch costs on landed data for the cost profiles.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adabatch.deadline.core.cost import NO_AGG, AggregationCost, LinearCost, QueryCost
from adabatch.deadline.core.executor import PlanRun, run_plan
from adabatch.deadline.core.multi import MultiQueryScheduler, MultiResult
from adabatch.deadline.core.numbers import check_number
from adabatch.deadline.core.schedule import QueryPlan
from adabatch.deadline.core.single import plan_single
from adabatch.deadline.core.spec import DeadlineScenario, QuerySpec, query_spec
from adabatch.deadline.spark.executor import SparkExecutor, SparkJob, check_spec
from adabatch.deadline.spark.jobs import CheckedAnswer, reference_answer
from adabatch.deadline.spark.queries import get_query
from adabatch.deadline.spark.tpch import Feeder, Manifest, StreamClock
from adabatch.errors import AdabatchError
from adabatch.outputs import dumps_json, write_atomic
from adabatch.params import Param

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_CONF = {
    "spark.ui.showConsoleProgress": "false",
    # Adaptive query execution re-plans every job at run time; for the jobs of a few
    # hundred milliseconds this scheduler runs on local[2] that costs more than it saves
    # (CQ4's final aggregation at SF 0.5: 0.55 s with it, 0.37 s without), and
    # the final aggregation's cost is what bounds the tightest deadlines. Every deadline
    # command (profile, run, baseline, bench) uses the same settings, so the fitted cost
    # models and the Structured Streaming baseline see the same engine.
    "spark.sql.adaptive.enabled": "false",
    # Spark's default 1 GiB driver heap (the only JVM in local mode) ran out in the SF 1
    # bench's Structured Streaming Q3 (stream-stream join state) and took the bench down
    # with it. Applies when this conf starts the JVM.
    "spark.driver.memory": "8g",
}
"""The Spark settings of every deadline command (comments say why each)."""


def spec_for(
    manifest: Manifest,
    query: str,
    *,
    deadline: float,
    cost: QueryCost,
    agg_cost: AggregationCost = NO_AGG,
    id: str | None = None,
) -> QuerySpec:
    """The :class:`QuerySpec` of ``query`` over the landing data: its window is the
    manifest's, its arrivals the slots' tuples of the query's primary stream."""
    qdef = get_query(query)
    return query_spec(
        id if id is not None else qdef.name,
        query=qdef.name,
        inputs=qdef.streams,
        window_start=manifest.window_start,
        window_end=manifest.window_end,
        deadline=deadline,
        rate=manifest.arrivals(qdef.primary),
        cost=cost,
        agg_cost=agg_cost,
    )


@dataclass(frozen=True)
class QueryRun(CheckedAnswer):
    """One query's outcome on Spark: schedule, measured cost, deadline and answer."""

    query: str
    name: str
    deadline: float
    completion: float | None
    met: bool
    batches: int
    cost: float
    planned_cost: float | None
    answer: list[tuple[Any, ...]] | None
    differences: list[str] | None
    jobs: tuple[SparkJob, ...]
    plan: QueryPlan | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "name": self.name,
            "deadline": self.deadline,
            "completion": self.completion,
            "met": self.met,
            "batches": self.batches,
            "cost": self.cost,
            "planned_cost": self.planned_cost,
            **self.answer_json(),
            "plan": None if self.plan is None else self.plan.to_json(),
            "jobs": [j.to_json() for j in self.jobs],
        }


def _references(manifest: Manifest, specs: Sequence[QuerySpec], check: bool) -> dict[str, Any]:
    if not check:
        return {}
    return {s.id: reference_answer(manifest, get_query(s.query)) for s in specs}


def _start(
    spark: SparkSession,
    manifest: Manifest,
    specs: Sequence[QuerySpec],
    workdir: Path,
    time_scale: float,
    lead_s: float,
    on_job: Callable[[SparkJob], None] | None,
) -> tuple[SparkExecutor, Feeder]:
    clock = StreamClock(manifest.window_start, time.monotonic() + lead_s, time_scale)
    feeder = Feeder(manifest, clock)
    feeder.reset()
    executor = SparkExecutor(spark, manifest, specs, workdir, clock, feeder=feeder, on_job=on_job)
    feeder.start()
    return executor, feeder


def run_single(
    spark: SparkSession,
    manifest: Manifest,
    spec: QuerySpec,
    workdir: str | Path,
    *,
    plan: QueryPlan | None = None,
    time_scale: float = 1.0,
    check: bool = True,
    lead_s: float = 1.0,
    on_job: Callable[[SparkJob], None] | None = None,
) -> QueryRun:
    """Plan ``spec`` with Function 1, ahead (the least-cost plan that completes first; or
    run the given ``plan``) and execute it on Spark in real time while the landing data
    arrives; compare the answer with DuckDB's.

    Infeasible specs fail before anything runs, naming the earliest achievable completion.
    """
    workdir = Path(workdir)
    check_spec(manifest, spec)
    if plan is None:
        plan = plan_single(spec, ahead=True)
    if not plan.feasible:
        msg = f"query {spec.id!r} is infeasible before running: {plan.reason}"
        raise AdabatchError(msg)
    references = _references(manifest, [spec], check)
    executor, feeder = _start(spark, manifest, [spec], workdir, time_scale, lead_s, on_job)
    try:
        outcome: PlanRun = run_plan(plan, executor)
    finally:
        feeder.stop()
    answer = executor.answer(spec.id)
    diffs = executor.differences(spec.id, references[spec.id]) if check else None
    run = QueryRun(
        query=spec.id,
        name=spec.query,
        deadline=spec.deadline,
        completion=outcome.completion,
        met=outcome.met,
        batches=executor.spark_batches(spec.id),
        cost=sum(j.seconds for j in executor.jobs),
        planned_cost=plan.cost,
        answer=answer,
        differences=diffs,
        jobs=tuple(executor.jobs),
        plan=plan,
    )
    write_atomic(workdir / "run.json", (dumps_json(run.to_json(), indent=1) + "\n").encode())
    return run


def run_multi(
    spark: SparkSession,
    manifest: Manifest,
    scenario: DeadlineScenario,
    workdir: str | Path,
    *,
    time_scale: float = 1.0,
    check: bool = True,
    lead_s: float = 1.0,
    on_job: Callable[[SparkJob], None] | None = None,
) -> tuple[MultiResult, list[QueryRun]]:
    """Run a multi-query scenario (Sec. 4) with the scheduling loop on Spark."""
    workdir = Path(workdir)
    for spec in scenario.queries:
        check_spec(manifest, spec)
    references = _references(manifest, scenario.queries, check)
    scheduler = MultiQueryScheduler.for_scenario(scenario)
    executor, feeder = _start(
        spark, manifest, scenario.queries, workdir, time_scale, lead_s, on_job
    )
    try:
        result = scheduler.run(executor)
    finally:
        feeder.stop()
    runs = []
    outcomes = {o.query: o for o in result.outcomes}
    for spec in scenario.queries:
        o = outcomes.get(spec.id)
        answer = executor.answer(spec.id)
        diffs = None
        if check and o is not None and not o.removed:
            diffs = executor.differences(spec.id, references[spec.id])
        jobs = tuple(j for j in executor.jobs if j.query == spec.id)
        runs.append(
            QueryRun(
                query=spec.id,
                name=spec.query,
                deadline=spec.deadline,
                completion=None if o is None else o.completion,
                met=False if o is None else o.met,
                batches=executor.spark_batches(spec.id),
                cost=sum(j.seconds for j in jobs),
                planned_cost=None,
                answer=answer,
                differences=diffs,
                jobs=jobs,
            )
        )
    payload = {"result": result.to_json(), "queries": [r.to_json() for r in runs]}
    write_atomic(workdir / "run.json", (dumps_json(payload, indent=1) + "\n").encode())
    return result, runs


def _landed_executor(
    spark: SparkSession,
    manifest: Manifest,
    query: str,
    workdir: str | Path,
    on_job: Callable[[SparkJob], None] | None,
) -> tuple[SparkExecutor, QuerySpec]:
    """An executor over fully landed data, for runs that follow no plan."""
    qdef = get_query(query)
    clock = StreamClock.starting_now(manifest.window_start)
    Feeder(manifest, clock).release_until(math.inf)
    # no plan is followed, so the cost model is never consulted
    spec = spec_for(manifest, qdef.name, deadline=manifest.window_end + 1.0, cost=LinearCost(1e-9))
    return SparkExecutor(spark, manifest, [spec], workdir, clock, on_job=on_job), spec


def _run_slot_range(executor: SparkExecutor, spec: QuerySpec, first: int, last: int) -> float:
    primary = get_query(spec.query).primary
    slots = executor.manifest.slots
    offset = slots[first].offsets[primary]
    end = slots[last].offsets[primary] + slots[last].tuples[primary]
    return executor.run_batch(spec.id, offset, end - offset, executor.now())


def run_in_batches(
    spark: SparkSession,
    manifest: Manifest,
    query: str,
    batches: int,
    workdir: str | Path,
    *,
    check: bool = False,
    on_job: Callable[[SparkJob], None] | None = None,
) -> QueryRun:
    """Cost versus number of batches (paper Sec. 7.2, Fig. 4): all input has landed, the
    query runs back to back in ``batches`` batches of equally many slots, then the final
    aggregation. No deadline; ``met`` is true."""
    qdef = get_query(query)
    n = len(manifest.slots)
    check_number(Param("batches", None, "batches", kind=int, low=1, high=n), batches, text=False)
    executor, spec = _landed_executor(spark, manifest, qdef.name, workdir, on_job)
    bounds = [round(i * n / batches) for i in range(batches + 1)]
    for i in range(batches):
        _run_slot_range(executor, spec, bounds[i], bounds[i + 1] - 1)
    if batches > 1:
        executor.run_final(spec.id, batches, executor.now())
    answer = executor.answer(spec.id)
    diffs = executor.differences(spec.id, reference_answer(manifest, qdef)) if check else None
    return QueryRun(
        query=spec.id,
        name=qdef.name,
        deadline=math.inf,
        completion=executor.now(),
        met=True,
        batches=executor.spark_batches(spec.id),
        cost=sum(j.seconds for j in executor.jobs),
        planned_cost=None,
        answer=answer,
        differences=diffs,
        jobs=tuple(executor.jobs),
    )


def run_slot_batches(
    spark: SparkSession,
    manifest: Manifest,
    query: str,
    ranges: Sequence[tuple[int, int]],
    workdir: str | Path,
    *,
    on_job: Callable[[SparkJob], None] | None = None,
) -> list[SparkJob]:
    """Partial-aggregation jobs over the given inclusive slot ranges (increasing, not
    overlapping), on landed data, without a final aggregation: cost samples of small
    batches for the profile."""
    executor, spec = _landed_executor(spark, manifest, query, workdir, on_job)
    previous = -1
    for first, last in ranges:
        if not previous < first <= last < len(manifest.slots):
            msg = (
                f"slot range ({first}, {last}): allowed increasing, non-overlapping ranges "
                f"within 0..{len(manifest.slots) - 1}"
            )
            raise AdabatchError(msg)
        _run_slot_range(executor, spec, first, last)
        previous = last
    return list(executor.jobs)
