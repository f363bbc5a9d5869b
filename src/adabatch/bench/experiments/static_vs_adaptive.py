"""Experiment 1, ``static-vs-adaptive`` (fixed-point paper §5.2, Fig. 14/15).

Filter, Reduce, Join and Window, each at a constant and at a sine rate: a sweep of static
intervals next to the adaptive controllers (``fixed-point``, ``isotonic``, ``pid``,
``adcom``) and what a Spark user runs today (Spark's default trigger and a fixed
``processingTime`` trigger), all on the same source, data and seed. Per workload and rate
shape: mean and p95 batch latency, stability, the ratio to the best static interval in
hindsight (the oracle) and to ``spark-default``, and the cost (CPU s per million records,
busy fraction).

Rates. Measured on local[2] with nothing else running (PySpark 4.3, static
runs of 16 s): every workload costs ~0.3 s per micro-batch whatever its size up to ~100k
records, so the rates are high enough that the per-record work matters. Filter at
250,000/s: p = 0.51 / 0.73 / 1.06 s at x = 0.5 / 1 / 2 s. Reduce commits every key in its
own transaction (the paper's Reduce, "about 1 ms" per key; 0.22-0.29 ms here) over 100,000
keys: p = ~0.32 / 0.5 s at x = 0.25 / 1 s of 1,000/s. Join over one key (output grows with
the square of the batch) at 14,000/s: p = 0.47 / 0.47 / 3.85 s at x = 0.25 / 0.5 / 4 s.
Window at 400,000/s: p = 0.52 / 0.89 s at x = 0.5 / 2 s.

The rates below are about two thirds of those, so that at the sine's peak (1.5 times the
mean) the per-record load stays near 0.4 of each second and fixed-point's ``p = 0.7 x``
point exists even when the shared machine is a third slower (at the measured rates it once
did not, and every run of the group diverged). 2 s is stable in every group.
Whether 0.25 s diverges depends on the machine's speed that hour: the per-batch overhead
was ~0.3 s in the measurements above and 0.21-0.22 s in a later full run, when 0.25 s held
for Filter and Reduce and diverged for Join and Window. So the headline is judged on the
groups where the smallest static interval did diverge, and the ``--quick`` version, one
group, sweeps 0.1 s: below any per-batch overhead measured here, it can only diverge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from adabatch.bench import figures, report
from adabatch.bench.model import (
    Analysis,
    Config,
    Context,
    Experiment,
    Outcome,
    Settings,
    Verdict,
    spark_baselines,
    static_sweep,
)
from adabatch.bench.ratios import oracle, ratios, spark_default

ADAPTIVE = ("fixed-point", "isotonic", "pid", "adcom")


@dataclass(frozen=True)
class Case:
    """One workload at one rate shape: a group of the experiment."""

    workload: str
    shape: str  # "constant" or "sine"
    profile: str
    keys: int = 1000
    per_key_commit: bool = False

    @property
    def group(self) -> str:
        return f"{self.workload} / {self.shape}"

    @property
    def prefix(self) -> str:
        return f"{self.workload}-{self.shape}-"


# mean rate per workload (records/s) and its keys; sines swing +-50% in 20 s.
RATES = {"filter": 180000, "reduce": 1000, "join": 9000, "window": 300000}
KEYS = {"filter": 1000, "reduce": 100000, "join": 1, "window": 1000}
PER_KEY_COMMIT = frozenset({"reduce"})
SINE_PERIOD_S = 20
STATIC_INTERVALS = (0.25, 0.5, 1.0, 2.0)
TRIGGERS = (1.0,)
FULL_DURATION_S = 40.0
FULL_WARMUP_S = 10.0
# quick: Reduce at its constant rate; an interval below the per-batch overhead (0.2-0.3 s
# on local[2], depending on the hour) can only diverge, and fixed-point must find a stable
# one within the run.
QUICK_STATIC = (0.1,)
QUICK_DURATION_S = 25.0
QUICK_WARMUP_S = 10.0


def cases(quick: bool) -> list[Case]:
    """The experiment's workload x rate-shape groups."""
    out = []
    for workload, rate in RATES.items():
        keys, pk = KEYS[workload], workload in PER_KEY_COMMIT
        low, high = round(rate * 0.5), round(rate * 1.5)
        out.append(Case(workload, "constant", f"constant:{rate}", keys, pk))
        out.append(Case(workload, "sine", f"sine:{low}:{high}:{SINE_PERIOD_S}s", keys, pk))
    if quick:
        return [c for c in out if c.workload == "reduce" and c.shape == "constant"]
    return out


class StaticVsAdaptive(Experiment):
    name = "static-vs-adaptive"
    title = "Static intervals vs adaptive controllers vs Spark's triggers"
    paper = "fixed-point paper Fig. 14 (constant rate) and Fig. 15 (sine rate)"
    description = (
        "Each workload runs at a constant and at a sine rate (the sine swings ±50% around "
        f"the mean in {SINE_PERIOD_S} s). Per group: static intervals "
        f"{', '.join(f'{x:g} s' for x in STATIC_INTERVALS)} (the papers' baseline; the best "
        "stable one is the oracle), the adaptive controllers "
        f"{', '.join(ADAPTIVE)} with their papers' defaults, Spark's default trigger and a "
        "1 s processingTime trigger. Rates: "
        + ", ".join(f"{w} {r}/s" for w, r in RATES.items())
        + f" (reduce over {KEYS['reduce']} keys, each committed in its own transaction; join "
        "over one key, so its output grows with the square of the batch)."
    )

    def configs(self, settings: Settings) -> list[Config]:
        quick = settings.quick
        duration = QUICK_DURATION_S if quick else FULL_DURATION_S
        skip = QUICK_WARMUP_S if quick else FULL_WARMUP_S
        out: list[Config] = []
        for case in cases(quick):
            common = {
                "workload": case.workload,
                "profile": case.profile,
                "duration_s": duration,
                "group": case.group,
                "keys": case.keys,
                "per_key_commit": case.per_key_commit,
                "skip_s": skip,
                "prefix": case.prefix,
                "labels": {"workload": case.workload, "rate": case.shape},
            }
            out += static_sweep(QUICK_STATIC if quick else STATIC_INTERVALS, **common)
            names = ("fixed-point",) if quick else ADAPTIVE
            for controller in names:
                out.append(
                    Config(
                        f"{case.prefix}{controller}",
                        controller=controller,
                        **{k: v for k, v in common.items() if k != "prefix"},
                    )
                )
            out += spark_baselines(triggers=() if quick else TRIGGERS, **common)
        return out

    def analyze(self, ctx: Context, outcomes: Sequence[Outcome]) -> Analysis:
        groups = list(dict.fromkeys(o.config.group for o in outcomes))
        tables = [winners_table(outcomes, groups)]
        tables += report.group_tables(outcomes)
        figs = []
        for workload in dict.fromkeys(o.config.workload for o in outcomes):
            mine = [o for o in outcomes if o.config.workload == workload]
            figs.append(
                figures.latency_vs_cost(
                    mine, ctx.path(f"latency-vs-cost-{workload}.png"), f"{workload}"
                )
            )
        first = groups[-1] if len(groups) > 1 else groups[0]
        shown = _timeline_picks(outcomes, first)
        figs.append(
            figures.timelines(
                shown,
                ctx.path("timelines.png"),
                f"{first}: fixed-point, the oracle and spark-default",
            )
        )
        verdicts = verdicts_for(outcomes, groups)
        return Analysis(
            tables=tuple(tables),
            figures=tuple(figs),
            shows=shows_text(outcomes, groups),
            paper=paper_text(outcomes, groups),
            verdicts=tuple(verdicts),
        )


def _best_adaptive(outcomes: Sequence[Outcome], group: str) -> Outcome | None:
    pool = [
        o for o in outcomes if o.config.group == group and o.config.role == "adaptive" and o.stable
    ]
    return min(pool, key=lambda o: o.get("mean_latency_s"), default=None)


def _named(outcomes: Sequence[Outcome], group: str, controller: str) -> Outcome | None:
    return next(
        (o for o in outcomes if o.config.group == group and o.config.controller == controller),
        None,
    )


def _smallest_static(outcomes: Sequence[Outcome], group: str) -> Outcome | None:
    pool = [o for o in outcomes if o.config.group == group and o.config.role == "static"]
    return min(pool, key=lambda o: float(o.config.params["interval"]), default=None)


def winners_table(outcomes: Sequence[Outcome], groups: Sequence[str]) -> report.Table:
    """Per workload and rate shape: fixed-point vs Spark's default trigger on latency, cost
    and stability, and the best adaptive controller's latency ratio to the oracle."""
    rows = []
    for g in groups:
        fp, sd = _named(outcomes, g, "fixed-point"), spark_default(outcomes, g)
        best, orc = _best_adaptive(outcomes, g), oracle(outcomes, g)
        stab = ", ".join(
            f"{o.config.controller}: {'stable' if o.stable else 'UNSTABLE'}"
            for o in (fp, sd)
            if o is not None
        )
        ratio = "-"
        if best is not None and orc is not None:
            ratio = f"{best.get('mean_latency_s') / orc.get('mean_latency_s'):.2f}x"
        rows.append(
            (
                g,
                report.winner(fp, sd, "mean_latency_s"),
                report.winner(fp, sd, "cpu_s_per_million_records"),
                stab,
                best.config.controller if best is not None else "none stable",
                ratio,
                orc.name if orc is not None else "none stable",
            )
        )
    return report.Table(
        "Who wins, fixed-point vs Spark's default trigger (lower is better; only stable "
        "runs can win)",
        (
            "workload / rate",
            "latency",
            "cost (CPU/M rec)",
            "stability",
            "best adaptive",
            "best adaptive vs oracle",
            "oracle",
        ),
        tuple(rows),
    )


def verdicts_for(outcomes: Sequence[Outcome], groups: Sequence[str]) -> list[Verdict]:
    """The headline (too-small static diverges, fixed-point stable) and the comparisons."""
    out = []
    diverge, fp_stable, near = [], [], []
    for g in groups:
        small, fp = _smallest_static(outcomes, g), _named(outcomes, g, "fixed-point")
        if small is not None and fp is not None and not small.stable:
            diverge.append((g, fp.stable))
        if fp is not None:
            fp_stable.append((g, fp.stable))
            orc = oracle(outcomes, g)
            if orc is not None and fp.stable:
                near.append((g, fp.get("mean_latency_s") / orc.get("mean_latency_s")))
    held = [g for g, ok in diverge if ok]
    out.append(
        Verdict(
            "fixed-point stays stable where the smallest static interval diverges",
            # a run where no static interval diverged shows nothing: the claim fails
            bool(diverge) and len(held) == len(diverge),
            f"the smallest static interval diverged in {len(diverge)} of {len(groups)} "
            f"workload/rate groups ({', '.join(g for g, _ in diverge) or 'none'}); "
            f"fixed-point was stable in {len(held)} of them",
            headline=True,
        )
    )
    stable_groups = [g for g, ok in fp_stable if ok]
    out.append(
        Verdict(
            "fixed-point is stable in every workload/rate group",
            bool(fp_stable) and len(stable_groups) == len(fp_stable),
            f"stable in {len(stable_groups)} of {len(fp_stable)}",
        )
    )
    if near:
        within = [g for g, r in near if r <= 1.5]
        out.append(
            Verdict(
                "fixed-point's mean latency is within 1.5x of the oracle",
                len(within) == len(near),
                "ratios: " + ", ".join(f"{g} {r:.2f}x" for g, r in near),
            )
        )
    lat, cost = [], []
    for g in groups:
        fp, sd = _named(outcomes, g, "fixed-point"), spark_default(outcomes, g)
        if fp is not None and sd is not None and fp.stable and sd.stable:
            r = ratios(fp, outcomes)
            lat.append(r["latency_to_default"])
            cost.append(r["cpu_to_default"])
    if lat:
        out.append(
            Verdict(
                "fixed-point has lower mean batch latency than Spark's default trigger",
                all(r < 1 for r in lat),
                "fixed-point / spark-default latency: " + ", ".join(f"{r:.2f}x" for r in lat),
            )
        )
        out.append(
            Verdict(
                "fixed-point costs less CPU per record than Spark's default trigger",
                all(r < 1 for r in cost),  # NaN (no CPU figure) never counts as cheaper
                "fixed-point / spark-default CPU per record: "
                + ", ".join(f"{r:.2f}x" for r in cost),
            )
        )
    return out


def _timeline_picks(outcomes: Sequence[Outcome], group: str) -> list[Outcome]:
    picks = [_named(outcomes, group, "fixed-point"), oracle(outcomes, group)]
    picks.append(spark_default(outcomes, group))
    seen, out = set(), []
    for o in picks:
        if o is not None and o.name not in seen:
            seen.add(o.name)
            out.append(o)
    return out


def _cpu_text(o: Outcome) -> str:
    cost = report.fmt_cost(o.summary, "cpu_s_per_million_records", 0)
    return f"CPU {cost}" if cost == report.NOT_MEASURED else f"{cost} CPU s/M rec"


def shows_text(outcomes: Sequence[Outcome], groups: Sequence[str]) -> str:
    parts = []
    for g in groups:
        fp, sd, orc = (
            _named(outcomes, g, "fixed-point"),
            spark_default(outcomes, g),
            oracle(outcomes, g),
        )
        bits = []
        if orc is not None:
            bits.append(f"oracle {orc.name} {orc.get('mean_latency_s'):.2f} s")
        for o in (fp, sd):
            if o is not None:
                state = "" if o.stable else " UNSTABLE"
                bits.append(
                    f"{o.config.controller} {o.get('mean_latency_s'):.2f} s{state} at "
                    f"{_cpu_text(o)}, busy "
                    f"{o.get('busy_fraction'):.2f}"
                )
        parts.append(f"{g}: " + "; ".join(bits) + ".")
    return " ".join(parts)


def paper_text(outcomes: Sequence[Outcome], groups: Sequence[str]) -> str:
    near = []
    for g in groups:
        fp, orc = _named(outcomes, g, "fixed-point"), oracle(outcomes, g)
        if fp is not None and orc is not None and fp.stable:
            near.append(fp.get("mean_latency_s") / orc.get("mean_latency_s"))
    text = (
        "The paper reports fixed-point within a small factor of the best static interval on "
        "every workload, at constant and varying rates (Fig. 14/15). "
    )
    if near:
        worst = max(near)
        agree = "agrees" if worst <= 1.5 else "disagrees"
        text += (
            f"Here the ratio to the oracle ranges {min(near):.2f}x-{worst:.2f}x over the "
            f"{len(near)} groups where fixed-point was stable, so it {agree} "
            "(threshold 1.5x). "
        )
    else:
        text += "Here no group had both a stable fixed-point run and a stable static one. "
    text += (
        "The oracle is chosen in hindsight from a coarse sweep, and its ratio uses batch "
        "latency x+q+p: a controller with slack (ρ = 0.7) pays for its margin in interval."
    )
    return text


EXPERIMENT = StaticVsAdaptive()
