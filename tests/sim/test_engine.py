"""The discrete-event engine: accounting against hand-computed cases, admission, divergence,
determinism, and speed; then the registered controllers on the simulated workloads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from adabatch.control.base import BatchPlan, BatchReport, Controller
from adabatch.control.registry import create
from adabatch.errors import AdabatchError
from adabatch.profiles import parse_profile
from adabatch.runs.simulated import make_scenario, simulate
from adabatch.sim.engine import ProfileArrivals, run_simulation
from adabatch.sim.workloads import make_workload, parse_resources


def linear_model(overhead_s: float, per_record_s: float = 0.01):
    """p = overhead + per_record * n on one core, one block, no noise."""
    return make_workload(
        "filter",
        {
            "overhead_s": overhead_s,
            "per_block_s": 0,
            "per_record_s": per_record_s,
            "cores": 1,
            "sigma": 0,
        },
    )


class Scripted(Controller):
    """A tiny in-test controller: plays back plans and logs every call."""

    name = "scripted"
    summary = "test"

    def __init__(self, plans: list[BatchPlan]) -> None:
        super().__init__()
        self.plans = list(plans)
        self.log: list[tuple[str, float]] = []
        self.reports: list[BatchReport] = []

    def plan(self, now: float) -> BatchPlan:
        self.log.append(("plan", now))
        planned = sum(1 for kind, _ in self.log if kind == "plan")
        return self.plans[min(planned, len(self.plans)) - 1]

    def observe(self, report: BatchReport) -> None:
        self.log.append(("observe", report.finished_at))
        self.reports.append(report)

    def state(self) -> dict[str, Any]:
        return {"observed": len(self.reports)}

    def restore(self, state: Mapping[str, Any]) -> None:
        pass


def test_hand_computed_stable_case():
    # 10 records/s, x = 1 s, p = 0.5 + 0.01 * 10 = 0.6 s; records spread evenly in time
    ctrl = create("static", {"interval": 1.0, "blocks": 1})
    out = run_simulation(ctrl, linear_model(0.5), parse_profile("constant:10"), 3.0)
    assert [r.cut_at for r in out.records] == [1.0, 2.0, 3.0]
    for i, r in enumerate(out.records):
        assert r.records == 10
        assert r.queue_delay_s == 0.0
        assert r.processing_s == pytest.approx(0.6)
        assert r.finished_at == pytest.approx(i + 1.6)
        assert r.latency_s == pytest.approx(1.6)  # x + q + p
        # the records of batch i arrived evenly over (i, i + 1]: mean arrival i + 0.5
        assert r.record_latency_s == pytest.approx(1.6 - 0.5)
        assert r.queue_len == 0
        assert r.controller_state == {"observed": i + 1}
    assert out.final_queue_len == 0
    assert not out.diverged


def test_hand_computed_queueing_case():
    # p = 1.2 + 0.1 = 1.3 s > x = 1 s: batch 1 waits 0.3 s, batch 2 never starts by t = 3
    ctrl = create("static", {"interval": 1.0, "blocks": 1})
    out = run_simulation(ctrl, linear_model(1.2), parse_profile("constant:10"), 3.0)
    b0, b1 = out.records
    assert (b0.started_at, b0.finished_at) == pytest.approx((1.0, 2.3))
    assert (b1.cut_at, b1.started_at, b1.finished_at) == pytest.approx((2.0, 2.3, 3.6))
    assert b1.queue_delay_s == pytest.approx(0.3)
    assert b1.latency_s == pytest.approx(1.0 + 0.3 + 1.3)
    assert b1.record_latency_s == pytest.approx(3.6 - 1.5)
    assert b0.queue_len == 1  # batch 1 was waiting when batch 0 finished
    assert out.final_queue_len == 1  # batch 2 (cut at 3.0) still queued
    assert out.cuts == 3


def test_a_finishing_batch_is_observed_before_the_cut_at_the_same_instant():
    # p = 0.9 + 0.1 = 1.0 = x: batch 0 finishes exactly at the cut at t = 2
    ctrl = Scripted([BatchPlan(1.0, 1)])
    run_simulation(ctrl, linear_model(0.9), parse_profile("constant:10"), 3.0)
    assert ctrl.log[:4] == [("plan", 0.0), ("plan", 1.0), ("observe", 2.0), ("plan", 2.0)]


def test_plans_take_effect_at_the_next_cut():
    plans = [BatchPlan(0.5, 1), BatchPlan(1.0, 2), BatchPlan(2.0, 3)]
    ctrl = Scripted(plans)
    out = run_simulation(ctrl, linear_model(0.1, 0.001), parse_profile("constant:100"), 6.5)
    assert [r.cut_at for r in out.records] == [0.5, 1.5, 3.5, 5.5]
    assert [r.interval_s for r in out.records] == [0.5, 1.0, 2.0, 2.0]
    assert [r.blocks for r in out.records] == [1, 2, 3, 3]
    assert [r.records for r in out.records] == [50, 100, 200, 200]
    assert [t for kind, t in ctrl.log if kind == "plan"] == [0.0, 0.5, 1.5, 3.5, 5.5]


def test_admission_cap_keeps_records_and_their_arrival_times():
    # 10 records/s, at most 5 admitted per 1 s batch: the other 5 wait in the source
    ctrl = create("static", {"interval": 1.0, "blocks": 1, "max_records": 5})
    out = run_simulation(ctrl, linear_model(0.1), parse_profile("constant:10"), 10.0)
    assert [r.records for r in out.records] == [5] * 10
    assert all(r.max_records == 5 for r in out.records)
    for i, r in enumerate(out.records):
        # batch i holds the records that arrived in (i/2, (i+1)/2]
        mean_arrival = 0.5 * i + 0.25
        assert r.record_latency_s == pytest.approx(r.finished_at - mean_arrival)
    # the backlog grows: records wait longer and longer in the source
    assert out.records[-1].record_latency_s > out.records[0].record_latency_s + 4.0


def test_admission_cap_drains_a_backlog_later():
    # 10 records/s for 2 s, then 1 record/s; cap 8: the backlog of 2 s is drained afterwards
    ctrl = create("static", {"interval": 1.0, "blocks": 1, "max_records": 8})
    out = run_simulation(ctrl, linear_model(0.1), parse_profile("step:10:1:2s"), 8.0)
    counts = [r.records for r in out.records]
    assert counts == [8, 8, 5, 1, 1, 1, 1, 1]
    assert sum(counts) == 26  # everything that arrived by t = 8 s, nothing lost


def test_coalesce_merges_the_batches_that_waited():
    # p = 2.5 s + 0.01 s per record > x = 1 s: while a batch runs, the next cuts wait
    def run(queue: str):
        ctrl = create("static", {"interval": 1.0, "blocks": 1})
        model = linear_model(2.5)
        return run_simulation(ctrl, model, parse_profile("constant:10"), 6.5, queue=queue)

    fifo, coalesce = run("fifo"), run("coalesce")
    assert [r.records for r in fifo.records] == [10, 10, 10]
    assert [r.cut_at for r in fifo.records] == [1.0, 2.0, 3.0]
    # coalesce: the cuts at 2 and 3 go as one batch at 3.6, those at 4, 5 and 6 at 6.3
    _, b1, b2 = coalesce.records
    assert [r.records for r in coalesce.records] == [10, 20, 30]
    assert (b1.cut_at, b1.interval_s, b1.started_at) == pytest.approx((3.0, 2.0, 3.6))
    assert b1.queue_delay_s == pytest.approx(0.6)
    assert b1.record_latency_s == pytest.approx(b1.finished_at - 2.0)  # arrived over (1, 3]
    assert (b2.cut_at, b2.interval_s, b2.records) == pytest.approx((6.0, 3.0, 30))
    assert coalesce.cuts == fifo.cuts == 6
    assert coalesce.final_queue_len == 0 and fifo.final_queue_len == 3


def test_queue_mode_is_checked():
    ctrl = create("static")
    with pytest.raises(AdabatchError, match="queue = 'lifo': allowed fifo, coalesce"):
        run_simulation(ctrl, linear_model(0.1), parse_profile("constant:10"), 5.0, queue="lifo")


def test_profile_arrivals_run_forward_and_hand_out_records_once():
    arrivals = ProfileArrivals(parse_profile("constant:10"))
    assert arrivals.available(1.0) == 10
    assert arrivals.available(1.0) == 10  # asked again at the same instant: no new records
    assert arrivals.mean_arrival(0, 5) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="next untaken 5"):
        arrivals.mean_arrival(0, 5)
    with pytest.raises(ValueError, match="runs forward"):
        arrivals.available(0.5)


def test_static_below_processing_time_diverges_and_stops_early():
    ctrl = create("static", {"interval": 0.1})
    out = run_simulation(ctrl, make_workload("reduce"), parse_profile("constant:5000"), 7200.0)
    assert out.diverged
    assert out.end_s < 1200.0  # stopped early: far fewer batches than two hours would cut
    assert len(out.records) < 1200.0 / 0.1
    result = simulate(make_scenario("reduce", "constant:5000", "2h"), "static", {"interval": 0.1})
    assert result.summary.extra["diverged"] is True
    assert result.summary.stable is False


def test_static_above_processing_time_is_stable():
    result = simulate(make_scenario("reduce", "constant:5000", "10m"), "static", {"interval": 1})
    s = result.summary
    assert s.stable is True and s.extra["diverged"] is False
    assert s.final_queue_len <= 1
    assert s.mean_processing_s < 0.5
    # throughput equals the offered rate (the last cut is at 600 s)
    assert s.throughput_rps == pytest.approx(5000, rel=1e-6)


def test_deterministic_for_a_seed():
    sc = make_scenario("join", "markov:2000,5000,8000:20s", "5m", seed=4, poisson=True)
    a = simulate(sc, "static", {"interval": 0.5})
    b = simulate(sc, "static", {"interval": 0.5})
    assert a.records == b.records
    other = simulate(
        make_scenario("join", "markov:2000,5000,8000:20s", "5m", seed=5, poisson=True),
        "static",
        {"interval": 0.5},
    )
    assert other.records != a.records


def test_poisson_counts_vary_around_the_profile():
    sc = make_scenario("filter", "constant:1000", "10m", poisson=True, noise=0)
    counts = [r.records for r in simulate(sc, "static", {"interval": 1.0}).records]
    assert len(set(counts)) > 10
    assert sum(counts) / len(counts) == pytest.approx(1000, rel=0.01)


def test_resources_slow_processing_inside_the_window():
    sc = make_scenario("filter", "constant:200000", "180s", noise=0, resources="0.5@60s-120s")
    records = simulate(sc, "static", {"interval": 1.0}).records
    inside = [r.processing_s for r in records if 60 <= r.started_at < 120]
    outside = [r.processing_s for r in records if r.started_at < 60]
    parallel = 200_000 * 1.5e-6 / 2  # work over two cores
    assert min(inside) - max(outside) == pytest.approx(parallel, rel=1e-6)
    assert parse_resources("0.5@60s-120s").factor(130) == 1.0


def test_record_latency_under_a_varying_rate():
    # a step inside a batch: 10 records/s in [0, 0.5), 30 records/s after; x = 1
    ctrl = create("static", {"interval": 1.0, "blocks": 1})
    out = run_simulation(ctrl, linear_model(0.1, 0.0), parse_profile("step:10:30:0.5"), 1.0)
    (r,) = out.records
    assert r.records == 20
    # 5 records over (0, 0.5] (mean 0.25), 15 over (0.5, 1] (mean 0.75)
    expected = r.finished_at - (5 * 0.25 + 15 * 0.75) / 20
    assert r.record_latency_s == pytest.approx(expected)
    # counted one by one (record j at the instant the count reaches j) the mean is 0.65:
    # the fluid is half an inter-arrival time earlier
    assert abs(r.finished_at - r.record_latency_s - 0.65) < 0.5 / 10


def test_bad_duration():
    with pytest.raises(AdabatchError, match="duration"):
        run_simulation(create("static"), make_workload("filter"), parse_profile("constant:1"), -5.0)


def test_an_hour_runs_to_its_end():
    # how fast is benchmarks/sim_speed.py's figure; here, that the hour is simulated whole
    ctrl = create("fixed-point")
    out = run_simulation(
        ctrl, make_workload("reduce"), parse_profile("sine:2000:8000:60s"), 3600.0, seed=1
    )
    assert len(out.records) > 3000
    assert not out.diverged and out.records[-1].cut_at > 3590.0


# -- the registered controllers in the simulator -----------------------------------------


def test_fixed_point_finds_the_type1_interval_on_join():
    # join at 5000 records/s crosses p = 0.7 x near 0.52 s (Type I) and 8.3 s (Type II)
    sc = make_scenario("join", "constant:5000", "10m", noise=0.05, warmup="60s")
    s = simulate(sc, "fixed-point").summary
    assert s.stable
    assert 0.4 < s.mean_interval_s < 1.5


def test_fixed_point_tracks_a_step_up_in_rate():
    sc = make_scenario("join", "step:3000:7000:300s", "10m", noise=0.05)
    records = simulate(sc, "fixed-point").records
    before = [r.interval_s for r in records if 200 < r.cut_at < 300]
    after = [r.interval_s for r in records if 500 < r.cut_at < 600]
    assert sum(after) / len(after) > sum(before) / len(before)
    assert max(r.queue_delay_s for r in records if r.cut_at > 500) < 2.0


@pytest.mark.parametrize("name", ["fixed-point", "static", "adcom", "pid", "isotonic"])
def test_registered_controllers_run_in_the_simulator(name):
    try:
        sc = make_scenario("reduce", "sine:2000:8000:60s", "5m", seed=2)
        result = simulate(sc, name)
    except ImportError:  # pragma: no cover - a controller not written yet
        pytest.skip(f"controller {name} not available")
    s = result.summary
    assert s.batches > 50
    assert s.controller == name
    assert all(r.controller_state is not None for r in result.records)
