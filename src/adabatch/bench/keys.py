"""Experiment 4, ``keys`` (fixed-point paper §5.3, Fig. 19).

Reduce at a constant rate while the number of distinct keys jumps from 500 to 40,000 and
back. Reduce's work per batch grows with the distinct keys it aggregates and upserts, so
the processing time of a given interval rises with the key count: ``fixed-point`` widens
its interval while the keys are many and narrows it afterwards; a static interval chosen
for 500 keys is overloaded at 40,000.

It needs the generator's time-varying key count, the source option ``keys_profile`` (a
rate-profile spec read with :func:`adabatch.profiles.parse_profile` whose value at a
record's arrival time is the number of keys in effect, e.g.
``steps:500@0,40000@40s,500@80s``). Without it the experiment stops with an error naming
the option before Spark starts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from adabatch.bench import figures, report
from adabatch.bench.core import (
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
from adabatch.errors import AdabatchError

PROFILE = "constant:20000"
FEW, MANY = 500, 40000
# (duration, many keys from, many keys until, warm-up skipped), stream seconds
FULL_TIMES = (90.0, 30.0, 60.0, 10.0)
QUICK_TIMES = (40.0, 15.0, 28.0, 6.0)


def keys_profile(start: float, end: float) -> str:
    """The key-count profile: ``FEW`` keys, ``MANY`` from ``start`` to ``end``, ``FEW``."""
    return f"steps:{FEW}@0,{MANY}@{start:g}s,{FEW}@{end:g}s"


def generator_has_keys_profile() -> bool:
    """Whether the generator source offers the ``keys_profile`` option."""
    from adabatch.sources.generator import GeneratorSource

    return any(p.name == "keys_profile" for p in GeneratorSource.OPTIONS)


class Keys(Experiment):
    name = "keys"
    title = "The number of keys jumps from 500 to 40,000 and back"
    paper = "fixed-point paper Fig. 19"
    description = (
        f"Reduce at {PROFILE} records/s with {FEW} distinct keys, {MANY} keys from "
        f"{FULL_TIMES[1]:g} s to {FULL_TIMES[2]:g} s of a {FULL_TIMES[0]:g} s run "
        f"({QUICK_TIMES[1]:g}-{QUICK_TIMES[2]:g} s of {QUICK_TIMES[0]:g} s in --quick), then "
        f"{FEW} again: fixed-point, static 1 s and 2 s intervals, Spark's default trigger "
        "and a 1 s processingTime trigger (--quick: fixed-point and Spark's default)."
    )

    def _times(self, settings: Settings) -> tuple[float, float, float, float]:
        return QUICK_TIMES if settings.quick else FULL_TIMES

    def configs(self, settings: Settings) -> list[Config]:
        if not generator_has_keys_profile():
            msg = (
                "experiment 'keys' needs the generator source option 'keys_profile' (the "
                "number of keys over stream time as a profile spec), which "
                "adabatch.sources.generator does not offer yet"
            )
            raise AdabatchError(msg)
        duration, start, end, skip = self._times(settings)
        common = {
            "workload": "reduce",
            "profile": PROFILE,
            "duration_s": duration,
            "skip_s": skip,
            "keys": MANY,
            "source_options": {"keys_profile": keys_profile(start, end)},
        }
        out = [Config("fixed-point", controller="fixed-point", **common)]
        if not settings.quick:
            out += static_sweep((1.0, 2.0), **common)
        out += spark_baselines(triggers=() if settings.quick else (1.0,), **common)
        return out

    def analyze(self, ctx: Context, outcomes: Sequence[Outcome]) -> Analysis:
        _, start, end, skip = self._times(ctx.settings)
        ph = [(f"{FEW} keys", 0.0, start), (f"{MANY} keys", start, end)]
        ph.append((f"{FEW} keys again", end, math.inf))
        segs = {o.name: report.phase_means(o, ph, skip) for o in outcomes}
        fp = by_name(outcomes, "fixed-point")
        f = [segs["fixed-point"][name] for name, _, _ in ph]
        rises = f[1]["interval_s"] > 1.2 * f[0]["interval_s"]
        verdicts = [
            Verdict(
                "fixed-point widens its interval while there are many keys",
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
                report.phase_table(outcomes, ph, "Per key-count phase (means)", skip),
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
