"""Experiment 11, ``overhead``: what reading through adabatch costs (our own measurement;
no paper figure answers it).

Reduce at a constant 5,000 records/s on the bench's master, every run the same duration,
one after another, compared on CPU seconds per million records (the driver's process
tree, :mod:`adabatch.runs.cpu`):

1. adabatch's own cost against Spark's trigger: ``static-1s`` and ``static-2s`` (the
   ``static`` controller, 2 blocks) against ``trigger-1s`` and ``trigger-2s`` (Spark's
   ``processingTime`` trigger at the same interval), all on the generator;
2. real sources against the generator: ``files-static-1s`` reads a fresh landing directory
   and ``redis-static-1s`` a fresh Redis Stream, each filled while it runs by ``adabatch
   produce`` sending the same profile and seed, against ``static-1s`` on the generator.

The producer must not count as the run's cost, and the meter counts every descendant of
this process (a child's CPU while it lives and, once reaped, through our reaped-children
time). So the producer is started by a launcher that exits at once (:func:`start_detached`):
it is re-parented away from our tree and never reaped by us. It still competes with Spark
for the cores, as a real producer on the same machine would. Its ``--duration`` is the
run's plus :data:`MARGIN_S`, so it ends on its own even if the bench dies; the hook stops
it (SIGINT: the file or pipeline in hand is finished) once the run is over.

When a live run ends the hook also checks it, exactly once: the database's per-key totals
must equal those of the first ``N`` records that landed, ``N`` the records the database
holds (the sources number records in landing order, so a run reads a prefix), and it
records how many the producer had written by the time the run reached its duration. Both
go to ``producer.json`` in the run's directory; the landed data is then deleted (a landing
directory of a 90 s run is ~70 MB).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
from adabatch.errors import AdabatchError
from adabatch.outputs import dumps_json, mark_dir, remove_tree, write_atomic
from adabatch.runs.produce import CHUNK_RECORDS, Totals, add_totals, redis_client
from adabatch.runs.source_spec import SourceSpec, parse_source, parse_target
from adabatch.runs.spark_job import parse_trigger
from adabatch.workloads.base import DEFAULT_DB_FILE

PROFILE = "constant:5000"
FULL_S, QUICK_S = 90.0, 20.0  # stream seconds of every run
FULL_SKIP_S, QUICK_SKIP_S = 10.0, 5.0
BLOCKS = 2
# The JVM was still compiling the reduce 8 s into a session (a batch's processing fell from
# 0.9 s to 0.45 s over the first measured run's 20 s), which would be charged to the first
# config: a full run, where a few percent decide, warms up longer.
QUICK_WARMUP_S, FULL_WARMUP_S = 8.0, 40.0
MARGIN_S = 30.0  # the producer's duration beyond the run's: Spark's start-up and the drain
STOP_GRACE_S = 15.0  # a stopped producer that has not exited by then is killed
REDIS_URL = "redis://127.0.0.1:6379/0"
LANDING = "landing"
PRODUCER_FILE = "producer.json"
PRODUCE_LOG = "produce.log"
TOTALS_TABLE = "adabatch_reduce_totals"  # reduce's table under the default prefix
# headline bounds of the full run (a measurement: reported, never adjusted)
TRIGGER_BOUND, SOURCE_BOUND = 1.03, 1.25
READ_SHARE = 0.9  # a live run reads at least this share of what was produced during it
_PART = re.compile(r"^part-(\d+)-(\d+)\.json$")
_LAUNCHER = r"""
import os, subprocess, sys
log = open(sys.argv[1], "ab")
p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log,
                     stderr=subprocess.STDOUT, start_new_session=True)
print(p.pid, flush=True)
os._exit(0)
"""


# -- a producer outside our process tree ---------------------------------------------------


def proc_start(pid: int) -> int | None:
    """Start time (clock ticks since boot) of a live ``pid``; None if gone or a zombie."""
    try:
        text = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return None if fields[0] == "Z" else int(fields[19])


def start_detached(argv: Sequence[str], log: Path) -> tuple[int, int]:
    """Start ``argv`` in a session of its own, output appended to ``log``, through a
    launcher that exits at once: the process is not our descendant, so the CPU meter never
    counts it. Returns its pid and start time (to signal it safely later)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(log), *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    pid = int(proc.stdout.strip() or 0) if proc.returncode == 0 else 0
    started = proc_start(pid) if pid > 0 else None
    if started is None:
        msg = f"could not start {' '.join(argv[:4])} ...: {proc.stderr.strip()[-300:]}"
        raise AdabatchError(msg)
    return pid, started


def stop_detached(pid: int, started: int, grace_s: float = STOP_GRACE_S) -> str:
    """SIGINT ``pid`` (if it is still the process started at ``started``) and wait for it
    to end; SIGKILL after ``grace_s``. Says how it ended."""
    if proc_start(pid) != started:
        return "exited"
    os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + grace_s
    while proc_start(pid) == started:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            return "killed"
        time.sleep(0.05)  # waiting for another process to finish its file
    return "stopped"


# -- what landed and what the run committed ------------------------------------------------


def produced_so_far(spec: SourceSpec) -> int:
    """Records the producer has written to ``spec`` so far (cheap: the newest file's first
    offset and its lines, or the stream's length)."""
    if spec.name == "redis":
        client = redis_client(spec)
        try:
            return int(client.xlen(spec.option("stream")))
        finally:
            client.close()
    directory = Path(spec.option("path"))
    parts = [(int(m[1]), int(m[2]), p) for p in directory.iterdir() if (m := _PART.match(p.name))]
    if not parts:
        return 0
    _, first, path = max(parts)
    with path.open("rb") as fh:
        return first + sum(1 for line in fh if line.strip())


def landed_prefix(spec: SourceSpec, count: int) -> tuple[Totals, int]:
    """Per-key totals of the first ``count`` records that landed in ``spec`` (landing
    order: file sequence, or stream id) and how many there were (fewer if fewer landed)."""
    totals: Totals = {}
    taken = 0
    if spec.name == "redis":
        client = redis_client(spec)
        low = "-"
        try:
            while taken < count:
                n = min(CHUNK_RECORDS, count - taken)
                entries = client.xrange(spec.option("stream"), min=low, max="+", count=n)
                if not entries:
                    break
                keys = [int(f[b"key"]) for _, f in entries]
                add_totals(totals, keys, [float(f[b"value"]) for _, f in entries])
                taken += len(entries)
                low = "(" + entries[-1][0].decode()
        finally:
            client.close()
        return totals, taken
    import pyarrow as pa
    import pyarrow.json as pajson

    schema = pa.schema([pa.field("key", pa.int64()), pa.field("value", pa.float64())])
    parse = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    directory = Path(spec.option("path"))
    files = sorted((int(m[1]), p) for p in directory.iterdir() if (m := _PART.match(p.name)))
    for _, path in files:
        if taken >= count:
            break
        table = pajson.read_json(path, parse_options=parse).slice(0, count - taken)
        add_totals(totals, table.column("key").to_numpy(), table.column("value").to_numpy())
        taken += table.num_rows
    return totals, taken


def db_totals(run_dir: Path) -> Totals:
    """Per-key (records, value sum) the run's reduce committed (empty if none)."""
    db = run_dir / DEFAULT_DB_FILE
    if not db.is_file():
        return {}
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
        try:
            rows = con.execute(
                f"SELECT key, sum(records), sum(value_sum) FROM {TOTALS_TABLE} GROUP BY key"
            ).fetchall()
        except sqlite3.OperationalError:
            return {}
    return {int(k): (int(n), float(s)) for k, n, s in rows}


def exactly_once(run_dir: Path, spec: SourceSpec) -> dict[str, Any]:
    """The database's totals against the landed prefix of the same length."""
    committed = db_totals(run_dir)
    read = sum(n for n, _ in committed.values())
    landed, taken = landed_prefix(spec, read)
    wrong = sorted(k for k in set(committed) | set(landed) if committed.get(k) != landed.get(k))
    return {
        "read": read,
        "exactly_once": read > 0 and taken == read and not wrong,
        "mismatched_keys": len(wrong),
        "landed_prefix": taken,
    }


class LiveProducer:
    """A run hook: ``adabatch produce`` filling the run's fresh source while it runs
    (started on creation, outside our process tree); ``update`` notes what was produced
    when the run reaches its duration, ``close`` stops it, checks the run exactly once
    and writes :data:`PRODUCER_FILE`."""

    def __init__(self, spec: SourceSpec, run_dir: Path, duration_s: float, seed: int) -> None:
        self.spec, self.run_dir, self.duration_s = spec, run_dir, duration_s
        self.produced_at_stop: int | None = None
        self.at_stream_s: float | None = None
        self.error = ""
        fresh(spec, run_dir)
        argv = [
            sys.executable, "-m", "adabatch.cli", "produce", "--to", spec.text,
            "--profile", PROFILE, "--duration", f"{duration_s + MARGIN_S:g}s",
            "--seed", str(seed),
        ]  # fmt: skip
        self.pid, self.started = start_detached(argv, run_dir / PRODUCE_LOG)

    def update(self, stream_s: float) -> None:
        if self.at_stream_s is None and stream_s >= self.duration_s:
            self.at_stream_s = stream_s
            try:
                self.produced_at_stop = produced_so_far(self.spec)
            except (AdabatchError, OSError) as exc:  # reported, the run goes on
                self.error = str(exc)[:300]

    def close(self) -> None:
        record: dict[str, Any] = {
            "target": self.spec.shown,
            "producer_pid": self.pid,
            "producer_ended": stop_detached(self.pid, self.started),
            "produced_at_stop": self.produced_at_stop,
            "at_stream_s": self.at_stream_s,
        }
        try:
            record["produced_total"] = produced_so_far(self.spec)
            record.update(exactly_once(self.run_dir, self.spec))
            discard(self.spec, self.run_dir)
        except (AdabatchError, OSError, ValueError, sqlite3.Error) as exc:
            self.error = self.error or str(exc)[:300]
        if self.error:
            record["check_error"] = self.error
        self.run_dir.mkdir(parents=True, exist_ok=True)
        text = dumps_json(record, indent=2) + "\n"
        write_atomic(self.run_dir / PRODUCER_FILE, text.encode("utf-8"))


def discard(spec: SourceSpec, run_dir: Path) -> None:
    """Delete what landed (checked already; see the module docstring)."""
    if spec.name == "redis":
        client = redis_client(spec)
        try:
            client.delete(spec.option("stream"))
        finally:
            client.close()
    else:
        remove_tree(Path(spec.option("path")), inside=run_dir, what="landing directory")


def fresh(spec: SourceSpec, run_dir: Path) -> None:
    """An empty landing directory of our own, or no stream under the run's key."""
    discard(spec, run_dir)
    if spec.name != "redis":
        mark_dir(Path(spec.option("path")), what="landing directory")


def read_producer(outcome: Outcome) -> dict[str, Any]:
    """A live run's :data:`PRODUCER_FILE` (empty if it has none)."""
    path = outcome.dir / PRODUCER_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


# -- the experiment ------------------------------------------------------------------------


def live_source(kind: str, run_dir: Path) -> str:
    """The fresh source of a live run: a landing directory inside the run's directory, or
    a Redis Stream whose key is unique to the run's directory."""
    if kind == "files":
        return f"files:{run_dir.resolve() / LANDING}"
    digest = hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:12]
    return f"{REDIS_URL}/adabatch-bench-overhead-{digest}"


def interval_of(config: Config) -> float:
    """The configured interval: the static controller's, or the trigger's (NaN: none)."""
    if config.role == "static":
        return float(config.params["interval"])
    seconds = parse_trigger(config.trigger)
    return math.nan if seconds is None else seconds


def cpu(outcome: Outcome) -> float:
    return outcome.get("cpu_s_per_million_records")


def ratio(outcome: Outcome, ref: Outcome | None) -> float:
    """CPU per record over the reference's (NaN when either is missing)."""
    if ref is None:
        return math.nan
    a, b = cpu(outcome), cpu(ref)
    return a / b if math.isfinite(a) and math.isfinite(b) and b > 0 else math.nan


def reference(outcome: Outcome, outcomes: Sequence[Outcome]) -> Outcome | None:
    name = outcome.config.labels.get("reference", "")
    return next((o for o in outcomes if o.name == name), None)


class Overhead(Experiment):
    name = "overhead"
    title = "What reading through adabatch costs: against Spark's trigger, and real sources"
    paper = "no paper figure (our own measurement of adabatch's read overhead)"
    description = (
        f"Reduce at {PROFILE} records/s, every run {FULL_S:g} s ({QUICK_S:g} s in --quick) "
        "one after another on the same seed, compared on CPU seconds per million records "
        "(the driver's process tree). adabatch's static controller (interval 1 s and 2 s, "
        f"{BLOCKS} blocks) against Spark's processingTime trigger at the same interval on "
        "the generator; and static 1 s reading a landing directory (JSON files, one a "
        "second) and a Redis Stream, each fresh and filled during the run by `adabatch "
        "produce` with the same profile and seed in a process outside the measured tree, "
        "against static 1 s on the generator. --quick: static 1 s, the 1 s trigger and the "
        "two live sources."
    )

    warmup_s = QUICK_WARMUP_S

    def configs(self, settings: Settings) -> list[Config]:
        # the runner reads warmup_s after asking for the configs (as for every experiment)
        self.warmup_s = QUICK_WARMUP_S if settings.quick else FULL_WARMUP_S
        d = QUICK_S if settings.quick else FULL_S
        skip = QUICK_SKIP_S if settings.quick else FULL_SKIP_S
        common: dict[str, Any] = {"workload": "reduce", "profile": PROFILE, "duration_s": d}
        common["skip_s"] = skip
        gen = {"source": "generator"}
        exp_dir = Path(settings.out) / self.name
        intervals = (1.0,) if settings.quick else (1.0, 2.0)
        statics = static_sweep(intervals, blocks=BLOCKS, group="generator", **common)
        sd, *triggers = spark_baselines(triggers=intervals, group="generator", **common)
        pairs = []
        for s, t in zip(statics, triggers, strict=True):
            pairs.append(_labelled(s, gen, reference=t.name))
            pairs.append(_labelled(t, gen, reference=""))
        live = [
            Config(
                f"{kind}-static-1s",
                controller="static",
                params={"interval": 1.0, "blocks": BLOCKS},
                group="live sources",
                source=live_source(kind, exp_dir / f"{kind}-static-1s"),
                labels={"source": kind, "reference": "static-1s"},
                **common,
            )
            for kind in ("files", "redis")
        ]
        out = [*pairs[:2], *live, *pairs[2:]]
        if not settings.quick:
            out.append(_labelled(sd, gen, reference=""))
        return out

    def hook(self, config: Config, ctx: Context) -> LiveProducer | None:
        if not config.live:
            if config.name == self.configs(ctx.settings)[0].name:
                redis_client(parse_target(f"{REDIS_URL}/adabatch-bench-overhead")).close()
            return None  # (above: Redis answers before the first run, not after four)
        run_dir = ctx.dir / config.name
        return LiveProducer(
            parse_source(config.source), run_dir, config.duration_s, ctx.settings.seed
        )

    def analyze(self, ctx: Context, outcomes: Sequence[Outcome]) -> Analysis:
        verdicts = overhead_verdicts(outcomes, quick=ctx.settings.quick)
        return Analysis(
            tables=(cost_table(outcomes), *report.group_tables(outcomes)),
            figures=(
                figures.latency_vs_cost(
                    outcomes,
                    ctx.path("latency-vs-cost.png"),
                    f"Reduce at {PROFILE}: adabatch vs Spark's trigger, and live sources",
                ),
            ),
            shows=_shows(outcomes),
            paper=(
                "No paper reports this: it is our own measurement of what adabatch adds to "
                "a Spark query's cost, the price of choosing the interval per batch, and "
                "of reading real sources instead of generating records in the executors."
            ),
            verdicts=tuple(verdicts),
            notes=(
                "The producer of a live run is not in the CPU figure (it runs outside the "
                "driver's process tree), nor is the Redis server's, but both share the "
                "machine's cores with Spark. Every producer's record (what it wrote by the "
                "end of the run, the exactly-once check) is in "
                f"`{self.name}/CONFIG/{PRODUCER_FILE}`.",
            ),
        )


def _labelled(config: Config, labels: dict[str, str], *, reference: str) -> Config:
    return dataclasses.replace(config, labels={**labels, "reference": reference})


# -- analysis ------------------------------------------------------------------------------


def _pct(part: float, whole: float) -> str:
    return f"{part / whole:.1%}" if whole > 0 else "-"


def read_share(outcome: Outcome) -> float:
    """What a live run committed over what its producer wrote by the run's end."""
    rec = read_producer(outcome)
    produced, read = rec.get("produced_at_stop"), rec.get("read")
    if not produced or read is None:
        return math.nan
    return float(read) / float(produced)


def cost_table(outcomes: Sequence[Outcome]) -> report.Table:
    """CPU per million records and the ratio to each run's reference."""
    rows = []
    for o in outcomes:
        ref = reference(o, outcomes)
        rec = read_producer(o) if o.config.live else {}
        produced = rec.get("produced_at_stop")
        once = rec.get("exactly_once")
        rows.append(
            (
                o.name,
                o.config.labels.get("source", "generator"),
                report.describe_config(o),
                f"{interval_of(o.config):g}" if o.config.role != "spark-default" else "-",
                report.fmt(o.get("mean_interval_s"), 2),
                report.fmt(o.stable),
                f"{int(o.get('records')):,}" if math.isfinite(o.get("records")) else "-",
                report.fmt_cost(o.summary, "cpu_s_per_million_records"),
                ref.name if ref is not None else "-",
                report.fmt_ratio(ratio(o, ref)),
                f"{rec.get('read', 0):,} / {produced:,} ({_pct(rec.get('read', 0), produced)})"
                if produced
                else "-",
                "-" if once is None else report.fmt(bool(once)),
            )
        )
    columns = (
        "config", "source", "what", "interval (s)", "mean interval (s)", "stable", "records",
        "CPU s/M rec", "reference", "CPU vs reference", "read / produced", "exactly once",
    )  # fmt: skip
    return report.Table(
        "CPU per record against the reference (the trigger at the same interval; static 1 s "
        "on the generator for the live sources)",
        columns,
        tuple(rows),
        note="read / produced: records the database committed over records the producer had "
        "written when the run reached its duration",
    )


def _bound(outcomes: Sequence[Outcome], names: Sequence[str], bound: float, what: str) -> Verdict:
    """``CPU(name) <= bound x CPU(its reference)`` for every name that ran."""
    got = {o.name: o for o in outcomes}
    ratios = {n: ratio(got[n], reference(got[n], outcomes)) for n in names if n in got}
    holds = bool(ratios) and all(math.isfinite(r) and r <= bound for r in ratios.values())
    evidence = ", ".join(
        f"{n} {report.fmt_ratio(r)} of {got[n].config.labels.get('reference')}"
        for n, r in ratios.items()
    )
    return Verdict(f"{what} (CPU per record <= {bound:g}x)", holds, evidence or "not run")


def overhead_verdicts(outcomes: Sequence[Outcome], *, quick: bool) -> list[Verdict]:
    """Full: the bounds are the headlines (a measurement). Quick (20 s runs, too noisy for
    the bounds, which are reported): every run stable, the live runs read what was produced
    and every ratio is finite. Both: each live run exactly once."""
    statics = [o.name for o in outcomes if o.config.role == "static" and not o.config.live]
    lives = [o for o in outcomes if o.config.live]
    trig = _bound(outcomes, statics, TRIGGER_BOUND, "adabatch's static interval costs as "
                  "little as Spark's processingTime trigger at the same interval")  # fmt: skip
    src = _bound(outcomes, [o.name for o in lives], SOURCE_BOUND, "reading a landing "
                 "directory or a Redis Stream costs little more than the generator")  # fmt: skip
    trig = Verdict(trig.claim, trig.holds, trig.evidence, headline=not quick)
    src = Verdict(src.claim, src.holds, src.evidence, headline=not quick)
    unstable = [o.name for o in outcomes if not o.stable]
    shares = {o.name: read_share(o) for o in lives}
    records = {o.name: read_producer(o) for o in lives}
    rated = [o for o in outcomes if reference(o, outcomes) is not None]
    finite = {o.name: ratio(o, reference(o, outcomes)) for o in rated}
    return [
        trig,
        src,
        Verdict(
            "every run stays stable",
            not unstable,
            f"unstable: {', '.join(unstable)}" if unstable else f"{len(outcomes)} runs",
            headline=quick,
        ),
        Verdict(
            f"each live run reads at least {READ_SHARE:.0%} of what its producer wrote during it",
            bool(shares) and all(s >= READ_SHARE for s in shares.values()),
            ", ".join(f"{n} {s:.1%}" for n, s in shares.items()) or "no live run",
            headline=True,
        ),
        Verdict(
            "each live run counts every record it read exactly once (database totals equal "
            "the landed records' per key)",
            bool(records) and all(r.get("exactly_once") is True for r in records.values()),
            "; ".join(_once_text(n, r) for n, r in records.items()) or "no live run",
            headline=True,
        ),
        Verdict(
            "every CPU ratio to a reference is finite",
            bool(finite) and all(math.isfinite(r) for r in finite.values()),
            ", ".join(f"{n} {report.fmt_ratio(r)}" for n, r in finite.items()),
            headline=quick,
        ),
    ]


def _once_text(name: str, rec: dict[str, Any]) -> str:
    error = f" ({rec['check_error']})" if "check_error" in rec else ""
    if "read" not in rec:
        return f"{name}: not checked{error or ' (no producer record)'}"
    return (
        f"{name}: {rec['read']:,} records committed, {rec.get('landed_prefix', 0):,} landed "
        f"in that prefix, {rec.get('mismatched_keys', 0)} keys differ{error}"
    )


def _shows(outcomes: Sequence[Outcome]) -> str:
    """The paragraph: each ratio as measured."""
    parts = []
    for o in outcomes:
        ref = reference(o, outcomes)
        if ref is None:
            continue
        parts.append(
            f"{o.name} used {report.fmt(cpu(o), 1)} CPU s per million records, "
            f"{report.fmt_ratio(ratio(o, ref))} of {ref.name}'s {report.fmt(cpu(ref), 1)}"
        )
    if not parts:
        return "No run had a reference to compare with."
    return (
        "; ".join(parts)
        + ". A ratio above 1 is what adabatch (or reading a real source) adds per record. "
        "Each ratio is one pair of runs on a shared machine and carries its run-to-run "
        "noise: repeat the experiment before reading a few percent into it. The "
        "generator makes its records (hashes, a text line) inside Spark's Python workers, "
        "which the CPU figure counts; a live source's records are made by the producer, "
        "outside it, so reading one can cost less than generating."
    )


EXPERIMENT = Overhead()
