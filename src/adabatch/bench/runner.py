"""Running experiments on real Spark: :func:`run_experiment` (``adabatch bench NAME``)
and :func:`run_all` (``adabatch bench all``, which also writes ``docs/results.md``).

Before the first config, an unmeasured ``spark-default`` run of
``Experiment.session_warmup_s`` stream seconds (directory ``warmup/``) warms the session,
once per Spark application, workload and source in a process (``bench all`` and a test
module warm each once), and only when a config is left to run. An output directory that
holds an earlier run is refused unless ``--resume`` (finished configs with the same
``config.json`` are reused, :mod:`adabatch.bench.resume`) or ``--force`` (deleted, only if
it has our ``bench.json``).

``source`` (``adabatch bench NAME --source SPEC``) replaces the generator in every run by
a live source (a Redis Stream or a landing directory) that a producer fills meanwhile, each
run reading only what arrives during it (``startingPosition=latest``,
:func:`adabatch.runs.compare.for_sequential_runs`); an experiment that sets generator
options or compares several rate profiles (one producer sends one) refuses it. A config
with a live source of its own (``Config.source``, filled by the experiment's hook) reads
that source; an experiment with such configs refuses a live ``--source``, which would take
its generator runs, the references it compares with, away.

A file ``notes.md`` in the experiment directory, written by whoever ran the configs (a run
done twice, the code a run predates), is published with the section: what the numbers
cannot say about how they were measured.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adabatch.bench import resume as resume_rule
from adabatch.bench.machine import machine_facts
from adabatch.bench.model import (
    Analysis,
    Config,
    Context,
    Experiment,
    ExperimentResult,
    Outcome,
    PartialRun,
    Settings,
)
from adabatch.bench.registry import available, get_experiment, names
from adabatch.bench.resume import MARKER
from adabatch.errors import AdabatchError, check_name
from adabatch.metrics import BatchRecord, RunSummary, read_jsonl
from adabatch.outputs import dumps_json, mark_dir, remove_tree, write_atomic
from adabatch.report.progress import ProgressLine
from adabatch.runs.compare import for_sequential_runs
from adabatch.runs.source_spec import GENERATOR, parse_source
from adabatch.streaming.options import SPARK_DEFAULT
from adabatch.urls import redact_url

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from adabatch.runs.spark_job import Progress, RunConfig

WARMUP_DIR = "warmup"
"""The unmeasured warm-up run's directory (a reserved config name)."""
NOTES_FILE = "notes.md"
"""What whoever ran the configs wrote about them, in the experiment directory; published
with the section."""


class _Bar:
    """The progress of a whole experiment on one line: the config running, the share of
    the planned stream seconds done, the wall time spent and an estimate of what is left.
    The estimate is paced by the stream run here: runs reused by ``--resume`` cost no time."""

    def __init__(self, title: str, enabled: bool) -> None:
        self.title = title
        self.line = ProgressLine(every_s=10.0, tty_every_s=0.25) if enabled else None
        self.started = time.monotonic()
        self.done_s = 0.0
        self.reused_s = 0.0

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.line is not None:
            self.line.end()

    def set(self, *, done: int, total: int, current: str, total_s: float, at_s: float) -> None:
        if self.line is None:
            return
        share = min(self.done_s + at_s, total_s) / max(total_s, 1e-9)
        spent = time.monotonic() - self.started
        ran_s = self.done_s + at_s - self.reused_s
        left_s = max(total_s - self.done_s - at_s, 0.0)
        left = f"{spent * left_s / ran_s / 60:.1f} min" if ran_s > 0 else "-"
        self.line.show(
            f"{self.title} {done}/{total} {current}: {share:.0%} of the stream, "
            f"{spent / 60:.1f} min, ETA {left}"
        )

    def finish_config(self, duration_s: float, *, reused: bool = False) -> None:
        self.done_s += duration_s
        if reused:
            self.reused_s += duration_s


def _check_configs(configs: Sequence[Config], seen: set[str]) -> None:
    for c in configs:
        if c.name == WARMUP_DIR:
            msg = f"experiment config name {c.name!r} is reserved for the warm-up run"
            raise AdabatchError(msg)
        if c.name in seen:
            msg = f"experiment config name {c.name!r} is used twice"
            raise AdabatchError(msg)
        seen.add(c.name)


def check_source(experiment: Experiment, configs: Sequence[Config], source: str) -> None:
    """A live ``source`` fits an experiment whose runs set no generator option and share
    one rate profile (what its producer sends); anything else is one line."""
    spec = parse_source(source)
    if not spec.live:
        return
    own = [c.name for c in configs if c.live]
    if own:
        msg = (
            f"experiment {experiment.name} chooses the source of each run itself "
            f"({', '.join(own[:3])}{', ...' if len(own) > 3 else ''} read live sources it "
            f"fills, the others the generator): run it without --source, not on {spec.shown}"
        )
        raise AdabatchError(msg)
    options = sorted({k for c in configs for k in c.source_options})
    if options:
        msg = (
            f"experiment {experiment.name} sets generator options ({', '.join(options)}) on "
            f"its runs: it runs on the generator only, not on {spec.shown}"
        )
        raise AdabatchError(msg)
    profiles = sorted({c.profile for c in configs})
    if len(profiles) > 1:
        msg = (
            f"experiment {experiment.name} compares {len(profiles)} rate profiles "
            f"({', '.join(profiles[:4])}{', ...' if len(profiles) > 4 else ''}) and one "
            f"producer sends one: run it on the generator, not on {spec.shown}"
        )
        raise AdabatchError(msg)


def _run_config(config: Config, run_dir: Path, settings: Settings, source: str) -> RunConfig:
    """``config``'s run into ``run_dir``, reading ``source``; a config with a live source
    of its own reads that one, from its earliest record (the experiment fills a fresh one)."""
    cfg = config.run_config(run_dir, seed=settings.seed, master=settings.master)
    if source == GENERATOR or config.live:
        return cfg
    return for_sequential_runs(dataclasses.replace(cfg, source=source), "bench")


def _config_dict(config: Config, source: str) -> dict[str, Any]:
    """``config.json`` of a run: the config, and the source when it is not the generator
    (password redacted), so ``--resume`` never reuses a run of another source."""
    out = config.to_dict()
    if source != GENERATOR and not config.live:
        out["source"] = parse_source(source).shown
    return out


def _load_outcome(config: Config, run_dir: Path, source: str = GENERATOR) -> Outcome | None:
    """A finished run of the same config in ``run_dir`` (for --resume), else None."""
    summary = resume_rule.finished_summary(run_dir, _config_dict(config, source))
    if summary is None:
        return None
    records = read_jsonl(run_dir / "metrics.jsonl")
    if config.role == "trigger":
        records = _trigger_records(records, run_dir)
    return Outcome(config, RunSummary.from_json(summary), tuple(records), run_dir)


def _finished(config: Config, exp_dir: Path, source: str) -> bool:
    """Whether ``exp_dir`` holds a finished run of ``config`` that ``--resume`` reuses
    (its summary alone: the batches are read once, when the run is reused)."""
    return (
        resume_rule.finished_summary(exp_dir / config.name, _config_dict(config, source))
        is not None
    )


def _trigger_records(records: Sequence[BatchRecord], run_dir: Path) -> list[BatchRecord]:
    """A processingTime trigger run's batches as its summary counts them: the source sees
    a batch end only at the next trigger, so metrics.jsonl holds the interval as the
    processing time, and the run took Spark's own durations from its progress log."""
    from adabatch.runs.spark_job import PROGRESS_FILE, spark_durations
    from adabatch.streaming.progress import read_progress

    progress = read_progress(run_dir / PROGRESS_FILE)
    if records and not progress:
        msg = (
            f"--resume: {str(run_dir)!r} is a processingTime trigger run without "
            f"{PROGRESS_FILE}, whose durations its batches need; run it again (--force)"
        )
        raise AdabatchError(msg)
    return spark_durations(records, progress)


def _write_marker(exp_dir: Path, marker: dict[str, Any]) -> None:
    write_atomic(exp_dir / MARKER, (dumps_json(marker, indent=2) + "\n").encode())


def _run_configs(
    experiment: Experiment,
    ctx: Context,
    configs: list[Config],
    spark: SparkSession,
    *,
    resume: bool,
    progress: bool,
    on_outcome: Callable[[Outcome], None] | None,
    source: str = GENERATOR,
    followups: bool = True,
) -> tuple[list[Outcome], float]:
    """Run (or with ``resume`` reuse) every config and, with ``followups``, the follow-ups
    they lead to; returns the outcomes and the wall seconds earlier runs spent on the
    reused ones."""
    from adabatch.runs.spark_job import run_spark

    settings = ctx.settings
    seen = {c.name for c in configs}
    outcomes: list[Outcome] = []
    reused_s = 0.0
    extra = experiment.planned_followups(settings) if followups else 0
    with _Bar(experiment.name, progress) as bar:
        pending = list(configs)
        while pending:
            for i, config in enumerate(pending):
                known = [o.config for o in outcomes] + pending[i:]
                mean_s = sum(c.duration_s for c in known) / len(known)
                total, total_s = len(known) + extra, sum(c.duration_s for c in known)
                total_s += extra * mean_s
                outcome, reused = _run_one(
                    experiment, config, ctx, spark, resume, run_spark, bar, len(outcomes),
                    total, total_s, source,
                )  # fmt: skip
                if reused:  # its wall time was spent by an earlier run of the command
                    reused_s += float(outcome.summary.get("wall_s") or 0.0)
                outcomes.append(outcome)
                if on_outcome is not None:
                    on_outcome(outcome)
                bar.finish_config(config.duration_s, reused=reused)
            pending = list(experiment.followups(settings, outcomes)) if followups else []
            _check_configs(pending, seen)
            check_source(experiment, [*(o.config for o in outcomes), *pending], source)
            extra = max(extra - len(pending), 0)
    return outcomes, reused_s


def run_experiment(
    experiment: Experiment,
    settings: Settings,
    *,
    spark: SparkSession | None = None,
    force: bool = False,
    resume: bool = False,
    progress: bool = True,
    on_outcome: Callable[[Outcome], None] | None = None,
    source: str = GENERATOR,
    only: str | None = None,
) -> ExperimentResult | PartialRun:
    """Run every config of ``experiment`` on real Spark (one session), analyse, and write
    ``summaries.csv``, the figures, ``section.md`` and ``bench.json`` (see
    :mod:`adabatch.bench.model`); every run reads ``source`` (see the module docstring).

    ``only``, a shell pattern of config names, runs the configs it matches; the analysis
    (and the follow-ups) comes once every config is finished in the directory, else the
    result is a :class:`PartialRun`: a bench longer than a sitting runs part by part."""
    from adabatch.bench import report
    from adabatch.runs.spark_job import SPARK_CONF
    from adabatch.spark import get_spark

    exp_dir = Path(settings.out) / experiment.name
    ctx = Context(settings, exp_dir)
    configs = list(experiment.configs(settings))
    _check_configs(configs, set())
    chosen = configs if only is None else select_configs(experiment.name, configs, only)
    check_source(experiment, configs, source)
    resume_rule.prepare_dir(exp_dir, force=force, resume=resume)
    marker = _start_marker(experiment, settings, source)
    _write_marker(exp_dir, marker)
    unfinished = _unfinished_others(configs, chosen, exp_dir, source)
    total = len(configs)
    if unfinished:
        configs = chosen
    check_inputs(configs, exp_dir, settings, source, resume=resume)
    if spark is None:
        spark = get_spark(settings.master, conf=SPARK_CONF)
    wall0 = time.time()
    _warm_session(experiment, settings, spark, configs, exp_dir, resume=resume, source=source)
    outcomes, reused_s = _run_configs(
        experiment, ctx, configs, spark, resume=resume, progress=progress,
        on_outcome=on_outcome, source=source, followups=not unfinished,
    )  # fmt: skip
    if unfinished:
        return PartialRun(
            experiment, str(only), tuple(outcomes), total - len(unfinished), total, exp_dir
        )
    analysis = with_kept_notes(experiment.analyze(ctx, outcomes), exp_dir)
    csv_path = report.write_summaries_csv(exp_dir / "summaries.csv", outcomes)
    result = ExperimentResult(
        experiment=experiment,
        settings=settings,
        outcomes=tuple(outcomes),
        analysis=analysis,
        dir=exp_dir,
        section=exp_dir / "section.md",
        csv=csv_path,
        wall_s=time.time() - wall0 + reused_s,
    )
    report.write_section(result)
    marker.update(
        {
            "wall_s": result.wall_s,
            "configs": [o.name for o in outcomes],
            "verdicts": [dataclasses.asdict(v) for v in analysis.verdicts],
        }
    )
    _write_marker(exp_dir, marker)
    return result


def with_kept_notes(analysis: Analysis, exp_dir: Path) -> Analysis:
    """``analysis`` with the experiment directory's ``notes.md`` appended to its notes."""
    path = exp_dir / NOTES_FILE
    if not path.is_file():
        return analysis
    text = path.read_text(encoding="utf-8").strip()
    if not text:
        return analysis
    head = f"**Kept with these runs** (`{exp_dir.name}/{NOTES_FILE}`):"
    return dataclasses.replace(analysis, notes=(*analysis.notes, head, text))


def _warm_session(
    experiment: Experiment,
    settings: Settings,
    spark: SparkSession,
    configs: Sequence[Config],
    exp_dir: Path,
    *,
    resume: bool,
    source: str,
) -> None:
    """The warm-up run before the first config left to run, unless this session is warm
    for its workload and source already."""
    left = next((c for c in configs if not (resume and _finished(c, exp_dir, source))), None)
    if left is None:
        return
    warm_key = _warm_key(spark, left, source)
    warmup_s = experiment.session_warmup_s(settings)
    if warmup_s > 0 and (warm_key is None or warm_key not in _WARMED):
        _warm_up(spark, left, warmup_s, exp_dir / WARMUP_DIR, settings, source)
        if warm_key is not None:
            _WARMED.add(warm_key)


def _unfinished_others(
    configs: Sequence[Config], chosen: Sequence[Config], exp_dir: Path, source: str
) -> list[Config]:
    """The configs not ``chosen`` that have no finished run in ``exp_dir``."""
    names = {c.name for c in chosen}
    return [c for c in configs if c.name not in names and not _finished(c, exp_dir, source)]


def _start_marker(experiment: Experiment, settings: Settings, source: str) -> dict[str, Any]:
    """What ``bench.json`` says before the first run: the settings that decide the numbers."""
    marker: dict[str, Any] = {
        "experiment": experiment.name,
        "quick": settings.quick,
        "seed": settings.seed,
        "master": redact_url(settings.master),
        "command": settings.command,
    }
    if source != GENERATOR:
        marker["source"] = parse_source(source).shown
    return marker


def select_configs(experiment: str, configs: Sequence[Config], only: str) -> list[Config]:
    """The configs whose names match the shell pattern ``only`` (``fnmatch``); an error
    naming the pattern and the configs there are when it matches none."""
    chosen = [c for c in configs if fnmatch.fnmatchcase(c.name, only)]
    if not chosen:
        shown = ", ".join(c.name for c in configs[:6]) + (", ..." if len(configs) > 6 else "")
        msg = (
            f"--only {only!r} matches no config of {experiment}: allowed a shell pattern "
            f"of its {len(configs)} config names ({shown})"
        )
        raise AdabatchError(msg)
    return chosen


def check_inputs(
    configs: Sequence[Config], exp_dir: Path, settings: Settings, source: str, *, resume: bool
) -> None:
    """Check every config's run before the first starts. The check opens each run's
    database, in its run directory: one it creates is marked as ours, so that ``--resume``
    may clear it like any run that did not finish. A finished run ``--resume`` reuses is
    left as it is (no empty database added to it)."""
    from adabatch.runs.spark_job import check_run

    for c in configs:
        run_dir = exp_dir / c.name
        if resume and _finished(c, exp_dir, source):
            continue
        if not run_dir.exists():
            mark_dir(run_dir, what="run directory")
        check_run(_run_config(c, run_dir, settings, source))


_WARMED: set[tuple[str, str, str]] = set()
"""(Spark application, workload, source) this process has warmed up."""


def _warm_key(spark: SparkSession, config: Config, source: str) -> tuple[str, str, str] | None:
    """What a warm-up before ``config`` warms: (Spark application, workload, source);
    ``None`` without a SparkContext (Spark Connect), which warms up every time."""
    try:
        app = str(spark.sparkContext.applicationId)
    except Exception:
        return None
    return app, config.workload, source


def warmup_config(first: Config, duration_s: float) -> Config:
    """The warm-up's config: Spark's default trigger on ``first``'s workload and profile
    for ``duration_s`` stream seconds, live from its start. ``first``'s starting backlog is
    left out: read in a few large batches, it would end the warm-up within a minute of
    wall time (the slo bench's catch-up: 180 stream seconds, all of them backlog)."""
    options = {k: v for k, v in first.source_options.items() if k != "startingBacklog"}
    return dataclasses.replace(
        first,
        name=WARMUP_DIR,
        controller=SPARK_DEFAULT,
        params={},
        trigger="default",
        duration_s=duration_s,
        skip_s=0.0,
        source_options=options,
        source=GENERATOR,  # nobody fills a config's own live source before its run
    )


def _warm_up(
    spark: SparkSession,
    first: Config,
    duration_s: float,
    run_dir: Path,
    settings: Settings,
    source: str = GENERATOR,
) -> None:
    """A short spark-default run of ``first``'s workload and profile, not measured."""
    from adabatch.runs.spark_job import run_spark

    remove_tree(run_dir, inside=run_dir.parent, what="warm-up directory")
    config = warmup_config(first, duration_s)
    result = run_spark(_run_config(config, run_dir, settings, source), spark=spark)
    if result.interrupted:
        raise KeyboardInterrupt


def _run_one(
    experiment: Experiment,
    config: Config,
    ctx: Context,
    spark: SparkSession,
    resume: bool,
    run_spark: Callable[..., Any],
    bar: _Bar,
    done: int,
    total: int,
    total_s: float,
    source: str = GENERATOR,
) -> tuple[Outcome, bool]:
    """Run ``config`` (or, with ``resume``, load its finished run: then ``True``)."""
    run_dir = ctx.dir / config.name
    if resume:
        found = _load_outcome(config, run_dir, source)
        if found is not None:
            return found, True
        # a half-finished run of ours: start it again
        remove_tree(run_dir, inside=ctx.dir, what="run directory")
    check_name(config.name, "experiment config name")  # it names a directory
    mark_dir(run_dir, what="run directory")
    text = json.dumps(_config_dict(config, source), indent=2, default=str) + "\n"
    write_atomic(run_dir / "config.json", text.encode("utf-8"))
    cfg = _run_config(config, run_dir, ctx.settings, source)
    hook = experiment.hook(config, ctx)
    current = f"[{done + 1}/{total}] {config.name}"
    bar.set(done=done, total=total, current=current, total_s=total_s, at_s=0.0)

    def on_progress(p: Progress) -> None:
        at = 0.0 if p.stream_s is None else min(p.stream_s, config.duration_s)
        if hook is not None and p.stream_s is not None:
            hook.update(p.stream_s)
        bar.set(done=done, total=total, current=current, total_s=total_s, at_s=at)

    try:
        result = run_spark(cfg, spark=spark, on_progress=on_progress)
    finally:
        if hook is not None:
            hook.close()
    if result.interrupted:
        raise KeyboardInterrupt
    return Outcome(config, result.summary, tuple(result.records), run_dir), False


def run_all(
    settings: Settings,
    *,
    docs_dir: Path,
    force: bool = False,
    resume: bool = False,
    progress: bool = True,
    source: str = GENERATOR,
) -> tuple[list[ExperimentResult], Path, list[str]]:
    """Run every available experiment in one SparkSession and regenerate
    ``docs_dir/results.md`` from scratch (:func:`adabatch.bench.report.write_results_page`).
    Returns the results, the page, and the experiments not run (with the reason); those
    that refuse a live ``source`` are among the latter."""
    from adabatch.bench import report
    from adabatch.runs.spark_job import SPARK_CONF
    from adabatch.spark import get_spark

    todo = available()
    skipped = [f"{n} (module not written yet)" for n in names() if n not in todo]
    spark = get_spark(settings.master, conf=SPARK_CONF)
    results = []
    # calibrate first: dybbs, params and pid simulate with its fit when it exists
    for name in sorted(todo, key=lambda n: n != "calibrate"):
        try:
            experiment = get_experiment(name)
            results.append(
                run_experiment(
                    experiment, settings, spark=spark, force=force, resume=resume,
                    progress=progress, source=source,
                )
            )  # fmt: skip
        except AdabatchError as exc:  # one failed experiment does not sink the page
            skipped.append(f"{name} ({exc})")
    results.sort(key=lambda r: names().index(r.experiment.name))
    page = report.write_results_page(
        results,
        docs_dir,
        command=settings.command,
        facts=machine_facts(),
        missing=skipped,
        quick=settings.quick,
    )
    return results, page, skipped
