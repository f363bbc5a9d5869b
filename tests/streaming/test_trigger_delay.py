"""``minRowsPerTrigger`` with ``maxTriggerDelay`` on real Spark (local[2]): a stream far
too slow to fill a batch still gets one as soon as its oldest record has waited the delay."""

from __future__ import annotations

import time

import pytest

from adabatch.api import read_stream
from adabatch.metrics import read_jsonl

pytestmark = pytest.mark.spark

DELAY_S = 1.5
DEADLINE_S = 120.0  # generous: the first micro-batch pays JVM and Python worker warm-up


@pytest.fixture(scope="module")
def spark():
    from adabatch.spark import get_spark

    return get_spark("local[2]")


def test_max_trigger_delay_releases_batches_min_rows_would_hold_forever(spark, tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    df = read_stream(
        spark,
        controller="spark-default",
        profile="constant:200",
        keys=10,
        metrics_path=metrics,
        min_rows_per_trigger=1_000_000,  # 200 records/s never fill a batch
        max_trigger_delay=f"{DELAY_S:g} seconds",
    )
    counts: list[int] = []
    query = (
        df.writeStream.foreachBatch(lambda batch, _: counts.append(batch.count()))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    t0 = time.time()
    try:
        while not metrics.exists() or len(read_jsonl(metrics)) < 3:
            assert query.exception() is None, str(query.exception())[:2000]
            assert time.time() - t0 < DEADLINE_S, "no batch was released"
            time.sleep(0.2)
    finally:
        query.stop()
    records = read_jsonl(metrics)
    assert [r.records for r in records] == counts[1 : len(records) + 1]  # after the warm-up
    for r in records:
        # handed out once the oldest record (arriving just after its window opened) had
        # waited the delay, and not much later: Spark asks every 10 ms while it waits
        waited = r.started_at - (r.cut_at - r.interval_s)
        assert DELAY_S <= waited < DELAY_S + 0.5
        assert 0 < r.records < 1_000_000
        assert r.records == pytest.approx(200 * r.interval_s, abs=2)
