"""``adabatch simulate``: run a controller in the discrete-event simulator and write the run."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from adabatch.batching import QUEUE_MODES
from adabatch.commands import Command
from adabatch.commands.args import parse_choice, parse_int
from adabatch.control.registry import create, parse_params
from adabatch.errors import AdabatchError, shown
from adabatch.metrics import RunSummary
from adabatch.outputs import open_output
from adabatch.profiles import GRAMMAR
from adabatch.report.text import fmt_value, summary_rows, target_line
from adabatch.runs.simulated import (
    RUN_FILES,
    SimProgress,
    StaticSweep,
    check_sweep,
    make_scenario,
    parse_grid,
    simulate,
    sweep_static,
    write_run,
)
from adabatch.sim.engine import check_batches
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
    parser.add_argument(
        "--queue", default="fifo", help="batch queue: fifo (papers' model) or coalesce (Spark's)"
    )
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
        msg = f"{what} {shown(text)} is not a number"
        raise AdabatchError(msg) from None


def parse_grid_blocks(text: str) -> list[int]:
    """``--sweep-blocks`` ``"1,2,4"`` -> integers >= 1 (their upper bound is ``static``'s)."""
    parts = str(text).split(",")
    if len(parts) > 100:
        msg = f"--sweep-blocks {shown(text)} has {len(parts)} values: allowed at most 100"
        raise AdabatchError(msg)
    return [parse_int(b.strip(), "--sweep-blocks", 1) for b in parts]


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
        queue=parse_choice(args.queue, "--queue", QUEUE_MODES),
    )
    params = parse_params(args.param)
    # every input is checked before the (longer) runs: the controller, its batch count, the grid
    check_batches(scenario.duration_s, create(args.controller, params).smallest_interval())
    if args.sweep_static:
        intervals = parse_grid(args.intervals)
        blocks = parse_grid_blocks(args.sweep_blocks)
        check_sweep(scenario, intervals, blocks)
    # the directory is checked and locked before the runs; its files are replaced after them
    with open_output(args.out, replaces=RUN_FILES) as out:
        with SimProgress() as progress:
            result = simulate(scenario, args.controller, params, on_progress=progress)
            sweep = (
                sweep_static(scenario, intervals, blocks, on_progress=progress)
                if args.sweep_static
                else None
            )
        paths = write_run(out, result, sweep=sweep)
    console = Console()
    table = Table(title=result.title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for label, text in summary_rows(result.summary):
        table.add_row(label, text)
    console.print(table)
    line = target_line(result.summary)
    if line is not None:
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    if sweep is not None:
        _print_sweep(console, sweep, result.summary)
    console.print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return 0


def _print_sweep(console: Console, sweep: StaticSweep, summary: RunSummary) -> None:
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
            fmt_value(r["mean_latency_s"], "{:.3f}"),
            fmt_value(r["p95_latency_s"], "{:.3f}"),
            fmt_value(r["mean_record_latency_s"], "{:.3f}"),
            fmt_value(r["mean_processing_s"], "{:.3f}"),
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
        f"{summary.controller} / oracle = {sweep.ratio(summary):.3f}"
    )


COMMAND = Command(NAME, HELP, add_arguments, run)
