"""DyBBS (``isotonic``): our stated deviations from Algorithm 1 and the ``cores`` bound.

A block interval with no stable batch interval is left before line 6 (the paper waits for a
convergence that never comes); a step up that cannot beat the optimum it left returns at
once; a new rate bin starts where its converged neighbour's search is; no batch gets more
blocks than ``cores``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from adabatch.control import BatchPlan, BatchReport
from adabatch.control.isotonic import PROBE_POINTS, IsotonicController
from adabatch.control.isotonic_blocks import BlockSearch
from adabatch.control.isotonic_start import out_of_reach
from adabatch.errors import AdabatchError

Cost = Callable[[float, int, float], float]  # p(interval, blocks, rate)


def trap(x: float, k: int, rate: float) -> float:
    """0.1 s per block and 0.6 s of work per second of 2,000 records/s, over two cores: at
    100 ms blocks p = 0.3 + 1.3 x (never stable); the best is 2 blocks near x = 0.8 s."""
    return 0.3 + 0.1 * k + 0.6 * x * rate / 2000.0 / min(k, 2)


def reduce(x: float, k: int, rate: float) -> float:
    """test_isotonic.REDUCE: 0.02 s per block; 2 blocks at x = 0.5 s are best."""
    return 0.2 + 0.02 * k + 4e-4 * rate * x / min(k, 2)


def closed_loop(ctrl: IsotonicController, p: Cost, rates: list[float]) -> list[dict]:
    """Plan, process, observe, one batch at a time: the state after each plan."""
    now, states = 0.0, []
    for i, rate in enumerate(rates):
        plan = ctrl.plan(now)
        states.append({**ctrl.state(), "plan": plan})
        proc = p(plan.interval_s, plan.blocks, rate)
        cut = now + plan.interval_s
        records = round(rate * plan.interval_s)
        ctrl.observe(BatchReport(i, plan.interval_s, plan.blocks, records, proc, 0.0, cut, cut,
                                 cut + proc))  # fmt: skip
        now = cut
    return states


def table(points: dict[float, float]) -> dict[float, list[float]]:
    return {x: [p, 1, i] for i, (x, p) in enumerate(points.items())}


# ------------------------------------------------------------------ the trap test


def test_out_of_reach_needs_three_unstable_points_whose_p_grows_as_fast_as_x() -> None:
    c = 0.05
    assert out_of_reach(table({0.25: 0.6, 0.5: 0.95, 1.0: 1.6}), c)  # slope 1.3
    assert not out_of_reach(table({0.5: 0.95, 1.0: 1.6}), c)  # two points: not yet
    assert not out_of_reach(table({0.25: 0.6, 0.5: 0.7, 1.0: 0.96}), c)  # slope 0.5
    assert not out_of_reach(table({0.25: 0.6, 0.5: 0.4, 1.0: 1.6}), c)  # 0.5 is stable
    # the measured Spark points (join at 10k/s, 100 ms blocks): 1.16 s at 0.95 s, 2.38 s
    # at 2.0 s; with the slow-start point before them, the slope is 1.2
    assert out_of_reach(table({0.5: 0.62, 0.95: 1.16, 2.0: 2.38}), c)


def test_a_block_interval_without_a_stable_interval_is_left_before_line_6() -> None:
    ctrl = IsotonicController(block_interval=0.1, rate_step=500)
    states = closed_loop(ctrl, trap, [2000.0] * 80)
    first_move = next(i for i, st in enumerate(states) if st["block_interval"] != 0.1)
    assert first_move <= 4  # three points at 100 ms, then away
    assert states[first_move]["phase"] == "block-sizing"
    assert not states[first_move]["converged"]  # line 6 never held at 100 ms
    assert "4|0.1" not in states[-1]["local_optima"]
    assert states[-1]["escaped"] == {"4": pytest.approx(0.25, abs=0.3)}
    # then the paper's algorithm finds the optimum: 2 blocks, the smallest stable x
    assert {st["plan"].blocks for st in states[-20:]} == {2}
    assert 0.8 <= states[-1]["plan"].interval_s <= 0.9
    assert all(st["plan"].blocks <= 10 for st in states)


def test_the_papers_fixed_block_interval_stays_in_the_trap() -> None:
    ctrl = IsotonicController(block_interval=0.1, block_sizing=False, max_interval=5.0)
    states = closed_loop(ctrl, trap, [2000.0] * 30)
    assert {st["block_interval"] for st in states} == {0.1}
    assert states[-1]["plan"] == BatchPlan(5.0, 50)  # no stable interval: the largest


def test_escape_halves_the_blocks_and_passes_over_trapped_block_intervals() -> None:
    ctrl = IsotonicController(block_interval=0.1)
    search = BlockSearch(ctrl.params, 64)
    never: Callable[[float], bool] = lambda bl: False  # noqa: E731
    assert search.escape(80, 0.1, 1.0, never) == 0.2  # 10 blocks -> 5
    assert search.escape(80, 0.1, 1.0, lambda bl: bl == 0.2) == 0.5  # 5 -> 2
    assert search.escape(80, 0.6, 0.8, never) == 0.5  # one block: down to 2
    assert search.escape(80, 0.1, 0.1, never) == 0.1  # one block at the minimum: stay
    assert BlockSearch(ctrl.params, 2).escape(80, 0.1, 1.0, never) == 0.7  # capped: 2 -> 1


def test_an_escape_at_one_rate_moves_every_rate_that_never_converged_there() -> None:
    # cores unknown: the per-block cost that trapped 2,000 records/s traps 3,000 too
    ctrl = IsotonicController(block_interval=0.1, rate_step=500, reuse=False)
    closed_loop(ctrl, trap, [2000.0] * 40)
    assert ctrl.state()["floor"] == 0.1
    states = closed_loop(ctrl, trap, [3000.0] * 3)
    assert states[1]["dr_to_bl"]["6"] > 0.1  # left without measuring 100 ms again
    told = IsotonicController(block_interval=0.1, rate_step=500, reuse=False, cores=2)
    closed_loop(told, trap, [2000.0] * 40)
    states = closed_loop(told, trap, [3000.0] * 3)
    assert states[1]["dr_to_bl"]["6"] == 0.1  # with the cores known, each rate judges


# ------------------------------------------------------------------ the block search


def test_a_step_up_that_cannot_beat_its_optimum_returns_at_once() -> None:
    # reduce settles at 0.3 s (2 blocks at 0.5 s); the step to 0.4 s (1 block at 0.5 s)
    # runs one batch 0.18 s slower and unstable, and the search returns without waiting
    ctrl = IsotonicController(block_interval=0.1)
    states = closed_loop(ctrl, reduce, [2000.0] * 150)
    i = next(i for i, st in enumerate(states) if st["block_interval"] == 0.4)
    assert states[i + 1]["block_interval"] == 0.3
    assert states[i + 1]["searching"] == {"80": False}


def test_a_step_up_that_does_not_converge_returns_after_its_batches() -> None:
    ctrl = IsotonicController(block_interval=0.1, rate_step=500)
    closed_loop(ctrl, reduce, [2000.0] * 12)  # converged at 0.1, stepping up to 0.2
    state = ctrl.state()
    assert state["probe_from"] == {"4": 0.1} and state["block_interval"] == 0.2
    limit = PROBE_POINTS * ctrl.params.min_points
    state["probe_batches"] = {"4": limit}
    ctrl.restore(json.loads(json.dumps(state)))
    ctrl.plan(100.0)
    assert ctrl.state()["block_interval"] == 0.2  # one more batch allowed
    ctrl.restore({**state, "probe_batches": {"4": limit + 1}})
    ctrl.plan(100.0)
    assert ctrl.state()["block_interval"] == 0.1
    assert ctrl.state()["searching"] == {"4": False} and ctrl.state()["probe_from"] == {}


# ------------------------------------------------------------------ new rate bins


@pytest.mark.parametrize("reuse", [True, False])
def test_a_new_rate_starts_where_the_nearest_converged_rate_settled(reuse: bool) -> None:
    ctrl = IsotonicController(block_interval=0.1, rate_step=500, reuse=reuse)
    closed_loop(ctrl, reduce, [2000.0] * 150)
    assert ctrl.state()["dr_to_bl"] == {"4": 0.3}
    closed_loop(ctrl, reduce, [3000.0])  # the batch that reveals 3,000 records/s
    ctrl.plan(1000.0)
    assert ctrl.state()["dr_to_bl"]["6"] == (0.3 if reuse else 0.1)


# ------------------------------------------------------------------ cores


def test_no_batch_gets_more_blocks_than_cores() -> None:
    assert IsotonicController().params.cores is None  # unknown unless told
    ctrl = IsotonicController(block_interval=0.1, cores=2)
    rates = [2000.0] * 60 + [6000.0] * 60 + [1000.0] * 60
    states = closed_loop(ctrl, trap, rates)
    assert max(st["plan"].blocks for st in states) == 2
    assert {st["plan"].blocks for st in states[-20:]} <= {1, 2}
    # more cores than max_blocks: max_blocks still bounds
    assert IsotonicController(block_interval=0.1, cores=16, max_blocks=4).blocks_for(2.0, 0.1) == 4
    with pytest.raises(AdabatchError, match=r"'cores' = 0 is out of range"):
        IsotonicController(cores=0)


def test_state_with_escapes_round_trips() -> None:
    ctrl = IsotonicController(block_interval=0.1)
    closed_loop(ctrl, trap, [2000.0] * 30 + [2600.0] * 20)
    snapshot = json.loads(json.dumps(ctrl.state()))
    assert snapshot["escaped"] and snapshot["floor"] > 0
    twin = IsotonicController(block_interval=0.1)
    twin.restore(snapshot)
    assert twin.state() == ctrl.state()
    rates = [3300.0] * 40
    a = [st["plan"] for st in closed_loop(twin, trap, rates)]
    assert a == [st["plan"] for st in closed_loop(ctrl, trap, rates)]
