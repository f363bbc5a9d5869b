"""A run with a latency target says in its summary and on the console whether the target
was met: the controller's final verdict, what the batches after the warm-up did, and, when
out of reach, the best achievable latency and why (simulated runs; the Spark path builds
the same summary from the state the source saved)."""

from __future__ import annotations

import json
import math

import pytest

from adabatch.cli import main
from adabatch.control import BatchReport
from adabatch.control.base import TargetStatus
from adabatch.metrics import BatchRecord, RunSummary, fraction_over, summarize
from adabatch.report.text import target_line
from adabatch.runs.simulated import make_scenario, simulate

TARGET_KEYS = {
    "target_s",
    "target_percentile",
    "slo_met",
    "achievable_latency_s",
    "target_mode",
    "target_reason",
    "fraction_over_target",
    "target_percentile_latency_s",
}


def records(latencies: list[float], interval: float = 1.0) -> list[BatchRecord]:
    """Back-to-back batches of ``interval`` whose batch latencies are ``latencies``."""
    out = []
    for i, lat in enumerate(latencies):
        cut = (i + 1) * interval
        p = lat - interval
        out.append(
            BatchRecord.from_report(BatchReport(i, interval, 2, 10, p, 0.0, cut, cut, cut + p))
        )
    return out


def test_fraction_over_counts_batches_strictly_above_the_limit():
    batches = records([1.2, 1.5, 2.0, 2.5])
    assert fraction_over(batches, 2.0) == 0.25  # 2.0 is not over 2.0
    assert fraction_over(batches, 1.0) == 1.0
    assert math.isnan(fraction_over([], 2.0))


def test_summarize_adds_the_target_over_the_batches_after_the_warm_up():
    # the first two batches (cut at 1 and 2 s) are the warm-up: their 9 s are left out
    batches = records([9.0, 9.0, 1.2, 1.4, 2.5, 1.3])
    status = TargetStatus(2.0, True, 1.1, "target", None, 95.0)
    args = {"controller": "slo", "workload": "reduce", "profile": "constant:1", "duration_s": 6.0}
    s = summarize(batches, skip_s=2.5, target=status, extra={"mode": "simulated"}, **args)
    assert set(s.extra) >= TARGET_KEYS and s.extra["mode"] == "simulated"
    assert (s.get("target_s"), s.get("slo_met"), s.get("target_mode")) == (2.0, True, "target")
    assert s.get("achievable_latency_s") == 1.1 and s.get("target_reason") is None
    assert s.get("fraction_over_target") == 0.25
    assert s.get("target_percentile_latency_s") == pytest.approx(2.335)  # p95 of the last 4
    plain = summarize(batches, skip_s=2.5, **args)
    assert not TARGET_KEYS & set(plain.to_json())  # without a target: no target keys
    assert s.to_json() == {**plain.to_json(), **s.extra}  # the run's own fields unchanged


def test_a_feasible_target_is_met_and_an_infeasible_one_is_not():
    scenario = make_scenario("reduce", "constant:5000", "120s", warmup="30s", seed=1)
    met = simulate(scenario, "slo", {"target": 2.0}).summary
    assert set(met.extra) >= TARGET_KEYS
    assert met.get("target_s") == 2.0 and met.get("target_percentile") == 95.0
    assert met.get("slo_met") is True and met.get("target_mode") == "target"
    assert met.get("achievable_latency_s") <= 2.0 and met.get("target_reason") is None
    assert 0.0 <= met.get("fraction_over_target") <= 0.1
    assert met.get("target_percentile_latency_s") <= 2.0 + 1e-6
    missed = simulate(scenario, "slo", {"target": 0.05}).summary
    assert missed.get("slo_met") is False and missed.get("target_mode") == "floor"
    assert missed.get("achievable_latency_s") > 0.05
    assert missed.get("target_reason").startswith("the processing floor is ")
    assert missed.get("fraction_over_target") == 1.0
    static = simulate(scenario, "static", {"interval": 1.0}).summary
    assert not TARGET_KEYS & set(static.to_json())


def summary(**values) -> RunSummary:
    """A summary of a run with a 2 s target at p95 that met it; ``values`` change it."""
    base = summarize(records([1.2, 1.4]), controller="slo", workload="w", profile="p", duration_s=2)
    target = {
        "target_s": 2.0,
        "target_percentile": 95.0,
        "slo_met": True,
        "achievable_latency_s": 1.1,
        "target_mode": "target",
        "target_reason": None,
        "fraction_over_target": 0.0,
        "target_percentile_latency_s": 1.43,
    }
    return base.with_values(**(target | values))


def test_target_line_says_met_or_not_and_why():
    assert target_line(summary()) == "latency target 2 s at p95: met (p95 batch latency 1.43 s)"
    missed = summary(
        target_s=0.3,
        slo_met=False,
        achievable_latency_s=0.62,
        target_mode="floor",
        target_reason="the processing floor is 0.42 s",
    )
    assert target_line(missed) == (
        "latency target 0.3 s at p95: NOT met, achievable 0.62 s (the processing floor is 0.42 s)"
    )
    early = summary(slo_met=False, achievable_latency_s=None, target_reason="still learning")
    assert target_line(early) == "latency target 2 s at p95: NOT met (still learning)"
    # a verdict of met that the run's own batches contradict is not shown as plain "met"
    late = summary(target_percentile_latency_s=2.31, fraction_over_target=0.08)
    assert target_line(late) == (
        "latency target 2 s at p95: met at the end of the run, not over all of it "
        "(p95 batch latency 2.31 s, 8.0% of the batches over the target)"
    )
    no_batches = summary(target_percentile_latency_s=math.nan, target_percentile=None)
    assert target_line(no_batches) == "latency target 2 s: met"
    # summary.json and back (NaN is null there)
    back = RunSummary.from_json(json.loads(json.dumps(no_batches.to_json())))
    assert target_line(back) == "latency target 2 s: met"
    plain = summarize(records([1.2]), controller="static", workload="w", profile="p", duration_s=1)
    assert target_line(plain) is None


def simulate_cli(tmp_path, controller: str, *params: str) -> tuple[int, dict]:
    """``adabatch simulate`` of reduce at 5,000 records/s: exit status and summary.json."""
    out = tmp_path / controller
    argv = ["simulate", "--workload", "reduce", "--controller", controller, "--out", str(out)]
    argv += ["--profile", "constant:5000", "--duration", "90s", "--warmup", "20s"]
    for p in params:
        argv += ["--param", p]
    code = main(argv)
    summary_json = json.loads((out / "summary.json").read_text()) if code == 0 else {}
    return code, summary_json


def test_simulate_prints_the_target_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, saved = simulate_cli(tmp_path, "slo", "target=0.05")
    assert code == 0
    printed = capsys.readouterr()
    lines = [line for line in printed.out.splitlines() if line.startswith("latency target")]
    assert len(lines) == 1
    assert lines[0].startswith("latency target 0.05 s at p95: NOT met, achievable ")
    assert lines[0].endswith(f"({saved['target_reason']})")  # one line, not wrapped
    assert saved["slo_met"] is False and saved["achievable_latency_s"] > 0.05
    assert f"achievable {saved['achievable_latency_s']:.2f} s" in lines[0]
    code, saved = simulate_cli(tmp_path, "static", "interval=1")
    assert code == 0 and "target_s" not in saved
    assert "latency target" not in capsys.readouterr().out


def test_run_prints_the_target_line_under_its_table(capsys):
    from adabatch.commands.run import print_summary
    from adabatch.runs.spark_job import RunResult

    print_summary(RunResult((), summary(), {}, False))
    lines = capsys.readouterr().out.splitlines()
    assert "  latency target 2 s at p95: met (p95 batch latency 1.43 s)" in lines
    plain = summarize(records([1.2]), controller="static", workload="w", profile="p", duration_s=1)
    print_summary(RunResult((), plain, {}, False))
    assert "latency target" not in capsys.readouterr().out


def test_the_cli_shows_a_target_out_of_reach_as_one_warning_line(tmp_path, capsys) -> None:
    from adabatch.cli import main

    argv = ["simulate", "--workload", "reduce", "--controller", "slo", "--param",
            "target=0.1", "--profile", "constant:5000", "--duration", "60s",
            "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("adabatch: warning:")]
    assert len(warnings) == 1 and "latency target 0.1 s (p95)" in warnings[0]
    assert "cannot be met" in warnings[0] and "Traceback" not in err
