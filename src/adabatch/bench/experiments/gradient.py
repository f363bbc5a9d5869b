"""Experiment 3, ``gradient`` (fixed-point paper §3.2.2 and §5.3, Fig. 18).

The gradient controller estimates ``dp/dx`` from the last two batches and steps the
interval down whenever the slope looks steep, else one 100 ms step towards ``p = rho x``.
The paper shows it destabilising under a sinusoidal rate after a spike makes the gradient
estimate huge. Workload as in Fig. 18: Reduce (each key committed in its own transaction,
over 100,000 keys) under a sine rate, with fixed-point on the same stream.

The headline is the paper's claim in the form each host shows it: the gradient controller
does not control the interval as fixed-point does. On a quiet local[2] it never settles:
its fixed step makes it a bang-bang stepper around the condition line (a sawtooth between
0.2 and 0.7 s), so its interval varies far more than fixed-point's (CV 0.38 vs 0.15 on
Spark; at least 1.36x in 20 of 20 simulated seeds at noise sigma 0.05-0.3), while the
processing times of consecutive batches differ by less than 0.1 s, the slope estimate
exceeds the threshold on about 1% of batches, and its p95 came out level with
fixed-point's (1.01 vs 1.04 s). On a slow, noisy host it ends *worse* instead, as in Fig.
18: both attempts of one CI run's quick version had it unstable with p95 12.8 and 24.4 s
against fixed-point's stable 3.2 and 2.1 s, while fixed-point, following the sine over a
wider range there, had the larger interval CV (0.48 and 0.33 against 0.27 and 0.20). A
third attempt on that host showed neither half (CV 0.28 vs 0.43, p95 not higher); the
quick test's one rerun absorbs such a run. In simulation its p95 is 5-15% higher at sigma
0.05-0.15 and twice as high at 0.3. Each half is reported as its own verdict; the
headline holds when either does. The gradient controller starts where fixed-point settles
on this stream, so what follows is the controller's doing, not a slow climb from its
minimum. Spark's default trigger and a 1 s ``processingTime`` trigger run alongside (full
version).
"""

from __future__ import annotations

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
)

PROFILE = "sine:200:1200:20s"
KEYS = 100_000
FULL_DURATION_S, QUICK_DURATION_S = 120.0, 60.0
FULL_SKIP_S, QUICK_SKIP_S = 10.0, 8.0
# Where fixed-point settles on this stream on a quiet local[2] (0.26 s + 0.22 ms per key:
# 0.5 s at the mean rate, 0.65 s at the peak), so the gradient controller does not start
# at its 0.1 s minimum, which it would leave only 0.1 s per completed batch.
START_S = 0.6
# the headline: gradient's interval CV over fixed-point's (>= 1.36 in 20 of 20 simulated
# seeds at noise sigma 0.05-0.3; 2.5 on Spark)
SETTLE_RATIO = 1.3


def steep_fraction(outcome: Outcome) -> float:
    """Fraction of the gradient controller's batches that took the "steep" branch."""
    branches = [r.controller_state.get("branch") for r in outcome.records]
    known = [b for b in branches if b is not None]
    return sum(b == "steep" for b in known) / len(known) if known else float("nan")


def _verdicts(grad: Outcome, fp: Outcome, steep: float) -> tuple[Verdict, ...]:
    """The headline (never settles or ends worse), its two halves, and the steep share."""
    worse = (not grad.stable and fp.stable) or (grad.get("p95_latency_s") > fp.get("p95_latency_s"))
    cv_ratio = grad.get("cv_interval") / fp.get("cv_interval")
    settles_not = cv_ratio >= SETTLE_RATIO
    cv = (
        f"interval CV {grad.get('cv_interval'):.2f} vs {fp.get('cv_interval'):.2f} "
        f"({cv_ratio:.1f}x)"
    )
    return (
        Verdict(
            "the gradient controller does not control the interval as fixed-point does: "
            f"it never settles (interval CV at least {SETTLE_RATIO:g}x fixed-point's) "
            "or it ends worse (unstable, or a higher p95 latency)",
            settles_not or worse,
            f"{cv}; {'ends worse' if worse else 'not worse'}",
            headline=True,
        ),
        Verdict(
            "the gradient controller does not settle: its interval varies at least "
            f"{SETTLE_RATIO:g}x as much as fixed-point's (coefficient of variation)",
            settles_not,
            cv,
        ),
        Verdict(
            "the gradient controller does worse than fixed-point on real Spark "
            "(unstable, or a higher p95 latency: the paper's Fig. 18)",
            worse,
            f"gradient: {'stable' if grad.stable else 'UNSTABLE'}, p95 "
            f"{grad.get('p95_latency_s'):.2f} s, max queue "
            f"{grad.get('max_queue_delay_s'):.2f} s; fixed-point: "
            f"{'stable' if fp.stable else 'UNSTABLE'}, p95 {fp.get('p95_latency_s'):.2f} s, "
            f"max queue {fp.get('max_queue_delay_s'):.2f} s",
        ),
        Verdict(
            "noise makes the slope look steep on a sizeable share of batches (> 20%)",
            steep > 0.2,
            f"steep branch on {steep:.0%} of the gradient controller's batches",
        ),
    )


class Gradient(Experiment):
    name = "gradient"
    title = "The gradient controller on real Spark noise"
    paper = "fixed-point paper Fig. 18 (gradient-based control is unstable)"
    description = (
        f"Reduce over {KEYS} keys with per-key commits at {PROFILE} records/s: the "
        "gradient controller (§3.2.2, defaults: step "
        f"0.1 s, threshold 1; started at {START_S:g} s, near where fixed-point settles) next "
        "to fixed-point, Spark's default trigger and a 1 s processingTime trigger."
    )

    def configs(self, settings: Settings) -> list[Config]:
        quick = settings.quick
        common = {
            "workload": "reduce",
            "keys": KEYS,
            "per_key_commit": True,
            "profile": PROFILE,
            "duration_s": QUICK_DURATION_S if quick else FULL_DURATION_S,
            "skip_s": QUICK_SKIP_S if quick else FULL_SKIP_S,
        }
        return [
            Config(
                "gradient", controller="gradient", params={"initial_interval": START_S}, **common
            ),
            Config("fixed-point", controller="fixed-point", **common),
            # --quick keeps to the headline's two (long) runs
            *([] if quick else spark_baselines(triggers=(1.0,), **common)),
        ]

    def analyze(self, ctx: Context, outcomes: Sequence[Outcome]) -> Analysis:
        grad, fp = by_name(outcomes, "gradient"), by_name(outcomes, "fixed-point")
        steep = steep_fraction(grad)
        verdicts = _verdicts(grad, fp, steep)
        settles_not, worse = verdicts[1].holds, verdicts[2].holds
        return Analysis(
            tables=(
                report.standard_table(
                    outcomes,
                    extra=(
                        ("interval CV", lambda o, r: report.fmt(o.get("cv_interval"), 2)),
                        ("max queue (s)", lambda o, r: report.fmt(o.get("max_queue_delay_s"), 2)),
                    ),
                ),
            ),
            figures=(
                figures.queue_timelines(
                    [grad, fp],
                    ctx.path("timeline.png"),
                    f"Reduce at {PROFILE}: gradient (top) vs fixed-point (bottom)",
                    caption="Interval, processing time and queue delay: the gradient "
                    "controller (Fig. 18) and fixed-point on the same stream",
                ),
                figures.latency_vs_cost(
                    outcomes, ctx.path("latency-vs-cost.png"), f"Reduce, {PROFILE}"
                ),
            ),
            shows=(
                f"The gradient controller took the steep branch on {steep:.0%} of its "
                f"batches; its interval CV is {grad.get('cv_interval'):.2f} (fixed-point "
                f"{fp.get('cv_interval'):.2f}) and its p95 batch latency "
                f"{grad.get('p95_latency_s'):.2f} s (fixed-point {fp.get('p95_latency_s'):.2f} s)."
            ),
            paper=(
                "The paper's Fig. 18 shows the gradient controller's interval collapsing and "
                "its latency growing under noise, after a spike makes the slope estimate "
                "huge. "
                + (
                    "That direction is reproduced here: it ended worse than fixed-point."
                    if worse
                    else "Here it did not collapse: the slope looked steep on only "
                    f"{steep:.0%} of batches, because consecutive processing times on this "
                    "machine differ by less than the threshold times the 100 ms step; it "
                    "stepped up and down around the condition line instead and stayed as good "
                    "as fixed-point on latency. "
                    + (
                        "It still never settled, which is the other half of the paper's "
                        "argument against a fixed step."
                        if settles_not
                        else "Nor did it vary more than fixed-point: neither half of the "
                        "paper's argument showed in this run."
                    )
                )
            ),
            verdicts=verdicts,
        )


EXPERIMENT = Gradient()
