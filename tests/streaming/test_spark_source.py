"""The ``adabatch`` data source inside real Spark (local[2]): blocks, admission control,
spark-default, option errors at load(), and replay after a restart."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from adabatch.api import read_stream
from adabatch.errors import AdabatchError
from adabatch.metrics import read_jsonl
from adabatch.streaming.state import load_state

pytestmark = pytest.mark.spark

DEADLINE_S = 150.0  # generous: the first micro-batches of a query pay JVM/Python warm-up


@pytest.fixture(scope="module")
def spark():
    from adabatch.spark import get_spark

    return get_spark("local[2]")


class Capture:
    """A foreachBatch function that records what each micro-batch held."""

    def __init__(self, fail_at: int | None = None, keep_rows: bool = False) -> None:
        self.batches: dict[int, dict] = {}
        self.fail_at = fail_at
        self.keep_rows = keep_rows
        self.lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        rows = sorted(tuple(r) for r in df.collect())
        entry = {
            "partitions": df.rdd.getNumPartitions(),
            "offsets": [r[0] for r in rows],
            "rows": rows if self.keep_rows else None,
        }
        with self.lock:
            self.batches[batch_id] = entry
        if self.fail_at is not None and batch_id == self.fail_at:
            msg = f"test failure injected in batch {batch_id}"
            raise RuntimeError(msg)

    def data_batches(self) -> int:
        return sum(1 for b in self.batches.values() if b["offsets"])


def run_until(query, done, deadline_s: float = DEADLINE_S) -> None:
    t0 = time.time()
    try:
        while not done():
            if query.exception() is not None:
                raise AssertionError(str(query.exception())[:2000])
            if time.time() - t0 > deadline_s:
                raise AssertionError("the query did not get there in time")
            time.sleep(0.2)
    finally:
        query.stop()


def start(df, sink, checkpoint):
    return df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint)).start()


def test_partitions_are_the_planned_blocks_and_no_record_is_lost(spark, tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    df = read_stream(
        spark,
        controller="static",
        params={"interval": 0.5, "blocks": 3},
        profile="constant:400",
        metrics_path=metrics,
        state_path=tmp_path / "state.json",
        keys=10,
    )
    sink = Capture()
    run_until(start(df, sink, tmp_path / "ck"), lambda: sink.data_batches() >= 5)
    records = read_jsonl(metrics)
    spark_batches = [sink.batches[i] for i in sorted(sink.batches) if i > 0]
    assert len(records) >= 4
    # batch 0 is Spark's empty warm-up batch; batch i is the source's (i-1)-th hand-out
    assert sink.batches[0]["partitions"] == 2 and not sink.batches[0]["offsets"]
    for rec, got in zip(records, spark_batches, strict=False):
        assert got["partitions"] == rec.blocks == 3
        assert len(got["offsets"]) == rec.records
        assert rec.interval_s == pytest.approx(0.5)
        assert rec.processing_s > 0 and rec.queue_delay_s >= 0
    offsets = [o for b in spark_batches for o in b["offsets"]]
    assert offsets == list(range(len(offsets)))  # contiguous, in order, no duplicates


def test_admission_control_defers_records_without_dropping(spark, tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    df = read_stream(
        spark,
        controller="static",
        params={"interval": 0.5, "blocks": 2, "max_records": 60},
        profile="constant:400",
        metrics_path=metrics,
        state_path=tmp_path / "state.json",
    )
    sink = Capture()
    run_until(start(df, sink, tmp_path / "ck"), lambda: sink.data_batches() >= 4)
    sizes = [len(sink.batches[i]["offsets"]) for i in sorted(sink.batches) if i > 0]
    assert max(sizes) == 60  # 200 arrive per interval, 60 admitted
    offsets = [o for i in sorted(sink.batches) for o in sink.batches[i]["offsets"]]
    assert offsets == list(range(len(offsets)))
    assert all(r.max_records == 60 for r in read_jsonl(metrics))
    # the rest is still in the source, waiting for later batches
    saved = load_state(tmp_path / "state.json")
    assert saved["cutter"]["next_offset"] == sum(r.records for r in read_jsonl(metrics)) + sum(
        b["end"] - b["start"] for b in saved["cutter"]["queue"]
    ) + (
        0
        if saved["cutter"]["in_flight"] is None
        else saved["cutter"]["in_flight"]["end"] - saved["cutter"]["in_flight"]["start"]
    )


def test_spark_default_hands_spark_everything_back_to_back(spark, tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    df = read_stream(
        spark,
        controller="spark-default",
        params={"blocks": 2},
        profile="constant:500",
        metrics_path=metrics,
    )
    sink = Capture()
    run_until(start(df, sink, tmp_path / "ck"), lambda: sink.data_batches() >= 5)
    records = read_jsonl(metrics)
    assert len(records) >= 4
    for prev, rec in itertools.pairwise(records):
        # the next batch holds what arrived while the previous one was processed
        assert rec.interval_s == pytest.approx(prev.processing_s, abs=0.1)
        assert rec.queue_delay_s < 0.05
        assert rec.blocks == 2
    offsets = [o for i in sorted(sink.batches) for o in sink.batches[i]["offsets"]]
    assert offsets == list(range(len(offsets)))


def test_bad_options_fail_at_load(spark):
    with pytest.raises(AdabatchError, match="unknown controller 'nope'"):
        read_stream(spark, controller="nope")
    with pytest.raises(AdabatchError, match="profile 'sine:1:2'"):
        read_stream(spark, profile="sine:1:2")
    from adabatch.streaming.source import register

    register(spark)
    reader = spark.readStream.format("adabatch")
    with pytest.raises(Exception, match="fixed-point parameter 'rho' = '7' is out of range"):
        reader.option("param.rho", "7").load()
    with pytest.raises(Exception, match="no option 'colour'"):
        spark.readStream.format("adabatch").option("colour", "red").load()


def test_restart_replays_the_same_records(spark, tmp_path):
    opts = {
        "controller": "static",
        "params": {"interval": 0.5, "blocks": 2},
        "profile": "constant:300",
        "metrics_path": tmp_path / "metrics.jsonl",
        "state_path": tmp_path / "ck" / "adabatch-state.json",
        "seed": 11,
        "keys": 50,
    }
    first = Capture(fail_at=3, keep_rows=True)
    query = start(read_stream(spark, **opts), first, tmp_path / "ck")
    t0 = time.time()
    while query.exception() is None and time.time() - t0 < DEADLINE_S:
        time.sleep(0.2)
    assert "test failure injected in batch 3" in str(query.exception())
    query.stop()
    assert first.batches[3]["rows"]  # batch 3 ran, then failed before its commit

    again = Capture(keep_rows=True)
    run_until(start(read_stream(spark, **opts), again, tmp_path / "ck"), lambda: 5 in again.batches)
    assert min(again.batches) == 3  # Spark replays the uncommitted batch from its log
    assert again.batches[3]["rows"] == first.batches[3]["rows"]
    offsets = [o for i in (1, 2) for o in first.batches[i]["offsets"]] + [
        o for i in sorted(again.batches) for o in again.batches[i]["offsets"]
    ]
    assert offsets == list(range(len(offsets)))


def test_a_controller_with_cores_gets_sparks_parallelism_unless_given(spark):
    from adabatch.api import _with_cores

    cores = spark.sparkContext.defaultParallelism
    assert _with_cores(spark, "isotonic", {"c": "0.05"}) == {"c": "0.05", "cores": cores}
    assert _with_cores(spark, "isotonic", {"cores": "1"}) == {"cores": "1"}
    assert _with_cores(spark, "fixed-point", {}) == {}  # no such parameter
    assert _with_cores(spark, "spark-default", {}) == {}
