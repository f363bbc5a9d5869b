"""The driver side of the source without Spark: Spark's call sequence replayed by hand on a
clock the test advances, with real metrics and state files."""

from __future__ import annotations

import json

import pytest
from runtime_helpers import Clock, make

from adabatch.batching import Limit
from adabatch.errors import AdabatchError
from adabatch.metrics import read_jsonl
from adabatch.streaming.offsets import INITIAL, SourceOffset
from adabatch.streaming.state import read_status


def test_warm_up_batch_then_schedule_and_metrics(tmp_path):
    clock = Clock()
    rt = make(tmp_path, clock)
    start = INITIAL.to_dict()
    assert rt.latest_offset(start) == start  # Spark's first micro-batch is empty
    # the state file claims the checkpoint at once, before the stream starts
    assert read_status(tmp_path / "state.json").stream_time(clock.t) is None
    clock.t += 7.0  # warm-up takes a while; the stream starts at the next call
    assert rt.latest_offset(start) == start
    clock.t += 1.01
    end = rt.latest_offset(start)
    off = SourceOffset.from_dict(end)
    assert (off.offset, off.cut_us, off.blocks) == (100, 1_000_000, 3)
    parts = rt.partitions(start, end)
    assert [(p.start, p.end) for p in parts] == [(0, 33), (33, 66), (66, 100)]
    clock.t += 0.4  # Spark finished the batch and asks again
    assert rt.latest_offset(end) == end
    (rec,) = read_jsonl(tmp_path / "metrics.jsonl")
    assert rec.records == 100 and rec.blocks == 3
    assert rec.processing_s == pytest.approx(0.4)
    assert rec.queue_delay_s == pytest.approx(0.01)
    assert rec.record_latency_s == pytest.approx(1.41 - 0.505, abs=1e-6)
    assert rec.controller_state == {"observed": 1}
    status = read_status(tmp_path / "state.json")
    assert status.stream_time(clock.t) == pytest.approx(1.41)


def run_batches(rt, clock, start, n, processing_s=0.3):
    """Spark's loop: poll until a batch comes, run it, repeat; returns the last end."""
    done = 0
    while done < n:
        clock.t += 0.01
        end = rt.latest_offset(start)
        if end != start:
            rt.partitions(start, end)
            clock.t += processing_s
            start = end
            done += 1
    return start


def test_restart_resumes_clock_controller_and_queue(tmp_path):
    clock = Clock()
    rt = make(tmp_path, clock)
    start = INITIAL.to_dict()
    rt.latest_offset(start)
    rt.latest_offset(start)
    start = run_batches(rt, clock, start, 3, processing_s=1.5)  # slower than x: queue grows
    rt.stop()
    before = json.loads((tmp_path / "state.json").read_text())
    queued = len(before["cutter"]["queue"])
    assert queued >= 1
    clock.t += 3600.0  # the query is down for an hour
    rt2 = make(tmp_path, clock)
    end = rt2.latest_offset(start)  # Spark committed batch 3; resumes with the queue
    nxt = SourceOffset.from_dict(end)
    assert nxt.offset == SourceOffset.from_dict(start).offset + 100
    assert rt2.now() == pytest.approx(before["last_seen"])  # the hour is not stream time
    status = read_status(tmp_path / "state.json")  # what `adabatch run` watches
    assert status.saved_at == clock.t
    assert status.stream_time(clock.t) == pytest.approx(before["last_seen"])
    assert rt2.controller.state()["observed"] == before["controller"]["observed"]
    assert rt2.lost_reports == 1  # batch 3 finished while we were down


def test_replayed_batch_is_measured_again(tmp_path):
    clock = Clock()
    rt = make(tmp_path, clock)
    start = INITIAL.to_dict()
    rt.latest_offset(start)
    rt.latest_offset(start)
    clock.t += 1.0
    end = rt.latest_offset(start)
    rt.partitions(start, end)
    clock.t += 0.2  # killed mid-batch: Spark logged the offsets but did not commit
    clock.t += 60.0
    rt2 = make(tmp_path, clock)
    parts = rt2.partitions(start, end)  # Spark replays the batch from its offset log
    assert sum(p.end - p.start for p in parts) == 100
    clock.t += 0.5
    assert rt2.latest_offset(end) == end
    (rec,) = read_jsonl(tmp_path / "metrics.jsonl")
    assert rec.processing_s == pytest.approx(0.5)
    assert rt2.lost_reports == 0


def test_state_of_another_query_is_refused(tmp_path):
    clock = Clock()
    rt = make(tmp_path, clock)
    rt.latest_offset(INITIAL.to_dict())
    rt.latest_offset(INITIAL.to_dict())
    clock.t += 1.0
    rt.latest_offset(INITIAL.to_dict())
    other = make(tmp_path, clock, **{"param.interval": "2.0"})
    with pytest.raises(AdabatchError, match="different query: params"):
        other.latest_offset(INITIAL.to_dict())
    fresh_checkpoint = make(tmp_path, clock)
    with pytest.raises(AdabatchError, match="checkpoint was replaced"):
        fresh_checkpoint.latest_offset(INITIAL.to_dict())


def test_restart_without_state_resumes_at_the_last_cut(tmp_path):
    clock = Clock()
    rt = make(tmp_path, clock, statePath=None)  # no state file
    start = INITIAL.to_dict()
    rt.latest_offset(start)
    rt.latest_offset(start)
    start = run_batches(rt, clock, start, 2)
    start.pop("state")  # a checkpoint written before offsets carried the controller's state
    clock.t += 100.0
    rt2 = make(tmp_path, clock, statePath=None)
    last = SourceOffset.from_dict(start)
    rt2.latest_offset(start)
    assert rt2.now() == pytest.approx(last.cut_us / 1e6)
    assert rt2.cutter.next_offset == last.offset


def test_spark_default_and_read_limit(tmp_path):
    clock = Clock()
    rt = make(tmp_path, clock, controller="spark-default", **{"param.interval": None})
    start = INITIAL.to_dict()
    rt.latest_offset(start)
    rt.latest_offset(start)
    clock.t += 2.0
    end = SourceOffset.from_dict(rt.latest_offset(start, Limit(max_rows=150)))
    assert end.offset == 150 and end.blocks == 3
