"""Experiment 4, ``keys`` (fixed-point paper §5.3, Fig. 19).

Reduce at a constant rate while the number of distinct keys jumps from 500 to 40,000 and
back (the generator's ``keys_profile`` source option). As in the paper, Reduce commits every
key of a batch in its own transaction, so the processing time of a given interval rises
with the keys the batch touches: ``fixed-point`` widens its interval while the keys are
many and narrows it afterwards; a static interval chosen for 500 keys is overloaded at
40,000.

Rate: measured on local[2] (static 1 s at 2,000 records/s), a per-key-commit
batch costs ~0.4 s plus ~0.25-0.3 ms per distinct key: 0.55 s with 500 keys (fixed-point
near 0.8 s) and 0.86 s with 40,000, where nearly every record is a new key (p ~0.4 s +
0.48 x, fixed-point near 1.8 s, and a 0.5 s static interval is overloaded).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from adabatch.bench import figures, report
from adabatch.bench.model import (
    Analysis,
    Config,
    Context,
    Experiment,
    Outcome,
    Settings,
    Verdict,
    by_name,
    spark_baselines,
    static_sweep,
)

PROFILE = "constant:2000"
FEW, MANY = 500, 40000
# (duration, many keys from, many keys until, warm-up skipped), stream seconds
FULL_TIMES = (90.0, 30.0, 60.0, 10.0)
# quick: 20 s of many keys; fixed-point approaches the new level by a factor of about 0.7
# per batch (p's slope over rho), so 13 s left it halfway (0.8 s -> 0.9 s of ~1.8 s)
QUICK_TIMES = (45.0, 12.0, 32.0, 6.0)
# a phase's first seconds are the controller's transition, not the phase (the batch cut
# just before a change still carries the old key count): left out of the phase means
FULL_SETTLE_S, QUICK_SETTLE_S = 8.0, 4.0
STATIC = (0.5, 1.0)  # comfortable for 500 keys; 0.5 s is overloaded at 40,000


def keys_profile(start: float, end: float) -> str:
    """The key-count profile: ``FEW`` keys, ``MANY`` from ``start`` to ``end``, ``FEW``."""
    return f"steps:{FEW}@0,{MANY}@{start:g}s,{FEW}@{end:g}s"


class Keys(Experiment):
    name = "keys"
    title = "The number of keys jumps from 500 to 40,000 and back"
    paper = "fixed-point paper Fig. 19"
    description = (
        f"Reduce at {PROFILE} records/s with {FEW} distinct keys, {MANY} keys from "
        f"{FULL_TIMES[1]:g} s to {FULL_TIMES[2]:g} s of a {FULL_TIMES[0]:g} s run "
        f"({QUICK_TIMES[1]:g}-{QUICK_TIMES[2]:g} s of {QUICK_TIMES[0]:g} s in --quick), then "
        f"{FEW} again, every key committed in its own transaction: fixed-point, static "
        f"{' and '.join(f'{x:g} s' for x in STATIC)} intervals, Spark's default trigger "
        "and a 1 s processingTime trigger (--quick: fixed-point and Spark's default)."
    )

    def _times(self, settings: Settings) -> tuple[float, float, float, float]:
        return QUICK_TIMES if settings.quick else FULL_TIMES

    def configs(self, settings: Settings) -> list[Config]:
        duration, start, end, skip = self._times(settings)
        common = {
            "workload": "reduce",
            "profile": PROFILE,
            "duration_s": duration,
            "skip_s": skip,
            "keys": MANY,
            "per_key_commit": True,
            "source_options": {"keys_profile": keys_profile(start, end)},
        }
        out = [Config("fixed-point", controller="fixed-point", **common)]
        if not settings.quick:
            out += static_sweep(STATIC, **common)
        out += spark_baselines(triggers=() if settings.quick else (1.0,), **common)
        return out

    def analyze(self, ctx: Context, outcomes: Sequence[Outcome]) -> Analysis:
        _, start, end, skip = self._times(ctx.settings)
        settle = QUICK_SETTLE_S if ctx.settings.quick else FULL_SETTLE_S
        ph = [(f"{FEW} keys", 0.0, start), (f"{MANY} keys", start, end)]
        ph.append((f"{FEW} keys again", end, math.inf))
        segs = {o.name: report.phase_means(o, ph, skip, settle) for o in outcomes}
        fp = by_name(outcomes, "fixed-point")
        f = [segs["fixed-point"][name] for name, _, _ in ph]
        # few keys: both phases (the first one's batches also carry the query's start-up)
        few = [x for x in (f[0]["interval_s"], f[2]["interval_s"]) if math.isfinite(x)]
        few_mean = sum(few) / len(few) if few else math.nan
        rises = f[1]["interval_s"] > 1.2 * few_mean
        verdicts = [
            Verdict(
                "fixed-point widens its interval while there are many keys (at least 1.2 "
                "times its mean interval with few keys, before and after)",
                rises,
                f"mean interval {_s(f[0]['interval_s'])} s -> {_s(f[1]['interval_s'])} s -> "
                f"{_s(f[2]['interval_s'])} s",
                headline=True,
            ),
            Verdict(
                "more keys cost more processing time (fixed-point's batches)",
                f[1]["processing_s"] > f[0]["processing_s"],
                f"processing {_s(f[0]['processing_s'])} s -> {_s(f[1]['processing_s'])} s",
            ),
            Verdict(
                "fixed-point narrows its interval again when the keys drop",
                f[2]["interval_s"] < f[1]["interval_s"],
                f"{_s(f[1]['interval_s'])} s -> {_s(f[2]['interval_s'])} s",
            ),
            Verdict(
                "fixed-point stays stable", fp.stable, f"queue slope {fp.get('queue_slope'):.3f}"
            ),
        ]
        shown = [o for o in outcomes if o.config.role != "trigger"]
        return Analysis(
            tables=(
                report.standard_table(outcomes),
                report.phase_table(
                    outcomes, ph, "Per key-count phase (means, transitions left out)", skip, settle
                ),
            ),
            figures=(
                figures.queue_timelines(
                    shown,
                    ctx.path("timeline.png"),
                    f"Reduce at {PROFILE}; {MANY} keys in the shaded span, {FEW} otherwise",
                    shade=[(start, end, f"{MANY} keys")],
                ),
                figures.latency_vs_cost(
                    outcomes, ctx.path("latency-vs-cost.png"), f"Reduce, {PROFILE}, keys vary"
                ),
            ),
            shows=(
                f"fixed-point's mean interval was {_s(f[0]['interval_s'])} s with {FEW} keys, "
                f"{_s(f[1]['interval_s'])} s with {MANY} and {_s(f[2]['interval_s'])} s after; "
                f"its processing time {_s(f[0]['processing_s'])} s, "
                f"{_s(f[1]['processing_s'])} s, {_s(f[2]['processing_s'])} s."
            ),
            paper=(
                "The paper's Fig. 19 shows the interval following the key count up and down. "
                + ("Reproduced here." if rises else "Not reproduced on this run.")
            ),
            verdicts=tuple(verdicts),
        )


def _s(seconds: float) -> str:
    """Seconds for the text: two decimals, ``-`` when a phase had no batch."""
    return report.fmt(seconds, 2)


EXPERIMENT = Keys()
