"""``adabatch pid-sweep``: find the toxic PID back-pressure settings (spark-pid-backpressure)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

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
    parser.add_argument(
        "--target",
        type=float,
        default=pid_sweep.DEFAULT_TARGET_RPS,
        help="constant processing throughput, records/s (default 5000)",
    )
    parser.add_argument(
        "--interval", type=float, default=1.0, help="batch interval, seconds (default 1)"
    )
    parser.add_argument(
        "--iterations",
        type=int,
        default=pid_sweep.DEFAULT_ITERATIONS,
        help="batches per case (default 100, as in the blog)",
    )
    parser.add_argument("--out", type=Path, required=True, help="output directory")


def run(args: argparse.Namespace) -> int:
    cases = pid_sweep.grid(
        kp=pid_sweep.parse_values(args.kp, "kp"),
        ki=pid_sweep.parse_values(args.ki, "ki"),
        kd=pid_sweep.parse_values(args.kd, "kd"),
        initial_batches=pid_sweep.parse_values(args.initial_batch, "initial-batch"),
        min_rates=pid_sweep.parse_values(args.min_rate, "min-rate"),
    )
    started = time.perf_counter()
    result = pid_sweep.run_sweep(
        cases, target_rps=args.target, interval_s=args.interval, iterations=args.iterations
    )
    elapsed = time.perf_counter() - started
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    pid_sweep.write_csv(result.results, out / "cases.csv")
    pid_sweep.write_csv(result.toxic(), out / "toxic.csv")
    pid_sweep.plot_examples(result, out / "trajectories.png")

    counts = result.counts()
    total = len(result.results)
    print(f"{total} cases, {args.iterations} batches each, in {elapsed:.1f} s")
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
