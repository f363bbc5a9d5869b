"""``adabatch deadline``: plan and simulate deadline-aware intermittent queries.

Subcommands here: ``plan`` (single-query schedules, Sec. 3), ``simulate`` (multi-query
scheduling in simulation, Sec. 4 and 7.4) and ``generate`` (random Sec. 7.4 scenarios).
The Spark subcommands (``profile``, ``run``, ``baseline``, ``bench``) come from
:mod:`adabatch.commands.deadline_spark`; each sets ``deadline_run`` on its parser, as the
ones here do.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from typing import Any

from adabatch.commands import Command
from adabatch.commands.args import parse_bounded_int, parse_choice, parse_float
from adabatch.commands.deadline_spark import add_subcommands as add_spark_subcommands
from adabatch.deadline.core.milp import MAX_MILP_BATCHES, plan_milp
from adabatch.deadline.core.schedule import QueryPlan
from adabatch.deadline.core.simulate import compare, generate_scenario, result_table
from adabatch.deadline.core.single import plan_single
from adabatch.deadline.core.spec import MAX_TIME, STRATEGIES, TIME_TRIGGERS
from adabatch.deadline.core.spec_file import load_scenario, load_specs, write_scenario
from adabatch.errors import AdabatchError
from adabatch.outputs import check_new_file
from adabatch.report.text import fmt_value

NAME = "deadline"
HELP = "deadline-aware intermittent query scheduling (plan, simulate, Spark runs)"
TRIGGER_NOTE = (
    "Time triggers (--time-trigger, multi-query): 'always' is the paper's rule (Sec. 4.4: "
    "when a MinBatch is late, process what has arrived at its expected time); 'budget', "
    "ours and the default, does so only while the query stays within its (1 + rsf) cost "
    "bound or its deadline is at risk, because under slower input 'always' breaks that "
    "bound (1.5x in our Fig. 11 VR3/VR4 runs, docs/deadline.md)."
)

METHODS = ("function1", "milp")
MAX_QUERIES = 1000
"""Most queries ``deadline generate`` draws (the paper's scenarios have 12)."""
MAX_SEED = 2**32 - 1
MAX_RSF = 100.0
"""Largest resource slack factor (the paper uses 0.1 to 1)."""
MAX_NOISE = 10.0
"""Largest lognormal sigma of the simulated cost noise (e^10: a batch 22,000 times its model)."""
MAX_DELTA = 1000.0
"""Largest deadline factor of ``generate`` (the paper uses 0.2 to 2)."""


def _seed(text: str) -> int:
    return parse_bounded_int(text, "--seed", 0, MAX_SEED)


def _rsf(text: str) -> float:
    return parse_float(text, "--rsf", 0.0, MAX_RSF)


def _c_max(text: str, *, allow_inf: bool) -> float:
    if allow_inf and text.strip().lower() in ("inf", "infinity"):
        return math.inf
    return parse_float(text, "--c-max", 0.0, MAX_TIME, open_low=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommands: ``plan``, ``simulate``, ``generate`` here, then the Spark ones."""
    parser.epilog = TRIGGER_NOTE
    sub = parser.add_subparsers(dest="deadline_command", metavar="SUBCOMMAND", required=True)
    _add_plan(sub)
    _add_simulate(sub)
    _add_generate(sub)
    add_spark_subcommands(sub)


def _add_plan(sub: Any) -> None:
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
        default="function1",
        help="function1 (any cost model, default) or milp (the Sec. 3.2 MILP, linear models; "
        "its plan is verified, and Function 1's replaces one that fails)",
    )
    plan.add_argument(
        "--ahead",
        action="store_true",
        help="of the least-cost plans, the one that completes first (what `deadline run` "
        "executes); default: the paper's latest-start plan",
    )
    plan.set_defaults(deadline_run=run_plan)


def _add_simulate(sub: Any) -> None:
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
        default=None,
        help=f"{', '.join(STRATEGIES)} or all (default: the file's scheduler.strategy, else "
        "llf); all = each",
    )
    sim.add_argument("--rsf", default=None, help=f"resource slack factor δ_RSF, 0 to {MAX_RSF:g}")
    sim.add_argument(
        "--c-max", default=None, help="max seconds of one MinBatch (C_max, > 0, or inf)"
    )
    sim.add_argument(
        "--no-min-batch",
        action="store_true",
        help="the plain EDF/LLF baseline: process everything available (Sec. 7.4)",
    )
    sim.add_argument(
        "--time-trigger",
        default=None,
        help=(
            "late MinBatch: budget (ours, the default: process what arrived only while within "
            "the (1+rsf) cost bound or when the deadline is at risk) or always (the paper's "
            "Sec. 4.4 rule, which exceeds the bound under slower input)"
        ),
    )
    sim.add_argument(
        "--noise", default="0", help=f"lognormal sigma on every batch cost, 0 to {MAX_NOISE:g}"
    )
    sim.add_argument("--seed", default="0", help=f"seed of the cost noise, 0 to {MAX_SEED}")
    sim.add_argument("--json", action="store_true", help="print JSON instead of tables")
    sim.set_defaults(deadline_run=run_simulate)


def _add_generate(sub: Any) -> None:
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
    gen.add_argument("--queries", default="12", help=f"number of queries, 1 to {MAX_QUERIES}")
    gen.add_argument(
        "--delta", default="1", help=f"deadline factor (1 = 1D), > 0 and <= {MAX_DELTA:g}"
    )
    gen.add_argument("--seed", default="0", help=f"random seed, 0 to {MAX_SEED}")
    gen.add_argument("--same-window", action="store_true", help="one window for all queries")
    gen.add_argument("--rsf", default="0.5", help=f"resource slack factor δ_RSF, 0 to {MAX_RSF:g}")
    gen.add_argument("--c-max", default="30", help="C_max in seconds (> 0)")
    gen.add_argument("--strategy", default="llf", help=f"queue order: {', '.join(STRATEGIES)}")
    gen.add_argument("--force", action="store_true", help="replace OUT if it exists")
    gen.set_defaults(deadline_run=run_generate)


def run(args: argparse.Namespace) -> int:
    return int(args.deadline_run(args) or 0)


def run_plan(args: argparse.Namespace) -> int:
    method = parse_choice(args.method, "--method", METHODS)
    specs = load_specs(args.spec)
    plans: list[QueryPlan] = []
    for spec in specs:
        plan = plan_single(spec, ahead=args.ahead)
        if method == "milp" and plan.feasible:
            if plan.num_batches <= MAX_MILP_BATCHES:
                plan = plan_milp(spec, max_batches=plan.num_batches)
            else:  # fewer batches than Function 1 is infeasible for a linear model
                why = f"the MILP tries at most {MAX_MILP_BATCHES} batches; Function 1's plan"
                plan = dataclasses.replace(plan, reason=why)
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
    one, done, deadline = (
        fmt_value(v, "{:.3f}") for v in (plan.single_batch_cost, plan.completion, plan.deadline)
    )
    print(
        f"{plan.query}: {plan.num_batches} batch(es), cost {plan.cost:.3f} s "
        f"(final aggregation {plan.agg_cost:.3f} s, one batch {one} s), "
        f"completes {done} for deadline {deadline}"
    )
    print(f"    {'#':>3} {'start':>12} {'end':>12} {'tuples':>12} {'cost_s':>10}")
    for i, b in enumerate(plan.batches, start=1):
        print(f"    {i:>3} {b.start:>12.3f} {b.end:>12.3f} {b.tuples:>12} {b.cost:>10.3f}")
    print()


def run_simulate(args: argparse.Namespace) -> int:
    chosen = None
    if args.strategy is not None:
        chosen = parse_choice(args.strategy, "--strategy", (*STRATEGIES, "all"))
    trigger = None
    if args.time_trigger is not None:
        trigger = parse_choice(args.time_trigger, "--time-trigger", TIME_TRIGGERS)
    rsf = None if args.rsf is None else _rsf(args.rsf)
    c_max = None if args.c_max is None else _c_max(args.c_max, allow_inf=True)
    noise = parse_float(args.noise, "--noise", 0.0, MAX_NOISE)
    seed = _seed(args.seed)
    scenario = load_scenario(
        args.scenario,
        strategy=None if chosen == "all" else chosen,
        rsf=rsf,
        c_max=c_max,
        min_batch=False if args.no_min_batch else None,
        time_trigger=trigger,
    )
    strategies = STRATEGIES if chosen == "all" else (scenario.strategy,)
    comparison = compare(scenario, strategies, noise=noise, seed=seed)
    results, feasibility = comparison.results, comparison.feasibility
    if args.json:
        out: dict[str, Any] = {
            "scenario": str(args.scenario),
            "feasibility": feasibility.to_json(),
            "results": {k: v.to_json() for k, v in results.items()},
        }
        print(json.dumps(out, indent=2))
        return _missed(results)
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
    return _missed(results)


def _missed(results: dict[str, Any]) -> int:
    """0 when every deadline was met; else one line naming the misses (exit 2, as
    ``plan`` does for an infeasible deadline)."""
    missed = {name: r.missed for name, r in results.items() if not r.all_met}
    if missed:
        details = "; ".join(f"{name}: {', '.join(ids)}" for name, ids in missed.items())
        msg = f"deadlines missed under {len(missed)} of {len(results)} strategies ({details})"
        raise AdabatchError(msg)
    return 0


def run_generate(args: argparse.Namespace) -> int:
    queries = parse_bounded_int(args.queries, "--queries", 1, MAX_QUERIES)
    delta = parse_float(args.delta, "--delta", 0.0, MAX_DELTA, open_low=True)
    seed = _seed(args.seed)
    rsf = _rsf(args.rsf)
    c_max = _c_max(args.c_max, allow_inf=False)
    strategy = parse_choice(args.strategy, "--strategy", STRATEGIES)
    check_new_file(args.out, "scenario file", force=args.force)  # before the work
    scenario = generate_scenario(
        queries,
        delta,
        seed=seed,
        rsf=rsf,
        c_max=c_max,
        strategy=strategy,
        same_window=args.same_window,
    )
    path = write_scenario(scenario, args.out, force=args.force)
    print(f"wrote {len(scenario.queries)} queries to {path}")
    return 0


COMMAND = Command(NAME, HELP, add_arguments, run)
