"""Each workload's batch function on real Spark and a real database, against plain pandas.

The batch functions are called directly with static DataFrames (what ``foreachBatch``
passes them), including replays of a batch id, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import sqlite3

import pandas as pd
import pytest
from wl_helpers import (
    PG_URL,
    drop_tables,
    plain_filter,
    plain_join,
    plain_reduce,
    records,
    spark_frame,
    unique_prefix,
)

from adabatch.workloads import WorkloadConfig, get_workload
from adabatch.workloads.sinks import Database

pytestmark = pytest.mark.spark

KEYS = 40


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def db(request, tmp_path):
    """(db_url, table_prefix) on each database; PostgreSQL tables dropped afterwards."""
    prefix = unique_prefix()
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/results.db", prefix
    else:
        yield PG_URL, prefix
        drop_tables(PG_URL, prefix)


def make(name, tmp_path, db, **kw):
    url, prefix = db
    cfg = WorkloadConfig(
        name=name,
        out_dir=tmp_path,
        run_id="run-a",
        keys=KEYS,
        db_url=url,
        table_prefix=prefix,
        **kw,
    )
    workload = get_workload(name)
    workload.check(cfg)
    return cfg, workload.foreach_batch(cfg)


def rows(cfg, sql, params=()):
    with Database(cfg.database_url, cfg.table_prefix) as d:
        return d.query(sql, params)


def ledger(cfg):
    return rows(
        cfg,
        "SELECT batch_id, records, first_offset, last_offset FROM {p}batches "
        "WHERE run_id = ? AND query = ? ORDER BY batch_id",
        (cfg.run_id, cfg.name),
    )


BOUNDS = [(0, 700), (700, 1500), (1500, 1501), (1501, 2600)]  # uneven, one single record


@pytest.mark.parametrize("per_key", [False, True])
def test_reduce_totals_exact_and_replays_do_not_double_count(spark, tmp_path, db, per_key):
    cfg, fn = make("reduce", tmp_path, db, per_key_commit=per_key)
    for batch_id, (a, b) in enumerate(BOUNDS):
        fn(spark_frame(spark, a, b, KEYS), batch_id)
        if batch_id == 1:
            fn(spark_frame(spark, a, b, KEYS), batch_id)  # a replay: same id, same data
    fn.close()
    # a new function (a restarted driver) replaying the last batch changes nothing either
    _, fn2 = make("reduce", tmp_path, db, per_key_commit=per_key)
    fn2(spark_frame(spark, *BOUNDS[-1], KEYS), len(BOUNDS) - 1)
    fn2.close()
    got = {
        k: (n, s)
        for k, n, s in rows(
            cfg,
            "SELECT key, records, value_sum FROM {p}reduce_totals WHERE run_id = ?",
            (cfg.run_id,),
        )
    }
    assert got == plain_reduce(records(0, 2600, KEYS))
    assert ledger(cfg) == [(i, b - a, a, b - 1) for i, (a, b) in enumerate(BOUNDS)]
    assert rows(cfg, "SELECT count(*) FROM {p}reduce_key_claims") == [(0,)]


def test_per_key_commit_resumes_after_a_failure_mid_batch(spark, tmp_path):
    """A database error after some keys committed; the replay commits only the rest."""
    db = (f"sqlite:///{tmp_path}/r.db", unique_prefix())
    cfg, fn = make("reduce", tmp_path, db, per_key_commit=True)
    frame = spark_frame(spark, 0, 500, KEYS)
    fn(frame, 0)
    p = cfg.table_prefix
    conn = sqlite3.connect(f"{tmp_path}/r.db")
    conn.execute(
        f"CREATE TRIGGER fail_key AFTER INSERT ON {p}reduce_key_claims WHEN NEW.key = 17 "
        "BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
    )
    conn.commit()
    with pytest.raises(sqlite3.IntegrityError, match="injected failure"):
        fn(spark_frame(spark, 500, 1200, KEYS), 1)
    claimed = rows(cfg, "SELECT count(*) FROM {p}reduce_key_claims WHERE batch_id = 1")[0][0]
    assert 0 < claimed < KEYS  # some keys of batch 1 are in, the batch is not
    assert [r[0] for r in ledger(cfg)] == [0]
    conn.execute("DROP TRIGGER fail_key")
    conn.commit()
    conn.close()
    fn(spark_frame(spark, 500, 1200, KEYS), 1)
    got = {
        k: (n, s)
        for k, n, s in rows(
            cfg,
            "SELECT key, records, value_sum FROM {p}reduce_totals WHERE run_id = ?",
            (cfg.run_id,),
        )
    }
    assert got == plain_reduce(records(0, 1200, KEYS))
    fn.close()


def test_filter_counts_exact(spark, tmp_path, db):
    words = ("spark", "join", "absent")
    cfg, fn = make("filter", tmp_path, db, filter_words=words)
    for batch_id, (a, b) in enumerate(BOUNDS):
        fn(spark_frame(spark, a, b, KEYS), batch_id)
    fn(spark_frame(spark, *BOUNDS[0], KEYS), 0)
    fn.close()
    got = rows(
        cfg,
        "SELECT batch_id, word, matches FROM {p}filter_counts WHERE run_id = ? "
        "ORDER BY batch_id, word",
        (cfg.run_id,),
    )
    expected = sorted(
        (i, w, n)
        for i, (a, b) in enumerate(BOUNDS)
        for w, n in plain_filter(records(a, b, KEYS), words).items()
    )
    assert got == expected
    assert any(n > 0 for _, _, n in got)
    assert ledger(cfg) == [(i, b - a, a, b - 1) for i, (a, b) in enumerate(BOUNDS)]


def test_join_counts_exact_and_superlinear(spark, tmp_path, db):
    cfg, fn = make("join", tmp_path, db)
    sizes = [(0, 400), (400, 1200), (1200, 2800)]  # each batch twice the previous
    for batch_id, (a, b) in enumerate(sizes):
        fn(spark_frame(spark, a, b, KEYS), batch_id)
    fn(spark_frame(spark, *sizes[1], KEYS), 1)
    fn.close()
    got = rows(
        cfg,
        "SELECT batch_id, joined_rows FROM {p}join_counts WHERE run_id = ? ORDER BY batch_id",
        (cfg.run_id,),
    )
    expected = [(i, plain_join(records(a, b, KEYS))) for i, (a, b) in enumerate(sizes)]
    assert got == expected
    # O(M x N): doubling the batch roughly quadruples the output
    assert got[2][1] > 3 * got[1][1] > 9 * got[0][1] > 0


def plain_window(bounds, window_s):
    """Per batch: (start_us, end_us, batches, {key: (records, sum)}) by brute force."""
    out = []
    ends = []
    for a, b in bounds:
        ends.append(int(records(a, b, KEYS)["event_time"].max().value // 1000))
        newest = max(ends)
        inside = [i for i, e in enumerate(ends) if e > newest - round(window_s * 1e6)]
        df = pd.concat([records(*bounds[i], KEYS) for i in inside])
        out.append((newest - round(window_s * 1e6), newest, len(inside), plain_reduce(df)))
    return out


def test_window_totals_exact_reused_across_a_restart(spark, tmp_path, db):
    # 100 records per second of event time: batches of 2..9 s, a 20 s window.
    bounds, start = [], 0
    for size in (200, 900, 300, 700, 500, 800, 200, 600, 900, 400):
        bounds.append((start, start + size))
        start += size
    cfg, fn = make("window", tmp_path, db)
    expected = plain_window(bounds, cfg.window_s)
    for batch_id, (a, b) in enumerate(bounds):
        if batch_id == 6:  # a restarted driver: the window comes back from the database
            fn.close()
            _, fn = make("window", tmp_path, db)
            fn(spark_frame(spark, *bounds[5], KEYS), 5)  # Spark's replay of the last batch
        fn(spark_frame(spark, a, b, KEYS), batch_id)
        start_us, end_us, n, per_key = expected[batch_id]
        got = {
            k: (r, s)
            for k, r, s in rows(
                cfg,
                "SELECT key, records, value_sum FROM {p}window_totals WHERE run_id = ?",
                (cfg.run_id,),
            )
        }
        assert got == per_key, f"batch {batch_id}"
        summary = rows(
            cfg,
            "SELECT window_start_us, window_end_us, batches, records "
            "FROM {p}window_batches WHERE run_id = ? AND batch_id = ?",
            (cfg.run_id, batch_id),
        )
        assert summary == [(start_us, end_us, n, sum(r for r, _ in per_key.values()))]
    fn.close()
    assert max(e[2] for e in expected) >= 3 and expected[-1][2] < len(bounds)  # it slid
    kept = rows(
        cfg, "SELECT DISTINCT batch_id FROM {p}window_partials WHERE run_id = ?", (cfg.run_id,)
    )
    assert len(kept) == expected[-1][2]  # expired partials were deleted
