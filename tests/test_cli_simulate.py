"""``adabatch simulate``: the files it writes, the oracle sweep, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from adabatch.cli import main
from adabatch.errors import AdabatchError
from adabatch.metrics import REQUIRED_SUMMARY_FIELDS, read_jsonl
from adabatch.runs.simulated import make_scenario


def test_simulate_writes_metrics_summary_and_timeline(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # no wrapping of the long paths it prints
    out = tmp_path / "run"
    code = main(
        [
            "simulate",
            "--workload",
            "reduce",
            "--controller",
            "fixed-point",
            "--param",
            "rho=0.7",
            "--profile",
            "sine:2000:8000:60s",
            "--duration",
            "3m",
            "--out",
            str(out),
            "--seed",
            "3",
            "--noise",
            "0.05",
        ]
    )
    assert code == 0
    records = read_jsonl(out / "metrics.jsonl")
    summary = json.loads((out / "summary.json").read_text())
    png = (out / "timeline.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert set(REQUIRED_SUMMARY_FIELDS) <= set(summary)
    assert summary["batches"] == len(records) > 100
    assert summary["controller"] == "fixed-point" and summary["workload"] == "reduce"
    assert summary["model"]["sigma"] == 0.05 and summary["seed"] == 3
    assert summary["stable"] is True
    assert all(r.controller_state for r in records)
    printed = capsys.readouterr().out
    assert "mean batch latency" in printed and str(out / "summary.json") in printed


def test_simulate_is_deterministic_for_a_seed(tmp_path):
    args = [
        "simulate",
        "--workload",
        "join",
        "--controller",
        "static",
        "--param",
        "interval=0.5",
        "--profile",
        "markov:2000,6000:10s",
        "--duration",
        "60",
        "--poisson",
    ]
    main([*args, "--out", str(tmp_path / "a")])
    main([*args, "--out", str(tmp_path / "b")])
    a = (tmp_path / "a" / "metrics.jsonl").read_text()
    assert a == (tmp_path / "b" / "metrics.jsonl").read_text()


def test_model_resources_and_cores_options_reach_the_model(tmp_path):
    out = tmp_path / "run"
    code = main(
        [
            "simulate",
            "--workload",
            "filter",
            "--controller",
            "static",
            "--profile",
            "constant:100000",
            "--duration",
            "90s",
            "--out",
            str(out),
            "--noise",
            "0",
            "--model",
            "per_record_s=1e-5",
            "--blocks-cores",
            "4",
            "--param",
            "blocks=4",
            "--resources",
            "0.5@30s-60s",
        ]
    )
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"]["cores"] == 4.0 and summary["model"]["per_record_s"] == 1e-5
    assert summary["resources"] == "0.5@30s-60s"
    records = read_jsonl(out / "metrics.jsonl")
    slow = [r.processing_s for r in records if 30 <= r.started_at < 60]
    fast = [r.processing_s for r in records if r.started_at < 30]
    # 100k records * 1e-5 s over 4 cores = 0.25 s; over 2 cores = 0.5 s
    assert min(slow) - max(fast) == pytest.approx(0.25)


def test_queue_coalesce_merges_waiting_batches_and_only_then_is_recorded(tmp_path):
    # reduce at 100k records/s costs more than the 0.25 s interval: batches wait
    args = ["simulate", "--workload", "reduce", "--controller", "static"]
    args += ["--param", "interval=0.25", "--profile", "constant:100000", "--duration", "60s"]
    args += ["--noise", "0"]
    runs = {}
    for queue in ("fifo", "coalesce"):
        out = tmp_path / queue
        assert main([*args, "--queue", queue, "--out", str(out)]) == 0
        summary = json.loads((out / "summary.json").read_text())
        runs[queue] = (summary, read_jsonl(out / "metrics.jsonl"))
    (fifo, fifo_batches), (coalesce, coalesce_batches) = runs["fifo"], runs["coalesce"]
    assert "queue" not in fifo and coalesce["queue"] == "coalesce"
    assert coalesce["batches"] < fifo["batches"]
    assert max(b.records for b in coalesce_batches) > max(b.records for b in fifo_batches)
    # merged batches span more than one planned interval; fifo batches never do
    assert max(b.interval_s for b in fifo_batches) == pytest.approx(0.25)
    assert max(b.interval_s for b in coalesce_batches) > 0.25


def test_queue_refuses_an_unknown_mode_with_the_allowed_ones(tmp_path, capsys):
    argv = ["simulate", "--workload", "reduce", "--controller", "static"]
    argv += ["--profile", "constant:1000", "--duration", "10s", "--queue", "lifo"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err == "adabatch: error: --queue 'lifo': allowed one of fifo, coalesce\n"
    assert not (tmp_path / "run").exists()


def test_a_scenario_checks_its_queue_mode():
    with pytest.raises(
        AdabatchError, match=r"'queue' = 'lifo' is not allowed: allowed one of fifo"
    ):
        make_scenario("reduce", "constant:1000", "10s", queue="lifo")


def test_sweep_static_prints_the_oracle(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "simulate",
            "--workload",
            "join",
            "--controller",
            "fixed-point",
            "--profile",
            "constant:5000",
            "--duration",
            "2m",
            "--out",
            str(out),
            "--sweep-static",
            "--intervals",
            "0.25:1.5:0.25",
            "--noise",
            "0",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "best static interval: 0.5 s" in printed
    assert "fixed-point / oracle" in printed
    sweep = json.loads((out / "sweep.json").read_text())
    assert [r["interval_s"] for r in sweep["rows"]] == [0.25, 0.5, 0.75, 1.0, 1.25, 1.5]
    # p = x is crossed near 0.36 s: 0.25 s diverges, 0.5 s is the smallest stable interval
    assert [r["stable"] for r in sweep["rows"]] == [False] + [True] * 5
    assert sweep["best"] == {"interval_s": 0.5, "blocks": 2}


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (["--controller", "magic"], "unknown controller 'magic'"),
        (["--workload", "sort"], "unknown workload 'sort'"),
        (["--param", "rho=1.5"], "'rho' = '1.5' is out of range"),
        (["--param", "rho=1"], "'rho' = '1' is out of range"),
        (["--param", "nonsense"], "not of the form name=value"),
        (["--profile", "sine:1:2"], "sine:MIN:MAX:PERIOD"),
        (["--profile", "trace:/no/such/rates.csv"], "does not exist"),
        (["--duration=-5s"], "duration '-5s'"),
        (["--duration", "0"], "duration '0' must be > 0"),
        (["--seed", "x"], "--seed 'x' is not an integer"),
        (["--model", "bogus=1"], "no model parameter 'bogus'"),
        (["--resources", "2@1s-5s"], "must be in (0, 1]"),
        (["--noise", "-1"], "'sigma' = -1.0 is out of range"),
        (["--sweep-static", "--intervals", "5:1:1"], "--intervals '5:1:1' is malformed"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, change, needle):
    args = {
        "--workload": "reduce",
        "--controller": "fixed-point",
        "--profile": "constant:1000",
        "--duration": "10s",
        "--out": str(tmp_path / "run"),
    }
    argv = ["simulate"]
    for key, value in args.items():
        if not any(c == key or c.startswith(key + "=") for c in change):
            argv += [key, value]
    code = main(argv + change)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("adabatch: error: ")
    assert needle in err
    assert "Traceback" not in err


def test_the_installed_command_exits_2_without_traceback(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "adabatch.cli",
            "simulate",
            "--workload",
            "reduce",
            "--controller",
            "fixed-point",
            "--profile",
            "bogus:1",
            "--duration",
            "10",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert (
        proc.stderr.strip().splitlines() == [proc.stderr.strip()]
        and "unknown shape 'bogus'" in proc.stderr
    )


def _png_size(path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_timeline_adds_a_blocks_panel_only_when_blocks_vary(tmp_path):
    from adabatch.control.base import BatchReport
    from adabatch.metrics import BatchRecord
    from adabatch.report.timeline import plot_timeline

    def record(i: int, blocks: int) -> BatchRecord:
        report = BatchReport(i, 1.0, blocks, 1000, 0.4, 0.0, i + 1.0, i + 1.0, i + 1.4)
        return BatchRecord.from_report(report)

    fixed = plot_timeline([record(i, 2) for i in range(10)], tmp_path / "a.png", "fixed")
    varying = plot_timeline([record(i, 1 + i % 3) for i in range(10)], tmp_path / "b.png", "v")
    empty = plot_timeline([], tmp_path / "c.png", "empty")
    assert _png_size(fixed) == (1000, 500)
    assert _png_size(varying) == (1000, 650)
    assert _png_size(empty) == (1000, 500)
