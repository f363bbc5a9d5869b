"""Profiles: cost models fitted to Spark measurements, loadable by spec files."""

from __future__ import annotations

import json

import pytest

from adabatch.deadline.core.cost import (
    AggregationCost,
    LinearCost,
    MonotoneCost,
    PiecewiseLinearCost,
)
from adabatch.deadline.spark import tpch
from adabatch.deadline.spark.cost_profile import (
    SweepPoint,
    agg_with_margin,
    default_sizes,
    fit_models,
    load_cost_profile,
    with_margin,
)
from adabatch.errors import AdabatchError


def _sweep(true_cost, true_agg, total: int) -> list[SweepPoint]:
    points = []
    for batches in (1, 2, 4, 8):
        size = total // batches
        tuples = (size,) * batches
        seconds = tuple(true_cost(t) for t in tuples)
        final = true_agg(batches) if batches > 1 else 0.0
        points.append(
            SweepPoint(total // size, batches, tuples, seconds, final, sum(seconds) + final)
        )
    return points


def test_fit_recovers_a_linear_cost_and_agg_model() -> None:
    sweep = _sweep(lambda n: 0.5 + 2e-4 * n, lambda b: 0.3 + 0.05 * b, 80_000)
    cost, agg = fit_models(sweep, segments=2)
    assert isinstance(cost, PiecewiseLinearCost)
    for n in (10_000, 20_000, 40_000, 80_000):
        assert cost.cost(n) == pytest.approx(0.5 + 2e-4 * n, rel=1e-6)
    # below the smallest measured batch the model is flat (the per-batch overhead)
    assert cost.cost(0) == cost.cost(5_000) == pytest.approx(cost.cost(10_000))
    assert agg.cost(1) == 0.0
    assert agg.cost(6) == pytest.approx(0.3 + 0.05 * 6, rel=1e-6)


def test_small_batches_anchor_the_overhead() -> None:
    # without small samples a small batch is priced like the smallest sweep batch (2 s);
    # one-slot samples measure the real per-batch overhead (1 s)
    sweep = _sweep(lambda n: 1e-4 * n if n > 15_000 else 1.0 + 1e-5 * n, lambda b: 0.2, 80_000)
    plain, _ = fit_models(sweep[:3], segments=1)
    anchored, _ = fit_models(sweep[:3], segments=2, small=[(500, 1.0), (520, 1.1), (480, 0.9)])
    assert plain.cost(500) == pytest.approx(2.0)
    assert anchored.cost(500) == pytest.approx(1.0, abs=0.1)
    assert anchored.cost(1) == pytest.approx(1.0, abs=0.1)


def test_the_overhead_is_never_below_the_measured_small_batches() -> None:
    # a straight line through the big batches passes below the one-slot batches' median
    # (0.06 s); the last batch of a tight deadline is one of those
    sweep = _sweep(lambda n: 0.01 + 1e-5 * n, lambda b: 0.1, 80_000)
    small = [(50, 0.055), (50, 0.06), (50, 0.065)]
    cost, _ = fit_models(sweep, segments=2, small=small)
    assert cost.cost(1) == cost.cost(50) == pytest.approx(0.06)
    assert cost.cost(80_000) == pytest.approx(0.01 + 1e-5 * 80_000, rel=0.02)
    assert cost.cost(160_000) > cost.cost(80_000)


def test_margins_scale_every_model_kind() -> None:
    pw = PiecewiseLinearCost(((0.0, 1.0), (100.0, 3.0)))
    lin = LinearCost(0.02, 1.0)
    expr = MonotoneCost(expr="1 + 0.02 * n")
    for model in (pw, lin, expr):
        scaled = with_margin(model, 1.5)
        assert scaled.cost(100) == pytest.approx(1.5 * model.cost(100))
        assert scaled.tuples_within(4.5) == model.tuples_within(3.0)
    assert with_margin(lin, 1.0) is lin
    agg = agg_with_margin(AggregationCost(LinearCost(0.1, 0.2)), 2.0)
    assert agg.cost(3) == pytest.approx(2.0 * (0.1 * 3 + 0.2))
    with pytest.raises(AdabatchError, match="margin"):
        with_margin(lin, 0.9)


def test_default_sizes_halve_down_to_a_32nd() -> None:
    assert default_sizes(400) == [400, 200, 100, 50, 25, 13]
    assert default_sizes(3) == [3, 2, 1]


def test_load_profile_errors(tmp_path) -> None:
    with pytest.raises(AdabatchError, match="does not exist"):
        load_cost_profile(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"query": "q6"}))
    with pytest.raises(AdabatchError, match="not a profile file"):
        load_cost_profile(bad)


@pytest.mark.spark
def test_profile_on_spark_writes_a_file_the_spec_loader_reads(tmp_path, capsys) -> None:
    from adabatch.cli import main
    from adabatch.deadline.core.spec_file import load_specs

    data = tmp_path / "data"
    tpch.prepare(data, scale_factor=0.01, slots=8, rate=4.0)
    out = tmp_path / "profiles"
    argv = ["deadline", "profile", "--query", "cq3", "--data", str(data), "--sf", "0.01"]
    argv += ["--slots", "8", "--rate", "4", "--sizes", "8,4,2", "--out", str(out)]
    assert main(argv) == 0
    capsys.readouterr()
    profile = load_cost_profile(out / "cq3.json")
    # the one-batch run (D) repeats at the start, middle and end of the sweep
    assert [p.batches for p in profile.sweep] == [1, 2, 1, 4, 1]
    assert [sum(p.tuples) for p in profile.sweep] == [profile.total] * 5
    ones = sorted(p.total_seconds for p in profile.sweep if p.batches == 1)
    assert profile.single_batch_cost == ones[1]
    assert len(profile.small) == 3 and all(t > 0 and s > 0 for t, s in profile.small)
    assert all(p.final_seconds > 0 for p in profile.sweep if p.batches > 1)
    # the fitted model is monotone and prices the whole window near the measured cost
    assert profile.cost.cost(profile.total) >= profile.cost.cost(profile.total // 4)
    assert profile.cost.overhead > 0
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(
        "queries:\n"
        "  - id: cq3\n"
        "    query: cq3\n"
        "    inputs: [lineitem]\n"
        "    window_start: 0\n"
        "    window_end: 1.75\n"
        f"    total: {profile.total}\n"
        "    deadline: 30\n"
        f"    cost: {out / 'cq3.json'}\n"
    )
    (spec,) = load_specs(spec_file)
    assert spec.cost == profile.cost
    assert spec.agg_cost == profile.agg_cost
    # ... and `adabatch deadline run` plans with it and runs on Spark: with a deadline of
    # 3D the slack is positive, so one batch over the whole window (paper eq. 3)
    argv = ["deadline", "run", "--query", "cq3", "--profile", str(out / "cq3.json")]
    argv += ["--deadline-factor", "3", "--data", str(data), "--sf", "0.01", "--slots", "8"]
    argv += ["--rate", "4", "--out", str(tmp_path / "run"), "--json"]
    assert main(argv) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert run["correct"] is True
    assert run["batches"] == 1
    assert [j["kind"] for j in run["jobs"]] == ["whole"]
    assert run["plan"]["batches"][0]["start"] >= 1.75
