"""What an experiment of ``adabatch bench`` is made of: configs, outcomes, the analysis.

An experiment is a list of :class:`Config` (one real Spark run each), run one after
another on the same seed in one SparkSession, and an analysis of their results
(:class:`Outcome`) into tables, figures and verdicts computed from the numbers.

Writing an experiment (one module per experiment, registered in
:data:`adabatch.bench.registry.EXPERIMENTS`)::

    from adabatch.bench import figures, report
    from adabatch.bench.model import (
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

    EXPERIMENT = Example()  # registered as "adabatch.bench.experiments.<module>:EXPERIMENT"

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
- :func:`adabatch.bench.runner.run_experiment` runs it all (``adabatch bench NAME``):
  raw per-batch metrics in ``OUT/NAME/CONFIG/`` (``metrics.jsonl``, ``summary.json``,
  ``timeline.png``), ``OUT/NAME/summaries.csv`` (one row per config with its ratios),
  figures, ``OUT/NAME/section.md`` and ``OUT/NAME/bench.json``;
  :func:`adabatch.bench.runner.run_all` runs every registered experiment
  (:mod:`adabatch.bench.registry`) and writes ``docs/results.md``.

Ratios (:func:`adabatch.bench.ratios.ratios`) are always within one run of the experiment
and one group: to the oracle (the stable ``static`` config with the lowest mean batch
latency) and to ``spark-default``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from adabatch.errors import AdabatchError
from adabatch.metrics import BatchRecord, RunSummary, source_backlog_grows
from adabatch.runs.source_spec import GENERATOR, parse_source
from adabatch.streaming.options import SPARK_DEFAULT

if TYPE_CHECKING:
    from adabatch.bench.report import Table
    from adabatch.runs.spark_job import RunConfig

ROLES = ("static", "adaptive", "spark-default", "trigger")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


@dataclass(frozen=True)
class Config:
    """One real Spark run of an experiment (the fields of ``RunConfig`` it sets).

    ``name`` is the run's directory and table label (lower case, digits, ``.``, ``_``,
    ``-``). ``group`` is the table/oracle group. ``labels`` are extra table columns (e.g.
    ``{"rate": "sine"}``). ``source`` is where the run reads (``generator``, ``files:DIR``,
    ``redis://HOST:PORT[/DB]/STREAM``): a live source of its own needs the experiment to
    fill it meanwhile (a producer started by its :meth:`Experiment.hook`).
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
    source: str = GENERATOR

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
        parse_source(self.source, f"config {self.name!r}: source")

    @property
    def live(self) -> bool:
        """Whether the config reads a live source of its own (files, Redis)."""
        return parse_source(self.source).live

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
            source=self.source,
        )

    def to_dict(self) -> dict[str, Any]:
        """The config as ``config.json`` records it: ``source`` only when live (password
        redacted), so a generator run's record is what it was before configs had one."""
        out = dataclasses.asdict(self)
        out["params"] = dict(self.params)
        out["source_options"] = dict(self.source_options)
        out["labels"] = dict(self.labels)
        out["role"] = self.role
        spec = parse_source(self.source)
        if spec.live:
            out["source"] = spec.shown
        else:
            del out["source"]
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
    summary: RunSummary
    records: tuple[BatchRecord, ...]
    dir: Path

    @property
    def name(self) -> str:
        return self.config.name

    @functools.cached_property
    def stable(self) -> bool:
        """The summary's verdict, and the source's backlog did not grow: a run recorded
        before the summary looked at that backlog is judged by the same rule (once per
        outcome: the verdicts ask many times)."""
        return bool(self.summary.stable) and not source_backlog_grows(self.records)

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
    data: tuple[Path, ...] = ()  # more raw files, published and linked beside the CSV


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

    def session_warmup_s(self, settings: Settings) -> float:
        """The warm-up run's stream seconds for ``settings`` (``warmup_s`` by default; an
        experiment whose full run compares CPU closely warms up longer than --quick)."""
        return self.warmup_s

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


@dataclass(frozen=True)
class PartialRun:
    """What ``--only`` ran while other configs of the experiment are not finished in its
    directory yet: no analysis until every one is (a later ``--resume`` runs it)."""

    experiment: Experiment
    only: str
    ran: tuple[Outcome, ...]
    finished: int
    total: int
    dir: Path


def by_name(outcomes: Sequence[Outcome], name: str) -> Outcome:
    """The outcome of the config called ``name``."""
    for o in outcomes:
        if o.name == name:
            return o
    msg = f"no outcome named {name!r}: have {', '.join(o.name for o in outcomes)}"
    raise AdabatchError(msg)
