"""The fixed-point controller (Das et al. Algorithm 1, §3.3–3.4), branch by branch, and on
analytic workloads against the two controllers of §3.2 that the paper rejected."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adabatch.control import registry
from adabatch.control.base import BatchReport, Controller
from adabatch.control.binary import BinaryController
from adabatch.control.fixed_point import FixedPointController, IntervalBounds
from adabatch.errors import AdabatchError


def report(x: float, p: float, batch_id: int = 0) -> BatchReport:
    """A finished batch of interval ``x`` and processing time ``p`` with no queue delay."""
    return BatchReport(batch_id, x, 2, 100, p, 0.0, x, x, x + p)


def fed(points: list[tuple[float, float]], **params: object) -> FixedPointController:
    c = FixedPointController(**params)
    for i, (x, p) in enumerate(points):
        c.observe(report(x, p, i))
    return c


# --- slow start and the single-point step ---------------------------------------------


def test_slow_start_doubles_until_first_completion_then_single_point_step() -> None:
    c = FixedPointController()
    assert [c.plan(0.0).interval_s for _ in range(4)] == [0.1, 0.2, 0.4, 0.8]
    assert c.state()["phase"] == "slow-start"
    assert c.state()["branch"] == "slow-start"
    c.observe(report(0.1, 0.35))
    assert c.plan(1.5).interval_s == 0.5  # 0.35 / 0.7
    assert c.state()["phase"] == "fixed-point"
    assert c.state()["branch"] == "single"


def test_slow_start_stops_doubling_at_max_interval() -> None:
    c = FixedPointController(max_interval=0.5)
    assert [c.plan(0.0).interval_s for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]


def test_without_slow_start_holds_initial_interval_until_a_batch_completes() -> None:
    c = FixedPointController(slow_start=False, initial_interval=3.0)
    assert [c.plan(0.0).interval_s for _ in range(3)] == [3.0, 3.0, 3.0]
    assert c.state()["phase"] == "fixed-point"
    assert c.state()["branch"] == "initial"
    c.observe(report(3.0, 1.4))
    assert c.plan(3.0).interval_s == 2.0
    assert c.state()["branch"] == "single"


# --- Algorithm 1 with two points, in the paper's branch order ---------------------------


def test_type_ii_branch_cuts_to_one_minus_r_of_the_smaller_interval() -> None:
    # p/x rises from 0.6 to 1.0 and the last batch is above the line: near Type-II.
    c = fed([(2.0, 1.2), (4.0, 4.0)])
    assert c.plan(0.0).interval_s == 1.5  # (1 - 0.25) * 2.0
    assert c.state()["branch"] == "type-ii"


def test_type_ii_needs_the_last_batch_above_the_condition_line() -> None:
    # Same two points, other order: the last batch (2.0, 1.2) has p < 0.7 x.
    c = fed([(4.0, 4.0), (2.0, 1.2)])
    assert c.plan(0.0).interval_s == 1.7  # 1.2 / 0.7 = 1.714
    assert c.state()["branch"] == "fixed-point"
    # ... and with the last batch above it the Type-II branch fires even if it is the small one.
    c = fed([(4.0, 4.0), (2.0, 1.6)])
    assert c.plan(0.0).interval_s == 1.5
    assert c.state()["branch"] == "type-ii"


def test_r_sets_the_type_ii_reduction() -> None:
    c = fed([(2.0, 1.2), (4.0, 4.0)], r=0.5)
    assert c.plan(0.0).interval_s == 1.0


def test_fixed_point_branch_when_p_over_x_falls() -> None:
    # Linear with intercept: p/x falls from 0.9 to 0.5, so no Type-II, even though unstable.
    c = fed([(1.0, 0.9), (2.0, 1.0)])
    assert c.plan(0.0).interval_s == 1.4  # 1.0 / 0.7 = 1.43
    assert c.state()["branch"] == "fixed-point"


def test_equal_intervals_apply_fixed_point() -> None:
    c = fed([(2.0, 1.0), (2.0, 3.0)])
    assert c.plan(0.0).interval_s == 4.3  # 3.0 / 0.7 = 4.29, not a Type-II cut
    assert c.state()["branch"] == "equal"


def test_only_the_two_most_recent_reports_count() -> None:
    c = fed([(2.0, 1.2), (4.0, 4.0), (4.0, 2.1)])
    assert c.state()["points"] == [[4.0, 4.0], [4.0, 2.1]]
    assert c.plan(0.0).interval_s == 3.0
    assert c.state()["branch"] == "equal"


def test_rho_sets_the_condition_line() -> None:
    c = fed([(1.0, 0.8)], rho=0.8)
    assert c.plan(0.0).interval_s == 1.0


def test_plan_is_idempotent_between_completions() -> None:
    c = fed([(2.0, 1.2), (4.0, 4.0)])
    assert [c.plan(t).interval_s for t in (0.0, 1.5, 3.0)] == [1.5, 1.5, 1.5]


# --- rounding and clamping ---------------------------------------------------------------


def test_rounds_to_the_granularity() -> None:
    c = fed([(1.0, 1.0)], granularity=0.25, min_interval=0.25)
    assert c.plan(0.0).interval_s == 1.5  # 1.43 is nearer 1.5 than 1.25


def test_clamps_to_both_bounds_without_rounding_out_of_them() -> None:
    low = fed([(1.0, 0.01)], min_interval=0.25)
    assert FixedPointController(min_interval=0.25).plan(0.0).interval_s == 0.3
    assert low.plan(0.0).interval_s == 0.3  # nearest multiple 0.2 < 0.25: next one up
    high = fed([(1.0, 100.0)], max_interval=59.95)
    assert high.plan(0.0).interval_s == 59.9  # nearest multiple 60.0 > 59.95: next one down


def test_blocks_are_passed_through() -> None:
    assert FixedPointController(blocks=8).plan(0.0).blocks == 8


def test_a_block_interval_gives_one_block_per_block_interval() -> None:
    """DyBBS's baseline: fixed-point at Spark Streaming's 100 ms block interval."""
    ctrl = FixedPointController(block_interval=0.1, slow_start=False, initial_interval=0.1)
    assert ctrl.plan(0.0).blocks == 1
    fed_ctrl = fed([(1.0, 0.84)], block_interval=0.1)  # next x = 0.84 / 0.7 = 1.2
    assert (fed_ctrl.plan(0.0).interval_s, fed_ctrl.plan(0.0).blocks) == (1.2, 12)
    half = fed([(1.0, 0.175)], block_interval=0.1, granularity=0.05)  # x = 0.25: 2.5 blocks
    assert half.plan(0.0).blocks == 3  # rounded half up
    with pytest.raises(AdabatchError, match="'block_interval' = 0 is out of range"):
        FixedPointController(block_interval=0)
    assert FixedPointController().params.block_interval is None  # unset: 'blocks' per batch


@given(
    x=st.floats(min_value=1e-6, max_value=1e6, allow_nan=False),
    g=st.sampled_from([0.05, 0.1, 0.25, 0.3, 1.0]),
    low=st.floats(min_value=0.01, max_value=5.0),
    span=st.floats(min_value=1.0, max_value=100.0),
)
def test_fit_stays_in_bounds_on_a_multiple_of_the_granularity(
    x: float, g: float, low: float, span: float
) -> None:
    bounds = IntervalBounds(low, low + span, g)
    y = bounds.fit(x)
    assert low - 1e-9 <= y <= low + span + 1e-9
    assert math.isclose(y / g, round(y / g), abs_tol=1e-6)


# --- parameters ---------------------------------------------------------------------------


def test_defaults_are_the_papers() -> None:
    params = FixedPointController().params
    assert (params.rho, params.r, params.granularity, params.slow_start) == (0.7, 0.25, 0.1, True)
    assert params.blocks == 2


@pytest.mark.parametrize(
    ("params", "needles"),
    [
        ({"rho": 1.0}, ["'rho'", "1.0", "(0, 1)"]),
        ({"rho": "abc"}, ["'rho'", "'abc'", "not a number"]),
        ({"r": 0}, ["'r'", "0", "(0, 1)"]),
        ({"granularity": 0}, ["'granularity'", "[0.001, 86400]"]),
        ({"blocks": 0}, ["'blocks'", "integer in [1, 10000]"]),
        ({"slow_start": "maybe"}, ["'slow_start'", "'maybe'", "true or false"]),
        ({"min_interval": 5, "max_interval": 2}, ["'min_interval'", "5", "max_interval"]),
        ({"initial_interval": 100}, ["'initial_interval'", "100", "[0.1, 60]"]),
        ({"initial_interval": 0.5, "min_interval": 1}, ["'initial_interval'", "0.5", "[1, 60]"]),
        (
            {"granularity": 1.0, "min_interval": 0.2, "max_interval": 0.5},
            ["'granularity'", "1.0", "[0.2, 0.5]"],
        ),
        ({"gamma": 1}, ["'gamma'", "rho, r, slow_start"]),
    ],
)
def test_bad_parameters_name_value_and_range(params: dict, needles: list[str]) -> None:
    with pytest.raises(AdabatchError) as err:
        FixedPointController(**params)
    for needle in needles:
        assert needle in str(err.value)


def test_string_parameters_from_the_cli_are_parsed() -> None:
    c = registry.create("fixed-point", {"rho": "0.8", "slow_start": "false", "blocks": "4"})
    assert isinstance(c, FixedPointController)
    assert (c.params.rho, c.params.slow_start, c.params.blocks) == (0.8, False, 4)


# --- state ---------------------------------------------------------------------------------


def test_state_round_trips_through_json() -> None:
    c = fed([(2.0, 1.2), (4.0, 4.0)])
    c.plan(0.0)
    saved = json.loads(json.dumps(c.state()))
    assert saved["phase"] == "fixed-point"
    assert saved["branch"] == "type-ii"
    assert saved["interval"] == 1.5
    twin = FixedPointController()
    twin.restore(saved)
    assert twin.state() == c.state()
    for later in (report(1.5, 0.9), report(1.3, 0.85)):
        c.observe(later)
        twin.observe(later)
        assert twin.plan(9.0) == c.plan(9.0)
        assert twin.state() == c.state()


def test_restore_keeps_slow_start_going() -> None:
    c = FixedPointController()
    c.plan(0.0)
    c.plan(0.1)
    twin = FixedPointController()
    twin.restore(json.loads(json.dumps(c.state())))
    assert twin.plan(0.3).interval_s == 0.4


@pytest.mark.parametrize(
    "state",
    [{"phase": "warming", "points": []}, {"phase": "fixed-point", "points": [[1, 1]] * 3}],
)
def test_restore_rejects_a_foreign_state(state: dict) -> None:
    with pytest.raises(AdabatchError, match="fixed-point state"):
        FixedPointController().restore(state)


# --- acceptance on analytic workloads -----------------------------------------------------


def run_loop(
    controller: Controller, processing: Callable[[float], float], batches: int
) -> tuple[list[float], list[float], list[str]]:
    """Drive ``controller`` as the papers' system model does, on ``p = processing(x)``.

    Batches are cut back to back at the planned intervals; one batch is processed at a
    time, starting at its cut or when the previous one finishes, whichever is later.
    ``observe`` gets each report once the loop's clock has passed its finish. Returns the
    planned intervals, the queue delays and the branch after each plan.
    """
    now, busy_until = 0.0, 0.0
    running: list[BatchReport] = []
    intervals, delays, branches = [], [], []
    for batch_id in range(batches):
        while running and running[0].finished_at <= now:
            controller.observe(running.pop(0))
        plan = controller.plan(now)
        x = plan.interval_s
        cut = now + x
        start = max(cut, busy_until)
        p = processing(x)
        running.append(
            BatchReport(batch_id, x, plan.blocks, 0, p, start - cut, cut, start, start + p)
        )
        busy_until = start + p
        intervals.append(x)
        delays.append(start - cut)
        branches.append(str(controller.state().get("branch")))
        now = cut
    return intervals, delays, branches


RHO = 0.7


def linear(x: float) -> float:
    return 1.0 + 0.4 * x


def superlinear(x: float) -> float:
    return 1.0 + 0.02 * x**2


# Crossings of p(x) with rho * x, solved in closed form.
LINEAR_TYPE_I = 1.0 / (RHO - 0.4)
_DISC = math.sqrt(RHO**2 - 4 * 0.02 * 1.0)
SUPERLINEAR_TYPE_I = (RHO - _DISC) / (2 * 0.02)
SUPERLINEAR_TYPE_II = (RHO + _DISC) / (2 * 0.02)


def assert_settled_near(intervals: list[float], delays: list[float], target: float) -> None:
    tail = intervals[-10:]
    assert all(abs(x - target) <= 0.1 * target for x in tail), (tail, target)
    assert delays[-1] == 0.0


def test_converges_to_type_i_on_a_linear_workload() -> None:
    intervals, delays, branches = run_loop(FixedPointController(), linear, 60)
    assert branches[:3] == ["slow-start"] * 3
    assert_settled_near(intervals, delays, LINEAR_TYPE_I)


def test_converges_to_type_i_on_a_superlinear_workload_with_slow_start() -> None:
    intervals, delays, _ = run_loop(FixedPointController(), superlinear, 60)
    assert_settled_near(intervals, delays, SUPERLINEAR_TYPE_I)


def test_from_above_type_ii_converges_to_type_i_and_binary_diverges() -> None:
    start = 40.0
    assert start > SUPERLINEAR_TYPE_II
    fixed = FixedPointController(slow_start=False, initial_interval=start)
    intervals, delays, branches = run_loop(fixed, superlinear, 80)
    assert "type-ii" in branches
    assert_settled_near(intervals, delays, SUPERLINEAR_TYPE_I)

    binary = BinaryController(initial_interval=start, step=1.0)
    intervals, delays, _ = run_loop(binary, superlinear, 80)
    assert intervals[-1] == binary.params.max_interval
    assert all(b >= a for a, b in itertools.pairwise(intervals))
    assert delays[-1] > delays[len(delays) // 2] > 0.0  # the queue grows without bound


def test_binary_settles_around_type_i_on_a_linear_workload() -> None:
    intervals, delays, _ = run_loop(BinaryController(initial_interval=1.0), linear, 200)
    # AIMD saw-tooth: up by 0.1 s per unstable batch, down 10 % per stable one.
    tail = intervals[-20:]
    assert all(abs(x - LINEAR_TYPE_I) <= 0.2 * LINEAR_TYPE_I for x in tail), tail
    assert abs(sum(tail) / len(tail) - LINEAR_TYPE_I) <= 0.1 * LINEAR_TYPE_I
    assert max(delays[-50:]) == 0.0


@pytest.mark.parametrize(("interval", "processing"), [(0.0, 0.5), (1.0, float("nan")), (1.0, -0.5)])
def test_unusable_reports_are_refused_by_name(interval: float, processing: float) -> None:
    with pytest.raises(AdabatchError, match="batch 7"):
        BatchReport(7, interval, 2, 0, processing, 0.0, 1.0, 1.0, 1.5)
