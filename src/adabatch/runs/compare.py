"""Several controllers, one after another, on the same Spark workload, profile and seed.

:func:`compare_spark` runs :func:`adabatch.runs.spark_job.run_spark` once per controller
(each into ``out/<controller>/``, all in one SparkSession), then tabulates the summaries
with ratios to the best run (lowest mean batch latency among the stable runs; among all
runs if none was stable) and draws one figure: every run's batch latency and processing
time over stream time. Absolute times are context; the ratios are the comparison.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from adabatch.errors import AdabatchError
from adabatch.metrics import BatchRecord, RunSummary
from adabatch.outputs import OutputDir, open_output, save_figure
from adabatch.runs.spark_job import (
    SPARK_CONF,
    Progress,
    RunConfig,
    RunResult,
    SparkProgress,
    check_run,
    run_spark,
)
from adabatch.urls import redact_url

COMPARE_FILES = ("comparison.png", "compare.json")

COLUMNS = (
    ("mean_latency_s", "latency x+q+p (s)"),
    ("p95_latency_s", "p95 latency (s)"),
    ("mean_record_latency_s", "record latency (s)"),
    ("mean_interval_s", "interval (s)"),
    ("busy_fraction", "busy"),
    ("cpu_s_per_million_records", "CPU s/M rec"),
)
RATIOS = (("mean_latency_s", "latency ratio"), ("cpu_s_per_million_records", "CPU ratio"))


@dataclass(frozen=True)
class Comparison:
    """The runs' summaries in order, the best run's name, and per-run ratios."""

    names: tuple[str, ...]
    summaries: tuple[RunSummary, ...]
    best: str
    ratios: tuple[dict[str, float], ...]

    def rows(self) -> list[dict[str, Any]]:
        """One row per run: its name, verdict, :data:`COLUMNS` and :data:`RATIOS`."""
        out = []
        for name, s, r in zip(self.names, self.summaries, self.ratios, strict=True):
            row: dict[str, Any] = {"controller": name, "stable": s.stable}
            row.update({key: s.get(key) for key, _ in COLUMNS})
            row.update({label: r[key] for key, label in RATIOS})
            out.append(row)
        return out

    def cpu_note(self) -> str | None:
        """Why the CPU columns are empty when the runs could not measure the CPU (executors
        on a cluster): ``CPU not measured: ...``; ``None`` when every run measured it."""
        scopes = sorted(
            {str(s.get("cpu_scope")) for s in self.summaries if s.get("cpu_measured") is False}
        )
        return "CPU " + "; ".join(scopes) if scopes else None


class CompareProgress:
    """An ``on_progress`` for :func:`compare_spark`: each run's name on a line of its
    own (on stdout), then that run's :class:`~adabatch.runs.spark_job.SparkProgress` line.
    Call :meth:`end` when the comparison ends."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self.lines: dict[str, SparkProgress] = {}

    def __call__(self, name: str, p: Progress) -> None:
        if name not in self.lines:
            self.end()
            print(f"{name}:")
            self.lines[name] = SparkProgress(self.stream)
        self.lines[name](p)

    def end(self) -> None:
        """Close the open line (a later message starts on its own line)."""
        for line in self.lines.values():
            line.end()


def for_sequential_runs(cfg: RunConfig, what: str) -> RunConfig:
    """``cfg`` for one of several runs one after another over the same source (``what``
    names them): each run of a live source (a Redis Stream, a landing directory) reads only
    what arrives during it (``starting_position=latest`` unless given), so every run sees
    the same kind of load, not the entries or files left by the runs before it."""
    spec = cfg.source_spec
    given = {str(k).replace("_", "").lower() for k in cfg.source_options}
    if not spec.live or "startingposition" in given:
        return cfg
    return replace(cfg, source_options={**cfg.source_options, "starting_position": "latest"})


def split_params(
    controllers: Sequence[str], params: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    """``{"fixed-point.rho": "0.6", "blocks": "4"}`` -> per-controller parameters.

    A ``NAME.k`` parameter goes to controller ``NAME``; a plain ``k`` to every controller
    that has a parameter ``k`` (an error if none has).
    """
    from adabatch.control import registry
    from adabatch.streaming.options import SPARK_DEFAULT, SPARK_DEFAULT_PARAMS

    def accepts(name: str) -> set[str]:
        if name == SPARK_DEFAULT:
            return {p.name for p in SPARK_DEFAULT_PARAMS}
        return {p.name for p in registry.controller_class(name).PARAMS}

    out: dict[str, dict[str, str]] = {name: {} for name in controllers}
    for key, value in params.items():
        owner, dot, pname = key.partition(".")
        if dot:
            if owner not in out:
                msg = f"--param {key}: {owner!r} is not among --controllers {','.join(out)}"
                raise AdabatchError(msg)
            out[owner][pname] = value
            continue
        takers = [name for name in controllers if key in accepts(name)]
        if not takers:
            msg = f"--param {key}: none of {', '.join(controllers)} has a parameter {key!r}"
            raise AdabatchError(msg)
        for name in takers:
            out[name][key] = value
    return out


def tabulate(names: Sequence[str], summaries: Sequence[RunSummary]) -> Comparison:
    """Ratios of every run to the best one (see the module docstring)."""
    if not summaries:
        msg = "nothing to compare: no runs"
        raise AdabatchError(msg)

    def latency(s: RunSummary) -> float:
        value = s.mean_latency_s
        return math.inf if value is None or math.isnan(value) else float(value)

    stable = [i for i, s in enumerate(summaries) if s.stable]
    pool = stable or list(range(len(summaries)))
    best = min(pool, key=lambda i: latency(summaries[i]))
    ratios = []
    for s in summaries:
        r = {}
        for key, _ in RATIOS:
            value, ref = s.get(key), summaries[best].get(key)
            ok = value is not None and ref is not None and ref > 0
            r[key] = float(value) / float(ref) if ok else math.nan
        ratios.append(r)
    return Comparison(tuple(names), tuple(summaries), names[best], tuple(ratios))


def plot_comparison(
    runs: Mapping[str, Sequence[BatchRecord]], path: Path | tuple[OutputDir, str], title: str
) -> Path:
    """Every run's batch latency (top) and processing time (bottom) over stream time, to a
    path or to a name in an :class:`OutputDir`."""
    fig = Figure(figsize=(10, 6.5), layout="constrained")
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True)
    for name, records in runs.items():
        t = [r.cut_at for r in records]
        (line,) = top.plot(t, [r.latency_s for r in records], label=name, lw=1.2)
        bottom.plot(t, [r.processing_s for r in records], color=line.get_color(), lw=1.0)
        bottom.plot(t, [r.interval_s for r in records], color=line.get_color(), lw=0.8, ls=":")
    top.set_ylabel("batch latency x+q+p (s)")
    bottom.set_ylabel("processing (—) / interval (··) (s)")
    bottom.set_xlabel("stream time (s)")
    top.set_title(title)
    top.legend(loc="upper left", fontsize="small")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    return save_figure(fig, path, dpi=110)


def compare_spark(
    base: RunConfig,
    controllers: Sequence[str],
    params: Mapping[str, str] | None = None,
    *,
    on_progress: Callable[[str, Progress], None] | None = None,
) -> tuple[Comparison, dict[str, RunResult], dict[str, Path]]:
    """Run every controller on ``base`` (its ``controller`` and ``params`` are replaced)
    and write ``compare.json`` and ``comparison.png`` into ``base.out_dir``."""
    from adabatch.spark import get_spark

    names = [c.strip() for c in controllers if c.strip()]
    if len(names) < 2 or len(set(names)) != len(names):
        msg = f"--controllers {','.join(controllers)!r}: give at least two different names"
        raise AdabatchError(msg)
    per = split_params(names, params or {})
    base = for_sequential_runs(base, "compare")
    configs = {
        name: replace(base, controller=name, params=per[name], out_dir=Path(base.out_dir) / name)
        for name in names
    }
    for cfg in configs.values():
        check_run(cfg)  # every run's input is checked before the first starts
    with open_output(base.out_dir, replaces=COMPARE_FILES) as od:
        spark = get_spark(base.master, conf=SPARK_CONF)
        od.begin()
        results: dict[str, RunResult] = {}
        for name, cfg in configs.items():
            callback = None if on_progress is None else (lambda p, n=name: on_progress(n, p))
            results[name] = run_spark(cfg, spark=spark, on_progress=callback)
            if results[name].interrupted:
                break
        done = list(results)
        table = tabulate(done, [results[n].summary for n in done])
        where = f"Spark {redact_url(base.master)}, seed {base.seed}"
        title = f"{base.workload} under {base.label} ({where})"
        paths = {
            "plot": plot_comparison(
                {n: results[n].records for n in done}, (od, "comparison.png"), title
            )
        }
        rows = json.loads(json.dumps(table.rows(), default=str))
        paths["compare"] = od.write_json(
            "compare.json",
            {"best": table.best, "rows": rows, "cpu_note": table.cpu_note()},
            indent=2,
        )
        od.complete()
    return table, results, paths
