"""Bounded resources and honest verdicts in the simulator: every size a user gives has a
limit checked before the work, and an overwhelmed run is never called stable."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from adabatch.cli import main
from adabatch.control import registry
from adabatch.errors import AdabatchError
from adabatch.profiles import MAX_TRACE_BYTES, check_span, parse_profile
from adabatch.runs.simulated import (
    MAX_GRID,
    SimProgress,
    make_scenario,
    parse_grid,
    simulate,
    sweep_static,
)
from adabatch.sim.engine import MAX_BATCHES, run_simulation


def simulate_cli(tmp_path: Path, *extra: str, profile: str = "constant:1000") -> int:
    return main(
        [
            "simulate",
            "--workload",
            "reduce",
            "--profile",
            profile,
            "--duration",
            "60s",
            "--out",
            str(tmp_path / "out"),
            *extra,
        ]
    )


# ------------------------------------------------------------------ honest verdicts


def test_an_overwhelmed_static_run_is_not_stable(tmp_path: Path) -> None:
    """1e8 records/s: the first batch takes far longer than the run, 59 batches wait."""
    assert simulate_cli(tmp_path, "--controller", "static", profile="constant:100000000") == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["batches"] < 2
    assert summary["final_queue_len"] > summary["batches"]
    assert summary["stable"] is False


def test_the_static_oracle_never_picks_a_diverging_interval() -> None:
    scenario = make_scenario("reduce", "constant:100000000", "60s", noise=0)
    sweep = sweep_static(scenario, [0.5, 1.0, 2.0, 5.0])
    for row in sweep.rows:
        assert row["final_queue_len"] > row["batches"]
        assert row["stable"] is False
    assert sweep.best is None


def test_the_oracle_still_finds_a_healthy_interval() -> None:
    scenario = make_scenario("reduce", "constant:5000", "60s", noise=0)
    sweep = sweep_static(scenario, [0.5, 1.0, 2.0])
    assert sweep.best is not None
    assert sweep.best["stable"] is True
    assert sweep.best["final_queue_len"] <= 1


# ------------------------------------------------------------------ profiles


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("markov:1,2:1e-300", "DWELL '1e-300' is not allowed: allowed 1 ms"),
        ("bursts:1:2:1e-300:1e-301", "EVERY '1e-300' is not allowed: allowed 1 ms"),
        ("bursts:1:2:1:1e-301", "LENGTH '1e-301' is not allowed: allowed 1 ms"),
        ("constant:1e308", "rate R '1e308' is not allowed"),
        ("sine:1:2:1e308", "PERIOD '1e308' is not allowed"),
        ("step:1:1e300:10", "rate R2 '1e300' is not allowed"),
    ],
)
def test_profile_periods_and_rates_are_bounded(spec: str, needle: str) -> None:
    with pytest.raises(AdabatchError) as err:
        parse_profile(spec)
    assert needle in str(err.value)


def test_a_generated_profile_may_not_change_rate_without_bound() -> None:
    fine = parse_profile("markov:1,2:1ms")
    check_span(fine, 60.0)
    with pytest.raises(AdabatchError, match="allowed at most 1,000,000"):
        check_span(fine, 1e6)
    with pytest.raises(AdabatchError, match="changes its rate"):
        make_scenario("reduce", "bursts:1:2:2ms:1ms", "1h")


def test_a_long_user_value_is_clipped_in_the_message() -> None:
    with pytest.raises(AdabatchError) as err:
        parse_profile("constant:" + "9" * 5000)
    assert len(str(err.value)) < 800


# ------------------------------------------------------------------ trace files


def test_a_trace_header_error_does_not_echo_the_file(tmp_path: Path) -> None:
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$very-secret-hash:19000:0:99999:7:::\n")
    with pytest.raises(AdabatchError) as err:
        parse_profile(f"trace:{secret}")
    assert "very-secret-hash" not in str(err.value)
    assert "time_s,rate_rps" in str(err.value)


def test_a_directory_named_as_trace_is_reported_as_one(tmp_path: Path) -> None:
    with pytest.raises(AdabatchError, match="is a directory"):
        parse_profile(f"trace:{tmp_path}")


def test_a_fifo_named_as_trace_is_reported_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)  # nobody writes: an open() for reading would block for ever
    with pytest.raises(AdabatchError, match="is a FIFO"):
        parse_profile(f"trace:{fifo}")


def test_a_trace_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    trace = tmp_path / "latin1.csv"
    trace.write_bytes(b"time_s,rate_rps\n0,100\n1,\xe9\xff\n")
    with pytest.raises(AdabatchError, match="is not UTF-8 text"):
        parse_profile(f"trace:{trace}")


def test_a_trace_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    trace = tmp_path / "huge.csv"
    with trace.open("wb") as fh:
        fh.write(b"time_s,rate_rps\n0,100\n")
        fh.truncate(MAX_TRACE_BYTES + 1)  # sparse: no disk used
    with pytest.raises(AdabatchError, match="allowed at most"):
        parse_profile(f"trace:{trace}")


def test_trace_rows_must_be_at_least_a_millisecond_apart(tmp_path: Path) -> None:
    trace = tmp_path / "dense.csv"
    trace.write_text("time_s,rate_rps\n0,100\n1e-300,5\n")
    with pytest.raises(AdabatchError, match="at least 1 ms"):
        parse_profile(f"trace:{trace}:linear")


# ------------------------------------------------------------------ controllers, grids, durations


@pytest.mark.parametrize(
    ("controller", "param", "needle"),
    [
        ("static", "blocks=1e18", "integer in [1, 10000]"),
        ("isotonic", "block_step=1e-300", "[0.001, 86400]"),
        ("isotonic", "max_blocks=99999999", "integer in [1, 10000]"),
        ("fixed-point", "granularity=1e-300", "[0.001, 86400]"),
        ("pid", "kp=1e308", "[0, 1e+06]"),
    ],
)
def test_controller_parameters_are_bounded(
    controller: str, param: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert simulate_cli(tmp_path, "--controller", controller, "--param", param) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_isotonic_with_the_smallest_block_step_finishes() -> None:
    """A block step of 1 ms steps the search in bounded work (it used to spin on a step
    below the 1 us grid the search rounds to)."""
    scenario = make_scenario("reduce", "constant:2000", "120s", noise=0.05, seed=1)
    result = simulate(scenario, "isotonic", {"block_step": "0.001"})
    assert result.summary.batches > 10


def test_a_sweep_grid_is_counted_before_it_is_built() -> None:
    with pytest.raises(AdabatchError, match="has 1e\\+09 values: allowed at most 1000"):
        parse_grid("1e-9:1:1e-9")
    with pytest.raises(AdabatchError, match="allowed at most 1000"):
        parse_grid("1:1e300:1e-300")
    with pytest.raises(AdabatchError, match="allowed at most 1000"):
        parse_grid(",".join(["1"] * (MAX_GRID + 1)))
    assert len(parse_grid("0.25:5:0.25")) == 20


def test_a_sweep_below_the_smallest_interval_fails_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    code = simulate_cli(
        tmp_path, "--controller", "static", "--sweep-static", "--intervals", "0.0001,1"
    )
    assert code == 2
    assert "'interval' = 0.0001 is out of range" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_duration_implying_too_many_batches_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    code = main(
        [
            "simulate",
            "--workload",
            "reduce",
            "--controller",
            "static",
            "--profile",
            "constant:1000",
            "--duration",
            "1e9",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert f"allowed at most {MAX_BATCHES:,}" in err
    assert "1e+09 batches" in err


def test_the_engine_refuses_too_many_batches_itself() -> None:
    ctrl = registry.create("static", {"interval": "0.001"})
    scenario = make_scenario("reduce", "constant:10", "60s")
    with pytest.raises(AdabatchError, match="batches"):
        run_simulation(ctrl, scenario.model, scenario.profile, 1e4)


# ------------------------------------------------------------------ progress


def test_the_engine_reports_progress_in_stream_time() -> None:
    seen: list[tuple[float, float, int]] = []
    scenario = make_scenario("reduce", "constant:1000", "15000s", noise=0)
    ctrl = registry.create("static", {"interval": "1"})
    out = run_simulation(
        ctrl,
        scenario.model,
        scenario.profile,
        scenario.duration_s,
        on_progress=lambda now, d, n: seen.append((now, d, n)),
    )
    assert len(seen) >= 5
    assert [s[0] for s in seen] == sorted(s[0] for s in seen)
    assert all(d == 15000.0 for _, d, _ in seen)
    assert not out.diverged
    assert seen[-1][2] == len(out.records)


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_progress_line_waits_then_prints_every_few_seconds() -> None:
    stream, clock = io.StringIO(), FakeClock()
    line = SimProgress(stream, clock=clock, after_s=3.0, every_s=10.0)
    line(10.0, 100.0, 5)
    assert stream.getvalue() == ""  # a short simulation shows nothing
    clock.t += 3.0
    line(20.0, 100.0, 9)
    assert stream.getvalue() == (
        "simulating: stream time 20.0 of 100.0 s (20%), 9 batches finished\n"
    )
    clock.t += 5.0
    line(30.0, 100.0, 12)  # not a terminal: at most a line every 10 s
    assert stream.getvalue().count("\n") == 1
    clock.t += 5.0
    line(40.0, 100.0, 15)
    assert stream.getvalue().count("\n") == 2
    line.end()
    assert stream.getvalue().count("\n") == 2
