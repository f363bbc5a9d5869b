"""``mode=advise`` on real Spark (local[2]): Spark's own trigger makes the batches, the
controller observes each one and the metrics carry its recommendation next to what Spark
did. Under the default trigger and under a processingTime trigger."""

from __future__ import annotations

import itertools
import time

import pytest

from adabatch.api import read_stream
from adabatch.metrics import read_jsonl

pytestmark = pytest.mark.spark

RHO = 0.7
DEADLINE_S = 120.0  # generous: the first micro-batch pays JVM and Python worker warm-up


@pytest.fixture(scope="module")
def spark():
    from adabatch.spark import get_spark

    return get_spark("local[2]")


def run_advised(spark, tmp_path, batches: int, trigger: dict | None = None):
    """Run an advised query until the metrics hold ``batches`` records; return them."""
    metrics = tmp_path / "metrics.jsonl"
    df = read_stream(
        spark,
        controller="fixed-point",
        params={"rho": RHO, "blocks": 1},
        profile="constant:2000",
        keys=20,
        metrics_path=metrics,
        state_path=tmp_path / "ckpt" / "adabatch-state.json",
        mode="advise",
    )
    counts: list[int] = []
    writer = df.writeStream.foreachBatch(lambda batch, _: counts.append(batch.count())).option(
        "checkpointLocation", str(tmp_path / "ckpt")
    )
    if trigger is not None:
        writer = writer.trigger(**trigger)
    query = writer.start()
    t0 = time.time()
    try:
        while not metrics.exists() or len(read_jsonl(metrics)) < batches:
            assert query.exception() is None, str(query.exception())[:2000]
            assert time.time() - t0 < DEADLINE_S, "the advised query made too few batches"
            time.sleep(0.2)
    finally:
        query.stop()
    records = read_jsonl(metrics)
    assert [r.records for r in records] == counts[1 : len(records) + 1]  # after the warm-up
    return records


def check_advice(records) -> None:
    """Every record carries the controller's plan after observing the batch: fixed-point
    with one batch seen plans p / rho (rounded to its 0.1 s granularity), one block."""
    assert all(r.advised_interval_s is not None and r.advised_blocks == 1 for r in records)
    assert [r.controller_state["observed"] for r in records] == list(range(1, len(records) + 1))
    first = records[0]
    assert first.advised_interval_s == pytest.approx(first.processing_s / RHO, abs=0.05 + 1e-9)
    assert all(r.advised_interval_s == r.controller_state["interval"] for r in records)


def test_default_trigger_decides_and_the_controller_advises(spark, tmp_path):
    records = run_advised(spark, tmp_path, batches=5)
    check_advice(records)
    # Spark's batches, not the controller's: 2 blocks (not the planned 1), and each batch
    # holds what arrived while the one before ran (the default trigger: x(n+1) = p(n))
    assert all(r.blocks == 2 for r in records)
    for prev, cur in itertools.pairwise(records[1:]):
        assert cur.interval_s == pytest.approx(prev.processing_s, abs=0.15)
        assert cur.queue_delay_s < 0.1  # handed out at once, never queued


def test_processing_time_trigger_decides_and_the_controller_advises(spark, tmp_path):
    records = run_advised(spark, tmp_path, batches=4, trigger={"processingTime": "2 seconds"})
    check_advice(records)
    # Spark asks on a 2 s grid of ticks, each ask a little after its tick (whence the
    # tolerance), so a batch spans a trigger interval. A batch that runs past the next tick
    # is followed at once; the batch after that one ends at the following tick of the grid
    # and so spans less, after an interval over 2 s. The source sees a batch end only at
    # the next trigger, so the processing time it measures (and the controller observes)
    # is the next interval.
    for prev, cur in itertools.pairwise(records):
        assert cur.interval_s > 1.75 or prev.interval_s > 2.0, (prev, cur)
    for prev, cur in itertools.pairwise(records[1:]):
        assert prev.processing_s == pytest.approx(cur.interval_s, abs=0.15)
