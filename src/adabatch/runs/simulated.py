"""Simulation runs: one controller on one scenario, the files of a run, and the static oracle.

A :class:`Scenario` is everything but the controller (workload cost model, rate profile,
duration, seed, resources, batch queue mode); :func:`simulate` runs a controller on it and
summarises with :func:`adabatch.metrics.summarize`; :func:`write_run` writes ``metrics.jsonl``,
``timeline.png``, ``sweep.json`` (with a sweep) and ``summary.json`` last;
:func:`sweep_static` runs the ``static`` controller over a grid of intervals (and blocks)
and picks the best stable one, the papers' oracle (fixed-point §5.2: "the minimum latency
achieved with any statically defined interval").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from adabatch.batching import QUEUE_MODES
from adabatch.control import registry
from adabatch.control.base import Controller
from adabatch.control.fingerprint import code_fingerprint
from adabatch.errors import AdabatchError, shown
from adabatch.metrics import BatchRecord, RunSummary, summarize, write_jsonl
from adabatch.outputs import OutputDir, open_output
from adabatch.params import Param
from adabatch.profiles import RateProfile, check_span, parse_duration, parse_profile
from adabatch.report.progress import ProgressLine
from adabatch.report.timeline import timeline_figure
from adabatch.runs.checks import check_duration
from adabatch.sim.engine import ProgressFn, check_batches, run_simulation
from adabatch.sim.workloads import CostModel, Resources, make_workload, parse_resources

QUEUE = Param(
    "queue",
    "fifo",
    "how batches that wait are served: fifo (the papers' model) or coalesce (Spark's)",
    kind=str,
    choices=QUEUE_MODES,
)


@dataclass(frozen=True)
class Scenario:
    """A workload under a rate profile for a duration; deterministic for ``seed``.

    ``queue`` is the batch queue's mode (:data:`QUEUE`): ``fifo`` serves waiting batches one
    at a time, ``coalesce`` merges them into the next one as Spark does.
    """

    model: CostModel
    profile: RateProfile
    duration_s: float
    seed: int = 0
    resources: Resources = field(default_factory=Resources)
    poisson: bool = False
    skip_s: float = 0.0  # warm-up left out of the summary's means
    queue: str = "fifo"

    def __post_init__(self) -> None:
        QUEUE.parse(self.queue, owner="scenario")
        check_duration(self.duration_s, self.skip_s)
        check_span(self.profile, self.duration_s)


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
    queue: str = "fifo",
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
        msg = f"duration {shown(duration)} must be > 0"
        raise AdabatchError(msg)
    return Scenario(
        model=make_workload(workload, overrides, calibration),
        profile=parse_profile(profile, seed=seed, base_dir=base_dir),
        duration_s=duration_s,
        seed=seed,
        resources=parse_resources(resources),
        poisson=poisson,
        skip_s=parse_duration(warmup),
        queue=queue,
    )


class SimProgress(ProgressLine):
    """The progress line of a long simulation, an ``on_progress`` for :func:`simulate` and
    :func:`sweep_static`. Nothing for the first ``after_s`` seconds of wall time; then
    rewritten in place on a terminal, or one line every ``every_s`` seconds otherwise."""

    def __init__(
        self,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        after_s: float = 3.0,
        every_s: float = 10.0,
    ) -> None:
        super().__init__(stream, every_s=every_s, tty_every_s=0.25, after_s=after_s, clock=clock)

    def __call__(self, now: float, duration_s: float, finished: int) -> None:
        done = min(now / duration_s, 1.0) if duration_s > 0 else 1.0
        self.show(
            f"simulating: stream time {now:,.1f} of {duration_s:,.1f} s ({done:.0%}), "
            f"{finished:,} batches finished"
        )


@dataclass(frozen=True)
class SimResult:
    """One simulated run: every batch and the summary."""

    records: tuple[BatchRecord, ...]
    summary: RunSummary

    @property
    def title(self) -> str:
        s = self.summary
        return f"{s.controller} on {s.workload} under {s.profile} (simulated)"


def simulate(
    scenario: Scenario,
    controller: str | Controller,
    params: Mapping[str, Any] | None = None,
    *,
    on_progress: ProgressFn | None = None,
) -> SimResult:
    """Run ``controller`` (a registry name with ``params``, or an instance) on ``scenario``;
    ``on_progress`` is handed to :func:`~adabatch.sim.engine.run_simulation`.

    Examples
    --------
    >>> sc = make_scenario("reduce", "constant:5000", "60s", noise=0)
    >>> r = simulate(sc, "static", {"interval": 1.0})
    >>> r.summary.batches, r.summary.stable
    (60, True)
    """
    if isinstance(controller, str):
        # the simulated machine's cores, as read_stream gives Spark's parallelism
        model_cores = getattr(scenario.model, "cores", None)
        cores = None if model_cores is None else max(1, round(model_cores))
        ctrl = registry.create(
            controller, registry.with_cores(controller, params or {}, lambda: cores)
        )
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
        queue=scenario.queue,
        on_progress=on_progress,
    )
    extra: dict[str, Any] = {
        "mode": "simulated",
        "seed": scenario.seed,
        "requested_duration_s": scenario.duration_s,
        "diverged": out.diverged,
        "end_s": out.end_s,
        "cuts": out.cuts,
        "controller_params": dict(ctrl.params),
        "controller_code": code_fingerprint(type(ctrl)),
        "model": scenario.model.values(),
        "resources": scenario.resources.spec,
        "poisson": scenario.poisson,
    }
    if scenario.queue != QUEUE.default:  # fifo runs keep the summary they always had
        extra["queue"] = scenario.queue
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
        target=ctrl.target_status(),
    )
    return SimResult(out.records, summary)


RUN_FILES = ("metrics.jsonl", "timeline.png", "sweep.json", "summary.json")
"""The files of a simulated run; a rerun removes all of them first (a stale sweep too)."""


def write_run(
    out_dir: str | Path | OutputDir,
    result: SimResult,
    title: str | None = None,
    *,
    sweep: StaticSweep | None = None,
) -> dict[str, Path]:
    """Write ``metrics.jsonl``, ``timeline.png``, ``sweep.json`` (with ``sweep``) and
    ``summary.json`` last into ``out_dir``, replacing an earlier run's files (see
    :mod:`adabatch.outputs`: until the summary is written, ``INCOMPLETE`` says so)."""
    if not isinstance(out_dir, OutputDir):
        with open_output(out_dir, replaces=RUN_FILES) as out:
            return write_run(out, result, title, sweep=sweep)
    out = out_dir
    out.begin(RUN_FILES)
    write_jsonl(out, result.records)
    paths = {
        "metrics": out.path("metrics.jsonl"),
        "timeline": out.savefig(
            timeline_figure(result.records, title or result.title), "timeline.png"
        ),
    }
    if sweep is not None:
        paths["sweep"] = write_sweep(out, sweep)
    paths["summary"] = out.write_summary(result.summary.to_json())
    out.complete()
    return paths


@dataclass(frozen=True)
class StaticSweep:
    """The static oracle: one summary row per (interval, blocks), and the best stable row
    by ``metric`` (``None`` if no static setting was stable)."""

    rows: tuple[dict[str, Any], ...]
    best: dict[str, Any] | None
    metric: str

    def ratio(self, summary: RunSummary) -> float:
        """The run's ``metric`` over the best row's: how far a run is from the oracle."""
        if self.best is None or not self.best[self.metric] > 0:
            return math.nan
        return float(summary.get(self.metric)) / float(self.best[self.metric])


# Most settings one static sweep may simulate (intervals x blocks).
MAX_GRID = 1000


def _too_many(what: str, text: str, count: float) -> AdabatchError:
    counted = f"{count:.4g}" if math.isfinite(count) else "uncountably many"
    return AdabatchError(
        f"--{what} {shown(text)} has {counted} values: allowed at most {MAX_GRID} "
        "(a larger STEP or a shorter list)"
    )


def parse_grid(text: str, what: str = "intervals") -> list[float]:
    """``"0.5:5:0.25"`` (start:stop:step, stop included) or ``"0.5,1,2"`` -> seconds; at
    most ``MAX_GRID`` values, counted before any is built."""
    text = str(text).strip()
    values = _grid_values(text, what)
    if values is None:
        msg = (
            f"--{what} {shown(text)} is malformed: expected START:STOP:STEP with STOP >= START "
            "and STEP > 0, or a comma-separated list"
        )
        raise AdabatchError(msg)
    if any(v <= 0 for v in values):
        msg = f"--{what} {shown(text)}: every value must be > 0"
        raise AdabatchError(msg)
    return values


def _grid_values(text: str, what: str) -> list[float] | None:
    """The values of a grid, ``None`` if it is malformed; too many is an error."""
    if ":" not in text:
        if text.count(",") >= MAX_GRID:
            raise _too_many(what, text, text.count(",") + 1)
        try:
            return [parse_duration(p) for p in text.split(",")]
        except AdabatchError:
            return None
    try:
        start, stop, step = (parse_duration(p) for p in text.split(":"))
    except (AdabatchError, ValueError):  # not three durations
        return None
    if not (step > 0 and stop >= start):
        return None
    span = (stop - start) / step  # inf for a denormal step: only compared
    if span + 1 > MAX_GRID:
        raise _too_many(what, text, span + 1)
    count = math.floor(span + 1e-9) + 1
    return [round(start + i * step, 9) for i in range(count)]


def check_sweep(scenario: Scenario, intervals: Sequence[float], blocks: Sequence[int]) -> None:
    """Refuse a static sweep before it runs: empty or more than ``MAX_GRID`` settings, a
    setting ``static`` does not allow, or a smallest interval that cuts too many batches."""
    if not intervals or not blocks:
        msg = "sweep_static needs at least one interval and one blocks value"
        raise AdabatchError(msg)
    if len(intervals) * len(blocks) > MAX_GRID:
        msg = (
            f"static sweep of {len(intervals)} intervals x {len(blocks)} blocks: allowed at "
            f"most {MAX_GRID} settings"
        )
        raise AdabatchError(msg)
    static = registry.controller_class("static")
    for k in sorted(set(blocks)):
        static.validate({"interval": min(intervals), "blocks": k})
    static.validate({"interval": max(intervals)})
    check_batches(scenario.duration_s, min(intervals))


def sweep_static(
    scenario: Scenario,
    intervals: Sequence[float],
    blocks: Sequence[int] = (2,),
    *,
    metric: str = "mean_latency_s",
    on_progress: ProgressFn | None = None,
) -> StaticSweep:
    """Run ``static`` for every interval and blocks on ``scenario``; the oracle is the
    stable setting with the lowest ``metric`` (batch latency by default, as the papers)."""
    check_sweep(scenario, intervals, blocks)
    rows = []
    for k in blocks:
        for x in intervals:
            summary = simulate(
                scenario, "static", {"interval": x, "blocks": k}, on_progress=on_progress
            ).summary
            rows.append({"interval_s": float(x), "blocks": int(k), **summary.to_json()})
    if metric not in rows[0]:
        msg = f"sweep metric {metric!r} is not a summary field"
        raise AdabatchError(msg)
    stable = [r for r in rows if r["stable"] and np.isfinite(r[metric])]
    best = min(stable, key=lambda r: r[metric]) if stable else None
    return StaticSweep(tuple(rows), best, metric)


def write_sweep(path: str | Path | OutputDir, sweep: StaticSweep) -> Path:
    """Write the oracle table as JSON (rows without the nested model parameters) to
    ``path``, or to ``sweep.json`` of an :class:`OutputDir`; NaN becomes null."""
    skip = {"model", "controller_params"}
    rows = [{k: v for k, v in r.items() if k not in skip} for r in sweep.rows]
    best = (
        None
        if sweep.best is None
        else {"interval_s": sweep.best["interval_s"], "blocks": sweep.best["blocks"]}
    )
    data = {"metric": sweep.metric, "best": best, "rows": rows}
    if isinstance(path, OutputDir):
        return path.write_json("sweep.json", data, indent=2)
    target = Path(path)
    with open_output(target.parent, what="sweep directory") as out:
        out.write_json(target.name, data, indent=2)
    return target
