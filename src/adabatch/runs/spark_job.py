"""One controller steering one real Spark query for a while: what ``adabatch run`` does.

:func:`run_spark` starts (or reuses) a SparkSession, reads the ``adabatch`` source with the
controller, attaches the workload's sink (:mod:`adabatch.workloads`), runs the query for a
duration of stream time, stops it, and writes the same files as a simulation: the
per-batch ``metrics.jsonl`` (written by the source as it goes), ``summary.json``
(:func:`adabatch.metrics.summarize` plus cost) and ``timeline.png``
(:func:`adabatch.report.timeline.plot_timeline`).

Layout of ``out_dir``: ``metrics.jsonl``, ``summary.json``, ``timeline.png``,
``spark_progress.jsonl`` (Spark's own per-batch progress, a line appended as each batch
finishes), ``checkpoint/`` (Spark's) with
``checkpoint/adabatch-state.json`` (the source's) inside, and the workload's SQLite file.
Running again with the same ``out_dir`` restarts the query from its checkpoint.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from adabatch.control.fingerprint import code_fingerprint
from adabatch.errors import AdabatchError
from adabatch.metrics import BatchRecord, RunSummary, read_jsonl, summarize
from adabatch.outputs import OutputDir, open_output
from adabatch.profiles import parse_duration
from adabatch.report.progress import ProgressLine
from adabatch.runs import cpu
from adabatch.runs.checks import check_duration
from adabatch.runs.source_spec import GENERATOR, SourceSpec, parse_source, source_options
from adabatch.streaming.options import SPARK_DEFAULT, parse_options
from adabatch.streaming.state import check_same_query, load_state, read_status
from adabatch.urls import redact_url

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

STATE_FILE = "adabatch-state.json"
# Spark's first micro-batches compile code and start Python workers; a query that has not
# handed out its first batch after this long is stuck.
STARTUP_TIMEOUT_S = 600.0
POLL_S = 0.5
DRAIN_TIMEOUT_S = 60.0  # longest wait for the batch in flight when the duration is over
# The driver's default thread stack overflows in Spark's regex check of a long Python
# traceback when a query is stopped during foreachBatch (StreamExecution.
# isInterruptionException, measured on PySpark 4.3): give threads a larger stack.
SPARK_CONF = {
    "spark.driver.extraJavaOptions": "-Xss16m",
    "spark.ui.showConsoleProgress": "false",
}
# A rerun continues the query (checkpoint, metrics.jsonl, spark_progress.jsonl are kept and
# appended to); the summary and the timeline of the earlier run are replaced.
REPLACED_FILES = ("summary.json", "timeline.png")
PROGRESS_FILE = "spark_progress.jsonl"  # Spark's per-batch progress, one JSON per line
APPENDED_FILES = ("metrics.jsonl", PROGRESS_FILE)
DEFAULT_WARMUP_S = 20.0  # the acceptance criteria judge convergence "after the first 20 s"


def parse_trigger(text: str) -> float | None:
    """``"default"`` -> ``None`` (next batch as soon as the previous ends) or
    ``"processingTime:1s"`` -> ``1.0``."""
    spec = str(text).strip()
    if spec.lower() == "default":
        return None
    kind, sep, value = spec.partition(":")
    if kind.strip().lower() != "processingtime" or not sep:
        msg = f"trigger {text!r} is not allowed: default or processingTime:DURATION (e.g. 1s)"
        raise AdabatchError(msg)
    seconds = parse_duration(value)
    if seconds <= 0:
        msg = f"trigger {text!r}: the processingTime interval must be > 0"
        raise AdabatchError(msg)
    return seconds


@dataclass(frozen=True)
class RunConfig:
    """Everything one Spark run needs; validated by :func:`run_spark` before Spark starts."""

    workload: str
    controller: str
    profile: str
    duration_s: float
    out_dir: Path
    params: Mapping[str, Any] = field(default_factory=dict)
    master: str = "local[*]"
    db_url: str | None = None
    trigger: str = "default"
    seed: int = 0
    keys: int = 1000
    skip_s: float | None = None  # warm-up left out of the means; None: min(20 s, half)
    queue: str = "fifo"
    source_options: Mapping[str, Any] = field(default_factory=dict)
    per_key_commit: bool = False
    # where records come from: generator, files:DIR or redis://HOST:PORT[/DB]/STREAM; with
    # a live source (files, redis) ``profile`` only describes the producer ("" if unknown)
    source: str = GENERATOR

    @property
    def source_spec(self) -> SourceSpec:
        """The parsed ``source`` (one line if it is not one of the allowed forms)."""
        return parse_source(self.source, "source")

    @property
    def label(self) -> str:
        """What the run reads, for titles and summaries: the profile of the generator, or
        the live source (with the producer's profile when given)."""
        spec = self.source_spec
        if not spec.live:
            return self.profile
        return f"{spec.shown} ({self.profile})" if self.profile else spec.shown

    @property
    def warmup_s(self) -> float:
        """Seconds of stream time left out of the summary's means."""
        if self.skip_s is None:
            return min(DEFAULT_WARMUP_S, self.duration_s / 2)
        return self.skip_s

    @property
    def run_id(self) -> str:
        """Stable for an output directory, so a restart continues the same run."""
        digest = hashlib.sha1(str(Path(self.out_dir).resolve()).encode()).hexdigest()[:12]
        return f"{self.workload}-{digest}"

    @property
    def state_path(self) -> Path:
        return Path(self.out_dir) / "checkpoint" / STATE_FILE


@dataclass(frozen=True)
class Progress:
    """What the live progress line shows."""

    stream_s: float | None  # stream time now (None before the stream started)
    duration_s: float  # stream time at which the run stops
    last: BatchRecord | None
    batches: int
    records: int
    queue_len: int

    def text(self) -> str:
        """The progress line: stream time, batches and the last batch's numbers."""
        if self.stream_s is None:
            return "starting Spark and the query ..."
        text = f"t {self.stream_s:6.1f}/{self.duration_s:g}s  batches {self.batches:4d}"
        if self.last is not None:
            r = self.last
            text += (
                f"  interval {r.interval_s:5.2f}s  proc {r.processing_s:5.2f}s"
                f"  queue {r.queue_delay_s:5.2f}s ({self.queue_len})"
                f"  latency {r.latency_s:5.2f}s  blocks {r.blocks}"
            )
        return text


class SparkProgress(ProgressLine):
    """The live progress line of a Spark run, an ``on_progress`` for :func:`run_spark`:
    rewritten at every report on a terminal, a line every ``every_s`` seconds of stream
    time otherwise."""

    def __init__(self, stream: TextIO | None = None, every_s: float = 5.0) -> None:
        super().__init__(stream, every_s=every_s)

    def __call__(self, p: Progress) -> None:
        self.show(p.text(), at=0.0 if p.stream_s is None else p.stream_s)


@dataclass(frozen=True)
class RunResult:
    """A finished (or interrupted) Spark run: every batch, the summary, the files."""

    records: tuple[BatchRecord, ...]
    summary: RunSummary
    paths: dict[str, Path]
    interrupted: bool


def query_error(exc: BaseException | Any) -> str:
    """One line from a failed query: our AdabatchError's message if it carries one."""
    text = str(getattr(exc, "desc", None) or exc)
    found = re.findall(r"AdabatchError: ([^\n]+)", text)
    if found:
        return found[-1].strip()
    first = next((line.strip() for line in text.splitlines() if line.strip()), "unknown error")
    return f"the Spark query failed: {first[:300]}"


class _MetricsTail:
    """Reads the lines appended to ``metrics.jsonl`` since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pos = path.stat().st_size if path.exists() else 0
        self.earlier = len(read_jsonl(path)) if path.exists() else 0  # from earlier runs
        self.records: list[BatchRecord] = []

    def poll(self) -> list[BatchRecord]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as fh:
            fh.seek(self.pos)
            data = fh.read()
        complete = data[: data.rfind(b"\n") + 1]
        self.pos += len(complete)
        new = [
            BatchRecord.from_dict(json.loads(line))
            for line in complete.decode("utf-8").splitlines()
            if line.strip()
        ]
        self.records.extend(new)
        return new


def spark_durations(
    records: Sequence[BatchRecord], progress: Sequence[Mapping[str, Any]]
) -> list[BatchRecord]:
    """Records with processing times from Spark's own progress reports.

    Under a ``processingTime`` trigger Spark asks the source for the next batch only at the
    next trigger, so the source sees a batch end late; Spark's ``triggerExecution`` duration
    of the micro-batch with the same records is the processing time then. Records are
    matched to progress reports in order by their record counts (:func:`batch_records`).
    """
    reports = [p for p in progress if "triggerExecution" in p.get("durationMs", {})]
    out, j = [], 0
    for rec in records:
        while j < len(reports) and batch_records(reports[j]) != rec.records:
            j += 1
        if j == len(reports):
            out.append(rec)
            continue
        p = reports[j]["durationMs"]["triggerExecution"] / 1000.0
        j += 1
        finished = rec.started_at + p
        out.append(
            dataclasses.replace(
                rec,
                processing_s=p,
                finished_at=finished,
                latency_s=rec.interval_s + rec.queue_delay_s + p,
                record_latency_s=rec.record_latency_s - (rec.finished_at - finished),
            )
        )
    return out


def batch_records(progress: Mapping[str, Any]) -> int:
    """The records a micro-batch read from our source: its end offset less its start
    offset. ``numInputRows`` is not it when a query reads the source twice (the join
    workload's two streams count every record twice)."""
    sources = progress.get("sources") or []
    if not sources:
        return int(progress.get("numInputRows", -1))
    try:
        return sum(
            int(src["endOffset"]["offset"]) - int(src["startOffset"]["offset"]) for src in sources
        )
    except (KeyError, TypeError, ValueError):
        return int(progress.get("numInputRows", -1))


def check_run(cfg: RunConfig) -> tuple[Any, Any, float | None]:
    """Validate everything that can be checked without Spark; return workload, its config
    and the trigger interval."""
    from adabatch.workloads import WorkloadConfig, get_workload

    workload = get_workload(cfg.workload)
    check_duration(cfg.duration_s, cfg.warmup_s)
    if not cfg.source_spec.live and not cfg.profile.strip():
        msg = "a run on the generator needs a rate profile (--profile), e.g. constant:2000"
        raise AdabatchError(msg)
    options = parse_options(_source_options(cfg))
    trigger_s = parse_trigger(cfg.trigger)
    if trigger_s is not None and cfg.controller != SPARK_DEFAULT:
        msg = (
            f"trigger {cfg.trigger!r} fights the controller's own schedule: use it with "
            f"--controller {SPARK_DEFAULT} (controllers need the default trigger)"
        )
        raise AdabatchError(msg)
    wcfg = WorkloadConfig(
        name=cfg.workload,
        out_dir=Path(cfg.out_dir),
        run_id=cfg.run_id,
        keys=cfg.keys,
        db_url=cfg.db_url,
        per_key_commit=cfg.per_key_commit,
    )
    saved = load_state(cfg.state_path)
    if saved is not None:
        from adabatch.streaming.state import fingerprint_before_start

        check_same_query(cfg.state_path, saved, fingerprint_before_start(options, saved))
    elif (Path(cfg.out_dir) / "checkpoint" / "offsets").exists():
        msg = (
            f"{str(Path(cfg.out_dir) / 'checkpoint')!r} is a checkpoint without adabatch "
            "state (a different query?): use a new --out"
        )
        raise AdabatchError(msg)
    workload.check(wcfg)
    return workload, wcfg, trigger_s


def record_source_options(cfg: RunConfig) -> dict[str, str]:
    """The record source's own options (see :func:`source_options`)."""
    return source_options(cfg.source_spec, cfg.seed, cfg.keys, cfg.source_options)


def _source_options(cfg: RunConfig) -> dict[str, str]:
    out = {
        "source": cfg.source_spec.name,
        "controller": cfg.controller,
        "queue": cfg.queue,
        "metricsPath": str((Path(cfg.out_dir) / "metrics.jsonl").resolve()),
        "statePath": str(cfg.state_path.resolve()),
    }
    if cfg.profile.strip():
        out["profile"] = cfg.profile
    out.update({f"param.{k}": str(v) for k, v in cfg.params.items()})
    out.update(record_source_options(cfg))
    return out


def run_spark(
    cfg: RunConfig,
    *,
    spark: SparkSession | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    stop: threading.Event | None = None,
) -> RunResult:
    """Run ``cfg`` on real Spark and write the run's files (see the module docstring).

    Stops at ``cfg.duration_s`` of stream time, when ``stop`` is set, or on
    ``KeyboardInterrupt`` (the files are written in every case).
    """
    from adabatch.api import absolute_trace

    cfg = dataclasses.replace(cfg, profile=absolute_trace(cfg.profile))
    workload, wcfg, trigger_s = check_run(cfg)
    with open_output(cfg.out_dir, replaces=REPLACED_FILES) as od:
        return _run_spark(od, cfg, workload, wcfg, trigger_s, spark, on_progress, stop)


def _run_spark(
    od: OutputDir,
    cfg: RunConfig,
    workload: Any,
    wcfg: Any,
    trigger_s: float | None,
    spark: SparkSession | None,
    on_progress: Callable[[Progress], None] | None,
    stop: threading.Event | None,
) -> RunResult:
    from adabatch.spark import get_spark
    from adabatch.streaming.progress import DRAIN_TIMEOUT_S as EVENTS_TIMEOUT_S
    from adabatch.streaming.progress import ProgressLog, attach, detach, read_progress

    out = od.root
    paths = {
        "metrics": out / "metrics.jsonl",
        "summary": out / "summary.json",
        "timeline": out / "timeline.png",
        "progress": out / PROGRESS_FILE,
        "checkpoint": out / "checkpoint",
    }
    if spark is None:
        spark = get_spark(cfg.master, conf=SPARK_CONF)
    od.begin(appends=APPENDED_FILES)
    writer = _writer(spark, cfg, workload, wcfg, trigger_s, paths["checkpoint"])
    tail = _MetricsTail(paths["metrics"])
    status = read_status(cfg.state_path)
    # the generator's clock pauses while the query is down, a live source's does not: a
    # resumed live run stops ``duration_s`` after the stream time it is first seen at
    resumed_live = cfg.source_spec.live and status is not None
    stop_at = None if resumed_live else _resumed_at(status) + cfg.duration_s
    meter = cpu.RunMeter(cpu.session_master(spark))
    # Spark's progress goes to spark_progress.jsonl as each batch finishes; a rerun
    # appends, so this run's reports are the lines after ``since``
    since = _file_size(paths["progress"])
    log = ProgressLog(paths["progress"])
    attach(spark, log)
    try:
        wall0 = time.time()
        query = writer.start()
        log.follow(query.id)
        interrupted = False
        try:
            _watch(query, cfg, stop_at, tail, on_progress, stop, wall0, meter)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            error = query.exception() if not query.isActive else None
            query.stop()
            meter.sample(force=True)
    finally:
        if not detach(spark, log):  # every event of the stopped query has arrived
            warnings.warn(
                "Spark did not deliver every progress event within "
                f"{EVENTS_TIMEOUT_S:g} s: spark_progress.jsonl may miss the last batches",
                stacklevel=2,
            )
    if error is not None:
        raise AdabatchError(query_error(error))
    log.check()
    progress = read_progress(paths["progress"], since)
    tail.poll()
    records = read_jsonl(paths["metrics"]) if paths["metrics"].exists() else []
    if trigger_s is not None:
        records = spark_durations(records, progress)
    extra = _summary_extra(cfg, meter, progress, tail.records, interrupted)
    summary = _summarize(cfg, records, extra)
    if records:
        from adabatch.report.timeline import timeline_figure

        where = f"Spark {redact_url(cfg.master)}"
        title = f"{cfg.controller} on {cfg.workload} under {cfg.label} ({where})"
        od.savefig(timeline_figure(records, title), "timeline.png")
    od.write_summary(summary.to_json())
    od.complete()
    return RunResult(tuple(records), summary, paths, interrupted)


def _resumed_at(status: Any) -> float:
    """The stream time a query resumes at (0 for a new one)."""
    return status.last_seen if status is not None else 0.0


def _file_size(path: Path) -> int:
    """Bytes in ``path`` (0 if absent; a symlink is not followed)."""
    try:
        return path.lstat().st_size
    except FileNotFoundError:
        return 0


def _writer(
    spark: SparkSession,
    cfg: RunConfig,
    workload: Any,
    wcfg: Any,
    trigger_s: float | None,
    checkpoint: Path,
) -> Any:
    """The query's ``DataStreamWriter``: the ``adabatch`` source steered by the controller,
    the workload's sink, the checkpoint and the trigger."""
    from adabatch.api import read_stream

    opts = _source_options(cfg)
    df = read_stream(
        spark,
        source=opts["source"],
        controller=cfg.controller,
        params=cfg.params,
        metrics_path=opts["metricsPath"],
        state_path=opts["statePath"],
        queue=cfg.queue,
        **({"profile": opts["profile"]} if "profile" in opts else {}),
        **record_source_options(cfg),
    )
    writer = (
        workload.start(df, wcfg)
        .option("checkpointLocation", str(checkpoint.resolve()))
        .queryName(f"adabatch_{cfg.workload}_{cfg.run_id.split('-')[-1]}")
    )
    if trigger_s is not None:
        writer = writer.trigger(processingTime=f"{round(trigger_s * 1000)} milliseconds")
    return writer


def _summary_extra(
    cfg: RunConfig,
    meter: cpu.RunMeter,
    progress: Sequence[Mapping[str, Any]],
    new_records: Sequence[BatchRecord],
    interrupted: bool,
) -> dict[str, Any]:
    """What a Spark run's summary adds to :func:`~adabatch.metrics.summarize`'s fields:
    the run's settings, wall time, Spark's busy fraction and the CPU cost of this run's
    batches (``new_records``: a restarted run's earlier batches cost nothing now), with
    what that figure covers (``cpu_scope``: off a local master it is not measured)."""
    wall = meter.wall_s
    spark_busy_s = sum(p.get("durationMs", {}).get("triggerExecution", 0) for p in progress)
    return {
        "mode": "spark",
        "source": cfg.source_spec.shown,
        "master": redact_url(cfg.master),
        "trigger": cfg.trigger,
        "queue": cfg.queue,
        "seed": cfg.seed,
        "keys": cfg.keys,
        "controller_params": dict(cfg.params),
        "controller_code": code_fingerprint(cfg.controller),
        "requested_duration_s": cfg.duration_s,
        "interrupted": interrupted,
        "wall_s": wall,
        "spark_busy_fraction": spark_busy_s / 1000.0 / wall if wall > 0 else None,
        **meter.cost(sum(r.records for r in new_records)),
        "lost_reports": (load_state(cfg.state_path) or {}).get("lost_reports", 0),
    }


def _summarize(cfg: RunConfig, records: Sequence[BatchRecord], extra: dict[str, Any]) -> RunSummary:
    """The run's summary over every batch of the query (a restarted run's too), over the
    stream time the source has reached, with the controller's latency target as it left it."""
    from adabatch.streaming.runtime import saved_target

    status = read_status(cfg.state_path)
    stream_s = status.last_seen if status is not None else 0.0
    return summarize(
        records,
        controller=cfg.controller,
        workload=cfg.workload,
        profile=cfg.label,
        duration_s=stream_s,
        final_queue_len=status.queue_len if status is not None else 0,
        skip_s=cfg.warmup_s if stream_s > cfg.warmup_s else 0.0,
        extra=extra,
        target=saved_target(parse_options(_source_options(cfg))),
    )


def _watch(
    query: StreamingQuery,
    cfg: RunConfig,
    stop_at: float | None,
    tail: _MetricsTail,
    on_progress: Callable[[Progress], None] | None,
    stop: threading.Event | None,
    wall0: float,
    meter: cpu.RunMeter,
) -> None:
    """Wait until stream time ``stop_at`` (``None``: ``cfg.duration_s`` after the first
    stream time this query reports) or a stop, reporting progress and sampling the CPU
    meter."""
    while True:
        if not query.isActive:
            return
        meter.sample()
        tail.poll()
        status = read_status(cfg.state_path)
        if status is not None and status.saved_at < wall0:
            status = None  # written by an earlier run: its clock is not this query's
        stream_s = status.stream_time(time.time()) if status is not None else None
        if stop_at is None and stream_s is not None:
            stop_at = stream_s + cfg.duration_s
        if on_progress is not None:
            on_progress(
                Progress(
                    stream_s=stream_s,
                    duration_s=cfg.duration_s if stop_at is None else stop_at,
                    last=tail.records[-1] if tail.records else None,
                    batches=len(tail.records),
                    records=sum(r.records for r in tail.records),
                    queue_len=status.queue_len if status is not None else 0,
                )
            )
        if stream_s is not None and stop_at is not None and stream_s >= stop_at:
            _drain(query, cfg, tail, stop, meter)
            return
        if stream_s is None and time.time() - wall0 > STARTUP_TIMEOUT_S:
            msg = f"the query did not start its stream within {STARTUP_TIMEOUT_S:g} s"
            raise AdabatchError(msg)
        if stop is not None and stop.wait(POLL_S):
            return
        if stop is None:
            time.sleep(POLL_S)


def _drain(
    query: StreamingQuery,
    cfg: RunConfig,
    tail: _MetricsTail,
    stop: threading.Event | None,
    meter: cpu.RunMeter,
) -> None:
    """Let the batch Spark is processing finish, so it is measured and committed, before
    the query stops (bounded by ``DRAIN_TIMEOUT_S``); a batch handed out meanwhile is
    interrupted by the stop and replayed by a restart."""
    status = read_status(cfg.state_path)
    if status is None:
        return
    lost = int((load_state(cfg.state_path) or {}).get("lost_reports", 0))
    deadline = time.time() + DRAIN_TIMEOUT_S
    while query.isActive and time.time() < deadline:
        meter.sample()
        tail.poll()
        done = tail.earlier + len(tail.records) + lost >= status.handed
        if done or (stop is not None and stop.is_set()):
            return
        time.sleep(0.05)
