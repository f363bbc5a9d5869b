"""The figures every experiment shares: latency vs cost, and side-by-side timelines."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import ScalarFormatter

from adabatch.bench.model import Figure, Outcome
from adabatch.outputs import save_figure

ROLE_MARKERS = {"static": "o", "adaptive": "*", "spark-default": "s", "trigger": "D"}


def latency_vs_cost(
    outcomes: Sequence[Outcome],
    path: Path,
    title: str,
    *,
    latency_key: str = "mean_latency_s",
) -> Figure:
    """One point per configuration: mean batch latency against CPU seconds per million
    records; hollow markers are unstable runs, the marker shape is the role."""
    fig = MplFigure(figsize=(8, 5.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    groups = sorted({o.config.group for o in outcomes})
    colors = {g: f"C{i % 10}" for i, g in enumerate(groups)}
    seen_roles: set[str] = set()
    for o in outcomes:
        x, y = o.get("cpu_s_per_million_records"), o.get(latency_key)
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        role = o.config.role
        color = colors[o.config.group]
        ax.scatter(
            [x],
            [y],
            marker=ROLE_MARKERS[role],
            s=110 if role == "adaptive" else 55,
            facecolors=color if o.stable else "none",
            edgecolors=color,
            label=role if role not in seen_roles else None,
        )
        seen_roles.add(role)
        ax.annotate(o.name, (x, y), fontsize=6.5, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("cost: CPU seconds per million records")
    ylabel = "mean batch latency x+q+p (s)"
    if latency_key != "mean_latency_s":
        ylabel = latency_key
    ax.set_ylabel(ylabel)
    if any(o.get(latency_key) > 0 for o in outcomes):
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(ScalarFormatter())
    ax.set_title(title + "  (hollow = unstable)", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    handles, labels = ax.get_legend_handles_labels()
    if len(groups) > 1:
        from matplotlib.lines import Line2D

        for g in groups:
            handles.append(Line2D([], [], color=colors[g], lw=4))
            labels.append(g)
    if handles:
        ax.legend(handles, labels, fontsize="small", loc="best")
    save_figure(fig, path, dpi=110)
    return Figure(path, f"Latency vs cost, one point per configuration: {title}")


def timelines(outcomes: Sequence[Outcome], path: Path, title: str, caption: str = "") -> Figure:
    """Every outcome's batch latency (top) and processing time / interval (bottom) over
    stream time, in one figure (the papers' Fig. 16/17 shape, side by side)."""
    from adabatch.runs.compare import plot_comparison

    plot_comparison({o.name: o.records for o in outcomes}, path, title)
    return Figure(path, caption or title)


def queue_timelines(
    outcomes: Sequence[Outcome],
    path: Path,
    title: str,
    *,
    shade: Sequence[tuple[float, float, str]] = (),
    caption: str = "",
) -> Figure:
    """Interval, processing time and queue delay of each outcome over stream time, one
    panel per outcome; ``shade`` marks spans ``(start_s, end_s, label)`` (e.g. a
    background load or a key-count phase)."""
    n = len(outcomes)
    fig = MplFigure(figsize=(10, 2.4 * n + 0.8), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0]
    for ax, o in zip(axes, outcomes, strict=True):
        t = [r.cut_at for r in o.records]
        ax.plot(t, [r.interval_s for r in o.records], label="interval x", lw=1.2)
        ax.plot(t, [r.processing_s for r in o.records], label="processing p", lw=1.0)
        ax.plot(t, [r.queue_delay_s for r in o.records], label="queue delay q", lw=1.0)
        for start, end, label in shade:
            ax.axvspan(start, end, color="grey", alpha=0.15, label=label)
        stable = "stable" if o.stable else "UNSTABLE"
        ax.set_title(f"{o.name} ({stable})", fontsize=9)
        ax.set_ylabel("s")
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    uniq = dict(zip(labels, handles, strict=True))
    axes[0].legend(uniq.values(), uniq.keys(), fontsize="small", loc="upper left")
    axes[-1].set_xlabel("stream time (s)")
    fig.suptitle(title, fontsize=10)
    save_figure(fig, path, dpi=110)
    return Figure(path, caption or title)
