"""Tables, CSV, the Markdown section of an experiment, and ``docs/results.md``.

Every table reports cost next to latency (CPU s per million records, busy fraction) and
ratios measured within the experiment's run (:func:`adabatch.bench.ratios.ratios`).
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adabatch.bench.model import Outcome
from adabatch.bench.ratios import oracle, ratios, spark_default
from adabatch.errors import check_name
from adabatch.outputs import mark_dir, remove_tree, write_atomic
from adabatch.report import markdown
from adabatch.report.text import NOT_MEASURED, fmt, fmt_cost, fmt_ratio, not_measured
from adabatch.urls import redact_url

if TYPE_CHECKING:
    from adabatch.bench.model import ExperimentResult

# Summary fields of summaries.csv, after the config's own fields and before the ratios.
CSV_FIELDS = (
    "stable",
    "batches",
    "records",
    "mean_interval_s",
    "cv_interval",
    "mean_blocks",
    "mean_processing_s",
    "mean_queue_delay_s",
    "max_queue_delay_s",
    "mean_latency_s",
    "p95_latency_s",
    "mean_record_latency_s",
    "p95_record_latency_s",
    "throughput_rps",
    "overloaded_fraction",
    "busy_fraction",
    "spark_busy_fraction",
    "cpu_s",
    "cpu_s_per_million_records",
    "cpu_cores_used",
    "final_queue_len",
    "queue_slope",
    "wall_s",
    "lost_reports",
)
RATIO_FIELDS = ("latency_to_oracle", "cpu_to_oracle", "latency_to_default", "cpu_to_default")


@dataclass(frozen=True)
class Table:
    """A titled table of formatted cells (rendered as Markdown)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""

    def markdown(self) -> str:
        return markdown.table(self.columns, self.rows, title=self.title, note=self.note)


def describe_config(outcome: Outcome) -> str:
    """Short description of what ran: controller and its parameters, or the trigger."""
    c = outcome.config
    if c.role == "spark-default":
        return "Spark default trigger"
    if c.role == "trigger":
        return f"Spark trigger {c.trigger}"
    params = ", ".join(f"{k}={v}" for k, v in c.params.items())
    return f"{c.controller}" + (f" ({params})" if params else "")


# (header, function of (outcome, its ratios)) — the standard columns of every table.
Column = tuple[str, Callable[[Outcome, Mapping[str, float]], str]]
STANDARD_COLUMNS: tuple[Column, ...] = (
    ("config", lambda o, r: o.name),
    ("what", lambda o, r: describe_config(o)),
    ("stable", lambda o, r: fmt(o.stable)),
    ("interval (s)", lambda o, r: fmt(o.get("mean_interval_s"), 2)),
    ("latency x+q+p (s)", lambda o, r: fmt(o.get("mean_latency_s"), 2)),
    ("p95 latency (s)", lambda o, r: fmt(o.get("p95_latency_s"), 2)),
    ("record latency (s)", lambda o, r: fmt(o.get("mean_record_latency_s"), 2)),
    ("vs oracle", lambda o, r: fmt_ratio(r["latency_to_oracle"])),
    ("vs spark-default", lambda o, r: fmt_ratio(r["latency_to_default"])),
    ("busy", lambda o, r: fmt(o.get("busy_fraction"), 2)),
    ("CPU s/M rec", lambda o, r: fmt_cost(o.summary, "cpu_s_per_million_records")),
    ("CPU vs spark-default", lambda o, r: fmt_ratio(r["cpu_to_default"])),
)


def standard_table(
    outcomes: Sequence[Outcome],
    *,
    group: str | None = None,
    title: str | None = None,
    columns: Sequence[Column] = STANDARD_COLUMNS,
    extra: Sequence[Column] = (),
    everyone: Sequence[Outcome] | None = None,
) -> Table:
    """The experiment table of ``outcomes`` (those of ``group`` if given): latency, p95,
    stability, ratios to the oracle and to spark-default, busy fraction and CPU cost.
    ``everyone`` (default ``outcomes``) is the pool the ratios' references come from."""
    pool = list(everyone if everyone is not None else outcomes)
    shown = [o for o in outcomes if group is None or o.config.group == group]
    cols = [*columns[:3], *extra, *columns[3:]]
    rows = tuple(tuple(f(o, ratios(o, pool)) for _, f in cols) for o in shown)
    best = oracle(pool, group) if group is not None else oracle(pool)
    default = spark_default(pool, group) if group is not None else spark_default(pool)
    note = "Oracle (best static interval in hindsight, lowest mean latency among stable): " + (
        f"{best.name}" if best is not None else "none (no static interval was stable)"
    )
    if default is None:
        note += "; no spark-default run in this group"
    return Table(title if title is not None else group or "", tuple(h for h, _ in cols), rows, note)


def group_tables(outcomes: Sequence[Outcome], **kwargs: Any) -> tuple[Table, ...]:
    """One :func:`standard_table` per group, in the order the groups first appear."""
    groups = list(dict.fromkeys(o.config.group for o in outcomes))
    return tuple(standard_table(outcomes, group=g, everyone=outcomes, **kwargs) for g in groups)


def phase_means(
    outcome: Outcome,
    phases: Sequence[tuple[str, float, float]],
    skip_s: float = 0.0,
    settle_s: float = 0.0,
) -> dict[str, dict[str, float]]:
    """Mean interval, processing, queue delay and batch latency of the batches cut in each
    phase ``(name, start_s, end_s)`` of stream time, with their count. Batches cut before
    ``skip_s`` are left out, and so are those whose data began less than ``settle_s`` into
    a phase that starts after 0: they belong to the change, not to the phase."""
    recs = outcome.records
    t0 = recs[0].cut_at - recs[0].interval_s if recs else 0.0
    out = {}
    for name, start, end in phases:
        settling = settle_s > 0 and start > 0
        mine = [
            r
            for r in recs
            if start <= r.cut_at - t0 < end
            and r.cut_at - t0 >= skip_s
            and not (settling and r.cut_at - r.interval_s - t0 < start + settle_s)
        ]

        def mean(key: str, mine: list = mine) -> float:
            return float(sum(getattr(r, key) for r in mine) / len(mine)) if mine else math.nan

        out[name] = {
            "batches": float(len(mine)),
            "interval_s": mean("interval_s"),
            "processing_s": mean("processing_s"),
            "queue_delay_s": mean("queue_delay_s"),
            "latency_s": mean("latency_s"),
        }
    return out


def phase_table(
    outcomes: Sequence[Outcome],
    phases: Sequence[tuple[str, float, float]],
    title: str,
    skip_s: float = 0.0,
    settle_s: float = 0.0,
) -> Table:
    """One row per outcome and phase: the :func:`phase_means`."""
    rows = []
    for o in outcomes:
        for name, m in phase_means(o, phases, skip_s, settle_s).items():
            rows.append(
                (
                    o.name,
                    name,
                    f"{m['batches']:.0f}",
                    fmt(m["interval_s"], 2),
                    fmt(m["processing_s"], 2),
                    fmt(m["queue_delay_s"], 2),
                    fmt(m["latency_s"], 2),
                )
            )
    columns = ("config", "phase", "batches", "interval (s)", "processing (s)", "queue (s)")
    return Table(title, (*columns, "latency (s)"), tuple(rows))


def summary_row(outcome: Outcome, everyone: Sequence[Outcome]) -> dict[str, Any]:
    """One row of ``summaries.csv``."""
    c = outcome.config
    row: dict[str, Any] = {
        "config": c.name,
        "group": c.group,
        "role": c.role,
        "workload": c.workload,
        "controller": c.controller,
        "trigger": c.trigger,
        "profile": c.profile,
        "duration_s": c.duration_s,
        "keys": c.keys,
        "params": ";".join(f"{k}={v}" for k, v in c.params.items()),
        "source_options": ";".join(f"{k}={v}" for k, v in c.source_options.items()),
    }
    row.update({f"label_{k}": v for k, v in c.labels.items()})
    row.update({k: outcome.summary.get(k) for k in CSV_FIELDS})
    row.update(ratios(outcome, everyone))
    return row


def write_summaries_csv(path: Path, outcomes: Sequence[Outcome]) -> Path:
    """``summaries.csv``: one row per config, its summary and its ratios."""
    rows = [summary_row(o, outcomes) for o in outcomes]
    header: list[str] = []
    for row in rows:
        header += [k for k in row if k not in header]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=header)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return path


def verdict_lines(result: ExperimentResult) -> list[str]:
    out = []
    for v in result.analysis.verdicts:
        mark = "holds" if v.holds else "does NOT hold"
        head = " (headline)" if v.headline else ""
        line = f"- **{v.claim}** — {mark}{head}."
        if v.evidence:
            line += f" {v.evidence}"
        out.append(line)
    return out


def section_markdown(result: ExperimentResult, *, link_base: Path | None = None) -> str:
    """The experiment's Markdown section; figure links relative to ``link_base`` (default:
    the experiment directory)."""
    exp, a, s = result.experiment, result.analysis, result.settings
    base = link_base if link_base is not None else result.dir
    mode = "quick (CI smoke)" if s.quick else "full"
    total_stream = sum(o.config.duration_s for o in result.outcomes)
    lines = [
        f"## {exp.title} (`{exp.name}`)",
        "",
        f"Answers: {exp.paper}. Mode: {mode}; seed {s.seed}; master `{redact_url(s.master)}`; "
        f"{len(result.outcomes)} configurations, {total_stream:g} s of stream, "
        f"{result.wall_s / 60:.1f} min wall.",
        "",
    ]
    if s.command:
        lines += ["```", s.command, "```", ""]
    if exp.description:
        lines += [exp.description, ""]
    if a.verdicts:
        lines += ["**Verdicts (computed from the numbers below):**", "", *verdict_lines(result)]
        lines.append("")
    if a.shows:
        lines += ["**What it shows.** " + a.shows, ""]
    if a.paper:
        lines += ["**Against the paper.** " + a.paper, ""]
    for table in a.tables:
        lines += [table.markdown(), ""]
    for fig in a.figures:
        rel = os.path.relpath(fig.path, base)
        lines += [f"![{fig.caption}]({rel})", "", f"*{fig.caption}*", ""]
    for note in a.notes:
        lines += [note, ""]
    rel_csv = os.path.relpath(result.csv, base)
    raw = result.csv.parent / RAW_METRICS
    if raw.is_file():
        rel_raw = os.path.relpath(raw, base)
        per_batch = f"[{rel_raw}]({rel_raw}) (gzipped JSON lines, a `config` field per batch)"
    else:
        per_batch = f"`{result.dir.name}/CONFIG/metrics.jsonl`"
    more = "".join(f"; [{r}]({r})" for r in (os.path.relpath(p, base) for p in a.data))
    lines += [
        f"Raw data: [{rel_csv}]({rel_csv}) (one row per configuration); per-batch metrics "
        f"in {per_batch}{more}.",
        "",
    ]
    return "\n".join(lines)


def write_section(result: ExperimentResult) -> Path:
    """Write ``section.md`` into the experiment directory."""
    result.section.write_text(section_markdown(result), encoding="utf-8")
    return result.section


def winner(a: Outcome | None, b: Outcome | None, key: str) -> str:
    """Which of two runs is lower on ``key``, among the stable ones: its controller, a tie
    (within 5%), or that neither was stable; ``not measured`` for a CPU figure either run
    could not measure."""
    if any(o is not None and not_measured(o.summary, key) for o in (a, b)):
        return NOT_MEASURED
    ok = [o for o in (a, b) if o is not None and o.stable and math.isfinite(o.get(key))]
    if not ok:
        return "neither (both unstable)" if a is not None and b is not None else "-"
    if len(ok) == 1:
        return f"{ok[0].config.controller} (only stable one)"
    x, y = ok
    if abs(x.get(key) - y.get(key)) <= 0.05 * min(x.get(key), y.get(key)):
        return "tie (within 5%)"
    return (x if x.get(key) < y.get(key) else y).config.controller


def _contender(outcomes: Sequence[Outcome], group: str) -> Outcome | None:
    """The adaptive run a group's spark-default is compared with: fixed-point if it ran (as
    a user runs it, with its default parameters, where it also ran otherwise), else the
    stable adaptive run with the lowest mean latency (else any adaptive run)."""
    mine = [o for o in outcomes if o.config.group == group and o.config.role == "adaptive"]
    fp = [o for o in mine if o.config.controller == "fixed-point"]
    if fp:
        return min(fp, key=lambda o: bool(o.config.params))
    stable = [o for o in mine if o.stable]
    return min(stable or mine, key=lambda o: o.get("mean_latency_s"), default=None)


def default_vs_adaptive_table(results: Sequence[ExperimentResult]) -> Table:
    """Per experiment and workload/rate group: Spark's default trigger against adabatch's
    controller (fixed-point where it ran) on latency, on cost and on stability."""
    rows = []
    for r in results:
        groups = dict.fromkeys(o.config.group for o in r.outcomes)
        for g in groups:
            sd = next(
                (o for o in r.outcomes if o.config.group == g and o.config.role == "spark-default"),
                None,
            )
            ours = _contender(r.outcomes, g)
            if sd is None or ours is None:
                continue
            rows.append(
                (
                    r.experiment.name,
                    g or "-",
                    describe_config(ours),
                    f"{fmt(sd.get('mean_latency_s'), 2)} / {fmt(ours.get('mean_latency_s'), 2)}",
                    winner(sd, ours, "mean_latency_s"),
                    f"{fmt_cost(sd.summary, 'cpu_s_per_million_records')} / "
                    f"{fmt_cost(ours.summary, 'cpu_s_per_million_records')}",
                    winner(sd, ours, "cpu_s_per_million_records"),
                    f"{'stable' if sd.stable else 'UNSTABLE'} / "
                    f"{'stable' if ours.stable else 'UNSTABLE'}",
                    f"{fmt(sd.get('busy_fraction'), 2)} / {fmt(ours.get('busy_fraction'), 2)}",
                )
            )
    return Table(
        "Spark's default trigger vs adabatch, per experiment and workload/rate (spark-default "
        "/ adabatch; lower latency and CPU win, only a stable run can win)",
        (
            "experiment",
            "workload / rate",
            "adabatch",
            "latency x+q+p (s)",
            "latency winner",
            "CPU s/M rec",
            "cost winner",
            "stability",
            "busy",
        ),
        tuple(rows),
    )


RAW_METRICS = "metrics.jsonl.gz"


def write_raw_metrics(outcomes: Sequence[Outcome], path: Path) -> Path:
    """Every configuration's per-batch metrics in one gzipped JSON-lines file (a
    ``config`` field names the run), so the page's numbers can be re-checked without the
    output directory the experiment ran in."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same metrics give the same bytes
    with gzip.GzipFile(path, "wb", mtime=0) as raw:
        for o in outcomes:
            for r in o.records:
                line = json.dumps({"config": o.name, **json.loads(r.to_json())})
                raw.write(line.encode("utf-8") + b"\n")
    return path


def publish_assets(result: ExperimentResult, assets: Path) -> ExperimentResult:
    """Copy ``result``'s figures, CSV and raw metrics to ``assets/EXPERIMENT/`` (that
    directory replaced, only if adabatch made it) and return the result pointing there."""
    target = assets / check_name(result.experiment.name, "experiment name")
    remove_tree(target, inside=assets, what="results directory")
    mark_dir(target)
    copied = []
    for fig in result.analysis.figures:
        dest = target / fig.path.name
        shutil.copyfile(fig.path, dest)
        copied.append(type(fig)(dest, fig.caption))
    data = []
    for path in result.analysis.data:
        data.append(Path(shutil.copyfile(path, target / path.name)))
    shutil.copyfile(result.csv, target / result.csv.name)
    write_raw_metrics(result.outcomes, target / RAW_METRICS)
    return _relocated(result, copied, target / result.csv.name, data)


def _publish_sections(results: Sequence[ExperimentResult], docs_dir: Path) -> list[str]:
    """Copy every figure, CSV and the raw metrics to ``docs_dir/results/EXPERIMENT/``
    (the directory replaced) and return each experiment's section linking to them."""
    assets = docs_dir / "results"
    docs_dir.mkdir(parents=True, exist_ok=True)
    remove_tree(assets, inside=docs_dir, what="results directory")  # only one we made
    mark_dir(assets, what="results directory")
    return [section_markdown(publish_assets(r, assets), link_base=docs_dir) for r in results]


def headline_lines(results: Sequence[ExperimentResult]) -> list[str]:
    """One bullet per headline verdict: the experiment, the claim, whether it held."""
    return [
        f"- `{r.experiment.name}`: {v.claim} — {'holds' if v.holds else 'does NOT hold'}."
        for r in results
        for v in r.analysis.verdicts
        if v.headline
    ]


def _headlines(results: Sequence[ExperimentResult], missing: Sequence[str]) -> list[str]:
    """Every headline verdict, how many did not hold, and what did not run."""
    lines = headline_lines(results)
    failed = [v for r in results for v in r.analysis.verdicts if v.headline and not v.holds]
    if failed:
        lines += ["", f"{len(failed)} headline claim(s) did not hold on this run (see below)."]
    if missing:
        lines += ["", "Not run: " + "; ".join(missing) + "."]
    return lines


def write_results_page(
    results: Sequence[ExperimentResult],
    docs_dir: Path,
    *,
    command: str,
    facts: Mapping[str, str],
    missing: Sequence[str] = (),
    quick: bool = False,
) -> Path:
    """Regenerate ``docs_dir/results.md`` from scratch, copying every figure and CSV to
    ``docs_dir/results/EXPERIMENT/``. A ``quick`` page says so at the top: its runs are
    the CI smoke sizes, shorter and with fewer configurations than the full ones."""
    page = docs_dir / "results.md"
    sections = _publish_sections(results, docs_dir)
    facts_line = "; ".join(f"{k} {v}" for k, v in facts.items())
    lines = [
        "# adabatch results: the papers' experiments on real Spark",
        "",
        "Generated by `adabatch bench all`; do not edit by hand. Every number below comes "
        "from one run of the command on the machine described, and every ratio is taken "
        "within one experiment's run.",
        "",
        "```",
        command,
        "```",
        "",
        f"Machine: {facts_line}.",
        "",
        *(
            [
                "**These are the `--quick` versions** (the CI smoke sizes: runs of one to "
                "two minutes, fewer configurations, and Spark's default trigger only where "
                "the quick experiment includes it). Their directions are measured; their "
                "magnitudes are less certain than a full run's. The full page comes from "
                "the same command without `--quick` (about three hours on two cores).",
                "",
            ]
            if quick
            else []
        ),
        "## Headlines",
        "",
    ]
    lines += _headlines(results, missing)
    lines += [
        "",
        "## Who wins: Spark's default trigger or an adabatch controller",
        "",
        "What a Spark user runs today (the default trigger: the next micro-batch as soon as "
        "the previous one ends, with everything that has arrived) against adabatch's "
        "controller on the same source, data and seed, in every experiment that ran both.",
        "",
        default_vs_adaptive_table(results).markdown(),
        "",
        *sections,
    ]
    return write_atomic(page, ("\n".join(lines) + "\n").encode("utf-8"))


def _relocated(
    result: ExperimentResult, figures: list[Any], csv_path: Path, data: list[Path]
) -> ExperimentResult:
    import dataclasses

    analysis = dataclasses.replace(result.analysis, figures=tuple(figures), data=tuple(data))
    return dataclasses.replace(result, analysis=analysis, csv=csv_path)
