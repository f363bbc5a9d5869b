"""A live source's producer for a bench run, outside the measured process tree, and
the check that the run read what landed exactly once.

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

import hashlib
import json
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

from adabatch.bench.model import Outcome
from adabatch.errors import AdabatchError
from adabatch.outputs import dumps_json, mark_dir, remove_tree, write_atomic
from adabatch.runs.produce import CHUNK_RECORDS, Totals, add_totals, redis_client
from adabatch.runs.source_spec import SourceSpec
from adabatch.workloads.base import DEFAULT_DB_FILE

MARGIN_S = 30.0  # the producer's duration beyond the run's: Spark's start-up and the drain
STOP_GRACE_S = 15.0  # a stopped producer that has not exited by then is killed
REDIS_URL = "redis://127.0.0.1:6379/0"
LANDING = "landing"
PRODUCER_FILE = "producer.json"
PRODUCE_LOG = "produce.log"
TOTALS_TABLE = "adabatch_reduce_totals"  # reduce's table under the default prefix
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

    def __init__(
        self, spec: SourceSpec, run_dir: Path, duration_s: float, seed: int, profile: str
    ) -> None:
        self.spec, self.run_dir, self.duration_s = spec, run_dir, duration_s
        self.produced_at_stop: int | None = None
        self.at_stream_s: float | None = None
        self.error = ""
        fresh(spec, run_dir)
        argv = [
            sys.executable, "-m", "adabatch.cli", "produce", "--to", spec.text,
            "--profile", profile, "--duration", f"{duration_s + MARGIN_S:g}s",
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


def live_source(kind: str, run_dir: Path) -> str:
    """The fresh source of a live run: a landing directory inside the run's directory, or
    a Redis Stream whose key is unique to the run's directory."""
    if kind == "files":
        return f"files:{run_dir.resolve() / LANDING}"
    digest = hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:12]
    return f"{REDIS_URL}/adabatch-bench-overhead-{digest}"
