"""The Spark runner: plans and the multi-query loop executed as Spark jobs in real time."""

from __future__ import annotations

import dataclasses

import pytest

from adabatch.deadline.core.cost import AggregationCost, LinearCost
from adabatch.deadline.core.schedule import Batch, QueryPlan
from adabatch.deadline.core.single import plan_single
from adabatch.deadline.core.spec import DeadlineScenario
from adabatch.deadline.spark import tpch
from adabatch.errors import AdabatchError

pytestmark = pytest.mark.spark

SLOTS = 8
RATE = 4.0  # slots per second: a window of 1.75 s


@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> tpch.Manifest:
    return tpch.prepare(tmp_path_factory.mktemp("tpch"), scale_factor=0.01, slots=SLOTS, rate=RATE)


@pytest.fixture(scope="module")
def spark():
    from adabatch.spark import get_spark

    return get_spark("local[2]", conf={"spark.ui.showConsoleProgress": "false"})


def test_run_in_batches_combines_to_duckdb(spark, manifest, tmp_path) -> None:
    from adabatch.deadline.spark.runner import run_in_batches

    run = run_in_batches(spark, manifest, "q4", 3, tmp_path, check=True)
    assert run.correct is True
    kinds = [j.kind for j in run.jobs]
    assert kinds == ["partial", "partial", "partial", "final"]
    covered = [s for j in run.jobs if j.slots for s in range(j.slots[0], j.slots[1] + 1)]
    assert covered == list(range(SLOTS))
    assert run.cost == pytest.approx(sum(j.seconds for j in run.jobs))
    lines = (tmp_path / "batches.jsonl").read_text().splitlines()
    assert len(lines) == 4


def test_run_single_follows_the_plan_in_real_time(spark, manifest, tmp_path) -> None:
    from adabatch.deadline.spark.runner import run_single, spec_for

    n = manifest.total("lineitem")
    spec = spec_for(
        manifest, "q12", deadline=manifest.window_end + 300.0, cost=LinearCost(1.0 / n, 0.5)
    )
    first = manifest.slots[2].offsets["lineitem"] + manifest.slots[2].tuples["lineitem"]
    plan = QueryPlan(
        query=spec.id,
        feasible=True,
        batches=(
            Batch(manifest.slots[2].arrival_s, first, 0.0, 0.0),
            Batch(manifest.window_end, n - first, 0.0, 0.0),
        ),
        cost=0.0,
        deadline=spec.deadline,
    )
    run = run_single(spark, manifest, spec, tmp_path, plan=plan)
    assert run.correct is True, run.differences
    assert run.met is True
    assert run.batches == 2
    partials = [j for j in run.jobs if j.kind == "partial"]
    assert [j.slots for j in partials] == [(0, 2), (3, SLOTS - 1)]
    # each batch starts at (not before) its planned time, after its slots have landed
    assert partials[0].start >= manifest.slots[2].arrival_s - 1e-6
    assert partials[1].start >= manifest.window_end - 1e-6
    assert partials[1].start >= partials[0].end - 1e-6
    assert run.jobs[-1].kind == "final"
    # completion is read off the clock just after the final job's own end
    assert run.jobs[-1].end - 1e-6 <= run.completion <= run.jobs[-1].end + 0.5
    assert (tmp_path / "run.json").is_file()


def test_function1_plan_runs_on_spark(spark, manifest, tmp_path) -> None:
    from adabatch.deadline.spark.runner import run_single, spec_for

    n = manifest.total("orders")
    spec = spec_for(
        manifest,
        "cq2",
        deadline=manifest.window_end + 1.6,
        cost=LinearCost(1.5 / n, 0.4),
        agg_cost=AggregationCost(LinearCost(0.05, 0.3)),
    )
    plan = plan_single(spec)
    assert plan.feasible and plan.num_batches >= 2
    run = run_single(spark, manifest, spec, tmp_path, plan=plan)
    assert run.correct is True, run.differences
    # slots are indivisible: a batch ending inside a slot takes the slot, so Spark may
    # run fewer batches than planned, never more, and reads every slot exactly once
    assert 1 <= run.batches <= plan.num_batches
    covered = [s for j in run.jobs if j.slots for s in range(j.slots[0], j.slots[1] + 1)]
    assert covered == list(range(SLOTS))
    assert run.planned_cost == pytest.approx(plan.cost)


def test_infeasible_deadline_fails_before_running(spark, manifest, tmp_path) -> None:
    from adabatch.deadline.spark.runner import run_single, spec_for

    n = manifest.total("lineitem")
    spec = spec_for(
        manifest, "q6", deadline=manifest.window_end + 0.1, cost=LinearCost(2.0 / n, 0.5)
    )
    with pytest.raises(AdabatchError, match=r"infeasible before running.*earliest achievable"):
        run_single(spark, manifest, spec, tmp_path)
    assert not (tmp_path / "batches.jsonl").exists()


def test_spec_must_describe_the_landing_data(spark, manifest, tmp_path) -> None:
    from adabatch.deadline.core.spec import query_spec
    from adabatch.deadline.spark.runner import run_single

    spec = query_spec(
        "q6",
        query="q6",
        window_start=0.0,
        window_end=manifest.window_end,
        deadline=manifest.window_end + 10,
        rate=1000.0,
        cost=LinearCost(1e-4, 0.5),
    )
    with pytest.raises(AdabatchError, match="landing data holds"):
        run_single(spark, manifest, spec, tmp_path)
    nameless = dataclasses.replace(spec, query=None)
    with pytest.raises(AdabatchError, match="names no query to run on Spark"):
        run_single(spark, manifest, nameless, tmp_path)


def test_missing_input_files_are_a_clear_error(spark, manifest, tmp_path) -> None:
    from adabatch.deadline.spark.executor import SparkExecutor
    from adabatch.deadline.spark.runner import spec_for

    spec = spec_for(manifest, "q6", deadline=10.0, cost=LinearCost(1e-6, 0.5))
    clock = tpch.StreamClock.starting_now(manifest.window_start)
    feeder = tpch.Feeder(manifest, clock)
    feeder.reset()
    feeder.release_until(manifest.slots[1].arrival_s)  # slots 0 and 1 only
    executor = SparkExecutor(spark, manifest, [spec], tmp_path, clock)
    upto = manifest.slots[3].offsets["lineitem"]
    with pytest.raises(AdabatchError, match=r"slot-00002\.parquet.* missing from the landing"):
        executor.run_batch(spec.id, 0, upto, executor.now())
    feeder.reset()


def test_lost_staged_file_stops_the_run(spark, manifest, tmp_path) -> None:
    from adabatch.deadline.spark.runner import run_single, spec_for

    n = manifest.total("lineitem")
    spec = spec_for(
        manifest, "q6", deadline=manifest.window_end + 60.0, cost=LinearCost(1.0 / n, 0.5)
    )
    one = QueryPlan(
        query=spec.id,
        feasible=True,
        batches=(Batch(manifest.window_end, n, 0.0, 0.0),),
        cost=0.0,
        deadline=spec.deadline,
    )
    staged = manifest.staging_path(manifest.slots[5], "lineitem")
    tpch.Feeder(manifest, tpch.StreamClock.starting_now(0.0)).reset()
    aside = tmp_path / "aside.parquet"
    staged.rename(aside)
    try:
        with pytest.raises(AdabatchError, match=r"slot 5 file .* missing from staging"):
            run_single(spark, manifest, spec, tmp_path / "run", plan=one, check=False)
    finally:
        tpch.Feeder(manifest, tpch.StreamClock.starting_now(0.0)).reset()
        aside.rename(staged)


def test_multi_query_loop_on_spark(spark, manifest, tmp_path) -> None:
    from adabatch.deadline.spark.runner import run_multi, spec_for

    specs = []
    for name, stream in (("cq1", "orders"), ("q14", "lineitem")):
        n = manifest.total(stream)
        specs.append(
            spec_for(
                manifest,
                name,
                deadline=manifest.window_end + 120.0,
                cost=LinearCost(2.0 / n, 0.5),
                agg_cost=AggregationCost(LinearCost(0.05, 0.3)),
            )
        )
    result, runs = run_multi(
        spark, manifest, DeadlineScenario(tuple(specs), strategy="edf"), tmp_path
    )
    assert result.all_met
    assert [r.correct for r in runs] == [True, True]
    for r in runs:
        covered = [s for j in r.jobs if j.slots for s in range(j.slots[0], j.slots[1] + 1)]
        assert covered == list(range(SLOTS))
    # MinBatchSize (δ_RSF = 0.5) splits each window into several batches
    assert all(o.batches >= 2 for o in result.outcomes)
