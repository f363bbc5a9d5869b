"""Spark's own progress on real Spark: the backlog in ``lastProgress`` (``reportLatestOffset``)
and the listener that writes ``spark_progress.jsonl`` as batches finish.

Overload: Spark's default trigger with ``maxRowsPerTrigger`` 2,000 takes at most 2,000
records per micro-batch, and a micro-batch costs >= 0.2 s here, so local[2] processes at
most ~10,000 records/s; a burst of 40,000/s for 2 s outruns it, then 200/s lets the
backlog drain by ~2,000 records a batch.
"""

from __future__ import annotations

import json
import time
from itertools import pairwise

import pytest

from adabatch.api import read_stream
from adabatch.control.fingerprint import code_fingerprint
from adabatch.metrics import read_jsonl
from adabatch.runs.spark_job import RunConfig, run_spark
from adabatch.streaming.progress import ProgressLog, attach, detach, source_batches

pytestmark = pytest.mark.spark

MAX_ROWS = 2000
BURST = "steps:40000@0,200@2s"
WAIT_S = 60.0  # give up on the backlog draining after this long (a stuck query)


@pytest.fixture(scope="module")
def spark():
    from adabatch.spark import get_spark

    return get_spark("local[2]")


def backlogs(progress):
    return [b.backlog_records for p in progress for b in source_batches(p)]


def drained_after_peak(series, falls=3):
    """The backlog peaked and then fell ``falls`` batches in a row."""
    if len(series) < 2:
        return False
    peak = series.index(max(series))
    tail = series[peak:]
    return len(tail) > falls and all(a > b for a, b in pairwise(tail[-falls - 1 :]))


def test_backlog_in_last_progress_grows_under_overload_and_shrinks_after(spark, tmp_path):
    df = read_stream(
        spark, controller="spark-default", profile=BURST, keys=100, maxRowsPerTrigger=MAX_ROWS
    )
    log = ProgressLog(tmp_path / "progress.jsonl", keep=True)
    attach(spark, log)
    query = (
        df.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .queryName("progress_overload")
        .start()
    )
    log.follow(query.id)
    seen = []  # latestOffset as the user reads it from lastProgress, while the query runs
    try:
        deadline = time.monotonic() + WAIT_S
        while not drained_after_peak(backlogs(log.progress())):
            assert query.isActive, query.exception()
            assert time.monotonic() < deadline, backlogs(log.progress())
            last = query.lastProgress
            if last is not None and source_batches(last):
                seen.append(json.loads(last["sources"][0]["latestOffset"]))
            query.awaitTermination(0.2)
    finally:
        query.stop()
        assert detach(spark, log)
    series = backlogs(log.progress())
    peak = series.index(max(series))
    assert seen and all(o is not None and o["offset"] > 0 and o["blocks"] == 0 for o in seen)
    assert all(b is not None and b >= 0 for b in series)
    # grows under the burst, to a peak far above one batch's worth
    assert peak > 0 and series[peak] > series[0] + 5 * MAX_ROWS, series
    # shrinks after, batch by batch: by one batch (at most MAX_ROWS) less the arrivals
    falls = [a - b for a, b in pairwise(series[peak:])]
    assert len(falls) >= 3 and all(0 < f <= MAX_ROWS for f in falls), series
    # the file holds every batch's report, one line each, in batch order
    lines = (tmp_path / "progress.jsonl").read_text().splitlines()
    assert len(lines) == log.count == len(log.progress())
    ids = [json.loads(line)["batchId"] for line in lines]
    assert ids == sorted(set(ids)) and ids[0] == 0


def test_run_writes_a_line_per_batch_as_it_goes_and_leaves_the_conf(spark, tmp_path):
    conf = spark.conf.getAll
    out = tmp_path / "run"
    path = out / "spark_progress.jsonl"
    counts = []
    for seconds in (2.0, 1.5):  # the second run restarts the query: the file is appended to
        cfg = RunConfig(
            workload="reduce",
            controller="static",
            params={"interval": 0.5},
            profile="constant:2000",
            duration_s=seconds,
            out_dir=out,
            master="local[2]",
            keys=100,
        )
        before = path.read_bytes() if path.exists() else b""
        result = run_spark(cfg, spark=spark)
        assert path.read_bytes().startswith(before)  # earlier runs' lines kept
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        ours = [p for p in lines if source_batches(p)]  # the warm-up batch reads no records
        # one line per batch the source measured (metrics.jsonl: every run's batches)
        assert len(ours) == len(read_jsonl(out / "metrics.jsonl")) > 0
        assert [b.records for p in ours for b in source_batches(p)] == [
            r.records for r in read_jsonl(out / "metrics.jsonl")
        ]
        ids = [p["batchId"] for p in lines]
        assert ids == sorted(set(ids))
        assert result.summary.extra["spark_busy_fraction"] > 0
        assert result.summary.extra["controller_code"] == code_fingerprint("static")
        counts.append(len(lines))
        assert spark.conf.getAll == conf
    assert counts[1] > counts[0]
    assert spark.conf.get("spark.sql.streaming.numRecentProgressUpdates") == "100"
