"""The Sec. 3.2 MILP agrees with Function 1 on linear cost models."""

from __future__ import annotations

import numpy as np
import pytest

from adabatch.deadline.cost import AggCostModel, LinearCost, MonotoneCost
from adabatch.deadline.milp import plan_milp, solve_batches
from adabatch.deadline.single import plan_problems, plan_single
from adabatch.deadline.spec import QuerySpec, query_spec
from adabatch.errors import AdabatchError


def paper_case(deadline: float) -> QuerySpec:
    return query_spec(
        "c", window_start=1, window_end=10, deadline=deadline, rate=1.0,
        cost=LinearCost(per_tuple=0.5),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("deadline", "sizes"),
    [(16, [10]), (15, [10]), (12, [6, 4]), (11, [4, 4, 2])],
)
def test_worked_cases(deadline: float, sizes: list[int]) -> None:
    spec = paper_case(deadline)
    plan = plan_milp(spec, max_batches=10)  # the paper tries 1..10 batches
    assert plan.feasible
    assert plan.sizes == sizes  # unique for these cases
    assert plan.cost == 5.0
    assert plan_problems(spec, plan) == []


def test_infeasible_case() -> None:
    plan = plan_milp(paper_case(10.3), max_batches=10)
    assert not plan.feasible
    assert "at most 10 batches" in plan.reason


def random_linear_spec(rng: np.random.Generator, i: int) -> QuerySpec:
    """Small linear instances with round numbers, so no constraint is a float knife edge."""
    rate = float(rng.choice([1, 2, 4, 5, 10]))
    length = int(rng.integers(5, 40))
    per_tuple = float(rng.choice([0.05, 0.1, 0.2, 0.25, 0.5]))
    overhead = float(rng.choice([0.0, 0.5, 1.0, 2.0]))
    agg = [None, LinearCost(0.5), LinearCost(0.25, 1.0)][int(rng.integers(3))]
    start = int(rng.integers(0, 20))
    total = int(length * rate) + 1
    single = per_tuple * total + overhead
    deadline = round((start + length + float(rng.uniform(0.1, 1.1)) * single) * 4) / 4
    return query_spec(
        f"r{i}", window_start=start, window_end=start + length, deadline=deadline, rate=rate,
        cost=LinearCost(per_tuple, overhead), agg_cost=AggCostModel(agg),
    )  # fmt: skip


def test_milp_agrees_with_function_1_on_random_linear_instances() -> None:
    rng = np.random.default_rng(2024)
    multi = feasible = 0
    for i in range(60):
        spec = random_linear_spec(rng, i)
        f1 = plan_single(spec)
        # Function 1's count + 1 bounds the search: a MILP needing more would disagree anyway
        limit = f1.num_batches + 1 if f1.feasible else 8
        mp = plan_milp(spec, max_batches=limit)
        assert mp.feasible == f1.feasible, spec.describe()
        if not f1.feasible:
            continue
        feasible += 1
        multi += f1.num_batches > 1
        assert mp.num_batches == f1.num_batches, (spec.describe(), f1.sizes, mp.sizes)
        assert mp.cost == pytest.approx(f1.cost, abs=1e-9)
        assert plan_problems(spec, mp) == []
    assert feasible >= 30 and multi >= 15, (feasible, multi)


def test_fewer_batches_than_function_1_is_infeasible() -> None:
    rng = np.random.default_rng(5)
    checked = 0
    for i in range(40):
        spec = random_linear_spec(rng, i)
        f1 = plan_single(spec)
        if not f1.feasible or f1.num_batches < 2:
            continue
        assert solve_batches(spec, f1.num_batches - 1) is None, spec.describe()
        checked += 1
    assert checked >= 8


def test_milp_needs_a_linear_model() -> None:
    spec = query_spec(
        "m", window_start=0, window_end=10, deadline=20, rate=1.0,
        cost=MonotoneCost(expr="1 + n ** 0.5"),
    )  # fmt: skip
    with pytest.raises(AdabatchError, match="linear cost model"):
        plan_milp(spec)
