"""``trigger(availableNow=True)`` on real Spark (local[2]): a backlog the generator made
(``startingBacklog``) drains in the controller's windows, the query stops by itself, and
the sink's totals are what was produced up to the target, per key, each record once. A
second run on the same checkpoint drains what arrived meanwhile and stops again."""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np
import pytest

from adabatch.api import read_stream
from adabatch.metrics import read_jsonl
from adabatch.sources.generator import GeneratorSource

pytestmark = pytest.mark.spark

RATE = 3000
BACKLOG_S = 20.0
KEYS = 50
TIMEOUT_S = 120.0  # generous: the first micro-batch pays JVM and Python worker warm-up


@pytest.fixture(scope="module")
def spark():
    from adabatch.spark import get_spark

    return get_spark("local[2]")


class Totals:
    """A foreachBatch sink keeping each micro-batch's offsets and keys (in Arrow)."""

    def __init__(self) -> None:
        self.batches: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        table = df.select("offset", "key").toArrow()
        entry = (table.column("offset").to_numpy(), table.column("key").to_numpy())
        with self.lock:
            self.batches[batch_id] = entry

    def data(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return [self.batches[i] for i in sorted(self.batches) if len(self.batches[i][0])]


def run_available_now(spark, tmp_path, sink: Totals):
    df = read_stream(
        spark,
        controller="fixed-point",
        params={"rho": 0.7, "initial_interval": 1.6},
        profile=f"constant:{RATE}",
        keys=KEYS,
        metrics_path=tmp_path / "metrics.jsonl",
        state_path=tmp_path / "ckpt" / "adabatch-state.json",
        starting_backlog=f"{BACKLOG_S:g}s",
    )
    query = (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        stopped = query.awaitTermination(TIMEOUT_S)
        assert query.exception() is None, str(query.exception())[:2000]
        assert stopped, "the availableNow query did not stop by itself"
    finally:
        query.stop()


def expected_key_counts(n: int) -> Counter:
    source = GeneratorSource.from_options({"keys": str(KEYS)}, f"constant:{RATE}")
    return Counter(source.records(0, n).column("key").to_pylist())


def check_each_record_once(batches, first: int = 0) -> int:
    """The batches hold records ``first ..`` in order, without gap or repeat; returns the
    end."""
    at = first
    for offsets, _ in batches:
        assert np.array_equal(np.sort(offsets), np.arange(at, at + len(offsets)))
        at += len(offsets)
    return at


def key_counts(batches) -> Counter:
    return Counter(int(k) for _, keys in batches for k in keys)


def test_available_now_drains_the_backlog_in_controller_windows_and_stops(spark, tmp_path):
    sink = Totals()
    run_available_now(spark, tmp_path, sink)
    batches = sink.data()
    records = read_jsonl(tmp_path / "metrics.jsonl")
    # the target: the stream time at which the query's stream started, the backlog's end
    target = records[-1].cut_at
    assert target == pytest.approx(BACKLOG_S, abs=0.1)
    produced = GeneratorSource.from_options({}, f"constant:{RATE}").available(target)
    # everything produced up to the target, each record once
    assert check_each_record_once(batches) == produced
    assert key_counts(batches) == expected_key_counts(produced)
    # in the controller's windows: slow start doubles them, the last ends at the target
    assert len(batches) == len(records) == 4
    assert [len(b[0]) for b in batches] == [r.records for r in records]
    intervals = [r.interval_s for r in records]
    assert intervals[:3] == [1.6, 3.2, 6.4]
    assert intervals[3] == pytest.approx(target - 11.2)
    assert [r.records for r in records[:3]] == [round(x * RATE) for x in intervals[:3]]
    assert all(r.cut_at <= target for r in records)

    # a restarted availableNow query drains what arrived while the first one ran, and stops
    again = Totals()
    run_available_now(spark, tmp_path, again)
    more = again.data()
    end = check_each_record_once(more, first=produced)
    assert end > produced  # the first drain took seconds of stream time
    later = read_jsonl(tmp_path / "metrics.jsonl")[len(records) :]
    assert [len(b[0]) for b in more] == [r.records for r in later]
    assert key_counts(batches + more) == expected_key_counts(end)
