"""The driver side of the source under Spark's triggers, without Spark: availableNow
(fresh and restarted queries), a starting backlog, maxTriggerDelay and advise mode, on
Spark's call sequence replayed by hand on a clock the test advances."""

from __future__ import annotations

import json

import pytest
import runtime_helpers
from runtime_helpers import Clock

from adabatch.batching import NO_LIMIT, Limit
from adabatch.metrics import BatchRecord, read_jsonl
from adabatch.sources.generator import GeneratorSource
from adabatch.streaming.offsets import INITIAL, SourceOffset


def make(tmp_path, clock, **extra):
    return runtime_helpers.make(tmp_path, clock, **{"param.blocks": "2", **extra})


def spark_loop(rt, clock, start, processing_s=0.3, limit=NO_LIMIT, max_batches=1000):
    """Spark under availableNow: ask, run the batch, ask again; stop at the first answer
    equal to ``start``. Returns the batches' (start, end) offsets and the last end."""
    ranges = []
    for _ in range(max_batches):
        clock.t += 0.01
        end = rt.latest_offset(start, limit)
        if end == start:
            return ranges, start
        parts = rt.partitions(start, end)
        ranges.append((parts[0].start, parts[-1].end))
        clock.t += processing_s
        start = end
    raise AssertionError("the query never ended")


def test_fresh_query_drains_its_starting_backlog_in_planned_windows(tmp_path):
    clock = Clock()
    rt = make(tmp_path, clock, startingBacklog="12s")
    rt.prepare_available_now()  # Spark calls it before anything else
    start = INITIAL.to_dict()
    assert rt.latest_offset(start) == start  # the empty warm-up batch
    clock.t += 5.0  # warm-up takes a while; it does not eat into the backlog
    ranges, end = spark_loop(rt, clock, start)
    assert ranges == [(100 * i, 100 * (i + 1)) for i in range(12)]  # 1 s windows
    assert SourceOffset.from_dict(end).offset == 1200  # 12 s at 100/s, nothing later
    records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r.records for r in records] == [100] * 12  # every batch reported
    assert [r.cut_at for r in records] == [float(i) for i in range(1, 13)]
    # the records carry event times in the past: the stream began 12 s before it started
    assert rt.start_time == pytest.approx(1_005.01 - 12.0)


def test_fresh_query_without_backlog_stops_after_the_warm_up(tmp_path):
    clock = Clock()
    rt = make(tmp_path, clock)
    rt.prepare_available_now()
    start = INITIAL.to_dict()
    assert rt.latest_offset(start) == start
    clock.t += 5.0
    ranges, _ = spark_loop(rt, clock, start)
    assert ranges == []  # nothing had arrived when the query started


def test_restarted_query_drains_what_waited_at_the_stop(tmp_path):
    clock = Clock()
    rt = make(tmp_path, clock)
    start = INITIAL.to_dict()
    rt.latest_offset(start)
    rt.latest_offset(start)
    handed = []
    for _ in range(400):  # the default trigger, Spark slower than the 1 s interval
        clock.t += 0.01
        end = rt.latest_offset(start)
        if end != start:
            handed.append(end)
            clock.t += 2.0
            start = end
        if len(handed) == 4:
            break
    rt.stop()
    last_seen = rt.now()
    clock.t += 3600.0  # down for an hour: the stream stands still
    rt2 = make(tmp_path, clock)
    rt2.prepare_available_now()
    ranges, end = spark_loop(rt2, clock, start)
    assert ranges[0][0] == SourceOffset.from_dict(start).offset  # no gap, no repeat
    total = SourceOffset.from_dict(end).offset
    # everything that had arrived by the stream time of the stop, and not more
    assert total == GeneratorSource.from_options({}, "constant:100").available(last_seen)
    assert all(b - a <= 100 for a, b in ranges[:-1])  # the queued 1 s windows, then the rest


def test_max_trigger_delay_releases_a_held_batch(tmp_path):
    clock = Clock()
    rt = make(tmp_path, clock, minRowsPerTrigger="1000", maxTriggerDelay="2.5 s")
    assert rt.options.max_trigger_delay_s == 2.5
    start = INITIAL.to_dict()
    limit = Limit(min_rows=1000)  # what Spark passes: ReadMinRows has no delay
    rt.latest_offset(start, limit)
    rt.latest_offset(start, limit)
    for dt in (1.0, 1.0, 0.5):  # t = 1, 2, 2.5: the first record (0.01 s) waited < 2.5 s
        clock.t += dt
        assert rt.latest_offset(start, limit) == start
    clock.t += 0.02
    end = SourceOffset.from_dict(rt.latest_offset(start, limit))
    assert end.offset == 200  # the two cut windows, released together


def test_min_rows_defaults_to_kafkas_fifteen_minutes(tmp_path):
    rt = make(tmp_path, Clock(), minRowsPerTrigger="10")
    assert rt.options.max_trigger_delay_s == 900.0


def test_advise_mode_lets_spark_decide_and_records_the_recommendation(tmp_path):
    clock = Clock()
    rt = make(
        tmp_path,
        clock,
        controller="fixed-point",
        mode="advise",
        **{"param.interval": None, "param.blocks": "3"},
    )
    start = INITIAL.to_dict()
    rt.latest_offset(start)
    rt.latest_offset(start)
    ends = []
    clock.t += 0.5
    for _ in range(6):  # Spark's default trigger: it asks as soon as a batch has finished
        clock.t += 0.01
        end = rt.latest_offset(start)
        assert end != start  # everything that arrived meanwhile, at once
        rt.partitions(start, end)
        ends.append(SourceOffset.from_dict(end))
        clock.t += 0.4  # each batch takes 0.4 s
        start = end
    clock.t += 0.01
    rt.latest_offset(start)
    records = read_jsonl(tmp_path / "metrics.jsonl")
    assert len(records) == 6
    # Spark's batches: what arrived while the last one ran, in 2 blocks, not the plan's 3
    assert [e.blocks for e in ends] == [2] * 6
    assert all(r.interval_s == pytest.approx(0.41) for r in records[1:])
    assert all(r.processing_s == pytest.approx(0.41) for r in records)
    # fixed-point after each batch: x = p / rho = 0.41 / 0.7, rounded to 0.1 s -> 0.6 s
    assert all(r.advised_interval_s == pytest.approx(0.6) for r in records)
    assert all(r.advised_blocks == 3 for r in records)
    assert records[-1].controller_state["branch"] in ("single", "equal", "fixed-point")


def test_control_mode_writes_no_recommendation(tmp_path):
    clock = Clock()
    rt = make(tmp_path, clock)
    start = INITIAL.to_dict()
    rt.latest_offset(start)
    rt.latest_offset(start)
    clock.t += 1.01
    end = rt.latest_offset(start)
    clock.t += 0.2
    rt.latest_offset(end)
    (rec,) = read_jsonl(tmp_path / "metrics.jsonl")
    assert rec.advised_interval_s is None and rec.advised_blocks is None


def test_advise_mode_under_available_now_drains_as_spark_would(tmp_path):
    clock = Clock()
    rt = make(
        tmp_path,
        clock,
        controller="fixed-point",
        mode="advise",
        startingBacklog="5s",
        **{"param.interval": None, "param.blocks": None},
    )
    rt.prepare_available_now()
    start = INITIAL.to_dict()
    rt.latest_offset(start)
    clock.t += 3.0
    ranges, _ = spark_loop(rt, clock, start, processing_s=0.5)
    assert ranges == [(0, 500)]  # Spark's way: everything up to the target in one batch
    (rec,) = read_jsonl(tmp_path / "metrics.jsonl")
    assert rec.advised_interval_s == pytest.approx(0.7)  # 0.51 s / 0.7, on the 0.1 s grid


def test_metrics_written_before_advice_existed_still_read(tmp_path):
    old = (
        '{"batch_id":0,"interval_s":1.0,"blocks":2,"records":100,"processing_s":0.3,'
        '"queue_delay_s":0.0,"cut_at":1.0,"started_at":1.0,"finished_at":1.3,'
        '"latency_s":1.3,"record_latency_s":0.8,"rate_rps":100.0,"max_records":null,'
        '"queue_len":0,"controller_state":{}}\n'
    )
    (tmp_path / "metrics.jsonl").write_text(old)
    (rec,) = read_jsonl(tmp_path / "metrics.jsonl")
    assert rec.records == 100 and rec.advised_interval_s is None and rec.advised_blocks is None
    again = BatchRecord.from_dict(json.loads(rec.to_json()))
    assert again == rec
