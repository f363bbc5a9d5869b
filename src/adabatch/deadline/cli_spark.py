"""The Spark subcommands of ``adabatch deadline``: profile, run, baseline, bench.

:mod:`adabatch.commands.deadline` calls :func:`add_subcommands`; each parser sets
``deadline_run`` to its handler. The handlers parse, call the library, print.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from adabatch.deadline.spec import TIME_TRIGGERS
from adabatch.deadline.tpch import DEFAULT_RATE, DEFAULT_SCALE_FACTOR, DEFAULT_SLOTS
from adabatch.errors import AdabatchError

DEFAULT_DATA = "runs/deadline-data"


def _data_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("landing data (TPC-H, created on first use)")
    group.add_argument("--data", default=DEFAULT_DATA, help="data directory (tables, landing)")
    group.add_argument(
        "--sf",
        type=float,
        default=DEFAULT_SCALE_FACTOR,
        help=f"TPC-H scale factor (default {DEFAULT_SCALE_FACTOR:g})",
    )
    group.add_argument(
        "--slots",
        type=int,
        default=DEFAULT_SLOTS,
        help=f"landing files per stream ({DEFAULT_SLOTS})",
    )
    group.add_argument(
        "--rate",
        type=float,
        default=DEFAULT_RATE,
        help=f"slots landing per second ({DEFAULT_RATE:g})",
    )
    group.add_argument("--master", default="local[2]", help="Spark master (default local[2])")


def _csv_ints(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        msg = f"{text!r} is not a comma-separated list of integers"
        raise argparse.ArgumentTypeError(msg) from None


def _csv_floats(text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        msg = f"{text!r} is not a comma-separated list of numbers"
        raise argparse.ArgumentTypeError(msg) from None


def add_subcommands(sub: Any) -> None:
    """Add ``profile``, ``run``, ``baseline`` and ``bench`` to ``adabatch deadline``."""
    from adabatch.deadline.queries import QUERY_NAMES

    names = ", ".join(QUERY_NAMES)

    prof = sub.add_parser(
        "profile",
        help="measure a query's batch cost on Spark and fit its cost models",
        description=(
            "Process the landed window in batches of each size (slots) back to back, then "
            "the final aggregation; fit the piecewise-linear batch cost (tuples -> s) and "
            "the final-aggregation cost (batches -> s), and write the JSON that spec files "
            "load with `cost: PATH` (paper Sec. 6.2)."
        ),
    )
    prof.add_argument("--query", action="append", required=True, help=f"one of {names}")
    prof.add_argument("--sizes", type=_csv_ints, default=None, help="batch sizes in slots")
    prof.add_argument("--segments", type=int, default=2, help="segments of the batch-cost fit")
    prof.add_argument("--out", default="runs/deadline-profiles", help="output directory")
    _data_arguments(prof)
    prof.set_defaults(deadline_run=run_profile)

    run = sub.add_parser(
        "run",
        help="run queries with deadlines on Spark (single-query plans or the multi loop)",
        description=(
            "Plan each query with Function 1 and run its batches on Spark while the landing "
            "files arrive in real time; or, with --multi, run the multi-query scheduler "
            "(Sec. 4) on Spark. Give a SPEC file (window_start must be the data's, 0) or "
            "--query with --profile and --deadline-factor (deadline = window end + factor x "
            "the measured single-batch cost). Prints per query: batches, cost, completion, "
            "deadline met, and whether the answer equals DuckDB's."
        ),
    )
    run.add_argument("spec", nargs="?", help="spec file (.yaml/.toml) for the landing data")
    run.add_argument("--query", help=f"one of {names} (instead of SPEC)")
    run.add_argument("--profile", help="profile JSON of --query (adabatch deadline profile)")
    run.add_argument("--deadline-factor", type=float, default=1.0, help="deadline in units of D")
    run.add_argument("--margin", type=float, default=1.25, help="cost model margin for planning")
    run.add_argument("--multi", action="store_true", help="multi-query scheduler (Sec. 4)")
    run.add_argument("--strategy", default=None, help="llf, edf, sjf or rr (with --multi)")
    run.add_argument(
        "--time-trigger",
        choices=TIME_TRIGGERS,
        default=None,
        help="budget (default) or always: when a late MinBatch runs on time (with --multi)",
    )
    run.add_argument("--time-scale", type=float, default=1.0, help="real s per spec second")
    run.add_argument("--no-check", action="store_true", help="skip the DuckDB comparison")
    run.add_argument("--out", default="runs/deadline-run", help="output directory")
    run.add_argument("--json", action="store_true", help="print JSON")
    _data_arguments(run)
    run.set_defaults(deadline_run=run_run)

    base = sub.add_parser(
        "baseline",
        help="the same query as a Structured Streaming file-source query",
        description=(
            "Run the query as a streaming aggregation over the landing directory while the "
            "files arrive: the default trigger, a fixed processing-time trigger, or one shot "
            "(AvailableNow). Reports micro-batches, total compute cost, wall time, failures "
            "and the answer check."
        ),
    )
    base.add_argument("--query", action="append", required=True, help=f"one of {names}")
    base.add_argument(
        "--trigger",
        action="append",
        default=None,
        help="default, available-now or processing:SECONDS (repeatable; default: default)",
    )
    base.add_argument("--deadline", type=float, default=None, help="deadline (spec seconds)")
    base.add_argument("--time-scale", type=float, default=1.0, help="real s per spec second")
    base.add_argument("--out", default="runs/deadline-baseline", help="output directory")
    base.add_argument("--json", action="store_true", help="print JSON")
    _data_arguments(base)
    base.set_defaults(deadline_run=run_baseline)

    bench = sub.add_parser(
        "bench",
        help="the paper's experiments on Spark and in simulation; writes docs/deadline.md",
        description=(
            "Profiles every query (Fig. 3, 4), runs single-query deadlines 1D..0.1D on "
            "the Spark runner (Fig. 6), compares with Structured Streaming (Fig. 5) and "
            "simulates multi-query strategies with the fitted models (Fig. 7, 8, 10, 11). "
            "Writes raw JSON lines, PNG figures and a markdown report."
        ),
    )
    bench.add_argument("--quick", action="store_true", help="CI smoke version (tens of seconds)")
    bench.add_argument("--out", default="runs/deadline-bench", help="output directory")
    bench.add_argument("--docs", default=None, help="also write the report here (docs/deadline.md)")
    bench.add_argument("--queries", default=None, help=f"comma-separated subset of {names}")
    bench.add_argument("--factors", type=_csv_floats, default=None, help="deadline factors")
    bench.add_argument("--margin", type=float, default=None, help="cost model margin")
    bench.add_argument("--skip", default="", help="sections to skip: single,baseline,multi")
    bench.add_argument(
        "--resume",
        action="store_true",
        help="continue the bench in OUT: keep its profiles and finished runs, run the rest",
    )
    bench.add_argument(
        "--report-only",
        action="store_true",
        help="no Spark: redo the simulation from OUT's profiles and rewrite the report",
    )
    _data_arguments(bench)
    bench.set_defaults(deadline_run=run_bench)


def _manifest(args: argparse.Namespace) -> Any:
    from adabatch.deadline.tpch import prepare

    return prepare(args.data, scale_factor=args.sf, slots=args.slots, rate=args.rate)


def _spark(args: argparse.Namespace) -> Any:
    from adabatch.deadline.runner import SPARK_CONF
    from adabatch.spark import get_spark

    return get_spark(args.master, "adabatch-deadline", SPARK_CONF)


def run_profile(args: argparse.Namespace) -> int:
    from adabatch.deadline.profile import profile_query
    from adabatch.deadline.queries import get_query

    queries = [get_query(q).name for q in args.query]
    manifest = _manifest(args)
    spark = _spark(args)
    out = Path(args.out)
    for name in queries:
        profile = profile_query(
            spark, manifest, name, out / "work" / name, sizes=args.sizes, segments=args.segments
        )
        path = profile.save(out / f"{name}.json")
        points = ", ".join(f"[{x:g}, {y:.3f}]" for x, y in profile.cost.breakpoints)
        print(f"{name}: one batch {profile.single_batch_cost:.3f} s; cost {points}; wrote {path}")
        for p in profile.sweep:
            print(
                f"    {p.batches:>4} batches of {p.slots:>4} slots: total {p.total_seconds:8.3f} s"
                f"  final {p.final_seconds:6.3f} s"
            )
    return 0


def _print_run(run: Any) -> None:
    verdict = "met" if run.met else "MISSED"
    correct = {True: "equals DuckDB", False: "DIFFERS from DuckDB", None: "not checked"}
    completion = "-" if run.completion is None else f"{run.completion:.3f}"
    print(
        f"{run.query} ({run.name}): {run.batches} batch(es), cost {run.cost:.3f} s, "
        f"completion {completion} for deadline {run.deadline:.3f}: {verdict}; answer "
        f"{correct[run.correct]}"
    )
    if run.differences:
        for line in run.differences:
            print(f"    {line}")


def run_run(args: argparse.Namespace) -> int:
    from adabatch.deadline.profile import agg_with_margin, load_profile, with_margin
    from adabatch.deadline.runner import run_multi, run_single, spec_for
    from adabatch.deadline.spec import Scenario, load_scenario

    if (args.spec is None) == (args.query is None):
        msg = "give a SPEC file or --query (with --profile), not both or neither"
        raise AdabatchError(msg)
    manifest = _manifest(args)
    if args.query is not None:
        if args.profile is None:
            msg = "--query needs --profile PATH (written by `adabatch deadline profile`)"
            raise AdabatchError(msg)
        if not (math.isfinite(args.deadline_factor) and args.deadline_factor > 0):
            msg = f"--deadline-factor = {args.deadline_factor!r}: allowed a number > 0"
            raise AdabatchError(msg)
        profile = load_profile(args.profile)
        if profile.query != args.query.lower():
            msg = f"profile {args.profile!r} is for {profile.query!r}, not {args.query!r}"
            raise AdabatchError(msg)
        deadline = manifest.window_end + args.deadline_factor * profile.single_batch_cost
        spec = spec_for(
            manifest,
            profile.query,
            deadline=deadline,
            cost=with_margin(profile.cost, args.margin),
            agg_cost=agg_with_margin(profile.agg_cost, args.margin),
        )
        scenario = Scenario((spec,))
    else:
        overrides = {"strategy": args.strategy, "time_trigger": args.time_trigger}
        scenario = load_scenario(args.spec, **overrides)
    spark = _spark(args)
    out = Path(args.out)
    check = not args.no_check
    if args.multi:
        result, runs = run_multi(
            spark, manifest, scenario, out, time_scale=args.time_scale, check=check
        )
        payload: Any = {"result": result.to_json(), "queries": [r.to_json() for r in runs]}
    else:
        runs = [
            run_single(
                spark, manifest, spec, out / spec.id, time_scale=args.time_scale, check=check
            )
            for spec in scenario.queries
        ]
        payload = [r.to_json() for r in runs]
    if args.json:
        print(json.dumps(payload, indent=1))
    else:
        for r in runs:
            _print_run(r)
    bad = [r.query for r in runs if r.correct is False]
    if bad:
        msg = f"answers differ from DuckDB for {', '.join(bad)}"
        raise AdabatchError(msg)
    return 0


def run_baseline(args: argparse.Namespace) -> int:
    from adabatch.deadline.baseline import Trigger, run_streaming
    from adabatch.deadline.queries import get_query

    queries = [get_query(q).name for q in args.query]
    triggers = [Trigger.parse(t) for t in (args.trigger or ["default"])]
    manifest = _manifest(args)
    spark = _spark(args)
    out = Path(args.out)
    runs = []
    for name in queries:
        for trig in triggers:
            label = trig.label.replace(":", "-")
            runs.append(
                run_streaming(
                    spark,
                    manifest,
                    name,
                    trig,
                    out / name / label,
                    deadline=args.deadline,
                    time_scale=args.time_scale,
                )
            )
    if args.json:
        print(json.dumps([r.to_json() for r in runs], indent=1))
        return 0
    for r in runs:
        status = f"FAILED ({r.failure})" if r.failure else "ok"
        met = "" if r.met is None else (", deadline met" if r.met else ", deadline MISSED")
        wall = "-" if r.wall_s is None else f"{r.wall_s:.2f}"
        print(
            f"{r.query} [{r.trigger}]: {r.batches} micro-batches ({r.data_batches} with data), "
            f"cost {r.cost:.3f} s, wall {wall} s, {status}{met}; answer "
            f"{'equals DuckDB' if r.correct else 'differs' if r.correct is False else '-'}"
        )
    return 0


def run_bench(args: argparse.Namespace) -> int:
    from adabatch.deadline.bench import bench_config, rerender, run_bench_config

    config = bench_config(args)
    report = rerender(config) if args.report_only else run_bench_config(config)
    print(f"wrote {report}")
    return 0
