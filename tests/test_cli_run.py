"""``adabatch run`` / ``adabatch compare``: bad input fails with one line before Spark starts;
a short real run writes metrics, summary with cost, and the timeline; helpers are exact."""

from __future__ import annotations

import io
import json
import math

import pytest

from adabatch.cli import main
from adabatch.errors import AdabatchError
from adabatch.metrics import BatchRecord, read_jsonl, summarize
from adabatch.report.progress import ProgressLine
from adabatch.report.text import fmt, fmt_ratio, fmt_value
from adabatch.runs.compare import split_params, tabulate
from adabatch.runs.spark_job import (
    Progress,
    SparkProgress,
    batch_records,
    parse_trigger,
    query_error,
    spark_durations,
)

BASE = ["--profile", "constant:200", "--duration", "20s", "--master", "local[2]"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workload", "sort", "--controller", "static"], "unknown workload 'sort'"),
        (["--workload", "reduce", "--controller", "pd"], "unknown controller 'pd'"),
        (
            ["--workload", "reduce", "--controller", "static", "--param", "rho=0.5"],
            "no parameter 'rho'",
        ),
        (
            [
                "--workload",
                "reduce",
                "--controller",
                "fixed-point",
                "--trigger",
                "processingTime:1s",
            ],
            "use it with --controller spark-default",
        ),
        (["--workload", "reduce", "--controller", "static", "--seed", "x"], "--seed 'x'"),
        (
            ["--workload", "reduce", "--controller", "static", "--source-option", "keyz=3"],
            "no option 'keyz'",
        ),
        (
            [
                "--workload",
                "reduce",
                "--controller",
                "static",
                "--db",
                "postgresql://postgres@127.0.0.1:1/test",
            ],
            "postgresql",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    profile_first = ["--profile", "constant:200", "--duration", "20s"]
    assert main(["run", *args, *profile_first, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("adabatch: error: ")
    assert message in err[0]


def test_malformed_profile_and_foreign_checkpoint(tmp_path, capsys):
    args = ["run", "--workload", "reduce", "--controller", "static", "--duration", "20s"]
    assert main([*args, "--profile", "sine:1:2", "--out", str(tmp_path / "a")]) == 2
    assert "profile 'sine:1:2'" in capsys.readouterr().err
    foreign = tmp_path / "b" / "checkpoint" / "offsets"
    foreign.mkdir(parents=True)
    assert main([*args, "--profile", "constant:10", "--out", str(tmp_path / "b")]) == 2
    assert "checkpoint without adabatch state" in capsys.readouterr().err


def test_compare_needs_two_controllers_and_routes_parameters(capsys, tmp_path):
    assert split_params(
        ["fixed-point", "static", "spark-default"],
        {"fixed-point.rho": "0.6", "blocks": "3"},
    ) == {
        "fixed-point": {"rho": "0.6", "blocks": "3"},
        "static": {"blocks": "3"},
        "spark-default": {"blocks": "3"},
    }
    with pytest.raises(AdabatchError, match="none of static has a parameter 'rho'"):
        split_params(["static"], {"rho": "0.5"})
    with pytest.raises(AdabatchError, match="'pid' is not among"):
        split_params(["static"], {"pid.kp": "1"})
    argv = ["compare", "--controllers", "static", "--workload", "reduce", *BASE]
    assert main([*argv, "--out", str(tmp_path)]) == 2
    assert "at least two different names" in capsys.readouterr().err


def test_tabulate_ratios_to_the_best_stable_run():
    empty = summarize([], controller="x", workload="reduce", profile="constant:1", duration_s=1.0)
    runs = [
        empty.with_values(stable=s, mean_latency_s=lat, cpu_s_per_million_records=cpu)
        for s, lat, cpu in [(True, 2.0, 100.0), (False, 1.0, 50.0), (True, 3.0, 80.0)]
    ]
    table = tabulate(["a", "b", "c"], runs)
    assert table.best == "a"  # b is faster but unstable
    assert [r["mean_latency_s"] for r in table.ratios] == [1.0, 0.5, 1.5]
    assert [r["cpu_s_per_million_records"] for r in table.ratios] == [1.0, 0.5, 0.8]


def test_trigger_and_query_error_parsing():
    assert parse_trigger("default") is None
    assert parse_trigger("processingTime:1.5s") == 1.5
    with pytest.raises(AdabatchError, match="processingTime:DURATION"):
        parse_trigger("continuous:1s")
    text = (
        "pyspark...\n  File x\n"
        "adabatch.errors.AdabatchError: state file 'x' belongs to a different query: y\n"
    )
    assert query_error(RuntimeError(text)) == "state file 'x' belongs to a different query: y"


def _record(i: int, records: int, p: float) -> BatchRecord:
    return BatchRecord(
        batch_id=i,
        interval_s=2.0,
        blocks=2,
        records=records,
        processing_s=p,
        queue_delay_s=0.0,
        cut_at=2.0 * (i + 1),
        started_at=2.0 * (i + 1),
        finished_at=2.0 * (i + 1) + p,
        latency_s=2.0 + p,
        record_latency_s=1.0 + p,
        rate_rps=records / 2.0,
    )


def test_spark_durations_replace_trigger_bound_processing_times():
    recs = [_record(0, 100, 2.0), _record(1, 120, 2.0)]
    progress = [
        {"batchId": 0, "numInputRows": 0, "durationMs": {"triggerExecution": 5000}},
        {"batchId": 1, "numInputRows": 100, "durationMs": {"triggerExecution": 700}},
        {"batchId": 2, "numInputRows": 120, "durationMs": {"triggerExecution": 900}},
    ]
    fixed = spark_durations(recs, progress)
    assert [r.processing_s for r in fixed] == [0.7, 0.9]
    assert fixed[0].latency_s == pytest.approx(2.7)
    assert fixed[1].record_latency_s == pytest.approx(1.9)


def test_spark_durations_match_by_source_offsets_when_the_query_reads_twice():
    """The join reads the source twice: numInputRows is twice the batch's records."""
    recs = [_record(0, 100, 1.0), _record(1, 120, 1.0)]
    progress = [
        {
            "batchId": i,
            "numInputRows": 2 * n,
            "sources": [{"startOffset": {"offset": lo}, "endOffset": {"offset": lo + n}}],
            "durationMs": {"triggerExecution": ms},
        }
        for i, (lo, n, ms) in enumerate([(0, 100, 400), (100, 120, 600)])
    ]
    fixed = spark_durations(recs, progress)
    assert [r.processing_s for r in fixed] == [0.4, 0.6]
    assert batch_records({"numInputRows": 7, "sources": [{"startOffset": None}]}) == 7


@pytest.mark.spark
def test_short_run_writes_metrics_summary_cost_and_timeline(tmp_path, capsys):
    out = tmp_path / "run"
    argv = [
        "run",
        "--workload",
        "reduce",
        "--controller",
        "static",
        "--param",
        "interval=1.0",
        "--profile",
        "constant:300",
        "--duration",
        "30s",
        "--keys",
        "20",
        "--master",
        "local[2]",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "static on reduce under constant:300" in printed
    records = read_jsonl(out / "metrics.jsonl")
    summary = json.loads((out / "summary.json").read_text())
    assert len(records) >= 3
    assert summary["batches"] == len(records)
    assert summary["records"] == sum(r.records for r in records)
    assert summary["mode"] == "spark"
    assert summary["cpu_s"] > 0 and summary["cpu_s_per_million_records"] > 0
    assert 0 < summary["busy_fraction"] <= 1
    assert (out / "timeline.png").stat().st_size > 10_000
    assert all(r.interval_s == pytest.approx(1.0) for r in records)
    # the reduce sink committed exactly the records Spark processed per batch
    import sqlite3

    with sqlite3.connect(out / "results.sqlite") as db:
        committed = db.execute("SELECT sum(records) FROM adabatch_batches").fetchone()[0]
    assert committed >= sum(r.records for r in records)


@pytest.mark.spark
def test_compare_two_controllers_prints_ratios_and_one_plot(tmp_path, capsys):
    argv = [
        "compare",
        "--controllers",
        "static,spark-default",
        "--param",
        "static.interval=1.0",
        "--param",
        "blocks=2",
        "--workload",
        "filter",
        "--profile",
        "constant:300",
        "--duration",
        "12s",
        "--master",
        "local[2]",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "ratios to" in printed
    saved = json.loads((tmp_path / "compare.json").read_text())
    assert [r["controller"] for r in saved["rows"]] == ["static", "spark-default"]
    best = next(r for r in saved["rows"] if r["controller"] == saved["best"])
    assert best["latency ratio"] == pytest.approx(1.0)
    assert (tmp_path / "comparison.png").stat().st_size > 10_000
    for name in ("static", "spark-default"):
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        assert summary["controller"] == name and summary["batches"] >= 1
    static = read_jsonl(tmp_path / "static" / "metrics.jsonl")
    assert all(r.interval_s == pytest.approx(1.0) and r.blocks == 2 for r in static)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_spark_progress_rewrites_a_terminal_line_and_throttles_a_log():
    rec = BatchRecord(0, 1.0, 2, 100, 0.4, 0.1, 1.0, 1.1, 1.5, 1.5, 1.0, 100.0)
    reports = [Progress(None, 60.0, None, 0, 0, 0)] + [
        Progress(t, 60.0, rec, i, 100 * i, 1) for i, t in enumerate([1.0, 3.0, 6.5, 7.0], 1)
    ]
    log = io.StringIO()
    with SparkProgress(log) as line:
        for p in reports:
            line(p)
    lines = log.getvalue().splitlines()
    assert lines[0] == "starting Spark and the query ..."
    assert len(lines) == 2 and lines[1].startswith("t    6.5/60s  batches    3")
    assert "interval  1.00s  proc  0.40s  queue  0.10s (1)  latency  1.50s  blocks 2" in lines[1]
    tty = Terminal()
    with SparkProgress(tty) as line:
        for p in reports:
            line(p)
    text = tty.getvalue()
    assert text.count("\r") == len(reports) and text.endswith("\n") and text.count("\n") == 1
    assert "\rt    1.0/60s" in text
    first = text.split("\r")[1]
    assert first == "starting Spark and the query ..."  # padded only over a longer line


def test_progress_line_waits_and_throttles_on_the_wall_clock():
    now = [0.0]
    log = io.StringIO()
    line = ProgressLine(log, every_s=10.0, after_s=3.0, clock=lambda: now[0])
    for t in (1.0, 3.0, 8.0, 13.0, 14.0):
        now[0] = t
        line.show(f"at {t:g}")
    line.end()
    assert log.getvalue() == "at 3\nat 13\n"


def test_number_formats():
    assert [fmt(v) for v in (None, math.nan, True, False, 1.23456, 1234.5, math.inf, 7)] == [
        "-", "-", "yes", "NO", "1.235", "1234", "inf", "7"
    ]  # fmt: skip
    assert fmt(1234.5, compact=False) == "1234.500" and fmt(0.5, 2) == "0.50"
    assert fmt_ratio(1.234) == "1.23x" and fmt_ratio(math.nan) == "-"
    assert fmt_value(math.nan, "{:.3f}") == "-" and fmt_value(2, "{:d}") == "2"
