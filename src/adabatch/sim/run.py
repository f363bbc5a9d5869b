"""Simulation runs: one controller on one scenario, the files of a run, and the static oracle.

A :class:`Scenario` is everything but the controller (workload cost model, rate profile,
duration, seed, resources); :func:`simulate` runs a controller on it and summarises with
:func:`adabatch.metrics.summarize`; :func:`write_run` writes ``metrics.jsonl``,
``summary.json`` and ``timeline.png``; :func:`sweep_static` runs the ``static`` controller
over a grid of intervals (and blocks) and picks the best stable one, the papers' oracle
(fixed-point §5.2: "the minimum latency achieved with any statically defined interval").
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adabatch.control import registry
from adabatch.control.base import Controller
from adabatch.errors import AdabatchError
from adabatch.metrics import BatchRecord, summarize, write_jsonl, write_summary
from adabatch.plots import plot_timeline
from adabatch.profiles import RateProfile, parse_duration, parse_profile
from adabatch.sim.engine import run_simulation
from adabatch.sim.workloads import CostModel, Resources, make_workload, parse_resources


@dataclass(frozen=True)
class Scenario:
    """A workload under a rate profile for a duration; deterministic for ``seed``."""

    model: CostModel
    profile: RateProfile
    duration_s: float
    seed: int = 0
    resources: Resources = field(default_factory=Resources)
    poisson: bool = False
    skip_s: float = 0.0  # warm-up left out of the summary's means

    def __post_init__(self) -> None:
        if not (self.duration_s > 0 and math.isfinite(self.duration_s)):
            msg = f"duration {self.duration_s!r} must be a positive number of seconds"
            raise AdabatchError(msg)
        if not 0 <= self.skip_s < self.duration_s:
            msg = f"warm-up {self.skip_s!r} must be >= 0 and shorter than the duration"
            raise AdabatchError(msg)


def make_scenario(
    workload: str,
    profile: str,
    duration: str | float,
    *,
    seed: int = 0,
    model: Mapping[str, Any] | None = None,
    calibration: str | Path | None = None,
    noise: float | None = None,
    cores: float | None = None,
    resources: str | None = None,
    poisson: bool = False,
    warmup: str | float = 0.0,
    base_dir: Path | None = None,
) -> Scenario:
    """A :class:`Scenario` from the strings the CLI takes; ``noise`` and ``cores`` are
    shortcuts for the model parameters ``sigma`` and ``cores``."""
    overrides = dict(model or {})
    if noise is not None:
        overrides["sigma"] = noise
    if cores is not None:
        overrides["cores"] = cores
    duration_s = parse_duration(duration)
    if duration_s <= 0:
        msg = f"duration {duration!r} must be > 0"
        raise AdabatchError(msg)
    return Scenario(
        model=make_workload(workload, overrides, calibration),
        profile=parse_profile(profile, seed=seed, base_dir=base_dir),
        duration_s=duration_s,
        seed=seed,
        resources=parse_resources(resources),
        poisson=poisson,
        skip_s=parse_duration(warmup),
    )


@dataclass(frozen=True)
class SimResult:
    """One simulated run: every batch and the summary."""

    records: tuple[BatchRecord, ...]
    summary: dict[str, Any]

    @property
    def title(self) -> str:
        s = self.summary
        return f"{s['controller']} on {s['workload']} under {s['profile']} (simulated)"


def simulate(
    scenario: Scenario,
    controller: str | Controller,
    params: Mapping[str, Any] | None = None,
) -> SimResult:
    """Run ``controller`` (a registry name with ``params``, or an instance) on ``scenario``.

    Examples
    --------
    >>> sc = make_scenario("reduce", "constant:5000", "60s", noise=0)
    >>> r = simulate(sc, "static", {"interval": 1.0})
    >>> r.summary["batches"], r.summary["stable"]
    (60, True)
    """
    if isinstance(controller, str):
        ctrl = registry.create(controller, params)
    else:
        if params:
            msg = "pass params only with a controller name, not with a controller object"
            raise AdabatchError(msg)
        ctrl = controller
    out = run_simulation(
        ctrl,
        scenario.model,
        scenario.profile,
        scenario.duration_s,
        seed=scenario.seed,
        resources=scenario.resources,
        poisson=scenario.poisson,
    )
    extra: dict[str, Any] = {
        "mode": "simulated",
        "seed": scenario.seed,
        "requested_duration_s": scenario.duration_s,
        "diverged": out.diverged,
        "end_s": out.end_s,
        "cuts": out.cuts,
        "controller_params": dict(ctrl.params),
        "model": scenario.model.values(),
        "resources": scenario.resources.spec,
        "poisson": scenario.poisson,
    }
    if out.diverged:
        extra["stable"] = False
    summary = summarize(
        out.records,
        controller=ctrl.name,
        workload=scenario.model.name,
        profile=scenario.profile.spec,
        # a diverged run stopped early: rates are over the span actually simulated
        duration_s=min(out.end_s, scenario.duration_s) if out.diverged else scenario.duration_s,
        final_queue_len=out.final_queue_len,
        skip_s=scenario.skip_s,
        extra=extra,
    )
    return SimResult(out.records, summary)


def write_run(out_dir: str | Path, result: SimResult, title: str | None = None) -> dict[str, Path]:
    """Write ``metrics.jsonl``, ``summary.json`` and ``timeline.png`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "metrics": out / "metrics.jsonl",
        "summary": out / "summary.json",
        "timeline": out / "timeline.png",
    }
    write_jsonl(paths["metrics"], result.records)
    write_summary(paths["summary"], result.summary)
    plot_timeline(result.records, paths["timeline"], title or result.title)
    return paths


@dataclass(frozen=True)
class StaticSweep:
    """The static oracle: one summary row per (interval, blocks), and the best stable row
    by ``metric`` (``None`` if no static setting was stable)."""

    rows: tuple[dict[str, Any], ...]
    best: dict[str, Any] | None
    metric: str

    def ratio(self, summary: Mapping[str, Any]) -> float:
        """``summary[metric] / best[metric]``: how far a run is from the oracle."""
        if self.best is None or not self.best[self.metric] > 0:
            return math.nan
        return float(summary[self.metric]) / float(self.best[self.metric])


def parse_grid(text: str, what: str = "intervals") -> list[float]:
    """``"0.5:5:0.25"`` (start:stop:step, stop included) or ``"0.5,1,2"`` -> seconds."""
    text = str(text).strip()
    try:
        if ":" in text:
            parts = [parse_duration(p) for p in text.split(":")]
            if len(parts) != 3:
                raise ValueError
            start, stop, step = parts
            if step <= 0 or stop < start:
                raise ValueError
            count = math.floor((stop - start) / step + 1e-9) + 1
            values = [round(start + i * step, 9) for i in range(count)]
        else:
            values = [parse_duration(p) for p in text.split(",")]
    except (AdabatchError, ValueError):
        msg = (
            f"--{what} {text!r} is malformed: expected START:STOP:STEP with STOP >= START "
            "and STEP > 0, or a comma-separated list"
        )
        raise AdabatchError(msg) from None
    if any(v <= 0 for v in values):
        msg = f"--{what} {text!r}: every value must be > 0"
        raise AdabatchError(msg)
    return values


def sweep_static(
    scenario: Scenario,
    intervals: Sequence[float],
    blocks: Sequence[int] = (2,),
    *,
    metric: str = "mean_latency_s",
) -> StaticSweep:
    """Run ``static`` for every interval and blocks on ``scenario``; the oracle is the
    stable setting with the lowest ``metric`` (batch latency by default, as the papers)."""
    if not intervals or not blocks:
        msg = "sweep_static needs at least one interval and one blocks value"
        raise AdabatchError(msg)
    rows = []
    for k in blocks:
        for x in intervals:
            summary = simulate(scenario, "static", {"interval": x, "blocks": k}).summary
            rows.append({"interval_s": float(x), "blocks": int(k), **summary})
    if metric not in rows[0]:
        msg = f"sweep metric {metric!r} is not a summary field"
        raise AdabatchError(msg)
    stable = [r for r in rows if r["stable"] and np.isfinite(r[metric])]
    best = min(stable, key=lambda r: r[metric]) if stable else None
    return StaticSweep(tuple(rows), best, metric)


def write_sweep(path: str | Path, sweep: StaticSweep) -> None:
    """Write the oracle table as JSON (rows without the nested model parameters)."""
    skip = {"model", "controller_params"}
    rows = [{k: v for k, v in r.items() if k not in skip} for r in sweep.rows]
    best = (
        None
        if sweep.best is None
        else {"interval_s": sweep.best["interval_s"], "blocks": sweep.best["blocks"]}
    )
    data = {"metric": sweep.metric, "best": best, "rows": rows}

    def clean(v: Any) -> Any:
        return None if isinstance(v, float) and math.isnan(v) else v

    data["rows"] = [{k: clean(v) for k, v in r.items()} for r in rows]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
