"""How fast the pure-Python parts run: the figures the unit tests no longer time.

Each case runs ``--repeat`` times and reports the best and the median wall time, with the
work it did, so a reader can see a slowdown without a flaky timed test:

- an hour of fixed-point on reduce under a sine profile in the simulator;
- 72,000 rate-profile calls (an hour of 0.1 s batch boundaries, cumulative + inverse) for
  every profile kind;
- the blog-sized PID sweep (4,000 cases x 100 batches).

    .venv/bin/python benchmarks/sim_speed.py [--repeat 3] [--json runs/sim_speed.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adabatch.control import create
from adabatch.profiles import parse_profile
from adabatch.sim.engine import run_simulation
from adabatch.sim.pid_sweep import grid, run_sweep
from adabatch.sim.workloads import make_workload

PROFILES = (
    "constant:1000",
    "step:1000:3000:60s",
    "sine:1000:6000:60s",
    "markov:1000,3000,6000:30s:7",
    "bursts:1000:8000:60s:10s",
)


def _hour_of_fixed_point() -> str:
    out = run_simulation(
        create("fixed-point"),
        make_workload("reduce"),
        parse_profile("sine:2000:8000:60s"),
        3600.0,
        seed=1,
    )
    return f"{len(out.records)} batches"


def _profile_calls(spec: str) -> Callable[[], str]:
    def run() -> str:
        p = parse_profile(spec)
        for i in range(36_000):
            p.cumulative(i * 0.1)
        for i in range(36_000):
            p.arrival_time(p.cumulative(i * 0.1 + 0.05))
        return "72,000 calls"

    return run


def _pid_sweep() -> str:
    result = run_sweep(grid(min_rates=(100.0,)))
    return f"{len(result.results)} cases"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per case (best, median)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    cases: dict[str, Callable[[], str]] = {"simulate 1 h fixed-point/reduce": _hour_of_fixed_point}
    cases.update({f"profile {spec}": _profile_calls(spec) for spec in PROFILES})
    cases["pid-sweep 4000 cases"] = _pid_sweep
    rows: list[dict[str, Any]] = []
    print(f"{'case':<42} {'work':>16} {'best s':>8} {'median s':>9}")
    for name, run in cases.items():
        times = []
        for _ in range(max(args.repeat, 1)):
            start = time.perf_counter()
            work = run()
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        row = {"case": name, "work": work, "best_s": min(times), "median_s": median}
        rows.append(row)
        print(f"{name:<42} {work:>16} {row['best_s']:>8.3f} {row['median_s']:>9.3f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": rows}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
