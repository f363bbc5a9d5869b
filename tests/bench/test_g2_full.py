"""The full versions of experiments 6-10 on real Spark (minutes each; left out of CI).

Full runs report their headline verdicts as measured rather than failing on them; what is
asserted here is that every configuration ran, the analysis computed its verdicts from
the numbers, and the files of the results page exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from adabatch.bench.core import Settings, get_experiment, run_experiment

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.parametrize("name", ["calibrate", "dybbs", "convergence", "params", "pid"])
def test_full_experiment_runs_and_reports(name: str, tmp_path: Path) -> None:
    experiment = get_experiment(name)
    settings = Settings(out=tmp_path, quick=False)
    result = run_experiment(experiment, settings, progress=False)
    assert len(result.outcomes) == len(experiment.configs(settings))
    assert all(o.records for o in result.outcomes)
    assert result.analysis.verdicts and any(v.headline for v in result.analysis.verdicts)
    for fig in result.analysis.figures:
        assert fig.path.is_file() and fig.path.stat().st_size > 5_000
    text = result.section.read_text()
    assert "Verdicts" in text and result.csv.is_file()
