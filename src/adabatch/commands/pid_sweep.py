"""``adabatch pid-sweep``: find the toxic PID back-pressure settings (spark-pid-backpressure)."""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from adabatch.commands import Command
from adabatch.commands.args import parse_bounded_int, parse_float
from adabatch.control.base import MAX_INTERVAL_S, MIN_INTERVAL_S
from adabatch.outputs import open_output
from adabatch.profiles import MAX_RATE_RPS
from adabatch.report.progress import ProgressLine
from adabatch.sim import pid_sweep

NAME = "pid-sweep"
HELP = (
    "simulate Spark's PID back pressure at constant throughput over a grid of kp, ki, kd, "
    "initial batch sizes and min rates; classify and count the toxic cases"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    values = "START:STOP:STEP (STOP excluded) or a comma-separated list"
    parser.add_argument("--kp", default="0:2:0.2", help=f"proportional gains, {values}")
    parser.add_argument("--ki", default="0:2:0.2", help=f"integral gains, {values}")
    parser.add_argument("--kd", default="0:2:0.2", help=f"derivative gains, {values}")
    parser.add_argument(
        "--initial-batch", default="2500,4500,5500,7500", help=f"initial batch sizes, {values}"
    )
    parser.add_argument(
        "--min-rate", default="100,500,1000,2500,4500", help=f"min rates (records/s), {values}"
    )
    # every value is parsed by the shared validators so bad input gives one line
    parser.add_argument(
        "--target",
        default=str(pid_sweep.DEFAULT_TARGET_RPS),
        help="constant processing throughput, records/s (default 5000)",
    )
    parser.add_argument("--interval", default="1", help="batch interval, seconds (default 1)")
    parser.add_argument(
        "--iterations",
        default=str(pid_sweep.DEFAULT_ITERATIONS),
        help="batches per case (default 100, as in the blog)",
    )
    parser.add_argument("--out", required=True, help="output directory")


SWEEP_FILES = ("toxic.csv", "trajectories.png", "cases.csv")


# Progress is shown after every this many cases (the cases of a chunk run as one sweep).
PROGRESS_CHUNK = 50


def _run_sweep(cases: Sequence[pid_sweep.SweepCase], **settings: Any) -> pid_sweep.SweepResult:
    """:func:`~adabatch.sim.pid_sweep.run_sweep` over ``cases`` a chunk at a time, with
    the cases done on a progress line (every case runs on its own: the result is the same
    as one sweep over all of them)."""
    if len(cases) <= PROGRESS_CHUNK:
        return pid_sweep.run_sweep(cases, **settings)
    results: list[pid_sweep.CaseResult] = []
    with ProgressLine(every_s=10.0, tty_every_s=0.25, after_s=3.0) as line:
        for start in range(0, len(cases), PROGRESS_CHUNK):
            part = pid_sweep.run_sweep(cases[start : start + PROGRESS_CHUNK], **settings)
            results.extend(part.results)
            line.show(f"pid-sweep: {len(results):,} of {len(cases):,} cases")
    return dataclasses.replace(part, results=tuple(results))


def run(args: argparse.Namespace) -> int:
    target = parse_float(args.target, "--target", 0.0, MAX_RATE_RPS, open_low=True)
    interval = parse_float(args.interval, "--interval", MIN_INTERVAL_S, MAX_INTERVAL_S)
    iterations = parse_bounded_int(
        args.iterations, "--iterations", pid_sweep.Thresholds().tail, pid_sweep.MAX_ITERATIONS
    )
    cases = pid_sweep.grid(
        kp=pid_sweep.parse_values(args.kp, "kp"),
        ki=pid_sweep.parse_values(args.ki, "ki"),
        kd=pid_sweep.parse_values(args.kd, "kd"),
        initial_batches=pid_sweep.parse_values(args.initial_batch, "initial-batch"),
        min_rates=pid_sweep.parse_values(args.min_rate, "min-rate"),
    )
    pid_sweep.check_size(len(cases), iterations)
    with open_output(args.out, replaces=SWEEP_FILES) as od:  # refused before the sweep runs
        started = time.perf_counter()
        result = _run_sweep(cases, target_rps=target, interval_s=interval, iterations=iterations)
        elapsed = time.perf_counter() - started
        od.begin()
        pid_sweep.write_csv(result.toxic(), (od, "toxic.csv"))
        pid_sweep.plot_examples(result, (od, "trajectories.png"))
        pid_sweep.write_csv(result.results, (od, "cases.csv"))  # last: the run is whole
        od.complete()
    out = od.root

    counts = result.counts()
    total = len(result.results)
    print(f"{total} cases, {iterations} batches each, in {elapsed:.1f} s")
    for klass, n in counts.items():
        print(f"  {klass:<12} {n:>6}  {100 * n / total:5.1f}%")
    print(f"  {'toxic':<12} {len(result.toxic()):>6}  (oscillating + diverging)")
    tol = result.thresholds.throughput_tolerance
    print(f"  the blog's assertion (throughput within {tol:.0%}) fails in {result.off_target()}")
    for table in (
        pid_sweep.class_table(result, "kd"),
        pid_sweep.class_table(result, "ki"),
        pid_sweep.table_by(result, "ki", "kd"),
    ):
        print()
        print(table)
    print()
    print(f"wrote {out / 'cases.csv'}, {out / 'toxic.csv'}, {out / 'trajectories.png'}")
    return 0


COMMAND = Command(NAME, HELP, add_arguments, run)
