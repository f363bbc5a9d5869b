"""Single-query planning (Sec. 3.1): the paper's worked cases, slack start, final
aggregation, infeasibility with the earliest completion, and validity on random specs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from adabatch.deadline.core.arrival import TraceArrival
from adabatch.deadline.core.cost import (
    AggregationCost,
    LinearCost,
    MonotoneCost,
    PiecewiseLinearCost,
)
from adabatch.deadline.core.executor import run_plan
from adabatch.deadline.core.simulate import SimulatedExecutor
from adabatch.deadline.core.single import (
    AHEAD_COST_TOL,
    earliest_completion,
    plan_problems,
    plan_single,
    schedule_without_agg_cost,
)
from adabatch.deadline.core.spec import QuerySpec, query_spec


def paper_case(deadline: float, **kw) -> QuerySpec:  # type: ignore[no-untyped-def]
    """Sec. 3.1: 1 tuple/s over [1, 10], 2 tuples per time unit, no aggregation cost."""
    return query_spec(
        f"d{deadline:g}",
        window_start=1,
        window_end=10,
        deadline=deadline,
        rate=1.0,
        **{"cost": LinearCost(per_tuple=0.5), **kw},
    )


@pytest.mark.parametrize(
    ("deadline", "sizes", "spans"),
    [
        (16, [10], [(11, 16)]),  # Case 1: positive slack, starts at deadline - minCompCost
        (15, [10], [(10, 15)]),  # Case 2: zero slack, starts at the window end
        (12, [6, 4], [(7, 10), (10, 12)]),  # Case 3
        (11, [4, 4, 2], [(6, 8), (8, 10), (10, 11)]),  # Case 4
    ],
)
def test_the_papers_four_cases(deadline: float, sizes: list[int], spans: list) -> None:
    spec = paper_case(deadline)
    plan = plan_single(spec)
    assert plan.feasible
    assert plan.sizes == sizes
    assert [(b.start, b.end) for b in plan.batches] == spans
    assert plan.cost == 5.0  # no overhead: any batching costs the same 10 x 0.5 s
    assert plan.completion == deadline
    assert plan_problems(spec, plan) == []


def test_function_1_directly_on_case_4() -> None:
    spec = paper_case(11)
    batches, reason = schedule_without_agg_cost(spec.arrivals, spec.cost, 10.0, 11.0)
    assert reason == ""
    assert [b.tuples for b in batches] == [4, 4, 2]


def test_infeasible_deadline_reports_the_earliest_completion() -> None:
    plan = plan_single(paper_case(10.3))
    assert not plan.feasible
    assert plan.batches == ()
    assert plan.earliest_completion == 10.5  # one tuple (0.5 s) after the window end
    assert "10.5" in plan.reason and "10.3" in plan.reason
    at_earliest = plan_single(paper_case(10.5))
    assert at_earliest.feasible and at_earliest.sizes == [3, 4, 2, 1]
    assert plan_problems(paper_case(10.5), at_earliest) == []


def test_deadline_before_window_end_is_infeasible() -> None:
    plan = plan_single(paper_case(9.0))
    assert not plan.feasible
    assert plan.earliest_completion == 10.5
    assert "before the window end" in plan.reason


def test_final_aggregation_cost_moves_the_last_batch_deadline() -> None:
    # agg(k) = 0.5 k for k >= 2 (eq. 4: the last batch must end by deadline - agg)
    agg = AggregationCost(LinearCost(per_tuple=0.5))
    spec = paper_case(12.5, agg_cost=agg)
    plan = plan_single(spec)
    # k = 2 assumes 1.0 s: Function 1 then needs 1 + 6 + 3 = three batches (1.5 s) > 1.0;
    # k = 3 assumes 1.5 s: the last batch ends by 11, giving Case 4's 4 + 4 + 2.
    assert plan.feasible
    assert plan.sizes == [4, 4, 2]
    assert plan.agg_cost == 1.5
    assert plan.completion == 12.5
    assert plan.cost == 6.5
    assert plan_problems(spec, plan) == []
    # with a deadline of 12 the growing aggregation cost never catches up
    tight = plan_single(paper_case(12, agg_cost=agg))
    assert not tight.feasible
    assert tight.earliest_completion == 12.5


def test_earliest_completion_is_tight() -> None:
    spec = query_spec(
        "t", window_start=0, window_end=100, deadline=0, rate=10.0,
        cost=LinearCost(0.02, 0.7), agg_cost=AggregationCost(LinearCost(0.3)),
    )  # fmt: skip
    earliest = earliest_completion(spec)
    assert plan_single(dataclasses.replace(spec, deadline=earliest)).feasible
    assert not plan_single(dataclasses.replace(spec, deadline=earliest - 1e-3)).feasible


def test_slack_start_is_the_latest_possible() -> None:
    plan = plan_single(paper_case(30))
    assert plan.batches[0].start == 25.0  # eq. 3: deadline - minCompCost


def random_specs(seed: int, count: int) -> list[QuerySpec]:
    """Random queries over every cost model and arrival kind."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        start = float(rng.uniform(0, 100))
        length = float(rng.uniform(10, 500))
        kind = i % 4
        if kind == 0:
            cost = LinearCost(float(rng.uniform(0.001, 0.05)), float(rng.uniform(0, 3)))
        elif kind == 1:
            a, b = float(rng.uniform(0, 2)), float(rng.uniform(0.01, 0.05))
            cost = PiecewiseLinearCost(((0, a), (200, a + 200 * b), (2000, a + 200 * b + 900 * b)))
        elif kind == 2:
            cost = MonotoneCost(
                expr=f"{rng.uniform(0, 2):.3f} + {rng.uniform(0.01, 0.1):.4f} * n ** 0.85"
            )
        else:
            cost = LinearCost(float(rng.uniform(0.001, 0.05)), float(rng.uniform(0, 3)))
        agg = AggregationCost(LinearCost(float(rng.uniform(0.01, 0.5))))
        if kind == 3:
            times = np.sort(rng.uniform(start, start + length, size=40))
            times[0], times[-1] = start, start + length
            counts = rng.integers(1, 30, size=40)
            rate = TraceArrival(
                tuple(np.unique(times)), tuple(int(c) for c in counts[: len(np.unique(times))])
            )
        else:
            rate = float(rng.uniform(0.5, 8))
        spec = query_spec(
            f"r{i}", window_start=start, window_end=start + length, deadline=0.0, rate=rate,
            cost=cost, agg_cost=agg,
        )  # fmt: skip
        single = spec.single_batch_cost
        deadline = start + length + float(rng.uniform(0.02, 1.2)) * single
        out.append(dataclasses.replace(spec, deadline=deadline))
    return out


def test_plans_are_valid_or_provably_infeasible_on_random_specs() -> None:
    feasible = infeasible = 0
    for spec in random_specs(seed=11, count=80):
        plan = plan_single(spec)
        if plan.feasible:
            feasible += 1
            assert plan_problems(spec, plan) == [], spec.describe()
            # no batching beats one batch after the window end
            assert plan.cost >= spec.single_batch_cost - 1e-9
        else:
            infeasible += 1
            assert plan.earliest_completion is not None
            assert plan.earliest_completion > spec.deadline
            relaxed = dataclasses.replace(spec, deadline=plan.earliest_completion)
            assert plan_single(relaxed).feasible
    assert feasible >= 30 and infeasible >= 5, (feasible, infeasible)


def test_tighter_deadlines_never_need_fewer_batches() -> None:
    spec = random_specs(seed=3, count=1)[0]
    one_d = spec.window_end + spec.single_batch_cost
    counts = []
    for fraction in (1.0, 0.8, 0.6, 0.4, 0.2, 0.1):
        deadline = spec.window_end + fraction * (one_d - spec.window_end)
        plan = plan_single(dataclasses.replace(spec, deadline=deadline))
        counts.append(plan.num_batches if plan.feasible else 10**9)
    assert counts == sorted(counts)
    assert counts[0] == 1


def test_a_plan_runs_on_the_simulated_executor_and_meets_its_deadline() -> None:
    spec = paper_case(11, agg_cost=AggregationCost(LinearCost(0.05)))
    plan = plan_single(spec)
    result = run_plan(plan, SimulatedExecutor([spec]))
    assert result.met
    assert [r.tuples for r in result.runs] == [*plan.sizes, 0]
    assert [r.offset for r in result.runs[:-1]] == plan.offsets()
    assert result.cost == pytest.approx(plan.cost)
    # early starts finish no later than the plan; planned starts finish exactly on it
    assert result.completion <= plan.completion + 1e-9
    planned = run_plan(plan, SimulatedExecutor([spec]), early=False)
    assert planned.completion == pytest.approx(plan.completion)
    assert [r.start for r in planned.runs[:-1]] == pytest.approx([b.start for b in plan.batches])


class _SlowFirstBatch(SimulatedExecutor):
    """Simulated executor whose ``which``-th batch (first by default) costs ``factor``
    times its model."""

    def __init__(self, specs, factor: float, which: int = 1) -> None:
        super().__init__(specs)
        self.factor, self.which, self.batches = factor, which, 0

    def run_batch(self, query_id: str, offset: int, tuples: int, at: float) -> float:
        self.batches += 1
        seconds = super().run_batch(query_id, offset, tuples, at)
        if self.batches == self.which:
            extra = (self.factor - 1.0) * seconds
            self._now += extra
            seconds += extra
        return seconds


def test_early_start_absorbs_a_first_batch_that_overruns_its_model() -> None:
    # deadline 12: batches 6 + 4 (the paper's third case), the first planned over [7, 10]
    # although its 6 tuples have all arrived earlier; 20% over its model it ends at 10.6
    spec = paper_case(12)
    plan = plan_single(spec)
    assert plan.sizes == [6, 4]
    arrived = SimulatedExecutor([spec]).arrival_time(spec.id, 6)
    assert arrived is not None and arrived < plan.batches[0].start
    late = run_plan(plan, _SlowFirstBatch([spec], factor=1.2), early=False)
    early = run_plan(plan, _SlowFirstBatch([spec], factor=1.2))
    assert not late.met and late.completion == pytest.approx(12.6)
    assert early.met and early.completion == pytest.approx(12.0)
    assert early.runs[0].start == pytest.approx(arrived)
    assert early.cost == pytest.approx(late.cost)  # the same batches: only the slack moved


def test_planning_ahead_keeps_the_cost_and_moves_the_slack_to_the_end() -> None:
    # 0.1 s per batch: Function 1 fills the batch after the window end up to the deadline
    # (3 + 7 tuples, the last over [10.4, 14]); ahead, the same two batches split 6 + 4
    # end at 12.1, and a last batch 30% over its model still meets the deadline
    spec = paper_case(14, cost=LinearCost(per_tuple=0.5, overhead=0.1))
    latest = plan_single(spec)
    ahead = plan_single(spec, ahead=True)
    assert latest.sizes == [3, 7] and latest.completion == pytest.approx(14.0)
    assert ahead.sizes == [6, 4] and ahead.completion == pytest.approx(12.1)
    assert ahead.cost == pytest.approx(latest.cost) and ahead.deadline == 14
    assert plan_problems(spec, ahead) == []
    slow = 1.3
    assert not run_plan(latest, _SlowFirstBatch([spec], slow, which=2)).met
    assert run_plan(ahead, _SlowFirstBatch([spec], slow, which=2)).met


def test_planning_ahead_never_costs_more_nor_finishes_later() -> None:
    for spec in random_specs(seed=5, count=40):
        latest = plan_single(spec)
        ahead = plan_single(spec, ahead=True)
        assert ahead.feasible == latest.feasible
        if latest.feasible:
            assert plan_problems(spec, ahead) == [], spec.describe()
            assert ahead.cost <= latest.cost * (1 + AHEAD_COST_TOL) + 1e-12
            assert ahead.completion <= latest.completion + 1e-9
