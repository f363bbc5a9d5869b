"""``adabatch deadline``: plan and simulate deadline-aware intermittent queries.

Subcommands here: ``plan`` (single-query schedules, Sec. 3), ``simulate`` (multi-query
scheduling in simulation, Sec. 4 and 7.4) and ``generate`` (random Sec. 7.4 scenarios).
The Spark subcommands (``profile``, ``run``, ``baseline``, ``bench``) come from
:mod:`adabatch.deadline.cli_spark` when it is present; each sets ``deadline_run`` on its
parser, as the ones here do.
"""

from __future__ import annotations

import argparse
import importlib
import json
from typing import Any

from adabatch.deadline.milp import plan_milp
from adabatch.deadline.schedule import QueryPlan
from adabatch.deadline.simulate import compare, generate_scenario, result_table
from adabatch.deadline.single import plan_single
from adabatch.deadline.spec import (
    STRATEGIES,
    TIME_TRIGGERS,
    load_scenario,
    load_specs,
    write_scenario,
)
from adabatch.errors import AdabatchError

NAME = "deadline"
HELP = "deadline-aware intermittent query scheduling (plan, simulate, Spark runs)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="deadline_command", metavar="SUBCOMMAND", required=True)

    plan = sub.add_parser(
        "plan",
        help="the least-cost batch schedule of every query in a spec file",
        description=(
            "Plan each query of SPEC alone (paper Sec. 3.1, Function 1): batches in "
            "execution order, the last one after the window end. Infeasible deadlines are "
            "reported with the earliest achievable completion time and exit status 2."
        ),
    )
    plan.add_argument("spec", help="spec file (.yaml, .yml or .toml; docs/deadline-spec.md)")
    plan.add_argument("--json", action="store_true", help="print one JSON object per query")
    plan.add_argument(
        "--method",
        choices=("function1", "milp"),
        default="function1",
        help="Function 1 (any cost model, default) or the Sec. 3.2 MILP (linear models)",
    )
    plan.add_argument(
        "--ahead",
        action="store_true",
        help="of the least-cost plans, the one that completes first (what `deadline run` "
        "executes); default: the paper's latest-start plan",
    )
    plan.set_defaults(deadline_run=run_plan)

    sim = sub.add_parser(
        "simulate",
        help="run a multi-query scenario in simulation (cost models in seconds)",
        description=(
            "Schedule the queries of SCENARIO in MinBatches (paper Sec. 4) on a simulated "
            "executor: per query deadline met, completion, batches and cost; totals vs the "
            "sum of single-batch costs; and whether the scenario passes the MinBatch "
            "schedulability test."
        ),
    )
    sim.add_argument("scenario", help="spec file with queries and an optional scheduler table")
    sim.add_argument(
        "--strategy",
        choices=(*STRATEGIES, "all"),
        default=None,
        help="queue order (default: the file's scheduler.strategy, else llf); all = each",
    )
    sim.add_argument("--rsf", type=float, default=None, help="resource slack factor δ_RSF")
    sim.add_argument(
        "--c-max", type=float, default=None, help="max seconds of one MinBatch (C_max)"
    )
    sim.add_argument(
        "--no-min-batch",
        action="store_true",
        help="the plain EDF/LLF baseline: process everything available (Sec. 7.4)",
    )
    sim.add_argument(
        "--time-trigger",
        choices=TIME_TRIGGERS,
        default=None,
        help=(
            "late MinBatch: process what arrived while within the (1+rsf) cost bound or "
            "when the deadline is at risk (budget, default) or always (the paper's Sec. 4.4)"
        ),
    )
    sim.add_argument("--noise", type=float, default=0.0, help="lognormal sigma on every batch cost")
    sim.add_argument("--seed", type=int, default=0, help="seed of the cost noise")
    sim.add_argument("--json", action="store_true", help="print JSON instead of tables")
    sim.set_defaults(deadline_run=run_simulate)

    gen = sub.add_parser(
        "generate",
        help="write a random multi-query scenario built as in the paper's Sec. 7.4",
        description=(
            "Random queries (linear costs, fixed rates) with deadlines windEnd + "
            "delta * minCompCost + C_max, staggered when windows overlap (paper Sec. 7.4); "
            "deterministic for --seed. Simulate it with `adabatch deadline simulate OUT`."
        ),
    )
    gen.add_argument("out", help="scenario file to write (.yaml or .json)")
    gen.add_argument("--queries", type=int, default=12, help="number of queries")
    gen.add_argument("--delta", type=float, default=1.0, help="deadline factor (1 = 1D)")
    gen.add_argument("--seed", type=int, default=0, help="random seed")
    gen.add_argument("--same-window", action="store_true", help="one window for all queries")
    gen.add_argument("--rsf", type=float, default=0.5, help="resource slack factor δ_RSF")
    gen.add_argument("--c-max", type=float, default=30.0, help="C_max in seconds")
    gen.add_argument("--strategy", choices=STRATEGIES, default="llf", help="queue order")
    gen.set_defaults(deadline_run=run_generate)

    try:
        cli_spark = importlib.import_module("adabatch.deadline.cli_spark")
    except ModuleNotFoundError as exc:
        if exc.name != "adabatch.deadline.cli_spark":
            raise
    else:
        cli_spark.add_subcommands(sub)


def run(args: argparse.Namespace) -> int:
    return int(args.deadline_run(args) or 0)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def run_plan(args: argparse.Namespace) -> int:
    specs = load_specs(args.spec)
    plans: list[QueryPlan] = []
    for spec in specs:
        plan = plan_single(spec, ahead=args.ahead)
        if args.method == "milp" and plan.feasible:
            plan = plan_milp(spec, max_batches=max(plan.num_batches, 1))
        plans.append(plan)
    if args.json:
        print(json.dumps([p.to_json() for p in plans], indent=2))
    else:
        for plan in plans:
            _print_plan(plan)
    bad = [p for p in plans if not p.feasible]
    if bad:
        details = "; ".join(
            f"{p.query}: deadline {p.deadline:g}, earliest achievable completion {_earliest(p)}"
            for p in bad
        )
        msg = f"{len(bad)} of {len(plans)} queries cannot meet their deadline ({details})"
        raise AdabatchError(msg)
    return 0


def _earliest(plan: QueryPlan) -> str:
    return "unknown" if plan.earliest_completion is None else f"{plan.earliest_completion:.6g}"


def _print_plan(plan: QueryPlan) -> None:
    if not plan.feasible:
        print(f"{plan.query}: INFEASIBLE - {plan.reason}")
        print()
        return
    print(
        f"{plan.query}: {plan.num_batches} batch(es), cost {plan.cost:.3f} s "
        f"(final aggregation {plan.agg_cost:.3f} s, one batch {_fmt(plan.single_batch_cost)} s), "
        f"completes {_fmt(plan.completion)} for deadline {_fmt(plan.deadline)}"
    )
    print(f"    {'#':>3} {'start':>12} {'end':>12} {'tuples':>12} {'cost_s':>10}")
    for i, b in enumerate(plan.batches, start=1):
        print(f"    {i:>3} {b.start:>12.3f} {b.end:>12.3f} {b.tuples:>12} {b.cost:>10.3f}")
    print()


def run_simulate(args: argparse.Namespace) -> int:
    strategy = None if args.strategy in (None, "all") else args.strategy
    scenario = load_scenario(
        args.scenario,
        strategy=strategy,
        rsf=args.rsf,
        c_max=args.c_max,
        min_batch=False if args.no_min_batch else None,
        time_trigger=args.time_trigger,
    )
    strategies = STRATEGIES if args.strategy == "all" else (scenario.strategy,)
    comparison = compare(scenario, strategies, noise=args.noise, seed=args.seed)
    results, feasibility = comparison.results, comparison.feasibility
    if args.json:
        out: dict[str, Any] = {
            "scenario": str(args.scenario),
            "feasibility": feasibility.to_json(),
            "results": {k: v.to_json() for k, v in results.items()},
        }
        print(json.dumps(out, indent=2))
        return 0
    verdict = "passes" if feasibility.feasible else "fails"
    print(
        f"MinBatch schedulability test (rsf {scenario.rsf:g}, c_max {scenario.c_max:g}): "
        f"{verdict} ({feasibility.jobs} jobs, tightest slack {feasibility.slack:.3f} s)"
    )
    print()
    for result in results.values():
        for line in result_table(result):
            print(line)
        print()
    return 0


def run_generate(args: argparse.Namespace) -> int:
    scenario = generate_scenario(
        args.queries,
        args.delta,
        seed=args.seed,
        rsf=args.rsf,
        c_max=args.c_max,
        strategy=args.strategy,
        same_window=args.same_window,
    )
    path = write_scenario(scenario, args.out)
    print(f"wrote {len(scenario.queries)} queries to {path}")
    return 0
