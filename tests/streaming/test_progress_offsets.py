"""Spark's progress without a Spark query: ``reportLatestOffset`` on a clock the test
advances (what has arrived by now, nothing changed by asking), and the listeners fed with
PySpark's own event objects built from progress JSON as Spark writes it."""

from __future__ import annotations

import copy
import json

import pytest
from pyspark.sql.streaming.listener import QueryProgressEvent
from runtime_helpers import Clock, make

from adabatch.errors import AdabatchError
from adabatch.streaming.offsets import INITIAL, SourceOffset
from adabatch.streaming.options import parse_options
from adabatch.streaming.progress import ProgressLog, read_progress, source_batches
from adabatch.streaming.reader import AdabatchStreamReader


def snapshot(rt, tmp_path):
    """Everything a report must leave alone: cutter, controller, files, clock."""
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    cutter = None if rt.cutter is None else rt.cutter.state()
    controller = None if rt.controller is None else rt.controller.state()
    return (cutter, controller, files, rt.start_time, rt.paused_s, rt._armed)


def test_none_before_the_stream_started_and_the_clock_not_started(tmp_path):
    clock = Clock()
    rt = make(tmp_path, clock)
    assert rt.report_latest_offset() is None
    assert rt.start_time is None and not rt._armed and not tmp_path.joinpath("state.json").exists()
    start = INITIAL.to_dict()
    assert rt.latest_offset(start) == start  # the warm-up batch: armed, not started
    clock.t += 5.0
    assert rt.report_latest_offset() is None
    assert rt.start_time is None  # asking did not start the stream


def test_latest_is_what_arrived_by_now_and_asking_changes_nothing(tmp_path):
    clock = Clock()
    rt = make(tmp_path, clock)
    start = INITIAL.to_dict()
    rt.latest_offset(start)
    rt.latest_offset(start)  # the stream starts here, at stream time 0
    clock.t += 1.01
    end = rt.latest_offset(start)
    assert SourceOffset.from_dict(end).offset == 100
    rt.partitions(start, end)
    clock.t += 2.545  # Spark is busy: 2.5 s more of records at 100/s have arrived
    before = snapshot(rt, tmp_path)
    latest = rt.report_latest_offset()
    again = rt.report_latest_offset()
    assert snapshot(rt, tmp_path) == before
    assert latest == again
    off = SourceOffset.from_dict(latest)  # the same shape as the batch ends
    assert set(latest) == set(INITIAL.to_dict())  # no controller state carried
    assert off.offset == rt.source.available(rt.now()) == 355
    assert off.cut_us == 3_555_000 and off.blocks == 0
    assert off.start_time_us == SourceOffset.from_dict(end).start_time_us
    assert off.offset - SourceOffset.from_dict(end).offset == 255  # the backlog in records
    # Spark's next poll sees the same schedule as if the report had not been asked for
    assert SourceOffset.from_dict(rt.latest_offset(end)).offset == 200


def test_reader_reports_none_before_its_runtime_exists(tmp_path):
    opts = parse_options({"controller": "static", "param.interval": "1.0"})
    reader = AdabatchStreamReader(opts)
    assert reader.reportLatestOffset() is None
    assert reader._runtime is None  # asking did not build the runtime


# A batch's progress as Spark 4.3 writes it (trimmed): 1,000 records cut at 0.5 s in 2 blocks,
# 11 records more had arrived when Spark took it, 5.83 ms after the cut.
START_US = 1_795_684_355_645_278
PROGRESS = {
    "id": "d5bbbdf6-a1b9-44c2-933e-3622551a9a77",
    "runId": "8b7cba16-d8cf-43d1-b87e-4d387ff329b4",
    "name": "counts",
    "timestamp": "2026-01-26T09:12:36.150Z",
    "batchId": 1,
    "batchDuration": 2310,
    "numInputRows": 1000,
    "inputRowsPerSecond": 83333.3,
    "processedRowsPerSecond": 432.9,
    "durationMs": {"addBatch": 2098, "latestOffset": 1, "triggerExecution": 2309},
    "stateOperators": [],
    "sources": [
        {
            "description": "PythonMicroBatchStreamWithAdmissionControl@452414d5",
            "startOffset": {"offset": 0, "cut_us": 0, "blocks": 0, "start_time_us": 0},
            "endOffset": {"offset": 1000, "cut_us": 500000, "blocks": 2, "start_time_us": START_US},
            "latestOffset": {
                "offset": 1011,
                "cut_us": 505830,
                "blocks": 0,
                "start_time_us": START_US,
            },
            "numInputRows": 1000,
            "inputRowsPerSecond": 83333.3,
            "processedRowsPerSecond": 432.9,
            "metrics": {},
        }
    ],
    "sink": {"description": "ForeachBatchSink", "numOutputRows": -1, "metrics": {}},
}
OTHER_QUERY = "0e0e0e0e-1111-2222-3333-444444444444"


def event(batch_id: int = 1, query_id: str = PROGRESS["id"], **changes):
    progress = copy.deepcopy(PROGRESS) | {"batchId": batch_id, "id": query_id} | changes
    return QueryProgressEvent.fromJson({"progress": progress})


def test_source_batches_read_interval_blocks_backlog_and_queue_delay():
    (b,) = source_batches(PROGRESS)
    assert (b.index, b.interval_s, b.blocks, b.records) == (0, 0.5, 2, 1000)
    assert b.backlog_records == 11 and b.queue_delay_s == pytest.approx(0.00583)
    # as PySpark's lastProgress has them: offsets as JSON text
    src = PROGRESS["sources"][0]
    text = {k: json.dumps(src[k]) for k in ("startOffset", "endOffset", "latestOffset")}
    assert source_batches({"sources": [src | text]}) == [b]
    # Spark's warm-up batch (the stream has not started) and other sources are left out
    warm = src | {"startOffset": None, "endOffset": INITIAL.to_dict(), "latestOffset": None}
    kafka = {"startOffset": {"topic": {"0": 5}}, "endOffset": {"topic": {"0": 9}}}
    assert source_batches({"sources": [warm, kafka]}) == []
    # no latest offset reported: no backlog, not a zero one
    (nolatest,) = source_batches({"sources": [src | {"latestOffset": None}]})
    assert nolatest.backlog_records is None and nolatest.queue_delay_s is None


def test_progress_log_holds_events_until_it_knows_its_query(tmp_path):
    log = ProgressLog(tmp_path / "p.jsonl", keep=True)
    log.onQueryProgress(event(0))  # before the caller learned the query's id
    log.onQueryProgress(event(0, OTHER_QUERY))
    assert not (tmp_path / "p.jsonl").exists() and log.count == 0
    log.follow(PROGRESS["id"])
    log.onQueryProgress(event(1))
    log.onQueryProgress(event(1, OTHER_QUERY))
    lines = (tmp_path / "p.jsonl").read_text().split("\n")
    assert lines[-1] == "" and len(lines) == 3  # one compact line per batch, ours only
    assert [json.loads(line)["batchId"] for line in lines[:-1]] == [0, 1]
    assert all(": " not in line and ", " not in line for line in lines)
    assert [p["batchId"] for p in log.progress()] == [0, 1] and log.count == 2
    assert read_progress(tmp_path / "p.jsonl", since=len(lines[0]) + 1) == [log.progress()[1]]
    log.check()


def test_progress_log_reports_a_file_it_cannot_write(tmp_path):
    (tmp_path / "p.jsonl").mkdir()  # a directory where the file should go
    log = ProgressLog(tmp_path / "p.jsonl")
    log.follow(PROGRESS["id"])
    log.onQueryProgress(event(1))
    with pytest.raises(AdabatchError, match=r"progress could not be written to .*p\.jsonl"):
        log.check()


def test_prometheus_gauges_from_one_report_and_gone_with_the_query():
    pytest.importorskip("prometheus_client")
    from adabatch.streaming.prometheus import PrometheusExporter

    exporter = PrometheusExporter()
    exporter.onQueryProgress(event(1))
    value = exporter.registry.get_sample_value
    labels = {"query": "counts", "source": "0"}
    assert value("adabatch_interval_seconds", labels) == 0.5
    assert value("adabatch_blocks", labels) == 2
    assert value("adabatch_batch_records", labels) == 1000
    assert value("adabatch_queue_records", labels) == 11
    assert value("adabatch_queue_delay_seconds", labels) == pytest.approx(0.00583)
    assert value("adabatch_processing_seconds", {"query": "counts"}) == 2.309
    assert value("adabatch_target_seconds", {"query": "counts"}) is None
    exporter.forget(PROGRESS["id"])
    assert value("adabatch_interval_seconds", labels) is None
    assert value("adabatch_processing_seconds", {"query": "counts"}) is None
