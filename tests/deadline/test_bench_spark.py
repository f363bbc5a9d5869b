"""``adabatch deadline bench --quick`` end to end on Spark, continued with ``--resume``."""

from __future__ import annotations

import json

import pytest

from adabatch.cli import main

pytestmark = pytest.mark.spark


def test_quick_bench_then_resume_runs_only_what_is_missing(tmp_path, capsys, monkeypatch) -> None:
    out = tmp_path / "bench"
    base = ["deadline", "bench", "--quick", "--out", str(out), "--queries", "q6"]
    assert main([*base, "--skip", "baseline,multi"]) == 0
    log = capsys.readouterr().err  # not a terminal: one progress line per step
    assert "] profile q6" in log and "] single q6 1D" in log and "] done" in log
    first = json.loads((out / "results.json").read_text())
    assert [(r["query"], r["factor"]) for r in first["single"]] == [("q6", 2.0), ("q6", 1.0)]
    assert all(r["correct"] for r in first["single"] if r["feasible"])
    assert [r["run"] for r in first["single"]] == [1, 1]  # every row, not only the first
    assert "baseline" not in first and "simulation" not in first
    jobs_before = (out / "batches.jsonl").read_text().splitlines()
    assert jobs_before

    # a resume stopped before it finished a row still keeps the rows it kept
    def stopped(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr("adabatch.deadline.spark.baseline.run_streaming", stopped)
        assert main([*base, "--resume"]) == 130  # interrupted
    stopped_run = json.loads((out / "results.json").read_text())
    assert stopped_run["single"] == first["single"] and stopped_run["runs"] == 2

    assert main([*base, "--resume"]) == 0
    second = json.loads((out / "results.json").read_text())
    assert second["profiles"] == first["profiles"] and second["single"] == first["single"]
    assert [(r["query"], r["trigger"]) for r in second["baseline"]] == [("q6", "default")]
    assert second["baseline"][0]["correct"] is True
    assert second["simulation"] and second["runs"] == 3
    assert second["elapsed_s"] > first["elapsed_s"]
    lines = (out / "batches.jsonl").read_text().splitlines()
    assert lines[: len(jobs_before)] == jobs_before  # appended to, not rewritten
    assert not [line for line in lines[len(jobs_before) :] if '"section":"profile"' in line]
    assert {json.loads(line)["run"] for line in lines[: len(jobs_before)]} == {1}
    progress = (out / "streaming_progress.jsonl").read_text().splitlines()
    assert progress and {json.loads(line)["run"] for line in progress} == {3}
    assert second["baseline"][0]["run"] == 3 and second["single"][0]["run"] == 1
    assert "] warm-up q6" in capsys.readouterr().err  # a new process runs q6 once first
    assert "over 3 runs of the command" in (out / "deadline.md").read_text()

    capsys.readouterr()
    assert main([*base, "--resume", "--margin", "1.5"]) == 2
    assert "margin = 1.25, this run has 1.5" in capsys.readouterr().err
