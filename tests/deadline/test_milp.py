"""The Sec. 3.2 MILP agrees with Function 1 on linear cost models, and every plan it
reports is verified against its constraints."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from adabatch.cli import main
from adabatch.deadline.core.cost import AggregationCost, LinearCost, MonotoneCost
from adabatch.deadline.core.milp import MAX_MILP_BATCHES, check_plan, plan_milp, solve_batches
from adabatch.deadline.core.schedule import Batch
from adabatch.deadline.core.single import plan_problems, plan_single
from adabatch.deadline.core.spec import QuerySpec, query_spec
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
        cost=LinearCost(per_tuple, overhead), agg_cost=AggregationCost(agg),
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


def huge_query() -> QuerySpec:
    """1e12 tuples at 1e6/s over a 1e6 s window, 0.5 s of slack after it."""
    return query_spec(
        "big", window_start=0, window_end=1e6, deadline=1e6 + 0.5, rate=1e6,
        total=10**12, cost=LinearCost(per_tuple=1e-9),
    )  # fmt: skip


def test_milp_at_1e12_tuples_meets_the_deadline() -> None:
    spec = huge_query()
    f1 = plan_single(spec)
    assert f1.feasible and f1.num_batches == 3
    plan = plan_milp(spec, max_batches=f1.num_batches)
    assert plan.feasible
    assert check_plan(spec, plan) == []
    assert sum(plan.sizes) == 10**12
    assert plan.completion is not None and plan.completion <= spec.deadline + 1e-6
    assert plan.num_batches == f1.num_batches
    assert plan.reason == ""  # the solver's own answer, verified: no fallback needed


def test_the_checker_catches_a_corrupted_answer() -> None:
    spec = paper_case(11)
    good = plan_milp(spec, max_batches=10)
    assert good.sizes == [4, 4, 2] and check_plan(spec, good) == []
    b0, b1, b2 = good.batches

    def corrupt(*batches: Batch, **fields: object) -> list[str]:
        return check_plan(spec, dataclasses.replace(good, batches=batches, **fields))

    late = [dataclasses.replace(b, start=b.start + 1, end=b.end + 1) for b in good.batches]
    assert any("after the deadline" in p for p in corrupt(*late, completion=12.0))
    assert any("hold 9 tuples" in p for p in corrupt(b0, b1, dataclasses.replace(b2, tuples=1)))
    overlap = dataclasses.replace(b1, start=b1.start - 0.5, end=b1.end - 0.5)
    assert any("before the previous one ends" in p for p in corrupt(b0, overlap, b2))
    early = dataclasses.replace(b0, start=b0.start - 2.5, end=b0.end - 2.5)  # 4th arrives at 4
    assert any("before its last tuple arrives" in p for p in corrupt(early, b1, b2))
    assert any("reported cost" in p for p in corrupt(b0, b1, b2, cost=4.0))
    cheap = dataclasses.replace(b1, cost=1.0)
    assert any("does not match the model" in p for p in corrupt(b0, cheap, b2))
    assert any("reported completion" in p for p in corrupt(b0, b1, b2, completion=10.0))
    nan = dataclasses.replace(b2, start=math.nan)
    assert any("non-finite" in p for p in corrupt(b0, b1, nan))
    half = dataclasses.replace(b2, tuples=2.5)
    assert any("not a whole number" in p for p in corrupt(b0, b1, half))
    before_end = [
        dataclasses.replace(b, start=b.start - 1.5, end=b.end - 1.5) for b in good.batches
    ]
    assert any("before the window end" in p for p in corrupt(*before_end, completion=10.5))


def test_the_cli_reports_the_verified_milp_plan_at_1e12(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "big.yaml"
    spec.write_text(
        "queries:\n  - {id: big, window_start: 0, window_end: 1e6, deadline: 1000000.5,"
        " rate: 1e6, total: 1e12, cost: {kind: linear, per_tuple: 1e-9}}\n",
        encoding="utf-8",
    )
    assert main(["deadline", "plan", str(spec), "--method", "milp", "--json"]) == 0
    (plan,) = json.loads(capsys.readouterr().out)
    assert plan["feasible"] and plan["completion"] <= plan["deadline"] + 1e-6
    assert sum(b["tuples"] for b in plan["batches"]) == 10**12


def test_the_milp_search_is_bounded() -> None:
    with pytest.raises(AdabatchError, match=f"from 1 to {MAX_MILP_BATCHES}"):
        plan_milp(paper_case(11), max_batches=MAX_MILP_BATCHES + 1)


def test_a_search_out_of_time_reports_function_1s_verified_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import adabatch.deadline.core.milp as milp_module

    spec = paper_case(11)
    monkeypatch.setattr(milp_module, "SEARCH_BUDGET_S", 0.0)
    plan = plan_milp(spec)
    assert plan.feasible and "stopped" in plan.reason and "Function 1" in plan.reason
    assert not check_plan(spec, plan)
    assert [b.tuples for b in plan.batches] == [b.tuples for b in plan_single(spec).batches]
