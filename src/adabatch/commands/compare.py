"""``adabatch compare``: several controllers one after another on the same Spark workload."""

from __future__ import annotations

import argparse

from adabatch.commands import Command
from adabatch.commands.run import (
    add_shared_arguments,
    check_controller,
    check_inputs,
    config_from_args,
    require_spark,
)
from adabatch.control.registry import parse_params
from adabatch.errors import AdabatchError, shown
from adabatch.outputs import check_dir_path
from adabatch.report.text import fmt
from adabatch.runs.compare import (
    COLUMNS,
    RATIOS,
    CompareProgress,
    compare_spark,
    for_sequential_runs,
    split_params,
)
from adabatch.streaming.options import SPARK_DEFAULT

NAME = "compare"
HELP = "run several controllers on the same Spark workload, profile and seed; table of ratios"
# Most controllers one comparison runs (each is a full Spark run).
MAX_CONTROLLERS = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--controllers",
        required=True,
        help=f"comma-separated controller names (e.g. fixed-point,static,{SPARK_DEFAULT})",
    )
    parser.add_argument(
        "--param",
        action="append",
        metavar="[NAME.]K=V",
        help="parameter of controller NAME, or of every controller that has K",
    )
    add_shared_arguments(parser)


def run(args: argparse.Namespace) -> int:
    base = config_from_args(args, "static", {}, check_dir_path(args.out))
    controllers = args.controllers.split(",")
    if len(controllers) > MAX_CONTROLLERS:
        msg = (
            f"--controllers {shown(args.controllers)} names {len(controllers)} controllers: "
            f"allowed at most {MAX_CONTROLLERS}"
        )
        raise AdabatchError(msg)
    # every controller and parameter is checked before the spark extra is imported
    check_inputs(base)
    for_sequential_runs(base, "compare")
    names = [c.strip() for c in controllers if c.strip()]
    for name, params in split_params(names, parse_params(args.param)).items():
        check_controller(name, params, base.duration_s)
    require_spark()
    progress = CompareProgress()
    try:
        table, results, paths = compare_spark(
            base, controllers, parse_params(args.param), on_progress=progress
        )
    finally:
        progress.end()
    headers = ["controller", "stable", *(label for _, label in COLUMNS)]
    headers += [label for _, label in RATIOS]
    rows = [[fmt(v, compact=False) for v in row.values()] for row in table.rows()]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print(f"{base.workload} under {base.label}, seed {base.seed}; ratios to {table.best}:")
    print("  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)))
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
    note = table.cpu_note()
    if note is not None:
        print(note)
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 130 if any(r.interrupted for r in results.values()) else 0


COMMAND = Command(NAME, HELP, add_arguments, run)
