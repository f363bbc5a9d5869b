"""Workloads as real streaming queries: ``start()`` on a replayable stream, restarts, kills.

Input is the adabatch data source on the generator, or Spark's ``rate`` source turned into
the generator's schema (wl_helpers); both are replayable and their records a pure function
of the offset, so every committed batch can be recomputed.
Exactly once: a reduce query stopped, or killed with SIGKILL (at any moment, and
right after its database commit but before Spark's commit log), then restarted from its
checkpoint, ends with per-key totals equal to the records up to the last committed offset.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from wl_helpers import (
    PG_URL,
    drop_tables,
    generator_records,
    generator_stream,
    plain_filter,
    plain_join,
    plain_reduce,
    rate_stream,
    records,
    unique_prefix,
)

from adabatch.workloads import WorkloadConfig, get_workload
from adabatch.workloads.sinks import Database

pytestmark = pytest.mark.spark

KEYS = 40
JOB = Path(__file__).with_name("reduce_job.py")
TIMEOUT_S = 240  # generous: Spark starts slowly on a loaded 2-core machine


def ledger(cfg):
    with Database(cfg.database_url, cfg.table_prefix) as db:
        return db.query(
            "SELECT batch_id, records, first_offset, last_offset FROM {p}batches "
            "WHERE run_id = ? AND query = ? ORDER BY batch_id",
            (cfg.run_id, cfg.name),
        )


def wait_for(predicate, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not predicate():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"job exited ({proc.returncode}) before {what}: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.25)


def run_query(spark, workload_name, cfg, checkpoint, until_batches, source="rate"):
    """Run the workload on ``source`` (rate: 1 s trigger; generator: the adabatch data
    source, state next to the checkpoint) until the ledger holds ``until_batches``."""
    if source == "rate":
        df, trigger = rate_stream(spark, 300, KEYS), "1 second"
    else:
        df, trigger = generator_stream(spark, Path(checkpoint).parent, KEYS), "0 seconds"
    workload = get_workload(workload_name)
    workload.check(cfg)
    query = (
        workload.start(df, cfg)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=trigger)
        .start()
    )
    try:
        wait_for(lambda: len(ledger(cfg)) >= until_batches or not query.isActive, "batches")
    finally:
        query.stop()
    assert query.exception() is None


REGENERATE = {"rate": records, "generator": generator_records}


def assert_exactly_once(cfg, source) -> int:
    """Ledger contiguous in ids and offsets; totals equal the source's records up to the
    last committed offset, per key. Returns the number of records committed."""
    rows = ledger(cfg)
    assert [r[0] for r in rows] == list(range(len(rows)))
    expected_first = 0
    for _, n, first, last in rows:
        if n == 0:
            continue
        assert first == expected_first and last - first + 1 == n
        expected_first = last + 1
    with Database(cfg.database_url, cfg.table_prefix) as db:
        got = {
            k: (n, s)
            for k, n, s in db.query(
                "SELECT key, records, value_sum FROM {p}reduce_totals WHERE run_id = ?",
                (cfg.run_id,),
            )
        }
    assert got == plain_reduce(REGENERATE[source](0, expected_first, KEYS))
    return expected_first


def test_filter_and_window_queries_match_plain_computation(spark, tmp_path):
    url = f"sqlite:///{tmp_path}/r.db"
    common = {"out_dir": tmp_path, "run_id": "s", "keys": KEYS, "db_url": url}
    fcfg = WorkloadConfig(name="filter", filter_words=("spark", "rate"), **common)
    wcfg = WorkloadConfig(name="window", window_s=5.0, **common)
    for cfg in (fcfg, wcfg):
        run_query(spark, cfg.name, cfg, tmp_path / f"ckpt-{cfg.name}", until_batches=4)
    with Database(url) as db:
        nonempty = 0
        for batch_id, n, first, last in ledger(fcfg):
            got = dict(
                db.query(
                    "SELECT word, matches FROM {p}filter_counts WHERE batch_id = ?", (batch_id,)
                )
            )
            if n == 0:  # the rate source's first batch may be empty
                assert got == dict.fromkeys(fcfg.filter_words, 0)
                continue
            nonempty += 1
            assert got == plain_filter(records(first, last + 1, KEYS), fcfg.filter_words)
            assert n == last - first + 1
        assert nonempty >= 2
        rows = ledger(wcfg)
        assert len(rows) >= 3
        # the last window: every batch whose latest event time is within 5 s of the newest
        filled = [(first, last) for _, n, first, last in rows if n > 0]
        ends = [int(records(a, b + 1, KEYS)["event_time"].max().value // 1000) for a, b in filled]
        inside = [f for f, e in zip(filled, ends, strict=True) if e > max(ends) - 5_000_000]
        expected = plain_reduce(records(inside[0][0], inside[-1][1] + 1, KEYS))
        got = {
            k: (n, s)
            for k, n, s in db.query("SELECT key, records, value_sum FROM {p}window_totals")
        }
        assert got == expected
        assert len(filled) >= 3 and 0 < len(inside) < len(filled)  # the window slid


def test_join_query_matches_plain_computation(spark, tmp_path):
    cfg = WorkloadConfig(name="join", out_dir=tmp_path, run_id="j", keys=KEYS)
    get_workload("join").check(cfg)
    commit = get_workload("join").foreach_batch(cfg)
    seen: dict[int, tuple[int, int]] = {}

    def recording(batch_df, batch_id):
        row = batch_df.selectExpr("min(offset)", "max(offset)").collect()[0]
        seen[batch_id] = (row[0], row[1])
        commit(batch_df, batch_id)

    query = (
        rate_stream(spark, 300, KEYS)
        .writeStream.foreachBatch(recording)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        wait_for(lambda: len(ledger(cfg)) >= 3, "join batches")
    finally:
        query.stop()
    with Database(cfg.database_url) as db:
        got = dict(db.query("SELECT batch_id, joined_rows FROM {p}join_counts"))
    expected = {
        b: 0 if lo is None else plain_join(records(lo, hi + 1, KEYS))
        for b, (lo, hi) in seen.items()
    }
    assert len(got) >= 3 and got == {b: expected[b] for b in got}
    assert sum(got.values()) > 0


@pytest.mark.parametrize("source", ["generator", "rate"])
def test_reduce_stopped_and_restarted_is_exactly_once(spark, tmp_path, source):
    cfg = WorkloadConfig(name="reduce", out_dir=tmp_path, run_id="stop", keys=KEYS)
    ckpt = tmp_path / "checkpoint"
    run_query(spark, "reduce", cfg, ckpt, until_batches=4, source=source)
    first = len(ledger(cfg))
    run_query(spark, "reduce", cfg, ckpt, until_batches=first + 4, source=source)
    assert len(ledger(cfg)) >= first + 4
    assert assert_exactly_once(cfg, source) > 0


def start_job(tmp_path, db_url, prefix, *extra):
    return subprocess.Popen(
        [
            sys.executable,
            str(JOB),
            "--out",
            str(tmp_path),
            "--db",
            db_url,
            "--prefix",
            prefix,
            "--run-id",
            "kill",
            "--keys",
            str(KEYS),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the JVM dies with it
    )


def checkpoint_batches(tmp_path, kind):
    d = tmp_path / "checkpoint" / kind
    return {int(p.name) for p in d.iterdir() if p.name.isdigit()} if d.is_dir() else set()


def kill_and_restart(spark, tmp_path, db_url, prefix, *, kill_from_outside: bool):
    cfg = WorkloadConfig(
        name="reduce",
        out_dir=tmp_path,
        run_id="kill",
        keys=KEYS,
        db_url=db_url,
        table_prefix=prefix,
    )
    get_workload("reduce").check(cfg)
    if kill_from_outside:
        # 1. killed at whatever moment it is in, once it committed 2 batches
        job = start_job(tmp_path, db_url, prefix)
        try:
            wait_for(lambda: len(ledger(cfg)) >= 2, "2 committed batches", job)
        finally:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
        assert job.returncode == -signal.SIGKILL
    # 2. (re)started, kills itself right after the database committed its second new batch
    target = max((r[0] for r in ledger(cfg)), default=-1) + 2
    job = start_job(tmp_path, db_url, prefix, "--kill-after", str(target))
    out, err = job.communicate(timeout=TIMEOUT_S)
    assert job.returncode == -signal.SIGKILL, err
    assert f"committed batch {target}, killing" in out
    assert target in {r[0] for r in ledger(cfg)}
    assert target in checkpoint_batches(tmp_path, "offsets")
    assert target not in checkpoint_batches(tmp_path, "commits")  # Spark will replay it
    replayed = next(r for r in ledger(cfg) if r[0] == target)
    # 3. restarted in this process: replays batch `target`, goes on, stops cleanly
    run_query(
        spark, "reduce", cfg, tmp_path / "checkpoint", until_batches=target + 4, source="generator"
    )
    assert target in checkpoint_batches(tmp_path, "commits")
    assert next(r for r in ledger(cfg) if r[0] == target) == replayed
    # a stop may land between the database commit and Spark's commit log: the ledger is then
    # one batch ahead, a batch the next restart would replay and the sink skip
    last = max(r[0] for r in ledger(cfg))
    assert max(checkpoint_batches(tmp_path, "commits")) in (last, last - 1)
    assert last in checkpoint_batches(tmp_path, "offsets")
    assert assert_exactly_once(cfg, "generator") > 0


def test_reduce_killed_after_db_commit_restarts_exactly_once_sqlite(spark, tmp_path):
    url = f"sqlite:///{tmp_path}/r.db"
    kill_and_restart(spark, tmp_path, url, unique_prefix(), kill_from_outside=False)


@pytest.mark.services
def test_reduce_killed_after_db_commit_restarts_exactly_once_postgres(spark, tmp_path):
    prefix = unique_prefix()
    try:
        kill_and_restart(spark, tmp_path, PG_URL, prefix, kill_from_outside=False)
    finally:
        drop_tables(PG_URL, prefix)


@pytest.mark.slow  # two more Spark processes: minutes on a loaded 2-core machine
def test_reduce_killed_anywhere_then_after_db_commit_restarts_exactly_once(spark, tmp_path):
    url = f"sqlite:///{tmp_path}/r.db"
    kill_and_restart(spark, tmp_path, url, unique_prefix(), kill_from_outside=True)
