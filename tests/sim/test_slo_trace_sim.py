"""``benchmarks/slo_trace_sim.py``: a kept run's slowdowns replayed closed loop. Its
speeds slow only the part of a batch within a slow span, its cost model is the fit of the
batches before the load, and a run made of a kept run's files goes through end to end."""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
from pathlib import Path
from types import ModuleType

import pytest

from adabatch.sim.workloads import make_workload

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "slo_trace_sim.py"


@pytest.fixture(scope="module")
def trace_sim() -> ModuleType:
    spec = importlib.util.spec_from_file_location("slo_trace_sim", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kept_run(root: Path, *, slow: tuple[float, float], factor: float) -> Path:
    """A kept join run at 9,000 records/s, 1 s batches of ``p = 0.2 + 1e-5 n`` (0.29 s),
    ``factor`` times slower for the batches started in ``slow``."""
    run = root / "slo" / "join-cpu-slo-2s"
    run.mkdir(parents=True)
    config = {"workload": "join", "profile": "constant:9000", "duration_s": 60.0}
    (run / "config.json").write_text(json.dumps({**config, "skip_s": 10.0}))
    rows = []
    for i in range(60):
        cut = float(i + 1)
        p = 0.29 * (factor if slow[0] <= cut < slow[1] else 1.0)
        row = {"records": 9000, "interval_s": 1.0, "blocks": 2, "processing_s": p}
        rows.append({**row, "cut_at": cut, "started_at": cut, "finished_at": cut + p})
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_a_batch_is_slowed_only_within_a_slow_span(trace_sim: ModuleType) -> None:
    model = make_workload(
        "filter", {"overhead_s": 1.0, "per_block_s": 0, "per_record_s": 0, "sigma": 0}
    )
    traced = trace_sim.traced(model, [0.0, 10.0, 20.0], [1.0, 0.5, 1.0])
    assert traced.cost(0, 1.0, 1, t=2.0).processing_s == pytest.approx(1.0)
    assert traced.cost(0, 1.0, 1, t=12.0).processing_s == pytest.approx(2.0)
    # 0.5 s at full speed, then the other half of the work at half speed
    assert traced.cost(0, 1.0, 1, t=9.5).processing_s == pytest.approx(1.5)
    # 1 s at half speed does half the work; the rest after the span at full speed
    assert traced.cost(0, 1.0, 1, t=19.0).processing_s == pytest.approx(1.5)


def test_the_cost_model_is_the_fit_of_the_batches_before_the_load(
    trace_sim: ModuleType, tmp_path: Path
) -> None:
    run = kept_run(tmp_path, slow=(40.0, 50.0), factor=3.0)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for i, row in enumerate(rows):  # records from 5,000 to 14,500 before the load
        row["records"] = 5000 + 500 * (i % 20)
        row["processing_s"] = 0.2 + 1e-5 * row["records"]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    fit = trace_sim.calm_fit([run])
    assert fit["overhead_s"] == pytest.approx(0.2)
    assert fit["per_record_s"] == pytest.approx(2e-5)  # half the work on each of 2 cores


def test_a_kept_run_replays_end_to_end(
    trace_sim: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    run = kept_run(tmp_path, slow=(30.0, 40.0), factor=4.0)
    out = tmp_path / "trace.jsonl"
    argv = [str(SCRIPT), str(run), "--targets", "2", "--variant", "none:idle_reserve=0"]
    monkeypatch.setattr(sys, "argv", [*argv, "--out", str(out)])
    disabled = logging.root.manager.disable
    try:
        trace_sim.main()
    finally:  # the script silences every log line in its process; this one goes on
        logging.disable(disabled)
    table = capsys.readouterr().out.splitlines()
    assert table[1].startswith("join-cpu-slo-2s") and "|" in table[1]
    batches = [json.loads(line) for line in out.read_text().splitlines()]
    assert {b["variant"] for b in batches} == {"current", "none"}
    during = [b["batch"] for b in batches if 30.0 <= b["batch"]["started_at"] < 39.0]
    after = [b["batch"] for b in batches if b["batch"]["started_at"] >= 45.0]
    # the load's span makes the batches slower per record than those after it
    per_record = [sum(b["processing_s"] for b in s) / sum(b["records"] for b in s)
                  for s in (during, after)]  # fmt: skip
    assert per_record[0] > 2.0 * per_record[1]
