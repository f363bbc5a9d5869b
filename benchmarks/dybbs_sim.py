"""DyBBS (``isotonic``) against fixed-point in the simulator, with the per-block costs Spark
measured: 10-minute profiles, several seeds, the learning phase reported apart.

Every controller starts where the paper's did: isotonic at the 100 ms block interval (with
block sizing, told the model's cores as read_stream tells it Spark's; and without it),
fixed-point with one block per core (2) and with the paper's 100 ms block interval. Two
cost models: the default Reduce and Join models (their per-block costs are the local[2]
fits) and the whole local[2] fits (``adabatch.sim.workloads.LOCAL2_FITS``). Prints one
Markdown table per model: mean batch latency x + q + p after the learning phase (mean over
seeds, and the worst seed), during it, the mean blocks after it, and how many seeds stayed
stable.

    .venv/bin/python benchmarks/dybbs_sim.py --seeds 0 1 2 3 4   # ~1-2 min on one core
    .venv/bin/python benchmarks/dybbs_sim.py --seeds 0 1 --models default --workload join
    .venv/bin/python benchmarks/dybbs_sim.py --models default --workload reduce --sigma 0.4

The figures in the isotonic controller's docstring come from the first command.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from adabatch.runs.simulated import make_scenario, simulate
from adabatch.sim.workloads import LOCAL2_FITS

DURATION, LEARNING = "600s", 180.0
# (workload, profile): the bench's four scenarios (dybbs experiment) and four others
PROFILES = (
    ("join", "markov:4000,7000,10000:10s"),
    ("reduce", "sine:60000:300000:30s"),
    ("join", "sine:4000:10000:30s"),
    ("reduce", "markov:60000,180000,300000:10s"),
    ("join", "markov:2000,5000,8000:20s"),
    ("join", "sine:2000:8000:60s"),
    ("reduce", "markov:100000,200000,300000:20s"),
    ("reduce", "sine:100000:300000:60s"),
)
CONTROLLERS: dict[str, tuple[str, dict[str, Any]]] = {
    "fixed-point k=2": ("fixed-point", {}),
    "fixed-point 100 ms blocks": ("fixed-point", {"block_interval": 0.1}),
    "isotonic fixed 100 ms blocks": ("isotonic", {"block_interval": 0.1, "block_sizing": False}),
    # the simulator tells isotonic the model's cores (2), as read_stream tells it Spark's
    "isotonic from 100 ms": ("isotonic", {"block_interval": 0.1}),
}
MODELS = {"default": {}, "local2": None}  # None: the workload's whole local[2] fit


def run(
    workload: str, profile: str, seed: int, model: str, ctrl: str, sigma: float | None = None
) -> dict[str, float]:
    """One simulation: latency after and during the learning phase, blocks, stability;
    ``sigma`` overrides the model's processing-time noise."""
    overrides = MODELS[model]
    if overrides is None:
        overrides = LOCAL2_FITS[workload]
    if sigma is not None:
        overrides = {**overrides, "sigma": sigma}
    sc = make_scenario(
        workload, profile, DURATION, seed=seed, model=overrides, warmup=f"{LEARNING:g}s"
    )
    name, params = CONTROLLERS[ctrl]
    result = simulate(sc, name, params)
    s = result.summary
    learning = [r.latency_s for r in result.records if r.cut_at < LEARNING]
    return {
        "after": s.mean_latency_s if s.stable else math.inf,
        "learning": float(np.mean(learning)) if learning else math.nan,
        "blocks": s.mean_blocks,
        "stable": float(s.stable),
    }


def table(
    model: str, seeds: list[int], profiles: list[tuple[str, str]], sigma: float | None = None
) -> list[str]:
    """The Markdown table of one cost model."""
    noise = "" if sigma is None else f", noise sigma {sigma:g}"
    lines = [
        f"**{model} model{noise}** (latency x+q+p in s after {LEARNING:g} s of learning: mean over "
        f"seeds {', '.join(map(str, seeds))} / worst seed; during learning; blocks; stable seeds)",
        "",
        "| workload | profile | controller | after (mean / worst) | learning | blocks | stable |",
        "|---|---|---|---|---|---|---|",
    ]
    for workload, profile in profiles:
        for ctrl in CONTROLLERS:
            rows = [run(workload, profile, seed, model, ctrl, sigma) for seed in seeds]
            after = [r["after"] for r in rows]
            lines.append(
                f"| {workload} | {profile} | {ctrl} | {np.mean(after):.2f} / {max(after):.2f} "
                f"| {np.mean([r['learning'] for r in rows]):.2f} "
                f"| {np.mean([r['blocks'] for r in rows]):.1f} "
                f"| {int(sum(r['stable'] for r in rows))}/{len(rows)} |"
            )
            print(lines[-1], file=sys.stderr, flush=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--workload", choices=("join", "reduce"), help="only this workload")
    parser.add_argument("--sigma", type=float, help="processing-time noise (Spark: 0.3-0.4)")
    args = parser.parse_args(argv)
    profiles = [p for p in PROFILES if args.workload in (None, p[0])]
    started = time.monotonic()
    out = []
    for model in args.models:
        out += [*table(model, args.seeds, profiles, args.sigma), ""]
    print("\n".join(out))
    print(f"({time.monotonic() - started:.0f} s wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
