"""``adabatch simulate``: run a controller in the discrete-event simulator and write the run."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from adabatch.commands.args import parse_int
from adabatch.control.registry import parse_params
from adabatch.errors import AdabatchError
from adabatch.metrics import summary_rows
from adabatch.profiles import GRAMMAR
from adabatch.sim.run import (
    make_scenario,
    parse_grid,
    simulate,
    sweep_static,
    write_run,
    write_sweep,
)
from adabatch.sim.workloads import WORKLOADS

NAME = "simulate"
HELP = "simulate a controller on a workload cost model and a rate profile"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # every value is parsed by the library so bad input gives one line, not argparse usage
    parser.add_argument("--workload", required=True, help=f"one of {', '.join(WORKLOADS)}")
    parser.add_argument("--controller", required=True, help="see `adabatch controllers`")
    parser.add_argument("--param", action="append", metavar="K=V", help="controller parameter")
    parser.add_argument("--profile", required=True, help=f"rate profile: {GRAMMAR}")
    parser.add_argument("--duration", required=True, help="stream duration (90s, 10m, 1h)")
    parser.add_argument("--out", default="runs/simulate", help="output directory")
    parser.add_argument("--seed", default="0", help="random seed (integer >= 0)")
    parser.add_argument("--noise", help="lognormal sigma of processing times (model 'sigma')")
    parser.add_argument("--resources", help="available fraction of cores, e.g. 0.5@60s-120s")
    parser.add_argument("--model", action="append", metavar="K=V", help="cost model parameter")
    parser.add_argument("--calibration", help="cost model parameters from a calibration JSON")
    parser.add_argument("--blocks-cores", help="cores the blocks are divided over (model 'cores')")
    parser.add_argument("--poisson", action="store_true", help="Poisson record counts")
    parser.add_argument("--warmup", default="0", help="leave the first seconds out of means")
    parser.add_argument(
        "--sweep-static", action="store_true", help="also find the best static interval"
    )
    parser.add_argument(
        "--intervals", default="0.25:5:0.25", help="sweep grid START:STOP:STEP or a,b,c"
    )
    parser.add_argument("--sweep-blocks", default="2", help="blocks to sweep, e.g. 1,2,4")


def _float(text: str | None, what: str) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        msg = f"{what} {text!r} is not a number"
        raise AdabatchError(msg) from None


def _fmt(value: Any, pattern: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return pattern.format(value)


def run(args: argparse.Namespace) -> int:
    scenario = make_scenario(
        args.workload,
        args.profile,
        args.duration,
        seed=parse_int(args.seed, "--seed", 0),
        model=parse_params(args.model),
        calibration=args.calibration,
        noise=_float(args.noise, "--noise"),
        cores=_float(args.blocks_cores, "--blocks-cores"),
        resources=args.resources,
        poisson=args.poisson,
        warmup=args.warmup,
    )
    params = parse_params(args.param)
    if args.sweep_static:  # validate the grid before the (longer) runs
        intervals = parse_grid(args.intervals)
        blocks = [parse_int(b.strip(), "--sweep-blocks", 1) for b in args.sweep_blocks.split(",")]
    result = simulate(scenario, args.controller, params)
    paths = write_run(Path(args.out), result)
    console = Console()
    table = Table(title=result.title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for label, text in summary_rows(result.summary):
        table.add_row(label, text)
    console.print(table)
    if args.sweep_static:
        sweep = sweep_static(scenario, intervals, blocks)
        write_sweep(Path(args.out) / "sweep.json", sweep)
        _print_sweep(console, sweep, result.summary)
    console.print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return 0


def _print_sweep(console: Console, sweep: Any, summary: dict[str, Any]) -> None:
    table = Table(title="static oracle (fixed-point §5.2)")
    for col in (
        "interval (s)",
        "blocks",
        "mean latency",
        "p95 latency",
        "record latency",
        "processing",
        "stable",
    ):
        table.add_column(col, justify="right")
    for r in sweep.rows:
        best = sweep.best is not None and r is sweep.best
        table.add_row(
            f"{r['interval_s']:g}",
            str(r["blocks"]),
            _fmt(r["mean_latency_s"], "{:.3f}"),
            _fmt(r["p95_latency_s"], "{:.3f}"),
            _fmt(r["mean_record_latency_s"], "{:.3f}"),
            _fmt(r["mean_processing_s"], "{:.3f}"),
            "yes" if r["stable"] else "no",
            style="bold green" if best else None,
        )
    console.print(table)
    if sweep.best is None:
        console.print("no static interval in the grid was stable")
        return
    b = sweep.best
    console.print(
        f"best static interval: {b['interval_s']:g} s with {b['blocks']} blocks, "
        f"mean batch latency {b['mean_latency_s']:.3f} s; "
        f"{summary['controller']} / oracle = {sweep.ratio(summary):.3f}"
    )
