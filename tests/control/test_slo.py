"""The ``slo`` controller: a latency target met at the least CPU, in the simulator.

The simulated runs use the Reduce and Join cost models with the fits ``adabatch bench
calibrate`` measured on local[2] Spark (``LOCAL2_FITS``: overhead, per-block and per-record
costs, noise), except where a test says it uses the models' defaults. Every test drives
the controller through the real batching model (:class:`~adabatch.batching.BatchCutter`)
on a virtual clock; nothing is mocked.
"""

from __future__ import annotations

import itertools
import json
import logging
import math

import numpy as np
import pytest

from adabatch.control import create
from adabatch.control.base import BatchPlan, BatchReport, Controller
from adabatch.control.slo import SloController
from adabatch.control.slo_model import CATCH_UP_MAX_S, ProcessingFit, catch_up_records
from adabatch.errors import AdabatchError
from adabatch.metrics import BatchRecord
from adabatch.profiles import parse_profile
from adabatch.runs.simulated import Scenario, make_scenario, simulate
from adabatch.sim.engine import ProfileArrivals, run_simulation, simulate_arrivals
from adabatch.sim.workloads import LOCAL2_FITS, make_workload

WARMUP_S = 300.0
PROFILES = {
    "reduce": {
        "sine": "sine:20000:200000:600s",
        "markov": "markov:20000,80000,200000:120s:3",
    },
    "join": {
        "sine": "sine:2000:10000:600s",
        "markov": "markov:2000,5000,10000:120s:3",
    },
}


def calibrated(workload: str, profile: str, duration: str = "3600s") -> Scenario:
    """``workload`` with the local[2] fits under ``profile``."""
    return make_scenario(workload, profile, duration, model=LOCAL2_FITS[workload])


def after_warmup(records: tuple[BatchRecord, ...]) -> list[BatchRecord]:
    return [r for r in records if r.cut_at >= WARMUP_S]


def cpu_per_record(records: list[BatchRecord]) -> float:
    """The CPU proxy: processing seconds per record."""
    return sum(r.processing_s for r in records) / sum(r.records for r in records)


def p95_latency(records: list[BatchRecord]) -> float:
    return float(np.percentile([r.latency_s for r in records], 95))


_FIXED_POINT: dict[tuple[str, str], list[BatchRecord]] = {}


def fixed_point(workload: str, profile: str) -> list[BatchRecord]:
    """fixed-point's batches after warm-up on the same scenario (computed once)."""
    key = (workload, profile)
    if key not in _FIXED_POINT:
        result = simulate(calibrated(workload, profile), "fixed-point")
        _FIXED_POINT[key] = after_warmup(result.records)
    return _FIXED_POINT[key]


# --- parameters ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2", 2.0), ("2s", 2.0), ("1500ms", 1.5), ("2 seconds", 2.0), (2, 2.0), ("1 min", 60.0)],
)
def test_target_takes_seconds_and_sparks_durations(text: object, seconds: float) -> None:
    assert create("slo", {"target": text}).params.target == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "fault"),
    [("2 parsecs", "is not a duration"), ("-1s", "is out of range"), ("0", "is out of range")],
)
def test_a_bad_target_names_the_parameter_the_value_and_the_forms(text: str, fault: str) -> None:
    with pytest.raises(AdabatchError) as err:
        create("slo", {"target": text})
    message = str(err.value)
    assert f"slo parameter 'target' = '{text}' {fault}" in message
    assert "1500ms" in message and "'2 seconds'" in message and "\n" not in message


def test_interval_bounds_are_durations_and_cross_checked() -> None:
    ctrl = create("slo", {"target": 2, "min_interval": "200ms", "max_interval": "2 minutes"})
    assert (ctrl.params.min_interval, ctrl.params.max_interval) == (0.2, 120.0)
    with pytest.raises(AdabatchError, match="'min_interval' = 5 must not exceed"):
        create("slo", {"target": 2, "min_interval": "5s", "max_interval": "2s"})


# --- the decision rule on noise-free costs ----------------------------------------------


def noise_free(workload: str, **params: float) -> object:
    base = {"per_block_s": 0, "cores": 1, "sigma": 0, "straggler": 0}
    return make_workload(workload, {**base, **params})


def test_the_longest_interval_that_meets_the_target() -> None:
    # p = 0.3 + 2e-5 n at 10,000 records/s: x + 0.3 + 0.2 x <= 2 up to x = 1.4167 s
    model = noise_free("filter", overhead_s=0.3, per_record_s=2e-5)
    ctrl = SloController(target=2, idle_reserve=0)
    out = run_simulation(ctrl, model, parse_profile("constant:10000"), 300.0)
    assert [r.interval_s for r in out.records[-50:]] == [1.4] * 50
    state = ctrl.metrics_state()
    assert state["mode"] == "target" and state["slo_met"] is True
    assert state["predicted_latency_s"] == pytest.approx(1.98)
    assert state["margin"] == pytest.approx(1.0)


def test_a_share_of_the_idle_interval_is_kept_back_from_the_target() -> None:
    # as above, with a tenth of the idle part x - p = 0.8 x - 0.3 kept back:
    # 1.2 x + 0.3 + 0.1 (0.8 x - 0.3) <= 2 up to x = 1.3516 s
    model = noise_free("filter", overhead_s=0.3, per_record_s=2e-5)
    ctrl = SloController(target=2)
    out = run_simulation(ctrl, model, parse_profile("constant:10000"), 300.0)
    assert [r.interval_s for r in out.records[-50:]] == [1.35] * 50
    state = ctrl.metrics_state()
    assert state["mode"] == "target" and state["predicted_latency_s"] == pytest.approx(1.92)


def test_the_reserve_alone_does_not_put_the_target_out_of_reach() -> None:
    # stable from x = 0.43 s (0.3 + 0.2 x <= 0.9 x); at 0.45 s the latency is 0.84 s and
    # with the reserve 0.846 s, over a 0.843 s target: the plan is 0.45 s, mode target
    model = noise_free("filter", overhead_s=0.3, per_record_s=2e-5)
    for reserve in (0.0, 0.1):
        ctrl = SloController(target=0.843, idle_reserve=reserve)
        out = run_simulation(ctrl, model, parse_profile("constant:10000"), 120.0)
        assert [r.interval_s for r in out.records[-20:]] == [0.45] * 20
        state = ctrl.metrics_state()
        assert state["mode"] == "target" and state["slo_met"] is True


def test_no_interval_past_where_processing_grows_faster_than_the_interval() -> None:
    # p = 0.3 + 1e-8 n^2 at 1,000 records/s: p/x is least at sqrt(0.3 / 0.01) = 5.48 s;
    # a 20 s target would allow 12.6 s, deep in the superlinear region
    model = noise_free("join", overhead_s=0.3, per_record_s=0, per_pair_s=4e-8, join_keys=1)
    ctrl = SloController(target=20)
    out = run_simulation(ctrl, model, parse_profile("constant:1000"), 1200.0)
    tail = {r.interval_s for r in out.records[-20:]}
    assert tail <= {5.45, 5.5}
    assert ctrl.metrics_state()["coefficients"][2] > 0  # learnt the n^2 term


# --- targets on sine and Markov profiles, against fixed-point ---------------------------


@pytest.mark.parametrize("target", [1.0, 2.0, 5.0])
@pytest.mark.parametrize("profile", ["sine", "markov"])
@pytest.mark.parametrize("workload", ["reduce", "join"])
def test_meets_the_target_at_less_cpu_than_fixed_point(
    workload: str, profile: str, target: float
) -> None:
    spec = PROFILES[workload][profile]
    result = simulate(calibrated(workload, spec), "slo", {"target": target})
    assert result.summary.stable
    kept = after_warmup(result.records)
    assert p95_latency(kept) <= target
    assert cpu_per_record(kept) < cpu_per_record(fixed_point(workload, spec))
    # never called out of reach; a rate step may leave a backlog drained in one batch
    modes = [r.controller_state["mode"] for r in kept]
    assert not {"floor", "overload"} & set(modes)
    assert modes.count("catch-up") <= 3


# --- a rate step ----------------------------------------------------------------------


def test_a_fit_without_fixed_cost_does_not_call_the_shortest_interval_cheapest() -> None:
    """Join at 9,000 records/s on Spark: seven batches of 9,000-12,600 records. Their fit
    went through the origin with a curve (a = d = 0, c > 0), so the cost per record looked
    least at the shortest interval and slo planned 0.1 s batches that queued. It now looks
    no further than a quarter of the smallest batch measured."""
    batches = [(1.0, 9000, 0.40), (1.3, 11700, 0.44), (1.4, 12599, 0.62), (1.25, 11250, 0.57),
               (1.25, 11250, 0.73), (1.2, 10800, 0.47)]  # fmt: skip
    ctrl, cut = SloController(target=2), 0.0
    for i, (x, n, p) in enumerate(batches):
        cut += x
        ctrl.observe(BatchReport(i, x, 2, n, p, 0.0, cut, cut, cut + p))
    a, _b, c, d = ctrl.metrics_state()["coefficients"]
    assert a == 0.0 and d == 0.0 and c > 0.0  # the fit this is about
    assert ctrl.plan(cut + 0.5).interval_s >= 9000 / 4 / 9000 - 1e-9  # was 0.1


def test_follows_a_rate_step_within_two_batches() -> None:
    # the default join model: its interval for 5 s moves from about 4 s to 1.1-1.5 s and
    # back (at 8,000 records/s it is where p/x is least, a flat optimum the fit finds
    # over tens of batches as it learns that part of its curve)
    scenario = make_scenario("join", "steps:2000@0,8000@300s,2000@600s", "900s")
    result = simulate(scenario, "slo", {"target": 5})
    records = result.records

    def steady(t0: float, t1: float) -> float:
        return float(np.median([r.interval_s for r in records if t0 <= r.cut_at < t1]))

    steps = ((300.0, 8000.0, steady(240.0, 300.0), steady(330.0, 600.0)),)
    steps += ((600.0, 2000.0, steady(540.0, 600.0), steady(630.0, 900.0)),)
    for step_at, rate, old, level in steps:
        new = [r for r in records if r.cut_at > step_at]
        # the plan made after each report (a batch that ran past it is cut when it
        # finishes, so the interval a batch had is not always the one planned)
        state = [r.controller_state for r in new]
        # new[0] holds the step and shows part of the new rate: the next plan moves ...
        assert (state[0]["interval"] - old) * (level - old) > 0
        # ... and new[1] shows all of it: every plan made after its report is for the new
        # rate and is predicted to meet the target at it (where the fit has no fixed cost
        # yet, every interval costs the same per record and the plan is the longest such)
        for s in state[1:31]:
            assert s["rate_rps"] == pytest.approx(rate, rel=0.01)
            assert s["mode"] == "target" and s["predicted_latency_s"] <= 5.0
    assert steady(540.0, 600.0) < steady(240.0, 300.0) - 1.0  # the step moved the interval


@pytest.mark.parametrize("seed", [0, 3, 5, 6])  # seeds 1, 2, 4: the margin absorbs the step
def test_a_cpu_taken_away_shortens_the_next_cut_at_its_first_slow_report(seed: int) -> None:
    """A background load takes 70 % of the CPU at 120 s: the batch that runs into it
    misses the target, and the window already open when it reports is cut earlier, so the
    batch after it meets the target (planned at its own cut, it missed as well)."""
    scenario = make_scenario(
        "join", "constant:9000", "200s", seed=seed, model=LOCAL2_FITS["join"],
        resources="0.3@120s-",
    )  # fmt: skip
    records = [r for r in simulate(scenario, "slo", {"target": 5}).records if r.cut_at > 100]
    over = [i for i, r in enumerate(records) if r.latency_s > 5.0]
    assert over, "the load step made no batch miss: the scenario tests nothing"
    assert records[over[0] + 1].latency_s <= 5.0
    assert len(over) <= 2


@pytest.mark.parametrize("seed", [2, 3])
def test_no_batch_waits_in_a_queue_behind_a_slow_one(seed: int) -> None:
    """The CPU is gone for a second: the batch that runs into it takes four times as
    long. The next one is cut when it finishes, with what arrived by then, as Spark's
    processingTime trigger does; none is cut on schedule to wait behind it."""
    scenario = make_scenario(
        "join", "constant:9000", "100s", seed=seed, model=LOCAL2_FITS["join"],
        resources="0.05@60s-61s",
    )  # fmt: skip
    records = simulate(scenario, "slo", {"target": 2}).records
    slow = [r for r in records if r.processing_s > 1.5]
    assert slow, "no batch ran into the load: the scenario tests nothing"
    after = records[slow[0].batch_id + 1]
    assert after.cut_at == pytest.approx(slow[0].finished_at)
    assert max(r.queue_delay_s for r in records) == 0.0


def test_a_window_cut_at_once_behind_a_slow_batch_adds_no_latency_error() -> None:
    """After a 2 s batch among 0.4 s ones the next plan is shorter, and its window, open
    since that batch was cut, is cut at once when it ends: its latency is the slow
    batch's miss (in that batch's ratio and error), not an error of a plan of the rule,
    so it adds nothing behind ``δ``. (On Spark such windows after catch-up and overload
    batches put 5-6.6 s into ``δ`` for the rest of a run.)"""
    ctrl = SloController(target=2)
    steady = [0.4 + 0.02 * (i % 5) for i in range(30)]
    plan, start, free, cuts, added = ctrl.plan(0.0), 0.0, 0.0, [], []
    for i, p in enumerate([*steady, 2.0, 0.45, 0.45, 0.45]):
        cut = max(start + plan.interval_s, free)  # Spark's batching model: cut when free
        errors = len(ctrl._errors)
        ctrl.plan(cut)  # the next window opens at the cut
        n = round(10_000 * (cut - start))
        ctrl.observe(BatchReport(i, cut - start, 2, n, p, 0.0, cut, cut, cut + p))
        plan, start, free = ctrl.plan(cut), cut, cut + p  # asked again after the report
        cuts.append(cut)
        added.append(len(ctrl._errors) - errors)
    slow = len(steady)
    assert cuts[slow + 1] == pytest.approx(cuts[slow] + 2.0)  # cut when the slow one ended
    assert added[slow : slow + 3] == [1, 0, 1]


def test_a_cost_over_the_margin_goes_to_the_ratios_not_to_the_latency_error() -> None:
    """A batch planned by the rule takes four times its usual processing (a load's onset):
    the ratios count it, so ``δ`` learns none of it. (On Spark, window at a 5 s target,
    such a batch had put 1.7 s into ``δ`` for the rest of the run.)"""
    ctrl = SloController(target=2)
    steady = [0.4 + 0.02 * (i % 5) for i in range(30)]
    plan, start, free = ctrl.plan(0.0), 0.0, 0.0
    for i, p in enumerate([*steady, 4 * 0.44]):
        cut = max(start + plan.interval_s, free)
        planned = ctrl._pending.get(round(cut, 6))
        ctrl.plan(cut)
        n = round(10_000 * (cut - start))
        ctrl.observe(BatchReport(i, cut - start, 2, n, p, 0.0, cut, cut, cut + p))
        plan, start, free = ctrl.plan(cut), cut, cut + p
    assert planned is not None, "the slow batch was not planned by the rule: nothing tested"
    assert ctrl._latencies.values[-1] > planned[0] + 1.0  # it missed the plan by over 1 s
    assert ctrl._ratios.values[-1] > 3.0
    assert ctrl._errors.values[-1] <= 0.05
    assert ctrl.margins().delta <= 0.05


@pytest.mark.parametrize("seed", [0, 2, 5])  # seeds 1, 3, 9: no window needs the cut
def test_a_burst_under_an_open_window_cuts_it_when_full(seed: int) -> None:
    """The rate quadruples under a planned 4.5 s window. A window that fills with more
    records than still meet a 5 s target is cut once it holds that many (``cut_when_full``)
    instead of growing past it, so no batch misses (before, the window open when the burst
    began missed, and with it the one planned before its report)."""
    model = {**LOCAL2_FITS["join"], "per_record_s": 2.5e-6, "per_pair_s": 0.0, "sigma": 0.15}
    spec = "steps:9000@0,36000@40s,9000@48s"
    scenario = make_scenario("join", spec, "70s", seed=seed, model=model)
    records = [r for r in simulate(scenario, "slo", {"target": 5}).records if r.cut_at > 20]
    burst = [r for r in records if 40.0 < r.cut_at < 52.0]
    full = [r for r in burst if r.max_records is not None and r.records == r.max_records]
    assert full, "no window was cut when full: the scenario tests nothing"
    assert all(r.interval_s < 4.45 for r in full)
    assert max(r.latency_s for r in records) <= 5.0


def test_a_rate_seen_before_is_planned_from_what_was_learnt_there() -> None:
    spec = "steps:2000@0,8000@300s,2000@900s"
    result = simulate(calibrated("join", spec, "1200s"), "slo", {"target": 5})
    records = result.records
    before = float(np.median([r.interval_s for r in records if 200.0 <= r.cut_at < 300.0]))
    back = [r for r in records if r.cut_at > 900.0]
    # the plan after the first full report at 2,000 records/s again: no search (within
    # two granules: the margin is learnt on more batches by now)
    assert [abs(r.interval_s - before) <= 0.1 + 1e-9 for r in back[3:10]] == [True] * 7
    assert p95_latency(back[3:]) <= 5.0


# --- a target out of reach --------------------------------------------------------------


def test_a_target_below_the_processing_floor_is_reported_and_the_run_stays_stable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="adabatch.control.slo")
    scenario = calibrated("reduce", "constant:50000", "600s")
    result = simulate(scenario, "slo", {"target": "150ms"})
    records = result.records
    first = next(i for i, r in enumerate(records) if r.controller_state["warned"])
    assert first < 10
    lines = [r.getMessage() for r in caplog.records if r.name == "adabatch.control.slo"]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert "latency target 0.15 s (p95)" in lines[0] and "cannot be met" in lines[0]
    assert "best achievable" in lines[0] and "processing floor" in lines[0]
    assert result.summary.stable
    kept = after_warmup(records)
    states = [r.controller_state for r in records[first:]]
    assert not any(s["slo_met"] for s in states)
    assert {s["mode"] for s in states} == {"floor"}
    achievable = float(np.median([s["achievable_latency_s"] for s in states]))
    assert achievable > 0.15
    # the reported floor is what the run achieved (re-checked against what happened)
    assert achievable == pytest.approx(p95_latency(kept), rel=0.2)
    assert max(r.queue_len for r in kept) <= 2
    # the lowest latency that is stable: a longer interval than the floor's would not help
    assert p95_latency(kept) < p95_latency(after_warmup(simulate(scenario, "fixed-point").records))


def test_near_the_edge_of_stability_the_floor_gives_up_headroom_for_latency() -> None:
    # p = 0.3 + 8.5e-5 n; at 9,500 records/s P(x) = 0.3 + 0.8075 x keeps up from x = 1.56 s
    # (latency 1.8075 x + 0.3: 3.19 s at the grid's 1.6 s) and has 10 % headroom only
    # from 3.24 s (6.17 s): a 4 s target is out of reach, and the floor is the longest
    # interval within 1.5 x 3.19 s, 2.45 s at 4.73 s (at 5,000 records/s first, batches
    # of about 13,000 records were measured: the fit is trusted up to four times that)
    model = noise_free("filter", overhead_s=0.3, per_record_s=8.5e-5)
    ctrl = SloController(target=4)
    out = run_simulation(ctrl, model, parse_profile("steps:5000@0,9500@120s"), 300.0)
    assert [r.interval_s for r in out.records[-20:]] == [2.45] * 20
    state = ctrl.metrics_state()
    assert state["mode"] == "floor" and state["slo_met"] is False
    assert state["achievable_latency_s"] == pytest.approx(4.728, abs=0.001)
    assert max(r.latency_s for r in out.records[-20:]) == pytest.approx(4.728, abs=0.001)


def test_a_floor_its_batches_meet_is_not_reported_out_of_reach(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A 0.5 s target at 50,000 records/s: the first batches predict 0.51 s at the
    shortest stable interval, so the plans are of mode floor, but their batches end at
    0.42-0.46 s: the margin is wrong, not the target, and nothing says it is out of
    reach."""
    caplog.set_level(logging.WARNING, logger="adabatch.control.slo")
    result = simulate(calibrated("reduce", "constant:50000", "60s"), "slo", {"target": 0.5})
    lines = [r.getMessage() for r in caplog.records if r.name == "adabatch.control.slo"]
    assert lines == []
    states = [r.controller_state for r in result.records]
    assert sum(s["mode"] == "floor" for s in states[:10]) >= 5
    assert not any(s["out_of_reach"] for s in states)
    assert all(s["slo_met"] for s in states[-20:])


def test_a_target_out_of_reach_under_a_load_is_reported_and_taken_back_after_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Window at 150,000 records/s and a 3 s target while a load leaves half the cores
    for 40 s: the floor's batches over the target confirm it out of reach (one line, and
    one more for the overload that follows); once the load has gone and the batches meet
    the target again, one more line says so."""
    caplog.set_level(logging.WARNING, logger="adabatch.control.slo")
    scenario = make_scenario("window", "constant:150000", "400s", resources="0.5@40s-80s")
    result = simulate(scenario, "slo", {"target": 3})
    lines = [r.getMessage() for r in caplog.records if r.name == "adabatch.control.slo"]
    assert len(lines) == 3, lines
    assert "3 s (p95)" in lines[0] and "cannot be met" in lines[0] and "floor" in lines[0]
    assert "cannot be met: processing exceeds the interval" in lines[1]
    assert "is met again: the observed p95 batch latency is" in lines[2]
    states = [(r.cut_at, r.controller_state) for r in result.records]
    reached = [t for t, s in states if s["out_of_reach"]]
    assert reached and reached[0] > 40.0 and reached[-1] < 120.0
    # a floor is confirmed by three batches over the target, not by its plan alone
    first = next(i for i, (_, s) in enumerate(states) if s["out_of_reach"])
    floor_before = [r.latency_s for r in result.records[:first] if r.cut_at > 40.0]
    assert sum(latency > 3.0 for latency in floor_before) >= 2
    warned = [bool(s["warned"]) for _, s in states]
    back = warned.index(False, warned.index(True))
    assert [s["slo_met"] for _, s in states[back - 2 : back + 1]] == [True] * 3
    assert all(s["observed_latency_s"] <= 3.0 for _, s in states[back:])


# --- overload ---------------------------------------------------------------------------


OVERLOAD = "steps:3000@0,20000@120s,2000@300s"  # default join: ~10,500 records/s at most


def test_overload_caps_batches_and_loses_no_record() -> None:
    profile = parse_profile(OVERLOAD)
    model = make_workload("join")  # the model's defaults: no interval is stable at 20k/s
    arrivals = ProfileArrivals(profile)
    ctrl = SloController(target=2)
    out = simulate_arrivals(ctrl, model, arrivals, 900.0, rng=np.random.default_rng(0))
    records = out.records
    assert not out.diverged
    capped = [r for r in records if r.max_records is not None]
    assert capped and all(r.records <= r.max_records for r in capped)
    assert max(r.queue_len for r in records) <= 5  # the queue stays bounded
    # the queue of the uncapped batches cut before the first report at 20k/s drains
    assert max(r.latency_s for r in records if r.cut_at > 180.0) < 2.5
    # the backlog the controller reports is the records left in the source
    offset, errors = 0, []
    for r in records:
        offset += r.records
        waiting = math.floor(profile.cumulative(r.cut_at)) - offset
        if 150.0 <= r.cut_at <= 300.0:
            errors.append(abs(r.controller_state["backlog_records"] - waiting) / waiting)
    assert max(errors) < 0.02
    # nothing is lost: once the rate falls, the backlog drains and every record that
    # arrived is in a processed batch, but for the last interval's
    processed = sum(r.records for r in records)
    assert arrivals.arrived - processed <= 2000 * records[-1].interval_s + 1
    assert records[-1].controller_state["mode"] == "target"
    # without the cap the same scenario diverges
    free = simulate(make_scenario("join", OVERLOAD, "900s"), "fixed-point").summary
    assert free.get("diverged") is True


def test_after_overload_the_backlog_drains_within_the_target_at_the_new_rate() -> None:
    """The reports say what the source holds, so the rate fall at 300 s is seen under caps
    at once; the backlog then drains in capped batches that meet the target."""
    profile = parse_profile(OVERLOAD)
    out = simulate_arrivals(
        SloController(target=2), make_workload("join"), ProfileArrivals(profile), 900.0,
        rng=np.random.default_rng(0),
    )  # fmt: skip
    after = [r for r in out.records if r.cut_at > 300.0]
    assert after[1].controller_state["rate_rps"] == pytest.approx(2000, rel=0.05)
    draining = [r for r in after if r.controller_state["mode"] == "catch-up"]
    assert len(draining) > 20 and all(r.max_records is not None for r in draining)
    assert max(r.latency_s for r in after) <= 2.0 * 1.1
    assert not any(r.controller_state["slo_met"] for r in draining)  # records still wait
    assert out.records[-1].controller_state["mode"] == "target"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_after_a_cpu_load_overload_ends_and_the_target_is_met_again(seed: int) -> None:
    """Window at 150,000 records/s with a 5 s target while a load leaves 0.2 of the cores
    for 40 s: the load's batches bend the fit so that no interval looks stable after it.
    The overload caps grow with what the latest batch shows fits, so overload ends;
    before, ties among the caps were broken toward 0.1 s batches whose fixed cost read as
    noise (a margin of 14), and overload held to the end with the backlog growing."""
    scenario = make_scenario(
        "window", "constant:150000", "180s", seed=seed, resources="0.2@40s-80s"
    )
    records = simulate(scenario, "slo", {"target": 5}).records
    after = [r for r in records if r.cut_at > 80.0]
    assert min(r.records for r in after) > 20_000  # no batch far below those measured
    settled = [r for r in records if r.cut_at > 120.0]
    assert not any(r.controller_state["mode"] == "overload" for r in settled)
    assert records[-1].controller_state["backlog_records"] == 0
    assert p95_latency(settled) <= 5.0


# --- catch-up: a stream started five minutes behind -------------------------------------

BEHIND_S = 300.0


class _FixedCap(Controller):
    """Spark's default trigger with a record cap (``maxOffsetsPerTrigger``): the next batch
    as soon as the last one finishes, at most ``cap`` records: a user's usual fix."""

    name = "fixed-cap"
    summary = "test baseline"

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap

    def plan(self, now: float) -> BatchPlan:
        return BatchPlan(0.1, 2, self.cap, when_free=True)

    def observe(self, report: BatchReport) -> None:
        pass

    def state(self) -> dict:
        return {}

    def restore(self, state: dict) -> None:
        pass


def _behind(
    workload: str, rate: int, ctrl: Controller, target: float = 2.0
) -> tuple[list[BatchRecord], float]:
    """The batches of ``ctrl`` starting ``BEHIND_S`` behind a constant ``rate``, and the
    seconds until the backlog was read: until the batch from which on every batch's
    record latency stays within ``target`` finished (what ``adabatch bench slo`` counts;
    ``inf``: never in the run)."""
    model = make_workload(workload, LOCAL2_FITS[workload])
    profile = parse_profile(f"constant:{rate}")
    out = run_simulation(ctrl, model, profile, BEHIND_S + 300.0, behind_s=BEHIND_S)
    assert not out.diverged
    records = list(out.records)
    late = [i for i, r in enumerate(records) if r.record_latency_s > target]
    if not late or late[-1] + 1 >= len(records):
        return records, math.inf  # never caught up within the run
    return records, records[late[-1] + 1].finished_at - BEHIND_S


@pytest.mark.parametrize(
    ("workload", "rate", "target"),
    [("reduce", 50_000, 1.0), ("reduce", 5_000, 2.0), ("join", 2_000, 2.0)],
)
def test_a_stream_started_behind_is_read_at_full_speed_in_bounded_batches(
    workload: str, rate: int, target: float
) -> None:
    records, took = _behind(workload, rate, SloController(target=target), target)
    caps = [_behind(workload, rate, _FixedCap(s * rate), target)[1] for s in (20, 100)]
    assert took <= 1.25 * min(caps), (took, caps)
    # the first batch is one planned window, not the five minutes; none is unbounded
    assert records[0].records <= rate * target
    assert records[0].left_records >= rate * (BEHIND_S - target)  # the backlog, per batch
    # bounded by time, not by the backlog: no batch is planned past what the machine reads
    # in CATCH_UP_MAX_S (the noise of the cost model on top)
    assert max(r.processing_s for r in records) <= 1.5 * CATCH_UP_MAX_S
    # a record's state is the decision made after it: the plan of the batch after it
    draining = [
        b for a, b in itertools.pairwise(records) if a.controller_state["mode"] == "catch-up"
    ]
    assert draining and all(r.queue_delay_s == 0.0 for r in draining)  # cut when free
    # then the target holds again
    after = [r for r in records if r.cut_at > BEHIND_S + took + 30.0]
    assert p95_latency(after) <= target
    assert {r.controller_state["mode"] for r in after} == {"target"}


@pytest.mark.parametrize("seed", [0, 2])
def test_the_last_catch_up_batch_leaves_the_window_after_it_within_the_target(
    seed: int,
) -> None:
    """The window open while the last catch-up batch runs is cut when it finishes: a 1.3-1.7
    s batch that took all that waited made it miss a 1 s target (2.4-2.9 s; on Spark,
    window at 2 s: 2.61 s). That batch now holds only what lets the window after it meet
    the target; the rest goes in the next ones."""
    model = make_workload("reduce", LOCAL2_FITS["reduce"])
    out = run_simulation(
        SloController(target=1), model, parse_profile("constant:50000"), BEHIND_S + 60.0,
        behind_s=BEHIND_S, seed=seed,
    )  # fmt: skip
    records = list(out.records)
    last = max(i for i, r in enumerate(records) if r.controller_state["mode"] == "catch-up")
    assert records[last].cut_at < BEHIND_S + 20.0  # caught up within 20 s, as before
    assert max(r.latency_s for r in records[last + 1 :]) <= 1.25


def test_catch_up_batches_grow_past_the_largest_measured_only_while_records_s_rise() -> None:
    """Quadratic work (join pairs) measured at 8-12k records, where a linear fit sees no
    curve: while the steps raise the records/s the fit is followed up to 4x the largest
    batch; once a step of the same size read no faster, no batch goes past it."""
    rising, settled = ProcessingFit(0.98, 0.02, 0.1), ProcessingFit(0.98, 0.02, 0.1)
    for n in (2_000, 8_000):
        rising.add(n, 2, 0.1 + 6e-5 * n)
    for n in (8_000, 12_000, 12_000):
        settled.add(n, 2, 0.1 + 6e-5 * n)
    assert catch_up_records(rising, 2, 1.0, 10**9) > 1.5 * 8_000
    assert catch_up_records(settled, 2, 1.0, 10**9) <= 12_000
    # but always more than arrives while a batch runs, or the backlog grows (up to the cap)
    assert catch_up_records(settled, 2, 1.0, 10**9, at_least=15_000.2) == 15_001
    assert catch_up_records(settled, 2, 1.0, 14_000, at_least=15_000.2) == 14_000


def _drained_s(ctrl: Controller) -> float:
    """Seconds from the start until the source holds at most 3 s of arrivals, for a join
    at 9,000 records/s whose floor (about 2.2 s) lies above a 2 s target, 5 min behind."""
    fits = {**LOCAL2_FITS["join"], "overhead_s": 0.6, "per_record_s": 3e-5, "per_pair_s": 0.0}
    out = run_simulation(
        ctrl, make_workload("join", fits), parse_profile("constant:9000"), BEHIND_S + 300.0,
        behind_s=BEHIND_S,
    )  # fmt: skip
    left = (r for r in out.records[1:] if (r.left_records or 0) <= 9000 * 3.0)
    return next((r.finished_at - BEHIND_S for r in left), math.inf)


def test_a_backlog_is_read_at_full_speed_when_the_target_is_out_of_reach() -> None:
    """Behind, with no interval meeting the target even for the arrivals alone: the backlog
    is still read in catch-up batches, not at the pace of floor plans' caps (which took
    longer than the run's 300 s)."""
    caps = [_drained_s(_FixedCap(s * 9000)) for s in (20, 100)]
    assert _drained_s(SloController(target=2.0)) <= 1.25 * min(caps), caps


def test_spark_default_reads_the_whole_backlog_at_once_and_slo_does_not() -> None:
    """What a cap is for: without one, the batch after the first holds everything."""
    whole = _behind("join", 2_000, _FixedCap(10**9))[0]
    assert whole[1].records >= 2_000 * BEHIND_S * 0.99
    slo = _behind("join", 2_000, SloController(target=2.0))[0]
    longest = max(r.processing_s for r in slo)
    assert longest <= 1.5 * CATCH_UP_MAX_S  # about what one batch may be predicted to take
    assert longest < 0.05 * max(r.processing_s for r in whole)


# --- state --------------------------------------------------------------------------------


def test_state_round_trips_mid_overload_and_is_compact() -> None:
    ctrl = SloController(target=2)
    run_simulation(ctrl, make_workload("join"), parse_profile(OVERLOAD), 200.0)
    assert ctrl.metrics_state()["mode"] == "overload"
    text = json.dumps(ctrl.state())
    assert len(text) < 20_000
    twin = SloController(target=2)
    twin.restore(json.loads(text))
    assert twin.state() == ctrl.state()
    assert twin.plan(200.0) == ctrl.plan(200.0)
    assert twin.plan(200.0).max_records is not None


def test_a_malformed_state_is_refused() -> None:
    with pytest.raises(AdabatchError, match="slo state is malformed"):
        SloController(target=2).restore({"fit": {"bins": [[1, 2, 3]]}})


def test_a_batch_far_below_those_measured_does_not_make_the_margin() -> None:
    """The first three batches of the window query at 300,000 records/s on Spark: 150,000
    and 198,874 records took 0.66 and 1.07 s, so the fit went through the origin and a
    14,564-record probe was predicted 0.07 s; it took 0.81 s, its fixed cost. The fit
    learns that cost from it; counted as noise too, the 11x miss made the margin 11 and
    planned a 9.8 s overload window against a 1 s target, whose backlog took 40 batches."""
    ctrl = SloController(target=1)
    # (interval, records, processing, cut) as the Spark run reported them
    batches = [(0.5, 150_000, 0.6621, 0.5), (0.6629, 198_874, 1.0745, 1.1629),
               (1.0745, 14_564, 0.8146, 2.2374)]  # fmt: skip
    for i, (x, n, p, cut) in enumerate(batches):
        ctrl.observe(BatchReport(i, x, 2, n, p, 0.0, cut, cut, cut + p))
    assert ctrl.margins().q < 2.0  # the early margin, not the probe's miss
    plan = ctrl.plan(2.2374 + 0.8146)
    assert plan.interval_s < 5.0
    assert ctrl.state()["mode"] != "overload"  # 300,000/s fit at an interval of about 2 s


def test_an_empty_batch_does_not_stop_the_margin_learning() -> None:
    """An empty batch (a lull) is no batch size to measure the others against: the ratios
    of the batches after it still count."""
    ctrl = SloController(target=2)
    batches = [(1.0, 5000, 0.5), (1.0, 0, 0.3), (1.0, 6000, 0.9), (1.0, 5500, 0.9)]
    for i, (x, n, p) in enumerate(batches):
        cut = i + 1.0
        ctrl.observe(BatchReport(i, x, 2, n, p, 0.0, cut, cut, cut + p))
    assert len(ctrl._ratios) == 2  # the two batches after the empty one
