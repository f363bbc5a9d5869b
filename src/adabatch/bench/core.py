"""The experiment framework behind ``adabatch bench``.

An experiment is a list of :class:`Config` (one real Spark run each), run one after
another on the same seed in one SparkSession, and an analysis of their results
(:class:`Outcome`) into tables, figures and verdicts computed from the numbers.

Writing an experiment (one module per experiment, registered in :data:`REGISTRY`)::

    from adabatch.bench import figures, report
    from adabatch.bench.core import (
        Analysis, Config, Experiment, Verdict, by_name, spark_baselines,
    )

    class Example(Experiment):          # (the real timeline is adabatch.bench.experiments.timeline)
        name = "timeline"
        title = "Static interval vs fixed-point on a sine rate"
        paper = "fixed-point Fig. 16/17"

        def configs(self, settings):
            d = 40.0 if settings.quick else 180.0
            base = dict(workload="reduce", profile="sine:2000:8000:60s", duration_s=d)
            return [
                Config("static-1s", controller="static", params={"interval": 1.0}, **base),
                Config("fixed-point", controller="fixed-point", **base),
                *spark_baselines(triggers=(1.0,), **base),
            ]

        def analyze(self, ctx, outcomes):
            table = report.standard_table(outcomes)
            fig = figures.latency_vs_cost(outcomes, ctx.path("latency-vs-cost.png"), "...")
            fp, st = by_name(outcomes, "fixed-point"), by_name(outcomes, "static-1s")
            return Analysis(
                tables=(table,),
                figures=(fig,),
                shows="What the reader sees ...",
                verdicts=(Verdict("fixed-point stays stable", fp.stable, headline=True),),
            )

    EXPERIMENT = Example()   # the registry imports adabatch.bench.experiments.<module>.EXPERIMENT

The pieces:

- :class:`Config`: a name (its directory, unique in the experiment), the fields of
  :class:`adabatch.runs.spark_job.RunConfig` it sets, and ``group`` (the table/oracle group,
  e.g. ``"reduce / constant"``; ratios are computed within a group). ``role`` says what it
  is: ``static`` (a candidate for the oracle), ``spark-default`` (Spark's default
  trigger), ``trigger`` (a fixed ``processingTime`` trigger), ``adaptive`` (a controller).
  :func:`spark_baselines` makes the ``spark-default`` and ``processingTime`` configs every
  experiment must include; :func:`static_sweep` a sweep of static intervals.
- :class:`Settings`: ``quick``, ``seed``, ``master``, the output root and the command line.
- :meth:`Experiment.configs` returns the configs; :meth:`Experiment.followups` may add
  configs chosen from earlier outcomes (called until it returns none; declare how many
  with :meth:`Experiment.planned_followups` so the progress bar knows the total).
- :meth:`Experiment.hook` may return a :class:`RunHook` for a config: ``update(stream_s)``
  is called about twice a second during the run and ``close()`` always afterwards (the
  background load of ``resources`` uses it).
- :meth:`Experiment.analyze` gets a :class:`Context` (``ctx.path(name)`` for figure
  files) and every :class:`Outcome`, and returns an :class:`Analysis`: tables
  (:class:`adabatch.bench.report.Table`), figures (:class:`Figure`), the paragraph of
  what it shows, how it compares with the paper, and :class:`Verdict` s. Verdicts marked
  ``headline`` are the experiment's headline direction: ``--quick`` fails (exit 1) when
  one does not hold; full runs report them as measured.
- :func:`run_experiment` runs it all (``adabatch bench NAME``): raw per-batch metrics in
  ``OUT/NAME/CONFIG/`` (``metrics.jsonl``, ``summary.json``, ``timeline.png``),
  ``OUT/NAME/summaries.csv`` (one row per config with its ratios), figures,
  ``OUT/NAME/section.md`` and ``OUT/NAME/bench.json``. :func:`run_all` runs every
  registered experiment and writes ``docs/results.md``.

Before the first config, an unmeasured ``spark-default`` run of ``Experiment.warmup_s``
stream seconds (directory ``warmup/``) warms the session. An output directory that holds
an earlier run is refused unless ``--resume`` (finished configs with the same
``config.json`` are reused) or ``--force`` (deleted, only if it has our ``bench.json``).

Ratios (:func:`ratios`) are always within one run of the experiment and one group: to the
oracle (the stable ``static`` config with the lowest mean batch latency) and to
``spark-default``.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from adabatch.errors import AdabatchError, check_name
from adabatch.metrics import BatchRecord, read_jsonl
from adabatch.outputs import dumps_json, mark_dir, remove_tree, write_atomic
from adabatch.urls import redact_url

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from adabatch.bench.report import Table
    from adabatch.runs.spark_job import Progress, RunConfig

SPARK_DEFAULT = "spark-default"
ROLES = ("static", "adaptive", "spark-default", "trigger")
MARKER = "bench.json"  # written into every experiment directory we create
WARMUP_DIR = "warmup"  # the unmeasured warm-up run's directory (a reserved config name)
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")

# Every registered experiment in order (Experiment 1 to 10 of the module docstrings, the
# order they run in and docs/results.md lists them in): name -> module in
# adabatch.bench.experiments.
REGISTRY: dict[str, str] = {
    "static-vs-adaptive": "static_vs_adaptive",
    "timeline": "timeline",
    "gradient": "gradient",
    "keys": "keys",
    "resources": "resources",
    "dybbs": "dybbs",
    "convergence": "convergence",
    "params": "params",
    "pid": "pid",
    "calibrate": "calibrate",
}


@dataclass(frozen=True)
class Config:
    """One real Spark run of an experiment (the fields of ``RunConfig`` it sets).

    ``name`` is the run's directory and table label (lower case, digits, ``.``, ``_``,
    ``-``). ``group`` is the table/oracle group. ``labels`` are extra table columns (e.g.
    ``{"rate": "sine"}``).
    """

    name: str
    workload: str
    controller: str
    profile: str
    duration_s: float
    params: Mapping[str, Any] = field(default_factory=dict)
    trigger: str = "default"
    keys: int = 1000
    source_options: Mapping[str, Any] = field(default_factory=dict)
    skip_s: float | None = None
    queue: str = "fifo"
    per_key_commit: bool = False
    group: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _NAME_RE.match(self.name) or self.name in ("summaries.csv", "section.md"):
            msg = (
                f"experiment config name {self.name!r} is not allowed: lower-case letters, "
                "digits, '.', '_' and '-', starting with a letter or digit"
            )
            raise AdabatchError(msg)
        if not (self.duration_s > 0 and math.isfinite(self.duration_s)):
            msg = f"config {self.name!r}: duration_s = {self.duration_s!r} must be > 0"
            raise AdabatchError(msg)

    @property
    def role(self) -> str:
        """``static``, ``adaptive``, ``spark-default`` or ``trigger`` (see module doc)."""
        if self.controller == "static":
            return "static"
        if self.controller == SPARK_DEFAULT:
            return "spark-default" if self.trigger.strip().lower() == "default" else "trigger"
        return "adaptive"

    def run_config(self, out_dir: Path, *, seed: int, master: str) -> RunConfig:
        """The :class:`RunConfig` of this config's run into ``out_dir``."""
        from adabatch.runs.spark_job import RunConfig

        return RunConfig(
            workload=self.workload,
            controller=self.controller,
            profile=self.profile,
            duration_s=self.duration_s,
            out_dir=out_dir,
            params=dict(self.params),
            master=master,
            trigger=self.trigger,
            seed=seed,
            keys=self.keys,
            skip_s=self.skip_s,
            queue=self.queue,
            source_options=dict(self.source_options),
            per_key_commit=self.per_key_commit,
        )

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["params"] = dict(self.params)
        out["source_options"] = dict(self.source_options)
        out["labels"] = dict(self.labels)
        out["role"] = self.role
        return out


def trigger_name(seconds: float) -> str:
    """``processingTime:1.5s`` for 1.5."""
    return f"processingTime:{seconds:g}s"


def spark_baselines(
    *,
    workload: str,
    profile: str,
    duration_s: float,
    triggers: Sequence[float] = (1.0,),
    prefix: str = "",
    **fields: Any,
) -> list[Config]:
    """What a Spark user runs today on the same source and data: Spark's default trigger
    (``spark-default``) and one fixed ``processingTime`` trigger per entry of
    ``triggers`` (seconds). ``fields`` are further :class:`Config` fields (group, keys, ...)."""
    out = [
        Config(
            f"{prefix}spark-default",
            workload=workload,
            controller=SPARK_DEFAULT,
            profile=profile,
            duration_s=duration_s,
            **fields,
        )
    ]
    for t in triggers:
        out.append(
            Config(
                f"{prefix}trigger-{t:g}s",
                workload=workload,
                controller=SPARK_DEFAULT,
                trigger=trigger_name(t),
                profile=profile,
                duration_s=duration_s,
                **fields,
            )
        )
    return out


def static_sweep(
    intervals: Sequence[float],
    *,
    workload: str,
    profile: str,
    duration_s: float,
    prefix: str = "",
    blocks: int | None = None,
    **fields: Any,
) -> list[Config]:
    """One ``static`` config per interval (s): the sweep the oracle is taken from."""
    out = []
    for x in intervals:
        params: dict[str, Any] = {"interval": x}
        if blocks is not None:
            params["blocks"] = blocks
        out.append(
            Config(
                f"{prefix}static-{x:g}s",
                workload=workload,
                controller="static",
                params=params,
                profile=profile,
                duration_s=duration_s,
                **fields,
            )
        )
    return out


@dataclass(frozen=True)
class Settings:
    """How an experiment is run: ``out`` is the output root (the experiment writes into
    ``out / name``), ``command`` the exact command line for the results page."""

    out: Path
    quick: bool = False
    seed: int = 0
    master: str = "local[2]"
    command: str = ""


@dataclass(frozen=True)
class Outcome:
    """One finished config: its summary (``summary.json``), per-batch records, directory."""

    config: Config
    summary: dict[str, Any]
    records: tuple[BatchRecord, ...]
    dir: Path

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def stable(self) -> bool:
        return bool(self.summary.get("stable"))

    def get(self, key: str) -> float:
        """A numeric summary field, NaN when missing or null."""
        value = self.summary.get(key)
        if value is None or isinstance(value, bool):
            return math.nan if value is None else float(value)
        try:
            return float(value)
        except (TypeError, ValueError):
            return math.nan


@dataclass(frozen=True)
class Figure:
    """A PNG the experiment wrote (``path`` inside the experiment directory)."""

    path: Path
    caption: str


@dataclass(frozen=True)
class Verdict:
    """A claim checked against the numbers: ``holds`` is computed, never hard-coded.

    ``headline`` verdicts are the experiment's headline direction (asserted by
    ``--quick``); ``evidence`` gives the numbers behind it.
    """

    claim: str
    holds: bool
    evidence: str = ""
    headline: bool = False


@dataclass(frozen=True)
class Analysis:
    """What :meth:`Experiment.analyze` returns; :mod:`adabatch.bench.report` renders it."""

    tables: tuple[Table, ...] = ()
    figures: tuple[Figure, ...] = ()
    shows: str = ""
    paper: str = ""  # where the result agrees or disagrees with the paper, and why
    verdicts: tuple[Verdict, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Context:
    """What an analysis may use: the settings and the experiment's directory."""

    settings: Settings
    dir: Path

    def path(self, filename: str) -> Path:
        """A file in the experiment directory (for figures and extra data)."""
        return self.dir / filename


class RunHook(Protocol):
    """Something that acts during a run, on stream time (see :meth:`Experiment.hook`)."""

    def update(self, stream_s: float) -> None: ...

    def close(self) -> None: ...


class Experiment:
    """Base of every experiment; subclasses set the class attributes and override
    :meth:`configs` and :meth:`analyze` (and optionally the rest)."""

    name: str = ""
    title: str = ""
    paper: str = ""  # the seed figure(s) it answers, e.g. "fixed-point Fig. 16/17"
    description: str = ""  # one paragraph: the setup
    # Stream seconds of a throw-away spark-default run of the first config's workload
    # before the first measured run: the session's first micro-batches compile code and
    # start Python workers (several seconds), which would otherwise count against config 1.
    warmup_s: float = 8.0

    def configs(self, settings: Settings) -> list[Config]:
        """The configs to run, in order."""
        raise NotImplementedError

    def followups(self, settings: Settings, outcomes: Sequence[Outcome]) -> list[Config]:
        """More configs chosen from ``outcomes`` so far (none by default)."""
        return []

    def planned_followups(self, settings: Settings) -> int:
        """How many configs :meth:`followups` will add in all (for the progress bar)."""
        return 0

    def hook(self, config: Config, ctx: Context) -> RunHook | None:
        """An optional hook acting during ``config``'s run."""
        return None

    def analyze(self, ctx: Context, outcomes: Sequence[Outcome]) -> Analysis:
        """Tables, figures and verdicts from the outcomes."""
        raise NotImplementedError


@dataclass(frozen=True)
class ExperimentResult:
    """A finished experiment: its outcomes, analysis and files."""

    experiment: Experiment
    settings: Settings
    outcomes: tuple[Outcome, ...]
    analysis: Analysis
    dir: Path
    section: Path
    csv: Path
    wall_s: float

    @property
    def failed_headlines(self) -> list[Verdict]:
        return [v for v in self.analysis.verdicts if v.headline and not v.holds]


# ---------------------------------------------------------------------------- registry


def names() -> list[str]:
    """Every registered experiment name, in order (Experiment 1 to 10)."""
    return list(REGISTRY)


def get_experiment(name: str) -> Experiment:
    """The registered experiment ``name``; an :class:`AdabatchError` lists the known ones."""
    if name not in REGISTRY:
        msg = f"unknown experiment {name!r}: allowed all, {', '.join(REGISTRY)}"
        raise AdabatchError(msg)
    module_name = f"adabatch.bench.experiments.{REGISTRY[name]}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        msg = f"experiment {name!r} is registered but {module_name} is not written yet"
        raise AdabatchError(msg) from None
    experiment = getattr(module, "EXPERIMENT", None)
    if not isinstance(experiment, Experiment) or experiment.name != name:
        msg = f"{module_name} must define EXPERIMENT, an Experiment named {name!r}"
        raise AdabatchError(msg)
    return experiment


def available() -> list[str]:
    """Registered experiments whose module exists (``bench all`` runs these)."""
    out = []
    for name in REGISTRY:
        spec = importlib.util.find_spec(f"adabatch.bench.experiments.{REGISTRY[name]}")
        if spec is not None:
            out.append(name)
    return out


# ---------------------------------------------------------------------------- ratios


def oracle(outcomes: Sequence[Outcome], group: str | None = None) -> Outcome | None:
    """The best static interval in hindsight: the stable ``static`` config with the lowest
    mean batch latency (within ``group`` if given); ``None`` if no static run was stable."""
    pool = [
        o
        for o in outcomes
        if o.config.role == "static"
        and o.stable
        and (group is None or o.config.group == group)
        and math.isfinite(o.get("mean_latency_s"))
    ]
    return min(pool, key=lambda o: o.get("mean_latency_s"), default=None)


def spark_default(outcomes: Sequence[Outcome], group: str | None = None) -> Outcome | None:
    """The ``spark-default`` run of ``group`` (the first, if several)."""
    return next(
        (
            o
            for o in outcomes
            if o.config.role == "spark-default" and (group is None or o.config.group == group)
        ),
        None,
    )


def _ratio(value: float, ref: float) -> float:
    ok = math.isfinite(value) and math.isfinite(ref) and ref > 0
    return value / ref if ok else math.nan


def ratios(outcome: Outcome, outcomes: Sequence[Outcome]) -> dict[str, float]:
    """Mean-latency and CPU ratios of ``outcome`` to its group's oracle and spark-default
    (NaN where the reference is missing)."""
    group = outcome.config.group
    best, default = oracle(outcomes, group), spark_default(outcomes, group)
    out = {}
    for tag, ref in (("oracle", best), ("default", default)):
        for key, short in (("mean_latency_s", "latency"), ("cpu_s_per_million_records", "cpu")):
            ref_v = ref.get(key) if ref is not None else math.nan
            out[f"{short}_to_{tag}"] = _ratio(outcome.get(key), ref_v)
    return out


def by_name(outcomes: Sequence[Outcome], name: str) -> Outcome:
    """The outcome of the config called ``name``."""
    for o in outcomes:
        if o.name == name:
            return o
    msg = f"no outcome named {name!r}: have {', '.join(o.name for o in outcomes)}"
    raise AdabatchError(msg)


# ---------------------------------------------------------------------------- running


class _Bar:
    """The rich progress bar over a whole experiment (stream seconds done / planned)."""

    def __init__(self, title: str, enabled: bool) -> None:
        self.enabled = enabled
        self.title = title
        self.progress: Any = None
        self.task: Any = None
        self.done_s = 0.0

    def __enter__(self) -> _Bar:
        if self.enabled:
            from rich.progress import (
                BarColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(
                TextColumn("[bold]{task.fields[title]}"),
                BarColumn(),
                TextColumn("{task.fields[count]}"),
                TextColumn("{task.fields[current]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                transient=False,
            )
            self.progress.__enter__()
            self.task = self.progress.add_task(
                self.title, total=1.0, title=self.title, count="", current=""
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.__exit__(*exc)

    def set(self, *, done: int, total: int, current: str, total_s: float, at_s: float) -> None:
        if self.progress is None:
            return
        self.progress.update(
            self.task,
            total=max(total_s, 1e-9),
            completed=min(self.done_s + at_s, total_s),
            count=f"{done}/{total}",
            current=current,
        )

    def finish_config(self, duration_s: float) -> None:
        self.done_s += duration_s


def _check_configs(configs: Sequence[Config], seen: set[str]) -> None:
    for c in configs:
        if c.name == WARMUP_DIR:
            msg = f"experiment config name {c.name!r} is reserved for the warm-up run"
            raise AdabatchError(msg)
        if c.name in seen:
            msg = f"experiment config name {c.name!r} is used twice"
            raise AdabatchError(msg)
        seen.add(c.name)


def _load_outcome(config: Config, run_dir: Path) -> Outcome | None:
    """A finished run of the same config in ``run_dir`` (for --resume), else None."""
    cfg_file, summary_file = run_dir / "config.json", run_dir / "summary.json"
    if not (cfg_file.is_file() and summary_file.is_file()):
        return None
    if json.loads(cfg_file.read_text(encoding="utf-8")) != json.loads(
        json.dumps(config.to_dict(), default=str)
    ):
        return None
    summary = json.loads(summary_file.read_text(encoding="utf-8"))
    if summary.get("interrupted"):
        return None
    records = tuple(read_jsonl(run_dir / "metrics.jsonl"))
    return Outcome(config, summary, records, run_dir)


def prepare_dir(exp_dir: Path, *, force: bool, resume: bool) -> None:
    """Create the experiment directory; refuse to mix with an earlier run unless
    ``resume`` (reuse finished configs) or ``force`` (delete it: only a directory with
    our marker file)."""
    if exp_dir.exists() and any(exp_dir.iterdir()):
        if resume:
            return
        if not force:
            msg = (
                f"{str(exp_dir)!r} already holds results: use another --out, --resume to "
                "continue it, or --force to replace it"
            )
            raise AdabatchError(msg)
        if not (exp_dir / MARKER).is_file():
            msg = f"--force: {str(exp_dir)!r} was not written by adabatch bench; not deleting"
            raise AdabatchError(msg)
        remove_tree(exp_dir, inside=exp_dir.parent, what="--force: experiment directory")
    exp_dir.mkdir(parents=True, exist_ok=True)  # run_experiment writes the marker next


def run_experiment(
    experiment: Experiment,
    settings: Settings,
    *,
    spark: SparkSession | None = None,
    force: bool = False,
    resume: bool = False,
    progress: bool = True,
    on_outcome: Callable[[Outcome], None] | None = None,
) -> ExperimentResult:
    """Run every config of ``experiment`` on real Spark (one session), analyse, and write
    ``summaries.csv``, the figures, ``section.md`` and ``bench.json`` (module docstring)."""
    from adabatch.bench import report
    from adabatch.runs.spark_job import SPARK_CONF, check_run, run_spark
    from adabatch.spark import get_spark

    exp_dir = Path(settings.out) / experiment.name
    ctx = Context(settings, exp_dir)
    configs = list(experiment.configs(settings))
    seen: set[str] = set()
    _check_configs(configs, seen)
    prepare_dir(exp_dir, force=force, resume=resume)
    marker = {
        "experiment": experiment.name,
        "quick": settings.quick,
        "seed": settings.seed,
        "master": redact_url(settings.master),
        "command": settings.command,
    }
    write_atomic(exp_dir / MARKER, (dumps_json(marker, indent=2) + "\n").encode())
    for c in configs:  # every input checked before the first run starts
        check_run(c.run_config(exp_dir / c.name, seed=settings.seed, master=settings.master))
    if spark is None:
        spark = get_spark(settings.master, conf=SPARK_CONF)
    wall0 = time.time()
    first_done = resume and _load_outcome(configs[0], exp_dir / configs[0].name) is not None
    if experiment.warmup_s > 0 and not first_done:
        _warm_up(spark, configs[0], experiment.warmup_s, exp_dir / WARMUP_DIR, settings)
    outcomes: list[Outcome] = []
    reused_s = 0.0
    extra = experiment.planned_followups(settings)
    with _Bar(experiment.name, progress) as bar:
        pending = list(configs)
        while pending:
            for i, config in enumerate(pending):
                ahead = pending[i:]
                known = [o.config for o in outcomes] + ahead
                mean_s = sum(c.duration_s for c in known) / len(known)
                total, total_s = len(known) + extra, sum(c.duration_s for c in known)
                total_s += extra * mean_s
                outcome, reused = _run_one(
                    experiment, config, ctx, spark, resume, run_spark, bar, len(outcomes),
                    total, total_s,
                )  # fmt: skip
                if reused:  # its wall time was spent by an earlier run of the command
                    reused_s += float(outcome.summary.get("wall_s") or 0.0)
                outcomes.append(outcome)
                if on_outcome is not None:
                    on_outcome(outcome)
                bar.finish_config(config.duration_s)
            pending = list(experiment.followups(settings, outcomes))
            _check_configs(pending, seen)
            extra = max(extra - len(pending), 0)
    analysis = experiment.analyze(ctx, outcomes)
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
    write_atomic(exp_dir / MARKER, (dumps_json(marker, indent=2) + "\n").encode())
    return result


def _warm_up(
    spark: SparkSession, first: Config, duration_s: float, run_dir: Path, settings: Settings
) -> None:
    """A short spark-default run of ``first``'s workload and profile, not measured."""
    from adabatch.runs.spark_job import run_spark

    remove_tree(run_dir, inside=run_dir.parent, what="warm-up directory")
    config = dataclasses.replace(
        first,
        name=WARMUP_DIR,
        controller=SPARK_DEFAULT,
        params={},
        trigger="default",
        duration_s=duration_s,
        skip_s=0.0,
    )
    cfg = config.run_config(run_dir, seed=settings.seed, master=settings.master)
    result = run_spark(cfg, spark=spark)
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
) -> tuple[Outcome, bool]:
    """Run ``config`` (or, with ``resume``, load its finished run: then ``True``)."""
    run_dir = ctx.dir / config.name
    if resume:
        found = _load_outcome(config, run_dir)
        if found is not None:
            return found, True
        # a half-finished run of ours: start it again
        remove_tree(run_dir, inside=ctx.dir, what="run directory")
    check_name(config.name, "experiment config name")  # it names a directory
    mark_dir(run_dir, what="run directory")
    text = json.dumps(config.to_dict(), indent=2, default=str) + "\n"
    write_atomic(run_dir / "config.json", text.encode("utf-8"))
    cfg = config.run_config(run_dir, seed=ctx.settings.seed, master=ctx.settings.master)
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
    return Outcome(config, dict(result.summary), tuple(result.records), run_dir), False


def machine_facts() -> dict[str, str]:
    """Cores, memory, Python/Java/Spark versions and the date, for the results page."""
    import datetime
    import os
    import platform
    import subprocess

    facts = {"cores": str(os.cpu_count())}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                facts["memory"] = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        facts["memory"] = "unknown"
    facts["python"] = platform.python_version()
    try:
        proc = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, timeout=30, check=False
        )
        facts["java"] = (proc.stderr or proc.stdout).splitlines()[0].strip()
    except (OSError, IndexError, subprocess.TimeoutExpired):
        facts["java"] = "unknown"
    try:
        import pyspark

        facts["spark"] = pyspark.__version__
    except ImportError:
        facts["spark"] = "not installed"
    facts["os"] = platform.platform()
    facts["date"] = datetime.date.today().isoformat()
    return facts


def run_all(
    settings: Settings,
    *,
    docs_dir: Path,
    force: bool = False,
    resume: bool = False,
    progress: bool = True,
) -> tuple[list[ExperimentResult], Path, list[str]]:
    """Run every available experiment in one SparkSession and regenerate
    ``docs_dir/results.md`` from scratch (:func:`adabatch.bench.report.write_results_page`).
    Returns the results, the page, and the experiments not run (with the reason)."""
    from adabatch.bench import report
    from adabatch.runs.spark_job import SPARK_CONF
    from adabatch.spark import get_spark

    todo = available()
    skipped = [f"{n} (module not written yet)" for n in REGISTRY if n not in todo]
    spark = get_spark(settings.master, conf=SPARK_CONF)
    results = []
    # calibrate first: dybbs, params and pid simulate with its fit when it exists
    for name in sorted(todo, key=lambda n: n != "calibrate"):
        try:
            experiment = get_experiment(name)
            results.append(
                run_experiment(
                    experiment, settings, spark=spark, force=force, resume=resume,
                    progress=progress,
                )
            )  # fmt: skip
        except AdabatchError as exc:  # one failed experiment does not sink the page
            skipped.append(f"{name} ({exc})")
    results.sort(key=lambda r: list(REGISTRY).index(r.experiment.name))
    page = report.write_results_page(
        results,
        docs_dir,
        command=settings.command,
        facts=machine_facts(),
        missing=skipped,
        quick=settings.quick,
    )
    return results, page, skipped
