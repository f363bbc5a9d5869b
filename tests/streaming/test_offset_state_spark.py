"""On real Spark (local[2]): a query stopped, its local state file deleted and restarted
from its checkpoint plans the intervals its controller had learned, and every record
reaches the sink exactly once.

The controllers are bounded by ``max_interval`` = 1 s below what they would choose
(fixed-point: ``rho`` = 0.1 asks for 10 x the processing time; isotonic: slack ``c`` = 2 s
is never met), so the learned interval is exactly 1 s however noisy this host is, and a
controller that starts afresh plans its slow start (0.1 s, 0.25 s) first."""

from __future__ import annotations

import json
import threading
import time

import pytest

from adabatch.api import read_stream
from adabatch.metrics import read_jsonl

pytestmark = pytest.mark.spark

DEADLINE_S = 120.0  # generous: a query's first micro-batches pay JVM/Python warm-up
LEARNED_S = 1.0
CASES = {
    "fixed-point": {"rho": 0.1, "max_interval": LEARNED_S},
    "isotonic": {"c": 2.0, "max_interval": LEARNED_S, "block_sizing": "false"},
}


@pytest.fixture(scope="module")
def spark():
    from adabatch.spark import get_spark

    return get_spark("local[2]")


class Capture:
    """A foreachBatch function that keeps each micro-batch's record offsets by batch id
    (a replayed batch replaces its first run, as an idempotent sink would)."""

    def __init__(self) -> None:
        self.batches: dict[int, list[int]] = {}
        self.lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        offsets = sorted(r[0] for r in df.select("offset").collect())
        with self.lock:
            self.batches[batch_id] = offsets


def run(spark, tmp_path, controller: str, sink: Capture, until) -> None:
    """Run the query until ``until()`` holds, then stop it."""
    df = read_stream(
        spark,
        controller=controller,
        params=CASES[controller],
        profile="constant:200",
        metrics_path=tmp_path / "metrics.jsonl",
        state_path=tmp_path / "ck" / "adabatch-state.json",
        seed=3,
        keys=20,
    )
    query = (
        df.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "ck")).start()
    )
    t0 = time.time()
    try:
        while not until():
            if query.exception() is not None:
                raise AssertionError(str(query.exception())[:2000])
            if time.time() - t0 > DEADLINE_S:
                raise AssertionError("the query did not get there in time")
            time.sleep(0.1)
    finally:
        query.stop()


def intervals(tmp_path) -> list[float]:
    path = tmp_path / "metrics.jsonl"
    return [r.interval_s for r in read_jsonl(path)] if path.exists() else []


def last_logged_offset(tmp_path) -> dict:
    """The end offset of the last batch in Spark's offset log (its file's last line)."""
    logs = [p for p in (tmp_path / "ck" / "offsets").iterdir() if p.name.isdigit()]
    logs.sort(key=lambda p: int(p.name))
    return json.loads(logs[-1].read_text().splitlines()[-1])


@pytest.mark.parametrize("controller", ["fixed-point", "isotonic"])
def test_restart_without_the_state_file_plans_the_learned_intervals(spark, tmp_path, controller):
    first = Capture()
    run(spark, tmp_path, controller, first, lambda: intervals(tmp_path)[-3:] == [LEARNED_S] * 3)
    before = intervals(tmp_path)
    assert before[0] < LEARNED_S / 2  # it started from its slow start and learned 1 s
    assert last_logged_offset(tmp_path)["state"]  # the controller travels in the log
    (tmp_path / "ck" / "adabatch-state.json").unlink()  # a fresh driver: no local state

    again = Capture()
    run(spark, tmp_path, controller, again, lambda: len(intervals(tmp_path)) >= len(before) + 3)
    after = intervals(tmp_path)[len(before) :]
    assert after[:3] == [LEARNED_S] * 3  # resumed with what it had learned, no slow start

    records = {**first.batches, **again.batches}  # by batch id: a replay replaces
    offsets = [o for i in sorted(records) for o in records[i]]
    assert offsets == list(range(len(offsets)))  # every record once, in order
