"""The ``slo`` controller, closed loop, through the slowdowns a kept Spark run measured.

The simulator's noise has one spread at every load; on Spark a background CPU load both
slows the batches and widens their spread (join at 9,000 records/s: processing 0.3-0.4 s
before the load, 0.47-1.36 s under it). This replays that. The cost model is ``p = a +
b·n``, fitted to the batches the given runs of one boot and workload cut before the load
(stream seconds 10-35). Each batch a kept run measured gives the machine's speed from its
start to the next one's, ``p_model(n) / p_observed``, and a simulated batch takes the
time its model work needs at those speeds from its own start: only the part of it within a
slow span is slowed. So a change to the margins meets the load's real sequence of slow
batches, with its own intervals choosing the batches. Each row is one trace and one
target; the columns give, per controller setting, the p95 batch latency after the run's
warm-up, the share of those batches over the target and the processing seconds per 1M
records. A trace is as long as its run; the simulated run stops with it. Give slo runs:
a processingTime trigger run's ``metrics.jsonl`` does not hold Spark's processing times.

    .venv/bin/python benchmarks/slo_trace_sim.py runs/slo-full/slo/join-cpu-slo-{1,2,5}s
        [--targets 1,2,5] [--variant NAME:K=V,K=V ...] [--variant NAME:static:interval=1]
        [--out runs/trace.jsonl]

(Join's three cpu runs of the published grid at 5 s: p95 4.94, 4.99 and 5.08 s without
the reserve, ``--variant none:idle_reserve=0``; 4.61, 4.64 and 4.83 s with it.)
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import json
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from adabatch.control.registry import parse_params
from adabatch.runs.simulated import make_scenario, simulate
from adabatch.sim.workloads import Cost, CostModel

# batches before the load (stream seconds) give each boot's linear fit
CALM = (10.0, 35.0)
# the workloads' terms besides a fixed cost and a cost per record, left out of the fit
EXTRA_TERMS = ("per_pair_s", "per_partial_s", "merge_per_key_s", "commit_s", "commit_per_key_s")


def calm_fit(runs: list[Path]) -> dict[str, float]:
    """Model parameters of ``p = a + b·n``, least squares over the batches the runs (of one
    boot and workload) cut before the load: the shape the traced speeds apply to (all of
    it fixed where those batches hold one record count)."""
    n, p = [], []
    for run in runs:
        for line in (run / "metrics.jsonl").read_text().splitlines():
            r = json.loads(line)
            if CALM[0] <= r["cut_at"] < CALM[1] and r["records"] > 0:
                n.append(float(r["records"]))
                p.append(float(r["processing_s"]))
    if np.ptp(n) < 0.05 * np.mean(n):
        # one record count shows no slope: the cost is taken as all fixed
        a, b = float(np.median(p)), 0.0
    else:
        b, a = np.polyfit(n, p, 1)
        a, b = max(float(a), 0.0), max(float(b), 0.0)
    # two blocks on two cores: the parallel part is half the work
    return {"overhead_s": a, "per_block_s": 0.0, "per_record_s": 2.0 * b, "sigma": 0.0}


def trace_speeds(run: Path, model: CostModel) -> tuple[list[float], list[float]]:
    """Start times of a kept run's batches and the speed of the machine from each to the
    next: ``p_model(n) / p_observed``, the model's work done per second of that batch."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    starts, speeds = [], []
    for r in rows:
        expected = model.expected_processing(r["records"], r["interval_s"], r["blocks"])
        if expected > 0 and r["records"] > 0 and r["processing_s"] > 0:
            starts.append(float(r["started_at"]))
            speeds.append(expected / float(r["processing_s"]))
    return starts, speeds


def traced(model: CostModel, starts: list[float], speeds: list[float]) -> CostModel:
    """``model`` run at the traced speeds: a batch started at ``t`` whose model time is
    ``W`` ends when the work done since ``t`` at the speed of each traced span reaches
    ``W``, so only the part of it within a slow span is slowed."""
    edges = [*starts[1:], math.inf]

    def elapsed(t: float, work: float) -> float:
        i = max(0, bisect.bisect_right(starts, t) - 1)
        now, left = t, work
        while True:
            room = (edges[i] - now) * speeds[i]
            if room >= left:
                return now + left / speeds[i] - t
            left -= room
            now, i = edges[i], i + 1

    class Traced(type(model)):  # type: ignore[misc, valid-type]
        def cost(self, records: float, interval_s: float, blocks: int, t: float = 0.0,
                 rng: Any = None, resources: Any = None) -> Cost:  # fmt: skip
            c = super().cost(records, interval_s, blocks, t, rng, resources)
            f = elapsed(t, c.processing_s) / c.processing_s if c.processing_s > 0 else 1.0
            return Cost(float(c.processing_s * f), tuple(float(b * f) for b in c.block_s))

    values = {f.name: getattr(model, f.name) for f in dataclasses.fields(model)}
    return Traced(**values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="kept run directories")
    parser.add_argument("--targets", default="1,2,5")
    parser.add_argument(
        "--variant", action="append", default=[],
        help="NAME:K=V,K=V further slo parameters of one setting (the current one always "
        "runs), or NAME:static:interval=1 another controller's",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="JSON lines: every batch of every run")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    variants: list[tuple[str, str, dict[str, Any]]] = [("current", "slo", {})]
    for text in args.variant:
        name, _, spec = text.partition(":")
        controller = "slo"
        if ":" in spec:
            controller, _, spec = spec.partition(":")
        variants.append((name, controller, parse_params([p for p in spec.split(",") if p])))
    targets = [float(t) for t in args.targets.split(",")]
    print(f"{'trace':<28} {'tgt':>4} | " + " | ".join(f"{n:^20}" for n, _, _ in variants))
    raw: list[str] = []
    totals: dict[str, list[float]] = {n: [] for n, _, _ in variants}
    for run in args.runs:
        config = json.loads((run / "config.json").read_text())
        workload, profile = config["workload"], config["profile"]
        duration, skip = float(config["duration_s"]), float(config.get("skip_s", 0.0))
        boot = [
            r
            for r in args.runs
            if r.parent == run.parent
            and json.loads((r / "config.json").read_text())["workload"] == workload
        ]
        fits = calm_fit(boot)
        base = make_scenario(workload, profile, duration).model
        fits.update({k: 0.0 for k in EXTRA_TERMS if hasattr(base, k)})
        sc = make_scenario(workload, profile, duration, model=fits)
        starts, speeds = trace_speeds(run, sc.model)
        sc = dataclasses.replace(sc, model=traced(sc.model, starts, speeds))
        for target in targets:
            cells = []
            for name, controller, params in variants:
                if controller == "slo":
                    params = {**params, "target": target}
                records = list(simulate(sc, controller, params).records)
                kept = [r for r in records if r.cut_at >= skip]
                lat = [r.latency_s for r in kept]
                p95 = float(np.percentile(lat, 95))
                over = sum(x > target for x in lat) / len(lat)
                cpu = sum(r.processing_s for r in kept) / max(sum(r.records for r in kept), 1)
                totals[name].append(cpu)
                cells.append(f"{p95:6.3f} {over:5.1%} {cpu * 1e6:7.2f}")
                info = {"trace": str(run), "target_s": target, "variant": name}
                raw += [json.dumps({**info, "batch": json.loads(r.to_json())}) for r in records]
            print(f"{run.name:<28} {target:>4g} | " + " | ".join(cells))
    base = np.array(totals["current"])
    ratios = " ".join(f"{n} {np.mean(np.array(v) / base):.3f}" for n, v in totals.items())
    print("each: p95 batch latency (s), share of batches over the target, processing s per")
    print(f"1M records; mean CPU ratio to the current setting: {ratios}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(raw) + "\n")


if __name__ == "__main__":
    main()
