"""The Structured Streaming baseline over the same landing files."""

from __future__ import annotations

import pytest

from adabatch.deadline.spark import tpch
from adabatch.deadline.spark.baseline import Trigger, _is_memory_error
from adabatch.errors import AdabatchError


def test_trigger_parsing() -> None:
    assert Trigger.parse("default") == Trigger("default")
    assert Trigger.parse("available-now").label == "available-now"
    assert Trigger.parse("processing:5") == Trigger("processing", 5.0)
    assert Trigger.parse("processing:0.5s").label == "processing:0.5s"
    for bad in ("once", "processing:0", "processing:x", "processing"):
        with pytest.raises(AdabatchError, match="allowed default, available-now"):
            Trigger.parse(bad)


def test_memory_errors_are_recognised() -> None:
    assert _is_memory_error("java.lang.OutOfMemoryError: Java heap space")
    assert _is_memory_error("GC overhead limit exceeded")
    assert not _is_memory_error("FileNotFoundException")


@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> tpch.Manifest:
    return tpch.prepare(tmp_path_factory.mktemp("tpch"), scale_factor=0.01, slots=8, rate=4.0)


@pytest.fixture(scope="module")
def spark():
    from adabatch.spark import get_spark

    return get_spark("local[2]", conf={"spark.ui.showConsoleProgress": "false"})


@pytest.mark.spark
@pytest.mark.parametrize(
    ("query", "trigger"), [("q4", "default"), ("q19", "processing:1"), ("cq3", "available-now")]
)
def test_streaming_query_answers_like_duckdb(spark, manifest, tmp_path, query, trigger) -> None:
    from adabatch.deadline.spark.baseline import run_streaming
    from adabatch.deadline.spark.queries import get_query

    deadline = manifest.window_end + 600.0
    run = run_streaming(spark, manifest, query, trigger, tmp_path, deadline=deadline)
    assert run.failure is None
    assert run.correct is True, run.differences
    assert run.met is True
    streams = get_query(query).streams
    rows = sum(int(p["numInputRows"]) for p in run.progress)
    assert rows == sum(manifest.total(s) for s in streams)
    assert run.cost == pytest.approx(
        sum(p["durationMs"]["triggerExecution"] for p in run.progress) / 1000
    )
    assert run.cost > 0 and run.wall_s is not None and run.wall_s > 0
    if trigger == "available-now":
        assert run.data_batches == 1  # one shot after the whole window landed
        assert run.completion >= manifest.window_end
    if len(streams) == 2:  # the stream-stream join keeps state
        assert run.max_state_bytes > 0
    assert (tmp_path / "progress.jsonl").read_text().count("\n") == run.batches


@pytest.mark.spark
def test_failed_stream_is_reported_not_raised(spark, tmp_path) -> None:
    from adabatch.deadline.spark.baseline import run_streaming

    m = tpch.prepare(tmp_path / "data", scale_factor=0.01, slots=4, rate=4.0)
    m.staging_path(m.slots[2], "lineitem").write_bytes(b"not a parquet file")
    run = run_streaming(spark, m, "q6", "default", tmp_path / "run", deadline=60.0, timeout_s=60)
    assert run.failure is not None
    assert run.memory_failure is False
    assert run.answer is None and run.correct is None and run.met is False
