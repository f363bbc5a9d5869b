"""Every ``--quick`` bench experiment on real Spark: it runs, writes its files, and its
headline direction holds. The full versions are ``slow``.

CI runs eight of them on Spark (about 17 minutes on local[2]). ``overhead`` (two minutes,
reads a Redis Stream too, so also ``services``) is ``slow`` here: tests/bench/test_overhead.py,
which runs its producers and exactly-once check on real files and Redis, is its CI smoke.
Three long ones (calibrate, pid, params: ci_quick.py) are ``slow`` here; their analyses
run in CI on outcomes the simulator produces (tests/bench/test_g2_analysis.py).
``make test-all`` or ``adabatch bench all --quick`` runs them.

A headline on real Spark is a measurement. The machines here are shared: the same CPU-bound
loop took from 0.17 s to 0.32 s within a few minutes, and a stretch of a
minute at half speed is enough to overload a short run. So an experiment whose headline
fails runs once more from scratch, with a warning that names the failed claim; the test
fails if the headline fails twice."""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import pytest
from ci_quick import LONG_ON_SPARK, NEEDS_SERVICES

from adabatch.bench import model, registry, resume, runner
from adabatch.cli import main
from adabatch.control.fingerprint import code_fingerprint

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark():
    from adabatch.runs.spark_job import SPARK_CONF
    from adabatch.spark import get_spark

    return get_spark("local[2]", conf=SPARK_CONF)


def check_files(result: model.ExperimentResult) -> None:
    exp_dir = result.dir
    assert (exp_dir / resume.MARKER).is_file()
    rows = list(csv.DictReader((exp_dir / "summaries.csv").open()))
    assert [r["config"] for r in rows] == [o.name for o in result.outcomes]
    for o in result.outcomes:
        assert (o.dir / "metrics.jsonl").is_file() and (o.dir / "summary.json").is_file()
        assert o.summary.batches > 0
        assert o.summary.extra["cpu_s_per_million_records"] is not None
        # which code ran: None for Spark's own triggers
        assert o.summary.extra["controller_code"] == code_fingerprint(o.config.controller)
    for fig in result.analysis.figures:
        assert fig.path.is_file() and fig.path.stat().st_size > 1000
    section = result.section.read_text()
    assert result.experiment.title in section and "CPU s/M rec" in section
    assert any(f.path.name.startswith("latency-vs-cost") for f in result.analysis.figures)
    marker = json.loads((exp_dir / resume.MARKER).read_text())
    assert marker["quick"] is result.settings.quick and len(marker["verdicts"]) == len(
        result.analysis.verdicts
    )


def check_resume(result: model.ExperimentResult, capsys) -> None:
    """``--resume`` after a finished run re-runs nothing and rewrites the same table; a
    plain second run into the same directory is refused; ``--only`` while another config
    is not finished runs what it matches and leaves the analysis for later."""
    out = str(result.settings.out)
    name = result.experiment.name
    before = {o.name: (o.dir / "metrics.jsonl").stat().st_mtime_ns for o in result.outcomes}
    capsys.readouterr()
    code = main(["bench", name, "--quick", "--out", out, "--resume", "--no-progress"])
    text = capsys.readouterr().out
    assert code in (0, 1) and f"{name}: {len(result.outcomes)} configs" in text
    after = {o.name: (o.dir / "metrics.jsonl").stat().st_mtime_ns for o in result.outcomes}
    assert after == before
    assert main(["bench", name, "--quick", "--out", out, "--no-progress"]) == 2
    assert "already holds results" in capsys.readouterr().err
    # --only with another config not finished: its own runs (here reused), no analysis
    first, other = result.outcomes[0], result.outcomes[-1]
    total = len(result.experiment.configs(result.settings))
    aside = other.dir.with_name(other.dir.name + ".aside")
    other.dir.rename(aside)
    section = result.section.stat().st_mtime_ns
    try:
        argv = ["bench", name, "--quick", "--out", out, "--resume", "--only", first.name]
        assert main([*argv, "--no-progress"]) == 0
        text = capsys.readouterr().out
    finally:
        aside.rename(other.dir)
    assert f"1 config(s) matching {first.name!r} done; {total - 1} of {total} configs" in text
    assert result.section.stat().st_mtime_ns == section
    assert (first.dir / "metrics.jsonl").stat().st_mtime_ns == before[first.name]


RETRIES = 1  # see the module docstring


def run_quick(name: str, spark, root: Path) -> tuple[model.ExperimentResult, list[str]]:
    """Run ``name --quick``, once more if a headline fails; the last result and the
    failures of every attempt."""
    failures: list[str] = []
    experiment = registry.get_experiment(name)
    for attempt in range(RETRIES + 1):
        settings = model.Settings(root / f"run-{attempt}", quick=True, seed=0, master="local[2]")
        first = experiment.configs(settings)[0]
        warm = (spark.sparkContext.applicationId, first.workload, runner.GENERATOR)
        cold = experiment.session_warmup_s(settings) > 0 and warm not in runner._WARMED
        result = runner.run_experiment(experiment, settings, spark=spark, progress=False)
        # one warm-up per workload in a Spark application: the module shares one session
        assert (result.dir / runner.WARMUP_DIR).is_dir() == cold
        check_files(result)
        failed = [f"{v.claim}: {v.evidence}" for v in result.failed_headlines]
        if not failed:
            break
        failures += [f"run {attempt + 1}: {f}" for f in failed]
        if attempt < RETRIES:
            warnings.warn(f"{name} --quick: headline failed, running again: {failed}", stacklevel=2)
    return result, failures


def quick_param(name: str) -> object:
    marks = [pytest.mark.slow] if name in LONG_ON_SPARK | NEEDS_SERVICES else []
    marks += [pytest.mark.services] if name in NEEDS_SERVICES else []
    return pytest.param(name, marks=marks)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", [quick_param(n) for n in registry.names()])
def test_quick_experiment_holds_its_headline(name: str, spark, tmp_path: Path, capsys) -> None:
    result, failures = run_quick(name, spark, tmp_path)
    heads = [v for v in result.analysis.verdicts if v.headline]
    assert heads, "every experiment states its headline"
    assert not result.failed_headlines, failures
    if name == "gradient":  # the cheapest place to check --resume on real results
        check_resume(result, capsys)


@pytest.mark.slow
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("name", [quick_param(n) for n in registry.names()])
def test_full_experiment_runs(name: str, spark, tmp_path: Path) -> None:
    exp = registry.get_experiment(name)
    settings = model.Settings(tmp_path, quick=False, seed=0, master="local[2]")
    result = runner.run_experiment(exp, settings, spark=spark, progress=False)
    assert len(result.outcomes) >= len(exp.configs(settings))
    assert result.analysis.verdicts
    assert any(o.config.role == "spark-default" for o in result.outcomes)
    check_files(result)
