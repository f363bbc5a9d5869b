"""The PID back-pressure sweep: the blog's loop, classification, grid parsing, CLI."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from adabatch.cli import main
from adabatch.errors import AdabatchError
from adabatch.sim.pid_sweep import (
    DEFAULT_GAINS,
    SweepCase,
    Thresholds,
    classify,
    grid,
    parse_values,
    run_sweep,
    simulate_pid,
)


def klass(case: SweepCase) -> str:
    traj = simulate_pid(case)
    return classify(traj, case, target_rps=5000.0, interval_s=1.0, thresholds=Thresholds()).klass


def test_simulate_follows_the_blog_loop_by_hand() -> None:
    traj = simulate_pid(SweepCase(1.0, 0.2, 0.0, 2500.0, 100.0), iterations=3)
    # 2500 records at 5000/s = 500 ms, then a 500 ms pause; the first estimate is skipped,
    # the second sees 5000/s with no error and sets the batch to 5000 (1000 ms, no pause)
    assert traj.time_ms == (1000, 2000, 3000)
    assert traj.scheduling_delay_ms == (0, 0, 0)
    assert traj.batch == (2500.0, 5000.0, 5000.0)
    assert traj.throughput_rps[-1] == pytest.approx(10000 / 3)


def test_an_oversized_batch_builds_scheduling_delay() -> None:
    traj = simulate_pid(SweepCase(0.0, 0.0, 0.0, 7500.0, 100.0), iterations=2)
    assert traj.time_ms == (1500, 3000)
    assert traj.scheduling_delay_ms == (500, 1000)  # stays at 7500: 1.5 s per 1 s batch


@pytest.mark.parametrize("initial", [2500.0, 4500.0, 5500.0, 7500.0])
def test_spark_defaults_converge(initial: float) -> None:
    assert klass(SweepCase(1.0, 0.2, 0.0, initial, 100.0)) == "converged"


def test_known_toxic_and_sluggish_cases() -> None:
    # swings between min_rate and ~4x the target for the whole run
    assert klass(SweepCase(1.2, 0.2, 0.6, 7500.0, 2500.0)) == "oscillating"
    # large derivative: swings grow until the batch exceeds 10x the target
    assert klass(SweepCase(0.0, 0.2, 1.2, 7500.0, 100.0)) == "diverging"
    # kp = 0: settles, but ~12% below the target throughput
    assert klass(SweepCase(0.0, 0.2, 0.0, 5500.0, 100.0)) == "sluggish"


def test_collapse_onto_min_rate_is_diverging() -> None:
    case = SweepCase(0.0, 0.4, 0.0, 7500.0, 500.0)
    traj = simulate_pid(case)
    assert traj.batch[-20:] == (500.0,) * 20
    assert klass(case) == "diverging"


def test_a_slice_of_the_grid_finds_every_toxic_class() -> None:
    cases = grid(kd=(0.0, 1.0), initial_batches=(7500.0,), min_rates=(100.0,))
    result = run_sweep(cases)
    counts = result.counts()
    assert sum(counts.values()) == 200
    assert counts["oscillating"] > 0 and counts["diverging"] > 0 and counts["converged"] > 0
    assert not any(r.ki == 0 for r in result.toxic())


@pytest.mark.slow
def test_blog_sized_sweep_finds_toxic_cases() -> None:
    # its speed is a benchmark figure (benchmarks/sim_speed.py), not an assert
    cases = grid(min_rates=(100.0,))  # 10 x 10 x 10 x 4 = the blog's 4000 cases
    assert len(cases) == 4000
    result = run_sweep(cases)
    counts = result.counts()
    assert sum(counts.values()) == 4000
    assert counts["oscillating"] > 0 and counts["diverging"] > 0
    assert counts["converged"] > 2000
    # no integral term: no scheduling-delay feedback, never toxic in this setting
    assert not any(r.ki == 0 for r in result.toxic())


def test_parse_values() -> None:
    assert parse_values("0:2:0.2", "kp") == DEFAULT_GAINS
    assert DEFAULT_GAINS[3] == 0.6 and len(DEFAULT_GAINS) == 10
    assert parse_values("1, 2.5", "kp") == (1.0, 2.5)
    assert parse_values("7", "kd") == (7.0,)
    for bad in ("0:2", "0:2:0", "2:0:0.5", "a,b"):
        with pytest.raises(AdabatchError, match="--kp"):
            parse_values(bad, "kp")


def test_grid_validation() -> None:
    with pytest.raises(AdabatchError, match=r"kd = -0\.5"):
        grid(kd=(0.0, -0.5))
    with pytest.raises(AdabatchError, match="min rate = 0"):
        grid(min_rates=(0.0,))
    with pytest.raises(AdabatchError, match="iterations"):
        run_sweep(grid(kp=(1.0,), ki=(0.2,), kd=(0.0,)), iterations=5)


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_cli_writes_cases_toxic_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "sweep"
    rc = main(
        ["pid-sweep", "--kp", "0.6,1.2", "--ki", "0.2,1.8", "--kd", "0:2:0.6", "--out", str(out)]
    )
    assert rc == 0
    cases = read_csv(out / "cases.csv")
    toxic = read_csv(out / "toxic.csv")
    assert len(cases) == 2 * 2 * 4 * 4 * 5
    assert {c["class"] for c in cases} <= {"converged", "sluggish", "oscillating", "diverging"}
    assert toxic == [c for c in cases if c["class"] in ("oscillating", "diverging")]
    assert len(toxic) > 0
    assert (out / "trajectories.png").stat().st_size > 10_000
    printed = capsys.readouterr().out
    assert re.search(rf"^\s*toxic\s+{len(toxic)}\s", printed, re.MULTILINE)
    assert "by ki and kd" in printed


def test_cli_bad_grid_exits_2(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    assert main(["pid-sweep", "--ki", "0:1", "--out", str(tmp_path)]) == 2
    assert "--ki '0:1'" in capsys.readouterr().err
