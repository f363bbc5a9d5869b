"""``convergence`` (DyBBS Fig. 8): the convergence time computed from per-batch metrics,
the step schedule, and the simulator's prediction the experiment prints next to Spark."""

from __future__ import annotations

import math

import pytest

from adabatch.bench.experiments.convergence import (
    Schedule,
    convergence_time,
    schedule,
    simulated_times,
)
from adabatch.metrics import BatchRecord
from adabatch.profiles import parse_profile


def run_of(intervals: list[float], start: float = 0.0) -> list[BatchRecord]:
    out, t = [], start
    for x in intervals:
        out.append(BatchRecord(0, x, 2, 1, 0.1, 0.0, t + x, t + x, t + x + 0.1, 0, 0, 0))
        t += x
    return out


def test_settling_after_a_ramp_is_timed_from_the_phase_start() -> None:
    records = run_of([0.5, 0.5, 1.0, 2.0, 2.0, 1.9, 2.1, 2.0, 2.0])
    # rolling medians of 3: 0.5 0.5 0.5 1.0 2.0 2.0 ...: settled from the 5th batch (t=4)
    assert convergence_time(records, 0.0, 100.0) == pytest.approx(4.0)
    # the same run seen from a phase that starts at its 3rd batch
    assert convergence_time(records, 1.0, 100.0) == pytest.approx(3.0)


def test_one_noisy_batch_does_not_reset_the_clock_but_a_move_to_the_main_level_does() -> None:
    steady = [1.0] * 4 + [1.6] + [1.0] * 5
    assert convergence_time(run_of(steady), 0.0, 100.0) == 0.0
    moved = [1.0] * 4 + [2.0] * 8
    # most batches run at 2 s: rolling medians reach it at the second 2 s batch (4 + 2 s)
    assert convergence_time(run_of(moved), 0.0, 100.0) == pytest.approx(6.0)
    diverging = [1.0, 1.5, 2.0, 3.0, 4.5, 7.0, 10.0, 15.0]
    assert math.isinf(convergence_time(run_of(diverging), 0.0, 100.0))
    assert math.isnan(convergence_time(run_of([1.0, 1.0]), 0.0, 100.0))


def test_a_slow_stretch_of_the_host_in_the_second_half_does_not_set_the_level() -> None:
    # settled at 0.5 s from the step; the host then slows and the interval follows it for
    # the last 40 % of the phase (0.7 s, out of the 0.1 s band)
    run = [0.5] * 12 + [0.7] * 8
    assert convergence_time(run_of(run), 0.0, 100.0) == 0.0


def test_the_band_is_never_narrower_than_one_grid_step() -> None:
    # at a 0.3 s interval 20 % is 0.06 s: one 0.1 s step would read as not settled
    wobble = [0.3, 0.4, 0.4, 0.3] * 3 + [0.3] * 6
    assert convergence_time(run_of(wobble), 0.0, 100.0) == 0.0
    assert convergence_time(run_of(wobble), 0.0, 100.0, min_band_s=0.0) > 3.0
    # a move of two steps still counts
    moved = [0.6] * 6 + [0.3] * 9
    assert convergence_time(run_of(moved), 0.0, 100.0) == pytest.approx(0.6 * 6 + 0.3)


def test_a_later_excursion_does_not_undo_a_convergence() -> None:
    # in the band (0.4 +- 0.1 s) from the 4th batch; a slow stretch later moves it
    run = [0.8, 0.6, 0.5] + [0.4] * 8 + [0.6, 0.6, 0.6] + [0.4] * 10
    assert convergence_time(run_of(run), 0.0, 100.0) == pytest.approx(0.8 + 0.6 + 0.5)
    # a pass through the band shorter than HOLD batches is not a convergence
    ramp = [0.2, 0.3, 0.4, 0.4, 0.4, 0.6, 0.8, 1.0] + [0.4] * 10
    assert convergence_time(run_of(ramp), 0.0, 100.0) == pytest.approx(sum(ramp[:9]))


def test_schedule_steps_low_high_low_high() -> None:
    s = Schedule(100.0, 300.0, 10.0, 20.0)
    prof = parse_profile(s.profile)
    assert [prof.rate(t) for t in (5, 15, 35, 55)] == [100.0, 300.0, 100.0, 300.0]
    assert s.first == (10.0, 30.0) and s.second == (50.0, 70.0) and s.duration_s == 70.0
    quick = schedule(quick=True)
    # 20 s phases: long enough for isotonic to finish learning the high rate (see the
    # module docstring), still two runs well within a CI smoke budget
    assert quick.duration_s <= 65.0


def test_simulator_predicts_faster_reconvergence_for_isotonic() -> None:
    times = simulated_times(schedule(quick=False), seeds=(0, 1, 2))
    first, second = times["isotonic"]
    assert second < first


def test_a_failed_headline_shows_the_phase_batch_by_batch() -> None:
    from adabatch.bench.experiments.convergence import _intervals

    records = run_of([0.5, 0.5, 1.0], start=10.0)
    shown = _intervals(records, 10.5, 20.0)
    assert shown == "intervals/processing from 10.5 s: 0.50/0.10 1.00/0.10"
