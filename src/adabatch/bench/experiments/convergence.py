"""Experiment 7, ``convergence`` (DyBBS Fig. 8): a rate that steps to a new level and
later returns to it; how long ``fixed-point`` and ``isotonic`` take to converge the first
and the second time.

The rate (Reduce) is ``LOW`` for a warm-up, then ``HIGH`` (first appearance), ``LOW``
again, then ``HIGH`` again (second appearance), each phase ``phase_s`` long. DyBBS keeps
its statistics per discretised rate, so the second appearance should resume where the
first ended; fixed-point iteration only sees its last two batches and has to walk there
again (the paper: FPI 6 s both times, DyBBS 13 s the first time and faster than FPI the
second).

"Converged" (:func:`convergence_time`) is computed from the per-batch metrics: within a
phase, the settled interval is the median interval of all the phase's batches; the
controller has converged at the first batch from which the rolling median of
:data:`WINDOW` batch intervals stays within :data:`TOLERANCE` of the settled interval
(never closer than :data:`MIN_BAND_S`) for :data:`HOLD` batches, or for the rest of the
phase if fewer are left. A phase that settles only in its last few batches did not
converge (reported as ``inf``).

Three choices keep the machine's noise out of the measure. The rolling median keeps one
noisy batch (on Spark, a GC pause or a neighbour's burst) from resetting the clock;
fixed-point's interval ``p / rho`` moves with every batch's noise, so a plain per-batch
band would call it never converged. The band is never narrower than one step of
fixed-point's 100 ms interval grid: at the 0.3 s intervals this host settles on, 20 % is
0.06 s, less than one grid step. And the clock stops when the intervals first settle, at
the level most of the phase's batches have: a host that slows for a while moves the
interval (the controller following the host, not learning the rate), and such a stretch
must neither undo a convergence nor define the level. With "settled for the rest of the
phase", isotonic that had settled within 1 s of the second step read as 11.6 s because a
slow stretch of the host 9 s later (processing 0.59 s instead of 0.35 s) moved its
interval for five batches. With the median of the phase's second half as the level, one
CI run read isotonic at 5.2 s then 12.1 s, and at 8.0 s then 10.9 s on its retry (20 s
quick phases; the runs were not kept): a time in the middle of the phase is what that
level gives when a stretch fills the second half. Seven quick runs here, four of them
with one or both cores busy, did not repeat it (second times 0.1-0.3 s). Across ten quick
runs on Spark (five with a busy loop on one of the two cores) the first measure put
isotonic's second convergence anywhere from 0 s to 15.5 s; the second-half level at
0-0.9 s in all four runs with 20 s phases and in five of six with 12 s phases (5.6 s in
the sixth, where block sizing had moved isotonic to a new block interval near the end of
the first phase, so it met the rate again with three points), hence 20 s quick phases.
A time is the start of a batch, so two times less than a couple of batches apart
(:data:`TIE_S`) are a tie: isotonic settled at once on both appearances in one run (0.0 s
and 0.3 s), which does not say it was slower the second time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from adabatch.bench import figures, report
from adabatch.bench.model import (
    Analysis,
    Config,
    Context,
    Experiment,
    Figure,
    Outcome,
    Settings,
    Verdict,
    by_name,
    spark_baselines,
)
from adabatch.metrics import BatchRecord
from adabatch.outputs import save_figure
from adabatch.runs.simulated import make_scenario, simulate

TOLERANCE = 0.2
MIN_BAND_S = 0.1  # one step of fixed-point's default interval grid
WINDOW = 3
HOLD = 6  # batches the rolling median stays in the band to count as settled
TIE_S = 1.0  # convergence times this close are a tie: about two batches here
LOW, HIGH = 60_000.0, 200_000.0  # records/s; the paper steps 1 -> 3 MB/s
WARMUP_S, PHASE_S = 15.0, 20.0
QUICK_WARMUP_S, QUICK_PHASE_S = 5.0, 20.0
WORKLOAD = "reduce"
CONTROLLERS = ("fixed-point", "isotonic")


def convergence_time(
    records: Sequence[BatchRecord],
    start: float,
    end: float,
    *,
    tolerance: float = TOLERANCE,
    window: int = WINDOW,
    min_band_s: float = MIN_BAND_S,
    hold: int = HOLD,
) -> float:
    """Seconds after ``start`` until the batch intervals of ``[start, end)`` settle (see
    the module docstring); ``inf`` if they do not within the phase, NaN if the phase
    has fewer than ``window`` batches.

    Examples
    --------
    >>> from adabatch.metrics import BatchRecord
    >>> def rec(t, x):
    ...     return BatchRecord(0, x, 2, 1, 0.1, 0.0, t + x, t + x, t + x + 0.1, 0, 0, 0)
    >>> xs = [0.5, 1.0, 2.0, 2.1, 1.9, 2.0, 2.0, 2.0]
    >>> starts = [sum(xs[:i]) for i in range(len(xs))]
    >>> round(convergence_time([rec(t, x) for t, x in zip(starts, xs)], 0.0, 100.0), 6)
    3.5
    """
    seg = [r for r in records if start <= r.cut_at - r.interval_s < end]
    if len(seg) < window:
        return math.nan
    xs = np.array([r.interval_s for r in seg])
    settled = float(np.median(xs))
    rolling = np.array([np.median(xs[max(0, i - window + 1) : i + 1]) for i in range(len(xs))])
    band = max(tolerance * settled, min_band_s)
    inside = np.abs(rolling - settled) <= band + 1e-9
    first = next((i for i in range(len(seg)) if _holds(inside[i:], hold, window)), None)
    if first is None:
        return math.inf
    first_batch = seg[first]
    return float(first_batch.cut_at - first_batch.interval_s - start)


def _holds(inside: np.ndarray, hold: int, window: int) -> bool:
    """Whether the batches from here stay in the band for ``hold`` batches, or for all
    that are left when fewer remain (but at least ``window``)."""
    need = min(hold, len(inside))
    return need >= window and bool(inside[:need].all())


@dataclass(frozen=True)
class Schedule:
    """The step schedule: warm-up at LOW, then HIGH, LOW, HIGH for ``phase_s`` each."""

    low: float
    high: float
    warmup_s: float
    phase_s: float

    @property
    def first(self) -> tuple[float, float]:
        return self.warmup_s, self.warmup_s + self.phase_s

    @property
    def second(self) -> tuple[float, float]:
        start = self.warmup_s + 2 * self.phase_s
        return start, start + self.phase_s

    @property
    def duration_s(self) -> float:
        return self.warmup_s + 3 * self.phase_s

    @property
    def profile(self) -> str:
        w, p = self.warmup_s, self.phase_s
        return (
            f"steps:{self.low:g}@0,{self.high:g}@{w:g}s,{self.low:g}@{w + p:g}s,"
            f"{self.high:g}@{w + 2 * p:g}s"
        )

    def times(self, records: Sequence[BatchRecord]) -> tuple[float, float]:
        """Time to converge at the first and at the second appearance of ``high``."""
        return convergence_time(records, *self.first), convergence_time(records, *self.second)


def schedule(quick: bool) -> Schedule:
    if quick:
        return Schedule(LOW, HIGH, QUICK_WARMUP_S, QUICK_PHASE_S)
    return Schedule(LOW, HIGH, WARMUP_S, PHASE_S)


def _fmt_s(value: float) -> str:
    if math.isnan(value):
        return "-"
    return "not converged" if math.isinf(value) else f"{value:.1f}"


class Convergence(Experiment):
    name = "convergence"
    title = "Convergence after a rate step, first and second time"
    paper = "DyBBS Fig. 8"
    description = (
        f"Reduce under a rate that steps {LOW:g} -> {HIGH:g} -> {LOW:g} -> {HIGH:g} "
        "records/s after a warm-up. Time to converge = from the step until the rolling "
        f"median of {WINDOW} batch intervals first stays for {HOLD} batches within "
        f"{TOLERANCE:.0%} (at least {MIN_BAND_S:g} s, one step of fixed-point's grid) of the "
        "phase's settled interval (median of all its batches); a slow stretch of the host "
        "that moves the interval neither undoes a convergence nor sets the level. The same "
        "schedule is simulated (default cost model, 10 % noise, seeds 0-4) for context."
    )

    def configs(self, settings: Settings) -> list[Config]:
        s = schedule(settings.quick)
        base = dict(workload=WORKLOAD, profile=s.profile, duration_s=s.duration_s, skip_s=0.0)
        out = [Config(c, controller=c, group="step", **base) for c in CONTROLLERS]
        if not settings.quick:
            out += spark_baselines(triggers=(), group="step", **base)
        return out

    def analyze(self, ctx: Context, outcomes: Sequence[Outcome]) -> Analysis:
        s = schedule(ctx.settings.quick)
        times = {o.name: s.times(o.records) for o in outcomes}
        sim = simulated_times(s)
        table = _times_table(outcomes, times, sim)
        iso_first, iso_second = times["isotonic"]
        fp_first, fp_second = times["fixed-point"]
        reused = _le(iso_second, iso_first) and not math.isinf(iso_second)
        evidence = f"isotonic {_fmt_s(iso_first)} s then {_fmt_s(iso_second)} s"
        if not reused:  # what a run on a shared machine needs to be judged afterwards
            iso = by_name(outcomes, "isotonic").records
            evidence += "; " + "; ".join(_intervals(iso, *p) for p in (s.first, s.second))
        verdicts = (
            Verdict(
                "isotonic converges no later the second time the rate appears than the "
                f"first (DyBBS reuses its statistics; times within {TIE_S:g} s are a tie)",
                reused,
                evidence,
                headline=True,
            ),
            Verdict(
                "the second time, isotonic converges no later than fixed-point",
                _le(iso_second, fp_second),
                f"isotonic {_fmt_s(iso_second)} s, fixed-point {_fmt_s(fp_second)} s",
            ),
            Verdict(
                "the first time, fixed-point converges no later than isotonic (DyBBS "
                "learns longer)",
                _le(fp_first, iso_first),
                f"fixed-point {_fmt_s(fp_first)} s, isotonic {_fmt_s(iso_first)} s",
            ),
        )
        fig = plot_fig8([by_name(outcomes, c) for c in CONTROLLERS], s, times, ctx.path("fig8.png"))
        shows = (
            f"Isotonic took {_fmt_s(iso_first)} s to converge the first time the "
            f"{HIGH:g} records/s rate appeared and {_fmt_s(iso_second)} s the second time; "
            f"fixed-point took {_fmt_s(fp_first)} s and {_fmt_s(fp_second)} s."
        )
        agrees = _le(iso_second, iso_first) and _le(iso_second, fp_second)
        paper = (
            "The paper (Fig. 8): FPI converges after ~6 s both times, DyBBS after 13 s the "
            "first time and before FPI the second. "
            + (
                "Our run agrees on the direction."
                if agrees
                else "Our run does not reproduce the full direction; see the verdicts: "
                "on Spark the per-batch noise moves fixed-point's p / rho by 10-30 %, and "
                "short phases leave few batches to judge."
            )
        )
        return Analysis(
            tables=(table, report.standard_table(outcomes, title="Latency and cost")),
            figures=(
                fig,
                figures.latency_vs_cost(
                    outcomes, ctx.path("latency-vs-cost.png"), "convergence (reduce, steps)"
                ),
            ),
            shows=shows,
            paper=paper,
            verdicts=verdicts,
        )


def _times_table(
    outcomes: Sequence[Outcome],
    times: dict[str, tuple[float, float]],
    sim: dict[str, tuple[float, float]],
) -> report.Table:
    """Each run's times to converge after the two steps up, next to the simulator's."""
    rows = []
    for o in outcomes:
        first, second = times[o.name]
        sim_first, sim_second = sim.get(o.config.controller, (math.nan, math.nan))
        rows.append(
            (
                o.name,
                _fmt_s(first),
                _fmt_s(second),
                _fmt_s(sim_first),
                _fmt_s(sim_second),
                report.fmt(o.get("mean_latency_s"), 2),
                report.fmt(o.stable),
                report.fmt_cost(o.summary, "cpu_s_per_million_records"),
                report.fmt(o.get("busy_fraction"), 2),
            )
        )
    return report.Table(
        "Time to converge after the step to the high rate (s)",
        (
            "config",
            "1st time (Spark)",
            "2nd time (Spark)",
            "1st (sim, median)",
            "2nd (sim, median)",
            "latency x+q+p (s)",
            "stable",
            "CPU s/M rec",
            "busy",
        ),
        tuple(rows),
        "Spark-default has no interval of its own to converge: its intervals are the "
        "previous batch's processing time, shown for comparison.",
    )


def _intervals(records: Sequence[BatchRecord], start: float, end: float) -> str:
    """The phase's batches as ``interval/processing`` (s), block interval changes marked."""
    out, block = [], None
    for r in records:
        if start <= r.cut_at - r.interval_s < end:
            now = r.controller_state.get("block_interval")
            mark = f" [block {now:g} s]" if now != block and now is not None else ""
            block = now
            out.append(f"{r.interval_s:.2f}/{r.processing_s:.2f}{mark}")
    return f"intervals/processing from {start:g} s: " + " ".join(out)


def _le(a: float, b: float) -> bool:
    """``a <= b`` up to :data:`TIE_S`, where a NaN on either side is not evidence."""
    return not (math.isnan(a) or math.isnan(b)) and a <= b + TIE_S


def simulated_times(s: Schedule, seeds: Sequence[int] = range(5)) -> dict[str, tuple]:
    """Median convergence times of each controller in the simulator on the same schedule."""
    out = {}
    for c in CONTROLLERS:
        runs = []
        for seed in seeds:
            sc = make_scenario(WORKLOAD, s.profile, s.duration_s, seed=seed)
            runs.append(s.times(simulate(sc, c).records))
        out[c] = tuple(float(np.median([r[i] for r in runs])) for i in range(2))
    return out


def plot_fig8(
    outcomes: Sequence[Outcome], s: Schedule, times: dict[str, tuple], path: Path
) -> Figure:
    """The paper's Fig. 8: rate and batch interval over time, convergence marked."""
    fig = MplFigure(figsize=(10, 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax_rate = ax.twinx()
    t = np.linspace(0, s.duration_s, 400)
    from adabatch.profiles import parse_profile

    prof = parse_profile(s.profile)
    ax_rate.plot(t, [prof.rate(v) for v in t], color="grey", lw=1, ls="--", label="rate")
    ax_rate.set_ylabel("records/s")
    for i, o in enumerate(outcomes):
        color = f"C{i}"
        ax.step(
            [r.cut_at - r.interval_s for r in o.records],
            [r.interval_s for r in o.records],
            where="post",
            color=color,
            label=o.name,
        )
        for (start, _), dt in zip((s.first, s.second), times[o.name], strict=True):
            if math.isfinite(dt):
                ax.axvline(start + dt, color=color, lw=0.9, ls=":")
    for start, end in (s.first, s.second):
        ax.axvspan(start, end, color="orange", alpha=0.08)
    ax.set_xlabel("stream time (s)")
    ax.set_ylabel("batch interval (s)")
    ax.legend(loc="upper left", fontsize="small")
    ax.set_title(
        "Batch interval after a rate step (dotted: converged; shaded: the high rate)",
        fontsize=10,
    )
    save_figure(fig, path, dpi=110)
    return Figure(path, "DyBBS Fig. 8 on Spark: batch interval and rate, convergence marked")


EXPERIMENT = Convergence()
