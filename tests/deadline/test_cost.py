"""Cost models: cost, its integer inverse, fitting, JSON round trips, and bad input."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adabatch.deadline.core.cost import (
    AggregationCost,
    LinearCost,
    MonotoneCost,
    PiecewiseLinearCost,
    agg_cost_from_json,
    cost_from_json,
    tuples_within_by_bisection,
)
from adabatch.errors import AdabatchError

PIECEWISE = PiecewiseLinearCost(((0, 2.0), (100, 12.0), (1000, 30.0)))


def test_linear_cost_is_equation_1() -> None:
    m = LinearCost(per_tuple=3.0, overhead=5.0)  # the paper's Fig. 1 example
    assert m.cost(0) == 5.0
    assert m.cost(10) == 35.0
    assert m.tuples_within(35.0) == 10
    assert m.tuples_within(34.999) == 9
    assert m.tuples_within(7.9) == 0  # overhead plus one tuple is 8 s
    assert m.tuples_within(-1.0) == 0


def test_linear_inverse_is_exact_at_float_boundaries() -> None:
    m = LinearCost(per_tuple=0.1, overhead=0.3)  # 0.1 is not exact in binary
    for n in range(1, 2000):
        assert m.tuples_within(m.cost(n)) == n


@settings(max_examples=200, deadline=None)
@given(
    st.floats(1e-6, 10.0),
    st.floats(0.0, 100.0),
    st.floats(0.0, 1e5),
)
def test_linear_inverse_is_the_largest_fitting_integer(c: float, o: float, d: float) -> None:
    m = LinearCost(c, o)
    n = m.tuples_within(d)
    if n > 0:
        assert m.cost(n) <= d * (1 + 1e-9) + 1e-9
    assert m.cost(n + 1) > d - 1e-9 * max(1.0, d)


def test_piecewise_interpolates_and_extrapolates() -> None:
    assert PIECEWISE.overhead == 2.0
    assert PIECEWISE.cost(0) == 2.0
    assert PIECEWISE.cost(50) == pytest.approx(7.0)
    assert PIECEWISE.cost(550) == pytest.approx(21.0)
    assert PIECEWISE.cost(2000) == pytest.approx(50.0)  # last slope 0.02 continues


@settings(max_examples=200, deadline=None)
@given(st.floats(0.0, 500.0))
def test_piecewise_inverse_is_the_largest_fitting_integer(d: float) -> None:
    n = PIECEWISE.tuples_within(d)
    if n > 0:
        assert PIECEWISE.cost(n) <= d + 1e-9 * max(1.0, d)
    assert PIECEWISE.cost(n + 1) > d


def test_piecewise_fit_recovers_exact_breakpoints() -> None:
    truth = PiecewiseLinearCost(((0, 1.0), (400, 9.0), (2000, 17.0)))
    sizes = [50, 100, 200, 300, 400, 800, 1200, 1600, 2000]
    fit = PiecewiseLinearCost.fit(sizes, [truth.cost(s) for s in sizes], segments=2)
    for s in [0, 75, 400, 1000, 2000, 3000]:
        assert fit.cost(s) == pytest.approx(truth.cost(s), abs=1e-6)


def test_piecewise_fit_of_noisy_data_is_monotone_and_close() -> None:
    rng = np.random.default_rng(7)
    sizes = np.repeat([100, 200, 400, 800, 1600, 3200], 3)
    truth = 0.5 + 0.01 * sizes**0.8
    times = truth * rng.lognormal(0.0, 0.05, size=len(sizes))
    fit = PiecewiseLinearCost.fit(sizes.tolist(), times.tolist(), segments=3)
    ys = [y for _, y in fit.breakpoints]
    assert all(b >= a for a, b in itertools.pairwise(ys))
    rel = [abs(fit.cost(s) - t) / t for s, t in zip(sizes, truth, strict=True)]
    assert max(rel) < 0.15


def test_fit_rejects_too_few_sizes() -> None:
    with pytest.raises(AdabatchError, match="3 distinct positive sizes"):
        PiecewiseLinearCost.fit([10, 10, 20], [1, 1, 2], segments=2)


@pytest.mark.parametrize(
    ("points", "needle"),
    [
        (((0, 1.0),), "at least two"),
        (((5, 1.0), (10, 2.0)), "allowed 0"),
        (((0, 1.0), (10, 0.5)), "non-decreasing"),
        (((0, 1.0), (10, 2.0), (10, 3.0)), "increasing"),
        (((0, 1.0), (10, 2.0), (20, 2.0)), "flat"),
    ],
)
def test_piecewise_rejects_bad_breakpoints(points: tuple, needle: str) -> None:
    with pytest.raises(AdabatchError, match=needle):
        PiecewiseLinearCost(points)


def test_monotone_expression_and_callable() -> None:
    m = MonotoneCost(expr="1 + 0.5 * sqrt(n)")
    assert m.cost(16) == 3.0
    assert m.tuples_within(3.0) == 16
    assert m.tuples_within(0.5) == 0
    f = MonotoneCost(fn=lambda n: 2.0 + n * math.log1p(n))
    n = f.tuples_within(100.0)
    assert f.cost(n) <= 100.0 < f.cost(n + 1)
    assert tuples_within_by_bisection(LinearCost(0.25), 10.0) == 40


@pytest.mark.parametrize(
    ("expr", "needle"),
    [
        ("10 - n", "decreases"),
        ("__import__('os').getcwd()", "allowed"),
        ("n.real", "allowed"),
        ("1 +", "not an arithmetic expression"),
        ("log(n - 5)", "cannot be evaluated"),
    ],
)
def test_monotone_rejects_bad_expressions(expr: str, needle: str) -> None:
    with pytest.raises(AdabatchError, match=needle):
        MonotoneCost(expr=expr)


def test_callable_monotone_cost_cannot_be_stored() -> None:
    with pytest.raises(AdabatchError, match="use expr"):
        MonotoneCost(fn=lambda n: n + 1.0).to_json()


@pytest.mark.parametrize(
    "model",
    [LinearCost(0.002, 0.4), PIECEWISE, MonotoneCost(expr="0.4 + 0.003 * n ** 0.9")],
)
def test_json_round_trip(model) -> None:  # type: ignore[no-untyped-def]
    back = cost_from_json(model.to_json())
    for n in (0, 1, 17, 1000, 123456):
        assert back.cost(n) == model.cost(n)


def test_agg_cost_model() -> None:
    agg = AggregationCost(LinearCost(0.1, 0.5), per_group=0.001, groups=50)
    assert agg.cost(1) == 0.0  # one batch: nothing to combine
    assert agg.cost(4) == pytest.approx(0.5 + 0.4 + 0.001 * 50 * 4)
    back = agg_cost_from_json(agg.to_json())
    assert back.cost(7) == pytest.approx(agg.cost(7))
    alias = agg_cost_from_json({"kind": "linear", "per_batch": 0.1, "overhead": 0.5})
    assert alias.cost(3) == pytest.approx(0.8)
    assert agg_cost_from_json(None).cost(10) == 0.0
    assert agg_cost_from_json({"kind": "none"}).cost(10) == 0.0
    fitted = AggregationCost.fit([2, 4, 8, 16], [0.6, 0.8, 1.2, 2.0])
    assert fitted.cost(6) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"kind": "linear"}, "needs per_tuple"),
        ({"kind": "linear", "per_tuple": 0}, "out of range"),
        ({"kind": "linear", "per_tuple": "fast"}, "not a number"),
        ({"kind": "piecewise", "breakpoints": [1, 2]}, "list of"),
        ({"kind": "expr", "expr": 3}, "string in n"),
        ({"per_tuple": 1}, "kind"),
        ([1, 2], "allowed an object"),
    ],
)
def test_cost_json_errors(data, needle: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(AdabatchError, match=needle):
        cost_from_json(data)


def test_a_flat_fit_stays_flat_within_the_measurements() -> None:
    # CQ4's final aggregation at SF 0.1 (seconds vs number of batches): flat
    batches = [2, 4, 8, 16, 30]
    seconds = [0.283, 0.383, 0.304, 0.262, 0.280]
    model = PiecewiseLinearCost.fit(batches, seconds, segments=1)
    assert model.breakpoints[-1][1] > model.breakpoints[-2][1]  # still rising, barely
    for b in (2, 30, 60):
        assert 0.25 <= model.cost(b) <= 0.32, (b, model.cost(b))


def test_relative_fit_prices_small_batches_as_closely_as_large_ones() -> None:
    # CQ4's median batch costs at SF 1: the absolute fit priced the one-slot
    # batch (0.058 s) at 0.134 s, more than twice what it costs
    sizes = [3_697, 187_475, 374_902, 750_166, 1_500_362, 3_000_607, 6_001_215]
    seconds = [0.058, 0.299, 0.476, 0.816, 1.326, 2.852, 5.901]
    absolute = PiecewiseLinearCost.fit(sizes, seconds, segments=2)
    relative = PiecewiseLinearCost.fit(sizes, seconds, segments=2, relative=True)
    worst = {
        name: max(abs(model.cost(n) / y - 1) for n, y in zip(sizes, seconds, strict=True))
        for name, model in (("absolute", absolute), ("relative", relative))
    }
    assert worst["relative"] < 0.15 < worst["absolute"], worst
