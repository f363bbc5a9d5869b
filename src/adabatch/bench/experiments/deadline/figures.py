"""The deadline bench's PNG figures (Fig. 3-8, 10, 11), drawn from its results."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from adabatch.bench.experiments.deadline.rows import (
    BaselineRow,
    BenchResults,
    SimulationRow,
    SingleRow,
)
from adabatch.deadline.spark.cost_profile import CostProfile, SweepPoint
from adabatch.outputs import save_figure

SIMULATION_PANELS = (
    ("fig7", "delta", "Fig. 7: strategies × deadlines (δ_RSF 0.5)"),
    ("fig8", "delta", "Fig. 8: EDF/LLF without MinBatchSize"),
    ("fig10", "rate", "Fig. 10: 0.1D, δ_RSF 1.0, input rates"),
    ("fig11", "rate", "Fig. 11: 0.2D, δ_RSF 0.5, input rates"),
)
"""Simulation figure, its x axis (a row field) and its title."""


def _figure(width: float = 10.0, height: float = 4.5) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _save_png(fig: Any, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    return save_figure(fig, path)


def median_by_batches(sweep: Sequence[SweepPoint]) -> dict[int, float]:
    """Median total cost per number of batches (the one-batch run repeats)."""
    groups: dict[int, list[float]] = {}
    for q in sweep:
        groups.setdefault(int(q.batches), []).append(float(q.total_seconds))
    return {b: statistics.median(groups[b]) for b in sorted(groups)}


def _fit_line(ax: Any, p: CostProfile, top: float) -> None:
    """The piecewise-linear fit from 0 to ``top`` tuples, extended past its last point."""
    import numpy as np

    bps = p.cost.breakpoints
    grid = np.linspace(0, top, 50)
    bx, by = [b[0] for b in bps], [b[1] for b in bps]
    fit = np.interp(grid, bx, by) if grid[-1] <= bx[-1] else None
    if fit is None:
        slope = (by[-1] - by[-2]) / (bx[-1] - bx[-2])
        fit = np.where(grid <= bx[-1], np.interp(grid, bx, by), by[-1] + slope * (grid - bx[-1]))
    ax.plot(grid, fit, color="C3", label="piecewise-linear fit")


def _fig_cost_models(profiles: dict[str, CostProfile], figdir: Path) -> Path:
    names = list(profiles)
    cols = min(4, len(names))
    rows = math.ceil(len(names) / cols)
    fig = _figure(3.0 * cols, 2.4 * rows)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        p = profiles[name]
        xs: list[float] = []
        ys: list[float] = []
        for point in p.sweep:
            xs += point.tuples
            ys += point.batch_seconds
        xs += [t for t, _ in p.small]
        ys += [x for _, x in p.small]
        ax.scatter(xs, ys, s=6, alpha=0.5, label="measured batches")
        _fit_line(ax, p, max(xs))
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(f"{p.primary} tuples per batch", fontsize=8)
        ax.set_ylabel("seconds", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(names) :]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=7)
    return _save_png(fig, figdir / "fig3-cost-models.png")


def _fig_cost_vs_batches(profiles: dict[str, CostProfile], figdir: Path) -> Path:
    fig = _figure(8, 4.5)
    ax = fig.subplots()
    for name, p in profiles.items():
        base = p.single_batch_cost
        by = median_by_batches(p.sweep)
        ax.plot(list(by), [v / base for v in by.values()], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("number of batches (+ final aggregation)")
    ax.set_ylabel("total cost / cost of one batch")
    ax.set_title("Fig. 4: cost versus number of batches (Spark)")
    ax.legend(fontsize=7, ncol=2)
    return _save_png(fig, figdir / "fig4-cost-vs-batches.png")


def _bar(ax: Any, x: float, height: float, width: float, j: int, label: str | None,
         missed: bool) -> None:  # fmt: skip
    """One bar of series ``j``, hatched with a dashed edge when a deadline was missed."""
    ax.bar(
        x,
        height,
        width,
        color=f"C{j}",
        edgecolor="black" if missed else f"C{j}",
        linestyle="--" if missed else "-",
        hatch="//" if missed else None,
        label=label,
    )


def _grouped_bars(
    ax: Any,
    rows: Sequence[Any],
    group: str,
    series: str,
    bar: Callable[[Any], tuple[float, bool | None] | None],
    label: Callable[[Any], str],
    tick: Callable[[Any], str] = str,
) -> None:
    """The rows' bars, grouped by their ``group`` field (x tick ``i``, ``tick(group)``),
    side by side by their ``series`` field (colour ``C{j}``, ``label(series)`` once), both
    in order of first appearance. ``bar(row)`` gives the height and whether a deadline was
    missed (hatched; ``None``: no deadline, a plain bar), or ``None`` for no bar."""
    groups = list(dict.fromkeys(getattr(r, group) for r in rows))
    keys = list(dict.fromkeys(getattr(r, series) for r in rows))
    width = 0.8 / len(keys)
    for j, key in enumerate(keys):
        for i, g in enumerate(groups):
            row = next(
                (r for r in rows if getattr(r, group) == g and getattr(r, series) == key), None
            )
            value = None if row is None else bar(row)
            if value is None:
                continue
            height, missed = value
            x = i + (j - (len(keys) - 1) / 2) * width
            name = label(key) if i == 0 else None
            if missed is None:
                ax.bar(x, height, width, color=f"C{j}", label=name)
            else:
                _bar(ax, x, height, width, j, name, missed)
    ax.set_xticks(range(len(groups)), [tick(g) for g in groups])


def _query_figure(rows: Sequence[Any]) -> tuple[Any, Any]:
    """A figure and its axes wide enough for a group of bars per query of ``rows``."""
    fig = _figure(max(8, len(dict.fromkeys(r.query for r in rows)) * 0.9), 4.5)
    return fig, fig.subplots()


def _single_bar(r: SingleRow) -> tuple[float, bool] | None:
    return None if r.normalised_cost is None else (r.normalised_cost, not r.met)


def _baseline_bar(r: BaselineRow) -> tuple[float, None] | None:
    """A plain bar: a streaming run has no deadline to miss."""
    return None if r.ratio_to_single_batch is None else (r.ratio_to_single_batch, None)


def _fig_single(results: BenchResults, figdir: Path) -> list[Path]:
    rows = results.single or []
    if not rows:
        return []
    fig, ax = _query_figure(rows)
    _grouped_bars(ax, rows, "query", "factor", _single_bar, lambda f: f"{f:g}D")
    ax.set_ylabel("measured cost / D")
    ax.set_title("Fig. 6: single query, deadlines window end + f·D (hatched: missed)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, ncol=len(dict.fromkeys(r.factor for r in rows)))
    return [_save_png(fig, figdir / "fig6-single-deadlines.png")]


def _fig_baseline(results: BenchResults, figdir: Path) -> list[Path]:
    rows = results.baseline or []
    if not rows:
        return []
    fig, ax = _query_figure(rows)
    _grouped_bars(ax, rows, "query", "trigger", _baseline_bar, str)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_ylabel("Structured Streaming cost / one batch (D)")
    ax.set_title("Fig. 5: Structured Streaming versus one batch")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    return [_save_png(fig, figdir / "fig5-streaming-vs-batch.png")]


def _fig_panel(sub: Sequence[SimulationRow], axis: str, title: str, path: Path) -> Path:
    """One simulation figure: a bar per strategy and x value (δ or rate)."""
    fig = _figure(8, 4)
    ax = fig.subplots()
    _grouped_bars(
        ax,
        sub,
        axis,
        "strategy",
        lambda r: (r.normalised_cost, not r.all_met),
        str.upper,
        (lambda x: f"{x:g}D") if axis == "delta" else str,
    )
    ax.set_ylabel("total cost / Σ single-batch cost")
    ax.set_title(title + " (hatched: a deadline missed)")
    ax.legend(fontsize=8)
    return _save_png(fig, path)


def _fig_simulation(results: BenchResults, figdir: Path) -> list[Path]:
    rows = results.simulation or []
    paths = []
    triggers = list(dict.fromkeys(r.trigger for r in rows))
    for (figure, axis, title), trigger in itertools.product(SIMULATION_PANELS, triggers):
        sub = [r for r in rows if r.figure == figure and r.trigger == trigger]
        if not sub:
            continue
        name = figure if trigger == "budget" else f"{figure}-{trigger}"
        if figure in ("fig10", "fig11"):
            title += f", time trigger {trigger}"
        paths.append(_fig_panel(sub, axis, title, figdir / f"{name}-simulation.png"))
    return paths


def write_figures(results: BenchResults, figdir: Path) -> list[Path]:
    """Every figure the results have data for, in the report's order."""
    profiles = results.cost_profiles()
    paths = []
    if profiles:
        paths += [_fig_cost_models(profiles, figdir), _fig_cost_vs_batches(profiles, figdir)]
    return (
        paths
        + _fig_single(results, figdir)
        + _fig_baseline(results, figdir)
        + _fig_simulation(results, figdir)
    )
