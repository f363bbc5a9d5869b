"""Calibration: the least-squares fit recovers a model's parameters, the written file is
what ``CostModel.from_calibration`` and ``adabatch simulate --calibration`` read, the
experiment's cells are cut correctly, and (on Spark) the quick experiment fits and scores
held-out runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from adabatch.bench.experiments.calibrate import (
    Phases,
    calibration_for,
    calibration_path,
    model_for,
    steps_profile,
)
from adabatch.bench.model import Settings
from adabatch.cli import main
from adabatch.errors import AdabatchError
from adabatch.metrics import BatchRecord
from adabatch.sim.calibration import Cell, fit, free_params, prediction_errors, write_calibration
from adabatch.sim.workloads import CostModel, ReduceModel, make_workload

GRID = [(x, k, r) for x in (0.5, 1.0, 2.0) for k in (1, 2, 4) for r in (20_000, 60_000, 120_000)]


def cells_from(model: CostModel, grid, rng: np.random.Generator | None = None, batches=6):
    out = []
    for x, k, rate in grid:
        rows = []
        for _ in range(batches):
            n = round(rate * x)
            p = (
                model.cost(n, x, k, rng=rng).processing_s
                if rng
                else model.expected_processing(n, x, k)
            )
            rows.append((n, x, k, p))
        out.append(Cell.from_batches(f"x{x}-k{k}-r{rate}", rows, {"rate": rate}))
    return out


def test_fit_recovers_noise_free_reduce_parameters() -> None:
    true = make_workload(
        "reduce",
        {
            "overhead_s": 0.8,
            "per_block_s": 0.05,
            "per_record_s": 9e-6,
            "straggler": 0.3,
            "sigma": 0,
        },
    )
    result = fit("reduce", cells_from(true, GRID), known={"cores": 2.0})
    assert result.free == ("overhead_s", "per_block_s", "per_record_s", "straggler")
    for name in result.free:
        assert getattr(result.model, name) == pytest.approx(getattr(true, name), rel=1e-3)
    assert result.rms_relative_error < 1e-6
    assert result.model.sigma < 1e-6


def test_fit_recovers_the_superlinear_join_term() -> None:
    true = make_workload(
        "join", {"overhead_s": 0.6, "per_pair_s": 4e-8, "join_keys": 10, "sigma": 0}
    )
    grid = [(x, k, r) for x in (0.5, 1.0, 2.0) for k in (1, 2) for r in (5_000, 20_000, 40_000)]
    result = fit("join", cells_from(true, grid), known={"join_keys": 10})
    assert "straggler" not in result.free  # no cell has more blocks than cores
    assert result.model.per_pair_s == pytest.approx(4e-8, rel=1e-3)
    assert result.model.join_keys == 10


def test_noisy_fit_is_close_and_measures_the_scatter() -> None:
    true = make_workload("reduce", {"overhead_s": 0.4, "per_record_s": 5e-6, "sigma": 0.15})
    rng = np.random.default_rng(3)
    result = fit("reduce", cells_from(true, GRID, rng, batches=40))
    assert result.model.overhead_s == pytest.approx(0.4, rel=0.1)
    assert result.model.per_record_s == pytest.approx(5e-6, rel=0.15)
    # the fitted model predicts fresh noisy cells within a few percent on average
    fresh = prediction_errors(result.model, cells_from(true, GRID, np.random.default_rng(9), 40))
    assert np.mean([abs(e.relative_error) for e in fresh]) < 0.05
    assert 0.05 < result.model.sigma < 0.3


def test_fit_rejects_too_few_cells_and_unknown_parameters() -> None:
    model = make_workload("filter")
    cells = cells_from(model, [(1.0, 2, 1000), (2.0, 2, 1000)])
    with pytest.raises(AdabatchError, match="2 cells for 3 free parameters"):
        fit("filter", cells)
    with pytest.raises(AdabatchError, match="no model parameter 'rho'"):
        fit("filter", cells, free=("rho",))
    with pytest.raises(AdabatchError, match="unknown workload 'sort'"):
        free_params("sort", cells, 2.0)
    with pytest.raises(AdabatchError, match="has no batches"):
        Cell.from_batches("empty", [])


def test_calibration_file_round_trips_and_the_simulate_cli_accepts_it(tmp_path: Path) -> None:
    true = make_workload("reduce", {"overhead_s": 0.7, "per_record_s": 6e-6, "sigma": 0})
    result = fit("reduce", cells_from(true, GRID), known={"keys": 500})
    path = write_calibration(tmp_path / "cal.json", result, {"quick": True})
    data = json.loads(path.read_text())
    assert data["workload"] == "reduce" and data["fit"]["quick"] is True
    loaded = ReduceModel.from_calibration(path)
    assert loaded == result.model
    assert loaded.keys == 500
    out = tmp_path / "sim"
    code = main(
        ["simulate", "--workload", "reduce", "--controller", "fixed-point", "--profile",
         "constant:100000", "--duration", "30s", "--calibration", str(path), "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"]["overhead_s"] == pytest.approx(result.model.overhead_s)
    # the wrong workload is refused in one line
    with pytest.raises(AdabatchError, match="is for workload 'reduce', not 'join'"):
        make_workload("join", calibration=path)


def record(cut_at: float, x: float, p: float, n: int = 100) -> BatchRecord:
    return BatchRecord(0, x, 2, n, p, 0.0, cut_at, cut_at, cut_at + p, x + p, p, n / x)


def test_phase_cells_skip_start_up_and_batches_across_a_rate_change() -> None:
    phases = Phases((1000.0, 5000.0), 10.0)
    records = [record(t, 2.0, 0.5 + t / 100) for t in (2, 4, 6, 8, 10, 12, 14, 16, 18, 20)]
    records.insert(5, record(11.0, 2.0, 9.0))  # spans the change at 10 s: left out
    cells = phases.cells("run", records, skip_batches=2)
    assert [c.labels["rate"] for c in cells] == [1000.0, 5000.0]
    assert cells[0].batches == 3  # cuts at 6, 8, 10 (2 and 4 skipped)
    assert cells[1].batches == 5  # cuts at 12 .. 20
    assert math.isclose(cells[1].mean_processing_s, np.mean([0.62, 0.64, 0.66, 0.68, 0.7]))
    assert steps_profile((1000, 5000), 10) == "steps:1000@0s,5000@10s"


def test_other_experiments_use_a_calibration_of_the_same_mode_only(tmp_path: Path) -> None:
    quick = Settings(out=tmp_path, quick=True)
    full = Settings(out=tmp_path, quick=False)
    model, source = model_for(quick, "reduce", keys=1000)
    assert model == make_workload("reduce", {"keys": 1000}) and "defaults" in source
    true = make_workload("reduce", {"overhead_s": 0.9, "sigma": 0})
    result = fit("reduce", cells_from(true, GRID))
    write_calibration(calibration_path(tmp_path, "reduce"), result, {"quick": True})
    assert calibration_for(quick, "reduce") is not None
    assert calibration_for(full, "reduce") is None
    model, source = model_for(quick, "reduce")
    assert model.overhead_s == pytest.approx(0.9, rel=1e-3) and "calibration" in source


@pytest.mark.spark
@pytest.mark.slow  # a whole quick experiment on Spark: minutes; left out of CI
def test_quick_calibration_on_spark_fits_and_predicts_held_out_runs(tmp_path: Path) -> None:
    from adabatch.bench.experiments.calibrate import EXPERIMENT
    from adabatch.bench.runner import run_experiment

    result = run_experiment(EXPERIMENT, Settings(out=tmp_path, quick=True), progress=False)
    path = calibration_path(tmp_path, "reduce")
    data = json.loads(path.read_text())
    assert data["fit"]["success"] and len(data["fit"]["cells"]) >= 4
    assert ReduceModel.from_calibration(path).overhead_s > 0
    held = [v for v in result.analysis.verdicts if "improves" in v.claim]
    assert held and held[0].headline
    assert not result.failed_headlines, [v.evidence for v in result.failed_headlines]
    assert (tmp_path / "calibrate" / "calibration-reduce.png").is_file()
    assert "held-out" in result.section.read_text()
