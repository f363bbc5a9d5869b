"""The long fuzz profile: many more hostile ``adabatch`` invocations than CI runs, counted.

Runs the strategies and checks of tests/fuzz (same sentinel tree, same limits, same fork
server) with random generation instead of CI's fixed one, and records every failure
instead of stopping at the first. Prints, per command, the cases tried, the exit statuses,
the failures by class and the wall time, then one example per distinct failure; writes
the same as JSON.

    .venv/bin/python benchmarks/fuzz.py --examples 1000 --json runs/fuzz.json
    .venv/bin/python benchmarks/fuzz.py --budget 120 --commands simulate "deadline plan"

The figures in docs/reliability.md come from the first command.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fuzz"))

from cases import BUILDERS
from harness import CPU_S, MEM_BYTES, WALL_S, ForkServer, Result, fuzz_base, run_batch
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st


def fuzz_command(
    command: str, server: ForkServer, base: Path, examples: int, budget_s: float, rng_seed: int
) -> dict[str, Any]:
    """Run ``examples`` batches of ``command`` cases (or until ``budget_s``); the figures."""
    results: list[Result] = []
    started = time.monotonic()

    @seed(rng_seed)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(BUILDERS[command](), min_size=1, max_size=8))
    def batch(cases: list) -> None:
        if time.monotonic() - started < budget_s:
            results.extend(run_batch(server, cases, base))

    batch()
    wall = time.monotonic() - started
    statuses = Counter(_status(r) for r in results)
    classes = Counter(f.klass for r in results for f in r.failures)
    distinct: dict[tuple[str, str], dict[str, Any]] = {}
    for r in results:
        for f in r.failures:
            key = (f.klass, _signature(f.detail))
            entry = distinct.setdefault(
                key,
                {
                    "class": f.klass,
                    "count": 0,
                    "example": r.case.describe(400),
                    "status": _status(r),
                    "detail": f.detail[:500],
                },
            )
            entry["count"] += 1
    return {
        "command": command,
        "cases": len(results),
        "failed_cases": sum(1 for r in results if r.failures),
        "statuses": dict(statuses),
        "failures_by_class": dict(classes),
        "wall_s": round(wall, 1),
        "distinct_failures": sorted(distinct.values(), key=lambda e: -e["count"]),
    }


def _status(r: Result) -> str:
    if r.outcome.timed_out:
        return "timeout"
    if r.outcome.signal is not None:
        return f"signal {r.outcome.signal}"
    return str(r.outcome.status)


def _signature(detail: str) -> str:
    """What makes two failures the same bug: the exception type, or the kind of change."""
    if "Error" in detail:
        for word in detail.replace(":", " ").split():
            if word.endswith(("Error", "Exception")):
                return word
    if "outside" in detail:
        return " ".join(sorted({p.split()[-2] if " " in p else p for p in detail.split("; ")}))[:80]
    return detail[:60]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000, help="batches per command")
    parser.add_argument("--budget", type=float, default=float("inf"), help="seconds per command")
    parser.add_argument("--seed", type=int, default=1, help="generation seed")
    parser.add_argument("--jobs", type=int, default=2, help="cases run at once")
    parser.add_argument("--commands", nargs="*", default=list(BUILDERS), choices=list(BUILDERS))
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)

    figures = []
    base = fuzz_base()
    with ForkServer(args.jobs) as s:
        for command in args.commands:
            row = fuzz_command(command, s, base, args.examples, args.budget, args.seed)
            figures.append(row)
            print(
                f"{command:<18} {row['cases']:>6} cases  {row['failed_cases']:>5} failed  "
                f"{row['wall_s']:>7.1f} s  statuses {row['statuses']}",
                flush=True,
            )
    shutil.rmtree(base, ignore_errors=True)
    print()
    print(f"{'command':<18} {'cases':>6} {'failed':>6} {'wall s':>7}  failures by class")
    for row in figures:
        classes = ", ".join(f"{k} {v}" for k, v in sorted(row["failures_by_class"].items()))
        print(
            f"{row['command']:<18} {row['cases']:>6} {row['failed_cases']:>6} "
            f"{row['wall_s']:>7.1f}  {classes or '-'}"
        )
    total = sum(r["cases"] for r in figures)
    failed = sum(r["failed_cases"] for r in figures)
    print(f"{'total':<18} {total:>6} {failed:>6} {sum(r['wall_s'] for r in figures):>7.1f}")
    for row in figures:
        for entry in row["distinct_failures"]:
            print()
            print(f"[{row['command']}] {entry['class']} x{entry['count']}: {entry['example']}")
            print(f"    status {entry['status']}: {entry['detail'][:300]}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "settings": {
                "examples_per_command": args.examples,
                "budget_s": args.budget,
                "seed": args.seed,
                "jobs": args.jobs,
                "limits": {"mem_bytes": MEM_BYTES, "cpu_s": CPU_S, "wall_s": WALL_S},
            },
            "commands": figures,
        }
        args.json.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
