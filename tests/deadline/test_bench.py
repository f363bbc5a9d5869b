"""The bench's simulated section and report, on synthetic profiles (no Spark)."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from adabatch.bench.experiments import deadline as bench
from adabatch.deadline.core.cost import AggregationCost, LinearCost, PiecewiseLinearCost
from adabatch.deadline.spark.cost_profile import CostProfile, SweepPoint
from adabatch.deadline.spark.queries import QUERY_NAMES
from adabatch.deadline.spark.tpch import Manifest, Slot
from adabatch.errors import AdabatchError

SLOTS = 40


def _manifest() -> Manifest:
    slots = []
    for i in range(SLOTS):
        slots.append(
            Slot(
                index=i,
                arrival_s=i / 4.0,
                orderkey_lo=100 * i + 1,
                orderkey_hi=100 * i + 100,
                files={"orders": f"orders/slot-{i:05d}.parquet"},
                tuples={"orders": 100, "lineitem": 400},
                offsets={"orders": 100 * i, "lineitem": 400 * i},
            )
        )
    return Manifest(Path("/nonexistent"), 0.01, 4.0, 0.0, tuple(slots))


def _profile(name: str, primary: str, total: int, overhead: float, per_tuple: float) -> CostProfile:
    cost = PiecewiseLinearCost(((0.0, overhead), (total, overhead + per_tuple * total)))
    sweep = tuple(
        SweepPoint(
            SLOTS // b,
            b,
            (total // b,) * b,
            (cost.cost(total // b),) * b,
            0.0 if b == 1 else 0.2 + 0.01 * b,
            b * cost.cost(total // b) + (0.0 if b == 1 else 0.2 + 0.01 * b),
        )
        for b in (1, 2, 4)
    )
    return CostProfile(
        name, primary, 0.01, SLOTS, total, sweep, cost, AggregationCost(LinearCost(0.01, 0.2))
    )


@pytest.fixture
def profiles() -> list[CostProfile]:
    return [
        _profile("cq1", "orders", 100 * SLOTS, 0.5, 2e-3),
        _profile("q6", "lineitem", 400 * SLOTS, 0.8, 1e-3),
        _profile("cq4", "lineitem", 400 * SLOTS, 0.6, 1.5e-3),
    ]


def test_rate_profiles_keep_the_total_and_shift_arrivals() -> None:
    m = _manifest()
    fr = bench.stretched_trace(m, "lineitem", 100.0, "FR")
    assert fr.total == 400 * SLOTS
    assert fr.last_arrival == pytest.approx(100.0)
    for warp in bench.RATE_PROFILES:
        trace = bench.stretched_trace(m, "lineitem", 100.0, warp)
        assert trace.total == fr.total
    faster = bench.stretched_trace(m, "lineitem", 100.0, "VR1")
    assert faster.last_arrival == pytest.approx(85.0)
    bursty = bench.stretched_trace(m, "lineitem", 100.0, "VR2")
    assert len(bursty.times) == 10  # ten bursts
    assert bursty.arrived(50.0) >= fr.arrived(50.0)
    slower = bench.stretched_trace(m, "lineitem", 100.0, "VR3")
    assert slower.last_arrival == pytest.approx(100.0 * (1 + 20 / 4500))
    assert slower.arrived(50.0) <= fr.arrived(50.0)
    late_start = bench.stretched_trace(m, "lineitem", 100.0, "VR4")
    assert late_start.arrived(50.0) < fr.arrived(50.0)
    with pytest.raises(AdabatchError, match="rate profile"):
        bench.stretched_trace(m, "lineitem", 100.0, "VR9")
    for warp in ("VR3", "VR4"):  # lateness as given, the total kept
        late = bench.stretched_trace(m, "lineitem", 100.0, warp, late_s=1.5)
        assert late.last_arrival == pytest.approx(101.5)
        assert late.total == fr.total


def test_vr_lateness_keeps_the_papers_proportion_to_c_max(profiles) -> None:
    assert bench.paper_lateness("VR3", 30.0) == pytest.approx(20.0)  # the paper's own
    assert bench.paper_lateness("VR4", 30.0) == pytest.approx(7.0)
    assert bench.paper_lateness("VR3", 3.0) == pytest.approx(2.0)
    assert bench.paper_lateness("FR", 3.0) == bench.paper_lateness("VR1", 3.0) == 0.0
    specs = bench.fitted_specs(
        _manifest(), profiles, window_s=600.0, delta=0.1, c_max=3.0, actual="VR3"
    )
    for s in specs:  # late by 2 s, still before the first deadline (>= window end + C_max)
        assert s.actual_arrivals.last_arrival == pytest.approx(602.0)
        assert s.deadline > s.actual_arrivals.last_arrival


def test_fitted_specs_use_the_papers_staggered_deadlines(profiles) -> None:
    specs = bench.fitted_specs(_manifest(), profiles, window_s=600.0, delta=0.5, c_max=10.0)
    assert [s.window_end for s in specs] == [600.0] * 3
    first, *rest = specs
    assert first.deadline == pytest.approx(600.0 + 0.5 * first.single_batch_cost + 10.0)
    previous = first.deadline
    for s in rest:  # same window end: each queues behind the previous deadline
        assert s.deadline == pytest.approx(previous + 0.5 * s.single_batch_cost)
        previous = s.deadline


def test_simulated_grid_covers_the_papers_figures(profiles, tmp_path) -> None:
    config = bench.BenchConfig(
        out=tmp_path, sim_deltas=(1.0, 0.1), sim_window_s=600.0, sim_c_max=10.0
    )
    rows = bench.simulate_grid(_manifest(), profiles, config)
    figures = {r.figure for r in rows}
    assert figures == {"fig7", "fig8", "fig10", "fig11"}
    fig7 = [r for r in rows if r.figure == "fig7"]
    assert {r.strategy for r in fig7} == {"llf", "edf", "sjf", "rr"}
    assert {r.strategy for r in rows if r.figure == "fig8"} == {"edf", "llf"}
    assert {r.rate for r in rows if r.figure == "fig10"} == set(bench.RATE_PROFILES)
    assert {r.time_trigger for r in fig7} == {"budget"}
    for figure in ("fig10", "fig11"):  # the paper's rule next to the cost-bounded one
        sub = [r for r in rows if r.figure == figure]
        assert {r.time_trigger for r in sub} == {"budget", "always"}
        assert len(sub) == 2 * len(bench.RATE_PROFILES) * 4
    late = {r.rate: r.late_s for r in rows if r.figure == "fig10"}
    assert late["VR3"] == pytest.approx(20 / 30 * 10.0) and late["FR"] == 0.0
    for r in rows:
        bounded = r.time_trigger == "budget" and r.rsf == 0.5 and r.min_batch
        if r.strategy in ("edf", "llf") and r.schedulable and bounded:
            assert r.all_met, r
            assert r.normalised_cost <= 1.5 + 1e-9, r
    # without MinBatchSize every landed file is a batch: more batches, higher cost
    for delta in (1.0, 0.1):
        with_mb = next(r for r in fig7 if r.strategy == "edf" and r.delta == delta)
        without = next(
            r for r in rows if r.figure == "fig8" and r.strategy == "edf" and r.delta == delta
        )
        assert without.batches > with_mb.batches


def test_sim_c_max_is_the_largest_min_batch_cost_unless_given(profiles) -> None:
    from adabatch.deadline.core.multi import find_min_batch_size

    config = bench.BenchConfig(out=Path("/tmp"), sim_deltas=(1.0,), sim_window_s=600.0)
    c_max = bench.sim_c_max(_manifest(), profiles, config)
    specs = bench.fitted_specs(_manifest(), profiles, window_s=600.0, delta=1.0, c_max=c_max)
    sizes = [find_min_batch_size(s, 0.5, c_max) for s in specs]
    assert not any(mb.capped for mb in sizes)
    assert c_max == pytest.approx(
        max(s.cost.cost(mb.size) for s, mb in zip(specs, sizes, strict=True))
    )
    rows = bench.simulate_grid(_manifest(), profiles, config)
    assert all(r.c_max == pytest.approx(c_max) for r in rows)
    for r in rows:
        fixed_rate = r.rate == "FR" and r.rsf == 0.5
        if r.strategy in ("edf", "llf") and r.min_batch and fixed_rate:
            assert r.normalised_cost <= 1.5 + 1e-9
    given = bench.BenchConfig(out=Path("/tmp"), sim_c_max=7.5)
    assert bench.sim_c_max(_manifest(), profiles, given) == 7.5


def test_report_renders_tables_and_figures(profiles, tmp_path) -> None:
    config = bench.BenchConfig(out=tmp_path, sim_deltas=(1.0,), sim_window_s=600.0)
    manifest = _manifest()
    results = {
        "config": config.to_json(),
        "machine": {"cpus": 2, "load_avg_start": [1.0, 1.0, 1.0], "load_avg_end": [2.0, 2, 2]},
        "data": {
            "scale_factor": 0.01,
            "slots": SLOTS,
            "rate_slots_per_s": 4.0,
            "window_s": manifest.window_end,
            "orders": 4000,
            "lineitem": 16000,
        },
        "profiles": {p.query: p.to_json() for p in profiles},
        "single": [
            {
                "query": "cq1",
                "factor": 1.0,
                "D": 8.5,
                "deadline": 18.25,
                "feasible": True,
                "planned_batches": 2,
                "batches": 2,
                "normalised_cost": 1.2,
                "completion": 17.0,
                "met": True,
                "correct": True,
                "cost": 10.2,
            },
            {
                "query": "cq1",
                "factor": 0.1,
                "D": 8.5,
                "deadline": 10.6,
                "feasible": False,
                "planned_batches": 0,
                "met": False,
                "batches": 0,
                "normalised_cost": None,
            },
        ],
        "baseline": [
            {
                "query": "cq1",
                "trigger": "default",
                "batches": 30,
                "cost": 40.0,
                "ratio_to_single_batch": 40.0 / 8.5,
                "wall_s": 12.0,
                "met": False,
                "failure": None,
                "correct": True,
            }
        ],
        "simulation": [r.to_json() for r in bench.simulate_grid(manifest, profiles, config)],
        "elapsed_s": 12.0,
    }
    docs = tmp_path / "docs" / "deadline.md"
    (tmp_path / "batches.jsonl").write_text('{"section": "single"}\n')
    stale = docs.parent / "deadline-figures" / "old.png"
    stale.parent.mkdir(parents=True)
    (stale.parent / ".adabatch").write_text("an earlier publish made it\n")
    stale.write_bytes(b"old")
    path = bench.write_report(results, tmp_path, docs)
    assert path == docs
    text = docs.read_text()
    assert not stale.exists()  # the figures directory is replaced, not added to
    assert (docs.parent / "deadline-raw" / "batches.jsonl").read_text() == '{"section": "single"}\n'
    assert "[`batches.jsonl`](deadline-raw/batches.jsonl)" in text
    assert "| cq1 | 1D | 18.25 | 2 | 2 | 1.20 |" in text
    assert "infeasible" in text
    assert "| cq1 | default | 30 | 40.00 | 4.71 | 10.20 | 3.92 |" in text
    assert "](deadline-figures/fig6-single-deadlines.png)" in text
    assert "- δ_RSF 0.5, time trigger budget: EDF/LLF met every deadline in " in text
    assert "| fig11 | 0.2D | VR3 |" in text
    for name in ("fig3-cost-models", "fig4-cost-vs-batches", "fig5-streaming-vs-batch",
                 "fig6-single-deadlines", "fig7-simulation", "fig10-simulation",
                 "fig10-always-simulation", "fig11-always-simulation"):  # fmt: skip
        png = docs.parent / "deadline-figures" / f"{name}.png"
        assert png.read_bytes()[:4] == b"\x89PNG"
    assert not math.isnan(results["simulation"][0]["normalised_cost"])


def _args(**over) -> argparse.Namespace:
    base = {
        "out": "runs/x",
        "docs": None,
        "data": "runs/deadline-data",
        "sf": 0.2,
        "slots": 800,
        "rate": 32.0,
        "master": "local[2]",
        "queries": None,
        "factors": None,
        "margin": None,
        "skip": "",
        "quick": False,
    }
    base.update(over)
    return argparse.Namespace(**base)


def test_bench_config_from_arguments() -> None:
    full = bench.bench_config(_args())
    assert full.queries == QUERY_NAMES and full.factors == bench.PAPER_FACTORS
    quick = bench.bench_config(_args(quick=True, out="o"))
    assert quick.quick and quick.scale_factor == 0.01 and quick.data == Path("o/data")
    picked = bench.bench_config(_args(queries="Q6,cq1", factors=[1.0, 0.5], margin=1.5))
    assert picked.queries == ("q6", "cq1") and picked.factors == (1.0, 0.5)
    assert picked.margin == 1.5
    with pytest.raises(AdabatchError, match="--skip 'plots'"):
        bench.bench_config(_args(skip="single,plots"))
    with pytest.raises(AdabatchError, match="allowed one of cq1"):
        bench.bench_config(_args(queries="q2"))


def test_report_only_resimulates_from_saved_profiles(profiles, tmp_path) -> None:
    from dataclasses import replace

    from adabatch.cli import main

    data = tmp_path / "data"
    data.mkdir()
    manifest = replace(_manifest(), root=data)
    manifest.save()
    out = tmp_path / "bench"
    for p in profiles:
        p.save(out / "profiles" / f"{p.query}.json")
    config = bench.BenchConfig(out=out, data=data, queries=tuple(p.query for p in profiles))
    results = {
        "config": config.to_json(),
        "machine": {"cpus": 2, "load_avg_start": [1.0, 1.0, 1.0]},
        "data": {
            "scale_factor": 0.01,
            "slots": SLOTS,
            "rate_slots_per_s": 4.0,
            "window_s": 9.75,
            "orders": 4000,
            "lineitem": 16000,
        },
        "profiles": {p.query: p.to_json() for p in profiles},
    }
    (out / "results.json").write_text(json.dumps(results))
    argv = ["deadline", "bench", "--report-only", "--out", str(out), "--data", str(data)]
    assert main(argv) == 0
    text = (out / "deadline.md").read_text()
    assert "Fig. 7, 8, 10, 11" in text
    assert "| fig10 | 0.1D | VR4 |" in text
    assert main(["deadline", "bench", "--report-only", "--out", str(tmp_path / "none")]) == 2


def test_resume_refuses_results_of_other_data_settings(tmp_path) -> None:
    out = tmp_path / "bench"
    out.mkdir()
    earlier = bench.BenchConfig(out=out, scale_factor=0.5, margin=1.25)
    (out / "results.json").write_text(json.dumps({"config": earlier.to_json()}))
    same = bench.BenchConfig(out=out, scale_factor=0.5, margin=1.25, resume=True, queries=("q6",))
    assert bench.previous_results(same) == {"config": earlier.to_json()}
    assert bench.previous_results(replace(same, resume=False)) is None
    with pytest.raises(AdabatchError, match=r"scale_factor = 0\.5, this run has 1\.0"):
        bench.previous_results(replace(same, scale_factor=1.0))
    with pytest.raises(AdabatchError, match=r"margin = 1\.25, this run has 1\.5"):
        bench.previous_results(replace(same, margin=1.5))
    (out / "results.json").write_text("{not json")
    with pytest.raises(AdabatchError, match="is not a bench result"):
        bench.previous_results(same)
    fresh = bench.BenchConfig(out=tmp_path / "empty", resume=True)
    assert bench.previous_results(fresh) is None  # nothing to continue: start afresh
