"""The ``slo`` controller in the simulator: latency met, and at what CPU, against
fixed-point and against the best static interval that meets the same target.

For every cost model set (``calibrated``: Reduce and Join with the local[2] fits of
``adabatch bench calibrate``, :data:`~adabatch.sim.workloads.LOCAL2_FITS`; ``default``: the
models' defaults, as ``make_scenario`` gives them), workload, rate profile (sine, Markov)
and target, one table row:

- ``slo p95``, ``over``: p95 batch latency after the warm-up and the fraction of batches
  over the target; ``mode``: the fraction of batches the controller planned as "target"
  (the rest: target out of reach, "floor");
- ``cpu``: processing seconds per million records (busy fraction x duration / records),
  the CPU proxy, the same formula for every run;
- ``fp``: the fixed-point controller (its defaults) on the same scenario;
- ``static``: the static interval with the least CPU among those whose p95 batch latency
  meets the target and that are stable, from :func:`adabatch.runs.simulated.sweep_static`
  over 0.1 s steps (the hindsight oracle; ``-`` when none meets it).

    .venv/bin/python benchmarks/slo_sim.py [--models calibrated,default] [--duration 1h]
        [--targets 1,2,5] [--json runs/slo_sim.json] [--param NAME=VALUE]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from adabatch.control.registry import parse_params
from adabatch.metrics import RunSummary
from adabatch.params import parse_duration
from adabatch.runs.simulated import Scenario, make_scenario, simulate, sweep_static
from adabatch.sim.workloads import LOCAL2_FITS

PROFILES: dict[str, dict[str, dict[str, str]]] = {
    "calibrated": {
        "reduce": {
            "sine": "sine:20000:200000:600s",
            "markov": "markov:20000,80000,200000:120s:3",
        },
        "join": {"sine": "sine:2000:10000:600s", "markov": "markov:2000,5000,10000:120s:3"},
    },
    "default": {
        "reduce": {"sine": "sine:5000:50000:600s", "markov": "markov:5000,20000,50000:120s:3"},
        "join": {"sine": "sine:1000:5000:600s", "markov": "markov:1000,3000,5000:120s:3"},
    },
}
STATIC_STEP_S = 0.1


def cpu_per_m(summary: RunSummary | dict[str, Any]) -> float:
    """Processing seconds per million records of a run summary (or a sweep row)."""
    get = summary.get
    records = get("records")
    if not records:
        return math.nan
    return float(get("busy_fraction")) * float(get("duration_s")) / float(records) * 1e6


def scenario(models: str, workload: str, profile: str, duration: str, warmup: str) -> Scenario:
    overrides = LOCAL2_FITS[workload] if models == "calibrated" else None
    return make_scenario(workload, profile, duration, model=overrides, warmup=warmup)


def best_static(rows: tuple[dict[str, Any], ...], target: float) -> dict[str, Any] | None:
    """The stable static row with the least CPU whose p95 batch latency meets ``target``."""
    meets = [r for r in rows if r["stable"] and r["p95_latency_s"] <= target]
    return min(meets, key=cpu_per_m) if meets else None


def rows_for(
    models: str, workload: str, name: str, spec: str, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """One row per target for one scenario."""
    sc = scenario(models, workload, spec, args.duration, args.warmup)
    skip_s = parse_duration(args.warmup)
    fp = simulate(sc, "fixed-point").summary
    top = max(args.targets)
    grid = [round(STATIC_STEP_S * i, 9) for i in range(1, int(top / STATIC_STEP_S + 1e-9) + 1)]
    sweep = sweep_static(sc, grid)
    out = []
    for target in args.targets:
        result = simulate(sc, "slo", {**args.param, "target": target})
        kept = [r for r in result.records if r.cut_at >= skip_s]
        lat = np.array([r.latency_s for r in kept])
        modes = [r.controller_state["mode"] for r in kept]
        static = best_static(sweep.rows, target)
        s = result.summary
        out.append(
            {
                "models": models,
                "workload": workload,
                "profile": name,
                "target_s": target,
                "slo_p95_s": s.p95_latency_s,
                "slo_over": float(np.mean(lat > target)),
                "slo_target_mode": modes.count("target") / len(modes),
                "slo_cpu": cpu_per_m(s),
                "slo_stable": s.stable,
                "fp_p95_s": fp.p95_latency_s,
                "fp_cpu": cpu_per_m(fp),
                "static_interval_s": None if static is None else static["interval_s"],
                "static_p95_s": None if static is None else static["p95_latency_s"],
                "static_cpu": None if static is None else cpu_per_m(static),
            }
        )
    return out


def _fmt(value: float | None, spec: str) -> str:
    return (
        "-"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else (format(value, spec))
    )


def print_row(row: dict[str, Any]) -> None:
    fp_ratio = row["slo_cpu"] / row["fp_cpu"]
    st_ratio = None if row["static_cpu"] is None else row["slo_cpu"] / row["static_cpu"]
    print(
        f"{row['models']:<10} {row['workload']:<6} {row['profile']:<6} {row['target_s']:>4g} | "
        f"{row['slo_p95_s']:>6.2f} {row['slo_over']:>6.1%} {row['slo_target_mode']:>5.0%} "
        f"{row['slo_cpu']:>7.2f} | {row['fp_p95_s']:>6.2f} {row['fp_cpu']:>7.2f} "
        f"{fp_ratio:>6.2f} | {_fmt(row['static_interval_s'], '>5g'):>5} "
        f"{_fmt(row['static_p95_s'], '>6.2f'):>6} {_fmt(row['static_cpu'], '>7.2f'):>7} "
        f"{_fmt(st_ratio, '>6.2f'):>6}"
    )


HEADER = (
    f"{'models':<10} {'wl':<6} {'prof':<6} {'tgt':>4} | {'p95':>6} {'over':>6} {'mode':>5} "
    f"{'cpu':>7} | {'fp p95':>6} {'fp cpu':>7} {'/fp':>6} | {'st x':>5} {'st p95':>6} "
    f"{'st cpu':>7} {'/st':>6}"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", default="calibrated,default", help="model sets, comma-separated"
    )
    parser.add_argument("--workloads", default="reduce,join")
    parser.add_argument("--duration", default="1h")
    parser.add_argument("--warmup", default="300s")
    parser.add_argument("--targets", default="1,2,5", help="latency targets, comma-separated")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--param", action="append", metavar="K=V", help="further slo parameter")
    args = parser.parse_args()
    args.param = parse_params(args.param)
    args.targets = [parse_duration(t) for t in args.targets.split(",")]
    # a target out of reach shows as the mode column; keep the table free of its warning
    logging.getLogger("adabatch.control.slo").setLevel(logging.ERROR)
    print("cpu: processing s per 1M records; mode: batches planned to meet the target")
    print(HEADER)
    rows: list[dict[str, Any]] = []
    for models in args.models.split(","):
        for workload in args.workloads.split(","):
            for name, spec in PROFILES[models][workload].items():
                for row in rows_for(models, workload, name, spec, args):
                    rows.append(row)
                    print_row(row)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": rows}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
