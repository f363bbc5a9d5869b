"""Every ``--quick`` experiment of issue 5 (1-5) on real Spark: it runs, writes its files,
and its headline direction holds. The full versions are ``slow``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from adabatch.bench import core
from adabatch.bench.keys import generator_has_keys_profile
from adabatch.cli import main

MINE = ["static-vs-adaptive", "timeline", "gradient", "keys", "resources"]


@pytest.fixture(scope="module")
def spark():
    from adabatch.spark import get_spark
    from adabatch.streaming.run import SPARK_CONF

    return get_spark("local[2]", conf=SPARK_CONF)


def _skip_unrunnable(name: str) -> None:
    if name == "keys" and not generator_has_keys_profile():
        pytest.skip("the generator has no keys_profile option yet (asked of the lead)")


def check_files(result: core.ExperimentResult) -> None:
    exp_dir = result.dir
    assert (exp_dir / core.MARKER).is_file()
    rows = list(csv.DictReader((exp_dir / "summaries.csv").open()))
    assert [r["config"] for r in rows] == [o.name for o in result.outcomes]
    for o in result.outcomes:
        assert (o.dir / "metrics.jsonl").is_file() and (o.dir / "summary.json").is_file()
        assert o.summary["batches"] > 0
        assert o.summary["cpu_s_per_million_records"] is not None
    assert any(o.config.role == "spark-default" for o in result.outcomes)
    for fig in result.analysis.figures:
        assert fig.path.is_file() and fig.path.stat().st_size > 1000
    section = result.section.read_text()
    assert result.experiment.title in section and "CPU s/M rec" in section
    assert any(f.path.name.startswith("latency-vs-cost") for f in result.analysis.figures)
    marker = json.loads((exp_dir / core.MARKER).read_text())
    assert marker["quick"] is True and len(marker["verdicts"]) == len(result.analysis.verdicts)


@pytest.mark.spark
@pytest.mark.slow  # minutes each on local[2]; CI keeps the resume smoke below
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", MINE)
def test_quick_experiment_holds_its_headline(name: str, spark, tmp_path: Path) -> None:
    _skip_unrunnable(name)
    exp = core.get_experiment(name)
    settings = core.Settings(tmp_path, quick=True, seed=0, master="local[2]")
    result = core.run_experiment(exp, settings, spark=spark, progress=False)
    check_files(result)
    heads = [v for v in result.analysis.verdicts if v.headline]
    assert heads, "every experiment states its headline"
    assert not result.failed_headlines, [f"{v.claim}: {v.evidence}" for v in heads]


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_cli_resume_reuses_finished_configs(spark, tmp_path: Path, capsys) -> None:
    """``--resume`` after a finished run re-runs nothing and rewrites the same table."""
    out = str(tmp_path)
    exp = core.get_experiment("gradient")
    settings = core.Settings(tmp_path, quick=True, master="local[2]")
    first = core.run_experiment(exp, settings, spark=spark, progress=False)
    before = {o.name: (o.dir / "metrics.jsonl").stat().st_mtime_ns for o in first.outcomes}
    code = main(["bench", "gradient", "--quick", "--out", out, "--resume", "--no-progress"])
    text = capsys.readouterr().out
    assert code in (0, 1) and "gradient: 3 configs" in text
    after = {o.name: (o.dir / "metrics.jsonl").stat().st_mtime_ns for o in first.outcomes}
    assert after == before
    assert main(["bench", "gradient", "--quick", "--out", out, "--no-progress"]) == 2
    assert "already holds results" in capsys.readouterr().err


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("name", MINE)
def test_full_experiment_runs(name: str, spark, tmp_path: Path) -> None:
    _skip_unrunnable(name)
    exp = core.get_experiment(name)
    settings = core.Settings(tmp_path, quick=False, seed=0, master="local[2]")
    result = core.run_experiment(exp, settings, spark=spark, progress=False)
    check_files(result)
