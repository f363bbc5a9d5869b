"""The Spark subcommands of ``adabatch deadline``: profile, run, baseline, bench.

:mod:`adabatch.commands.deadline` calls :func:`add_subcommands`; each parser sets
``deadline_run`` to its handler. The handlers parse, call the library, print.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from adabatch.commands.args import parse_bounded_int, parse_choice, parse_float
from adabatch.deadline.core.spec import MAX_TIME, QUERY_NAMES, STRATEGIES, TIME_TRIGGERS
from adabatch.deadline.spark.tpch import DEFAULT_RATE, DEFAULT_SCALE_FACTOR, DEFAULT_SLOTS
from adabatch.errors import AdabatchError, shown
from adabatch.outputs import open_output
from adabatch.report.text import fmt_value

DEFAULT_DATA = "runs/deadline-data"

MAX_SCALE_FACTOR = 100.0
"""Largest TPC-H scale factor (SF 100: about 100 GB of tables)."""
MAX_SLOTS = 100_000
"""Most landing files per stream (and slots per profiled batch)."""
MAX_SLOT_RATE = 1e6
"""Most slots landing per second."""
MAX_LIST = 64
"""Most values in a comma-separated option (--sizes, --factors)."""
MAX_SEGMENTS = 16
"""Most segments of the piecewise-linear cost fit."""
MAX_FACTOR = 1000.0
"""Largest deadline factor, cost margin and time scale."""


def _data_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("landing data (TPC-H, created on first use)")
    group.add_argument("--data", default=DEFAULT_DATA, help="data directory (tables, landing)")
    group.add_argument(
        "--sf",
        default=str(DEFAULT_SCALE_FACTOR),
        help=f"TPC-H scale factor, > 0 and <= {MAX_SCALE_FACTOR:g} (default "
        f"{DEFAULT_SCALE_FACTOR:g})",
    )
    group.add_argument(
        "--slots",
        default=str(DEFAULT_SLOTS),
        help=f"landing files per stream, 1 to {MAX_SLOTS} ({DEFAULT_SLOTS})",
    )
    group.add_argument(
        "--rate",
        default=str(DEFAULT_RATE),
        help=f"slots landing per second, > 0 and <= {MAX_SLOT_RATE:g} ({DEFAULT_RATE:g})",
    )
    group.add_argument("--master", default="local[2]", help="Spark master (default local[2])")


def _run_arguments(parser: argparse.ArgumentParser, out: str) -> None:
    """What a command that runs queries in real time takes besides its own options: the
    time scale, where it writes, JSON output, and the landing data."""
    parser.add_argument(
        "--time-scale", default="1", help=f"real s per spec second, > 0 and <= {MAX_FACTOR:g}"
    )
    parser.add_argument("--out", default=out, help="output directory")
    parser.add_argument("--json", action="store_true", help="print JSON")
    _data_arguments(parser)


def _csv_items(text: str, what: str) -> list[str]:
    """The non-empty comma-separated items of ``text``: at least one, at most ``MAX_LIST``."""
    items = [v.strip() for v in text.split(",") if v.strip()]
    if not 1 <= len(items) <= MAX_LIST:
        msg = f"{what} {shown(text)}: allowed 1 to {MAX_LIST} comma-separated values"
        raise AdabatchError(msg)
    return items


def _csv_ints(text: str, what: str, low: int, high: int) -> list[int]:
    return [parse_bounded_int(v, what, low, high) for v in _csv_items(text, what)]


def _csv_floats(text: str, what: str, high: float) -> list[float]:
    return [parse_float(v, what, 0.0, high, open_low=True) for v in _csv_items(text, what)]


def _factor(text: str, what: str, low: float = 0.0, *, open_low: bool = True) -> float:
    return parse_float(text, what, low, MAX_FACTOR, open_low=open_low)


def _check_data(args: argparse.Namespace) -> None:
    """Validate the landing-data options in place (strings to numbers), before any work."""
    args.sf = parse_float(args.sf, "--sf", 0.0, MAX_SCALE_FACTOR, open_low=True)
    args.slots = parse_bounded_int(args.slots, "--slots", 1, MAX_SLOTS)
    args.rate = parse_float(args.rate, "--rate", 0.0, MAX_SLOT_RATE, open_low=True)


def _check_run(args: argparse.Namespace) -> None:
    """Validate :func:`_run_arguments`' options in place, before any work."""
    args.time_scale = _factor(args.time_scale, "--time-scale")
    _check_data(args)


def add_subcommands(sub: Any) -> None:
    """Add ``profile``, ``run``, ``baseline`` and ``bench`` to ``adabatch deadline``."""
    names = ", ".join(QUERY_NAMES)
    _add_profile(sub, names)
    _add_run(sub, names)
    _add_baseline(sub, names)
    _add_bench(sub, names)


def _add_profile(sub: Any, names: str) -> None:
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
    prof.add_argument(
        "--sizes", default=None, help=f"batch sizes in slots (comma-separated, 1 to {MAX_SLOTS})"
    )
    prof.add_argument(
        "--segments", default="2", help=f"segments of the batch-cost fit, 1 to {MAX_SEGMENTS}"
    )
    prof.add_argument("--out", default="runs/deadline-profiles", help="output directory")
    _data_arguments(prof)
    prof.set_defaults(deadline_run=run_profile)


def _add_run(sub: Any, names: str) -> None:
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
    run.add_argument(
        "--deadline-factor",
        default="1",
        help=f"deadline in units of D, > 0 and <= {MAX_FACTOR:g}",
    )
    run.add_argument(
        "--margin", default="1.25", help=f"cost model margin for planning, 1 to {MAX_FACTOR:g}"
    )
    run.add_argument("--multi", action="store_true", help="multi-query scheduler (Sec. 4)")
    run.add_argument("--strategy", default=None, help="llf, edf, sjf or rr (with --multi)")
    run.add_argument(
        "--time-trigger",
        default=None,
        help="budget (ours, the default) or always (the paper's Sec. 4.4 rule): when a late "
        "MinBatch runs on time (with --multi)",
    )
    run.add_argument("--no-check", action="store_true", help="skip the DuckDB comparison")
    _run_arguments(run, "runs/deadline-run")
    run.set_defaults(deadline_run=run_run)


def _add_baseline(sub: Any, names: str) -> None:
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
        help="default, available-now or processing:DURATION such as processing:5s "
        "(repeatable; default: default)",
    )
    base.add_argument("--deadline", default=None, help="deadline (spec seconds)")
    _run_arguments(base, "runs/deadline-baseline")
    base.set_defaults(deadline_run=run_baseline)


def _add_bench(sub: Any, names: str) -> None:
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
    bench.add_argument(
        "--factors",
        default=None,
        help=f"deadline factors (comma-separated, each > 0 and <= {MAX_FACTOR:g})",
    )
    bench.add_argument("--margin", default=None, help=f"cost model margin, 1 to {MAX_FACTOR:g}")
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
    from adabatch.deadline.spark.tpch import prepare

    return prepare(args.data, scale_factor=args.sf, slots=args.slots, rate=args.rate)


def _spark(args: argparse.Namespace) -> Any:
    from adabatch.deadline.spark.runner import SPARK_CONF
    from adabatch.spark import get_spark

    return get_spark(args.master, "adabatch-deadline", SPARK_CONF)


def run_profile(args: argparse.Namespace) -> int:
    from adabatch.deadline.spark.cost_profile import profile_query
    from adabatch.deadline.spark.queries import get_query

    queries = [get_query(q).name for q in args.query]
    if args.sizes is not None:
        args.sizes = _csv_ints(args.sizes, "--sizes", 1, MAX_SLOTS)
    args.segments = parse_bounded_int(args.segments, "--segments", 1, MAX_SEGMENTS)
    _check_data(args)
    manifest = _manifest(args)
    spark = _spark(args)
    with open_output(args.out) as od:  # one writer per directory
        out = od.root
        for name in queries:
            profile = profile_query(
                spark, manifest, name, out / "work" / name, sizes=args.sizes, segments=args.segments
            )
            path = profile.save(out / f"{name}.json")
            points = ", ".join(f"[{x:g}, {y:.3f}]" for x, y in profile.cost.breakpoints)
            print(
                f"{name}: one batch {profile.single_batch_cost:.3f} s; cost {points}; wrote {path}"
            )
            for p in profile.sweep:
                print(
                    f"    {p.batches:>4} batches of {p.slots:>4} slots: "
                    f"total {p.total_seconds:8.3f} s  final {p.final_seconds:6.3f} s"
                )
    return 0


def _print_run(run: Any) -> None:
    verdict = "met" if run.met else "MISSED"
    correct = {True: "equals DuckDB", False: "DIFFERS from DuckDB", None: "not checked"}
    completion = fmt_value(run.completion, "{:.3f}")
    print(
        f"{run.query} ({run.name}): {run.batches} batch(es), cost {run.cost:.3f} s, "
        f"completion {completion} for deadline {run.deadline:.3f}: {verdict}; answer "
        f"{correct[run.correct]}"
    )
    if run.differences:
        for line in run.differences:
            print(f"    {line}")


def run_run(args: argparse.Namespace) -> int:
    from adabatch.deadline.core.spec import DeadlineScenario
    from adabatch.deadline.core.spec_file import load_scenario
    from adabatch.deadline.spark.cost_profile import agg_with_margin, load_cost_profile, with_margin
    from adabatch.deadline.spark.runner import run_multi, run_single, spec_for

    if (args.spec is None) == (args.query is None):
        msg = "give a SPEC file or --query (with --profile), not both or neither"
        raise AdabatchError(msg)
    # every input is checked before the TPC-H data is built
    factor = _factor(args.deadline_factor, "--deadline-factor")
    margin = _factor(args.margin, "--margin", 1.0, open_low=False)
    strategy = None
    if args.strategy is not None:
        strategy = parse_choice(args.strategy, "--strategy", STRATEGIES)
    trigger = None
    if args.time_trigger is not None:
        trigger = parse_choice(args.time_trigger, "--time-trigger", TIME_TRIGGERS)
    _check_run(args)
    if args.query is not None:
        if args.profile is None:
            msg = "--query needs --profile PATH (written by `adabatch deadline profile`)"
            raise AdabatchError(msg)
        profile = load_cost_profile(args.profile)
        if profile.query != args.query.lower():
            msg = (
                f"profile {shown(args.profile)} is for {shown(profile.query)}, not "
                f"{shown(args.query)}"
            )
            raise AdabatchError(msg)
        manifest = _manifest(args)
        deadline = manifest.window_end + factor * profile.single_batch_cost
        spec = spec_for(
            manifest,
            profile.query,
            deadline=deadline,
            cost=with_margin(profile.cost, margin),
            agg_cost=agg_with_margin(profile.agg_cost, margin),
        )
        scenario = DeadlineScenario((spec,))
    else:
        scenario = load_scenario(args.spec, strategy=strategy, time_trigger=trigger)
        manifest = _manifest(args)
    spark = _spark(args)
    check = not args.no_check
    with open_output(args.out) as od:  # one writer per directory
        out = od.root
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
    from adabatch.deadline.spark.baseline import Trigger, run_streaming
    from adabatch.deadline.spark.queries import get_query

    queries = [get_query(q).name for q in args.query]
    triggers = [Trigger.parse(t) for t in (args.trigger or ["default"])]
    if args.deadline is not None:
        args.deadline = parse_float(args.deadline, "--deadline", -MAX_TIME, MAX_TIME)
    _check_run(args)
    manifest = _manifest(args)
    spark = _spark(args)
    runs = []
    with open_output(args.out) as od:  # one writer per directory
        for name in queries:
            for trig in triggers:
                label = trig.label.replace(":", "-")
                runs.append(
                    run_streaming(
                        spark,
                        manifest,
                        name,
                        trig,
                        od.mkdir(name) / label,
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
        wall = fmt_value(r.wall_s, "{:.2f}")
        print(
            f"{r.query} [{r.trigger}]: {r.batches} micro-batches ({r.data_batches} with data), "
            f"cost {r.cost:.3f} s, wall {wall} s, {status}{met}; answer "
            f"{'equals DuckDB' if r.correct else 'differs' if r.correct is False else '-'}"
        )
    return 0


def run_bench(args: argparse.Namespace) -> int:
    from adabatch.bench.experiments.deadline import bench_config, rerender, run_bench_config

    if args.factors is not None:
        args.factors = _csv_floats(args.factors, "--factors", MAX_FACTOR)
    if args.margin is not None:
        args.margin = _factor(args.margin, "--margin", 1.0, open_low=False)
    _check_data(args)
    config = bench_config(args)
    with open_output(config.out):  # one writer per directory
        report = rerender(config) if args.report_only else run_bench_config(config)
    print(f"wrote {report}")
    return 0
