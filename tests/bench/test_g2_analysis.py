"""The analyses of experiments 6-10 on outcomes produced by the simulator instead of Spark
(seconds, no Spark except the JVM estimator of ``pid``): they run end to end, write their
figures, and compute verdicts that follow the numbers. ``calibrate`` must recover a known
model and predict its held-out runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from adabatch.bench.model import Config, Context, Outcome, Settings
from adabatch.bench.registry import get_experiment
from adabatch.runs.simulated import make_scenario, simulate

TRUTH = {"overhead_s": 0.35, "per_record_s": 1e-6, "per_block_s": 0.04, "sigma": 0.05}
JOIN_PER_PAIR_S = 6e-9


def simulated(name: str, settings: Settings, model: dict | None = None) -> list[Outcome]:
    """Every config of the experiment that the simulator can run, as an outcome."""
    experiment = get_experiment(name)
    out: list[Outcome] = []
    pending = list(experiment.configs(settings))
    while pending:
        for c in pending:
            if c.controller != "spark-default":
                out.append(simulated_one(name, c, settings, model))
        pending = list(experiment.followups(settings, out))
    return out


def simulated_one(name: str, c: Config, settings: Settings, model: dict | None) -> Outcome:
    """Simulate one experiment config with the (optionally overridden) workload model."""
    overrides = dict(model or {})
    if c.workload == "join":
        overrides["join_keys"] = c.keys
        if model:  # a join over one key: a few ns per pair, as measured on Spark
            overrides["per_pair_s"] = JOIN_PER_PAIR_S
    warmup = c.skip_s if c.skip_s is not None else 0.0
    sc = make_scenario(
        c.workload, c.profile, c.duration_s, seed=settings.seed, model=overrides, warmup=warmup
    )
    result = simulate(sc, c.controller, dict(c.params))
    run_dir = settings.out / name / c.name
    run_dir.mkdir(parents=True, exist_ok=True)
    return Outcome(c, result.summary, result.records, run_dir)


def analyze(name: str, settings: Settings, outcomes: list[Outcome]):
    ctx = Context(settings, settings.out / name)
    analysis = get_experiment(name).analyze(ctx, outcomes)
    for fig in analysis.figures:
        assert fig.path.is_file() and fig.path.stat().st_size > 5_000
    assert analysis.tables and analysis.verdicts
    return analysis


def test_calibrate_recovers_a_known_model_and_predicts_held_out_runs(tmp_path: Path) -> None:
    settings = Settings(out=tmp_path, quick=False)
    analysis = analyze("calibrate", settings, simulated("calibrate", settings, TRUTH))
    verdicts = {v.claim: v for v in analysis.verdicts}
    within = [v for c, v in verdicts.items() if "within 25%" in c]
    assert len(within) == 2 and all(v.holds for v in within), [v.evidence for v in within]
    better = [v for c, v in verdicts.items() if "improves" in c]
    assert all(v.holds for v in better)  # the defaults are far from TRUTH
    from adabatch.sim.workloads import ReduceModel

    fitted = ReduceModel.from_calibration(tmp_path / "calibrate" / "calibration-reduce.json")
    assert fitted.overhead_s == pytest.approx(TRUTH["overhead_s"], rel=0.15)
    assert fitted.per_record_s == pytest.approx(TRUTH["per_record_s"], rel=0.15)


@pytest.mark.parametrize("name", ["convergence", "params", "dybbs"])
def test_analysis_runs_on_simulated_outcomes(name: str, tmp_path: Path) -> None:
    settings = Settings(out=tmp_path, quick=True)
    analysis = analyze(name, settings, simulated(name, settings))
    assert all(isinstance(v.holds, bool) for v in analysis.verdicts)
    assert any(v.headline for v in analysis.verdicts)


@pytest.mark.spark
def test_pid_analysis_on_simulated_outcomes(tmp_path: Path) -> None:
    settings = Settings(out=tmp_path, quick=True)
    analysis = analyze("pid", settings, simulated("pid", settings))
    jvm = next(v for v in analysis.verdicts if "identical outputs" in v.claim)
    assert jvm.holds, jvm.evidence
    # outcomes were simulated: Spark's swing is the simulator's, so the two orderings agree
    spark = next(v for v in analysis.verdicts if v.claim.startswith("on Spark"))
    sim = next(v for v in analysis.verdicts if "same ordering" in v.claim)
    assert spark.holds == sim.holds
