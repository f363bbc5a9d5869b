"""The ``redis`` source inside real Spark (local[2]): entries a producer XADDs while the
query runs reach the sink exactly once, in controller-cut batches."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
import redis

from adabatch.api import read_stream
from adabatch.metrics import read_jsonl
from adabatch.streaming.state import load_state

pytestmark = [pytest.mark.spark, pytest.mark.services]

URL = "redis://127.0.0.1:6379/0"
DEADLINE_S = 90.0  # generous: Spark's warm-up on a loaded 2-core machine
ENTRIES, KEYS, BURST = 3_000, 10, 150  # 150 entries every 0.1 s: 2 s of writing


@pytest.fixture(scope="module")
def spark():
    from adabatch.spark import get_spark

    return get_spark("local[2]")


@pytest.fixture
def key() -> Iterator[str]:
    client = redis.Redis.from_url(URL)
    name = f"adabatch:test:spark:{uuid.uuid4().hex}"
    yield name
    client.delete(name)
    client.close()


class Sums:
    """A foreachBatch sink: per-key record counts and value sums over all batches."""

    def __init__(self) -> None:
        self.counts: Counter[int] = Counter()
        self.sums: Counter[int] = Counter()
        self.batches = 0
        self.lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        rows = df.groupBy("key").agg({"value": "sum", "*": "count"}).collect()
        with self.lock:
            for row in rows:
                self.counts[row["key"]] += row["count(1)"]
                self.sums[row["key"]] += row["sum(value)"]
            self.batches += bool(rows)

    def total(self) -> int:
        with self.lock:
            return sum(self.counts.values())


def produce(stream: str, failures: list[BaseException]) -> None:
    """XADD ``ENTRIES`` entries in bursts: key ``i % KEYS``, value ``i``."""
    client = redis.Redis.from_url(URL)
    try:
        for lo in range(0, ENTRIES, BURST):
            pipe = client.pipeline(transaction=False)
            for i in range(lo, min(lo + BURST, ENTRIES)):
                pipe.xadd(stream, {"key": i % KEYS, "value": i})
            pipe.execute()
            time.sleep(0.1)  # the producer's pace, not a wait for the query
    except BaseException as exc:  # reported by the test thread
        failures.append(exc)
    finally:
        client.close()


def started(state_path) -> float | None:
    """The stream's start time once the runtime saved it."""
    return load_state(state_path).get("start_time") if state_path.exists() else None


def reported(tmp_path) -> int:
    path = tmp_path / "metrics.jsonl"
    return sum(r.records for r in read_jsonl(path)) if path.exists() else 0


def test_entries_added_while_the_query_runs_arrive_exactly_once(spark, tmp_path, key):
    state_path = tmp_path / "ck" / "adabatch-state.json"
    df = read_stream(
        spark,
        source="redis",
        url=URL,
        stream=key,
        schema="key INT, value DOUBLE",
        controller="static",
        params={"interval": 0.5},
        state_path=state_path,
        metrics_path=tmp_path / "metrics.jsonl",
    )
    assert df.schema.simpleString() == "struct<key:int,value:double>"
    sink = Sums()
    query = (
        df.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "ck")).start()
    )
    failures: list[BaseException] = []
    producer = threading.Thread(target=produce, args=(key, failures))
    try:
        t0 = time.time()
        while started(state_path) is None:  # the stream's clock starts after Spark's warm-up
            assert query.exception() is None, str(query.exception())[:2000]
            assert time.time() - t0 < DEADLINE_S, "the stream did not start in time"
            time.sleep(0.1)
        producer.start()
        while sink.total() < ENTRIES:
            assert query.exception() is None, str(query.exception())[:2000]
            assert time.time() - t0 < DEADLINE_S, f"{sink.total()} of {ENTRIES} in time"
            time.sleep(0.2)
        while reported(tmp_path) < ENTRIES:  # the last batch's report follows its end
            assert time.time() - t0 < DEADLINE_S, "the last batch was not reported in time"
            time.sleep(0.2)
    finally:
        producer.join()
        query.stop()
    assert not failures
    expected_counts = Counter(i % KEYS for i in range(ENTRIES))
    expected_sums: Counter[int] = Counter()
    for i in range(ENTRIES):
        expected_sums[i % KEYS] += i
    assert dict(sink.counts) == dict(expected_counts)
    assert dict(sink.sums) == {k: float(v) for k, v in expected_sums.items()}
    records = [r for r in read_jsonl(tmp_path / "metrics.jsonl") if r.records]
    assert len(records) >= 3  # the producer's 2 s went into several 0.5 s batches
    assert all(r.interval_s == pytest.approx(0.5) for r in records)
    manifest = load_state(state_path)["source"]
    assert manifest["stream"] == key and manifest["next_offset"] == ENTRIES
    # what Spark committed is forgotten: the segments left are the last batches' only
    assert manifest["base_offset"] > 0 and len(manifest["segments"]) <= 10
