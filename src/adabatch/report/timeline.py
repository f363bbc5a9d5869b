"""The run timeline: the fixed-point paper's Fig. 16/17 for simulated and real Spark runs.

Interval, processing time, queue delay and batch latency (``x + q + p``) per batch over
stream time, the ingestion rate on a secondary axis, and the blocks per batch in a second
panel when they vary (DyBBS). It takes only :class:`adabatch.metrics.BatchRecord`, so the
simulator and the Spark data source share it. Drawn with matplotlib's Agg canvas (no
pyplot, no display, no global state).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from adabatch.metrics import BatchRecord

_SERIES = (
    ("interval_s", "batch interval", "tab:blue", "-"),
    ("processing_s", "processing time", "tab:orange", "-"),
    ("queue_delay_s", "queue delay", "tab:red", "--"),
    ("latency_s", "batch latency x+q+p", "black", "-"),
)


def plot_timeline(records: Sequence[BatchRecord], path: str | Path, title: str) -> Path:
    """Draw the timeline of ``records`` (one point per batch at its cut time) to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    timeline_figure(records, title).savefig(path)
    return path


def timeline_figure(records: Sequence[BatchRecord], title: str) -> Figure:
    """The timeline of ``records`` as a figure (see :func:`plot_timeline`)."""
    records = sorted(records, key=lambda r: r.cut_at)
    blocks_vary = len({r.blocks for r in records}) > 1
    fig = Figure(figsize=(10, 6.5 if blocks_vary else 5), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    if blocks_vary:
        ax, ax_blocks = fig.subplots(2, 1, sharex=True, height_ratios=(3, 1))
    else:
        ax, ax_blocks = fig.subplots(1, 1), None
    fig.suptitle(title)
    if not records:
        ax.text(0.5, 0.5, "no finished batches", ha="center", va="center", transform=ax.transAxes)
        return fig
    t = [r.cut_at for r in records]
    for attr, label, color, style in _SERIES:
        ax.plot(t, [getattr(r, attr) for r in records], style, color=color, lw=1.2, label=label)
    ax.set_ylabel("seconds")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    rate_ax = ax.twinx()
    rate_ax.plot(
        t,
        [r.rate_rps for r in records],
        color="tab:gray",
        lw=0.8,
        alpha=0.6,
        label="ingestion rate",
    )
    rate_ax.set_ylabel("records / s")
    rate_ax.set_ylim(bottom=0)
    lines = ax.get_lines() + rate_ax.get_lines()
    ax.legend(lines, [ln.get_label() for ln in lines], loc="upper left", fontsize=8, ncols=3)
    if ax_blocks is not None:
        ax_blocks.step(t, [r.blocks for r in records], where="post", color="tab:green")
        ax_blocks.set_ylabel("blocks")
        ax_blocks.grid(alpha=0.3)
        ax_blocks.set_xlabel("stream time (s)")
    else:
        ax.set_xlabel("stream time (s)")
    return fig
