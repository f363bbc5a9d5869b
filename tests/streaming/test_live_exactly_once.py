"""End to end through a real source fed by a real producer in another process.

``adabatch run --source files:DIR | redis://…`` reduces what ``adabatch produce`` writes at
a sine profile; the run is killed with SIGKILL (its whole process group: driver, JVM,
Python workers) once the database has committed some batches, and restarted on the same
output directory. The database's per-key totals then equal, exactly, what landed in the
directory or the stream (read back independently of Spark).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from adabatch.runs.produce import landed_totals

pytestmark = [pytest.mark.spark, pytest.mark.services]

ADABATCH = [sys.executable, "-m", "adabatch.cli"]
PRODUCE = ["--profile", "sine:300:900:8s", "--duration", "10s"]
WAIT_S = 180.0


def start(args: list[str], log: Path) -> subprocess.Popen:
    """``adabatch ARGS`` in its own process group, output to ``log``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("ab") as out:
        return subprocess.Popen(
            [*ADABATCH, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def committed(out: Path) -> int:
    """Batches the run's SQLite ledger holds (0 before the database exists)."""
    db = out / "results.sqlite"
    if not db.exists():
        return 0
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
        try:
            return int(con.execute("SELECT count(*) FROM adabatch_batches").fetchone()[0])
        except sqlite3.OperationalError:
            return 0


def wait_for(what: str, check, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if proc.poll() is not None:
            pytest.fail(f"exited {proc.returncode} before {what}:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {WAIT_S:g} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)  # polling a file another process writes


def records_committed(out: Path) -> int:
    """Records the run's reduce totals hold so far (0 before the table exists)."""
    db = out / "results.sqlite"
    if not db.exists():
        return 0
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
        try:
            row = con.execute("SELECT sum(records) FROM adabatch_reduce_totals").fetchone()
        except sqlite3.OperationalError:
            return 0
    return int(row[0] or 0)


def db_totals(out: Path) -> dict[int, tuple[int, float]]:
    with sqlite3.connect(out / "results.sqlite") as con:
        rows = con.execute("SELECT key, records, value_sum FROM adabatch_reduce_totals").fetchall()
    return {int(k): (int(n), float(s)) for k, n, s in rows}


# CI runs the files case; the redis case (the same path through the runtime, a different
# source) is the slow one, run by hand (its source's exactly-once run without a kill is in
# tests/streaming/test_redis_spark.py)
@pytest.fixture(params=["files", pytest.param("redis", marks=pytest.mark.slow)])
def target(request, tmp_path):
    if request.param == "files":
        landing = tmp_path / "landing"
        landing.mkdir()
        yield f"files:{landing}"
        return
    import redis

    stream = f"adabatch-test-{uuid.uuid4().hex[:12]}"
    yield f"redis://127.0.0.1:6379/0/{stream}"
    redis.Redis.from_url("redis://127.0.0.1:6379/0").delete(stream)


def test_killed_and_restarted_run_counts_every_produced_record_once(tmp_path, target):
    out = tmp_path / "run"
    log = tmp_path / "run.log"
    run = [
        "run", "--source", target, "--workload", "reduce", "--controller", "fixed-point",
        "--duration", "25s", "--out", str(out), "--master", "local[2]",
    ]  # fmt: skip
    job = start(run, log)
    producer = None
    try:
        wait_for("the query to start", lambda: (out / "spark_progress.jsonl").exists(), job, log)
        producer = start(["produce", "--to", target, *PRODUCE], tmp_path / "produce.log")
        wait_for("1,000 committed records", lambda: records_committed(out) >= 1000, job, log)
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)
        killed_at = committed(out)
        job = start(run, log)  # the same --out: resumes from the checkpoint
        assert producer.wait(WAIT_S) == 0, (tmp_path / "produce.log").read_text()[-2000:]
        assert job.wait(WAIT_S) == 0, log.read_text()[-3000:]
    finally:
        for proc in (job, producer):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    landed = landed_totals(target)
    assert sum(n for n, _ in landed.values()) > 5_000  # the producer wrote its profile
    assert committed(out) > killed_at  # the restarted run committed more batches
    assert db_totals(out) == landed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stable"] is True
