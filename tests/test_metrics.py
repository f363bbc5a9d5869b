"""The shared per-batch metrics and run summary (simulator and Spark path alike)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from adabatch.control import BatchReport
from adabatch.errors import AdabatchError
from adabatch.metrics import (
    REQUIRED_SUMMARY_FIELDS,
    BatchRecord,
    MetricsWriter,
    RunSummary,
    busy_fraction,
    is_stable,
    read_jsonl,
    source_backlog_grows,
    summarize,
    write_summary,
)

# The keys of summary.json in their order: summarize's own, then what callers add.
SUMMARY_KEYS = [
    "controller",
    "workload",
    "profile",
    "duration_s",
    "batches",
    "records",
    "mean_interval_s",
    "cv_interval",
    "mean_blocks",
    "mean_processing_s",
    "mean_queue_delay_s",
    "max_queue_delay_s",
    "mean_latency_s",
    "p95_latency_s",
    "mean_record_latency_s",
    "p95_record_latency_s",
    "throughput_rps",
    "overloaded_fraction",
    "busy_fraction",
    "final_queue_len",
    "queue_slope",
    "stable",
    "skip_s",
]


def run(interval: float, processing: float, n: int) -> list[BatchRecord]:
    """A single-server queue with constant interval and processing time."""
    out, free = [], 0.0
    for i in range(n):
        cut = (i + 1) * interval
        start = max(cut, free)
        free = start + processing
        rep = BatchReport(i, interval, 2, 100, processing, start - cut, cut, start, free)
        out.append(BatchRecord.from_report(rep, queue_len=0))
    return out


def test_record_latencies_follow_both_definitions() -> None:
    rep = BatchReport(0, 2.0, 2, 100, 0.5, 0.25, 2.0, 2.25, 2.75)
    rec = BatchRecord.from_report(rep)
    assert rec.latency_s == pytest.approx(2.75)  # x + q + p
    assert rec.record_latency_s == pytest.approx(1.75)  # finished - mean arrival (x/2 before)


def test_stable_queue_is_stable_and_growing_queue_is_not() -> None:
    assert is_stable(run(1.0, 0.6, 200), final_queue_len=0)
    growing = run(1.0, 1.3, 200)
    assert growing[-1].queue_delay_s == pytest.approx(199 * 0.3)
    assert not is_stable(growing, final_queue_len=60)


def with_source(records: list[BatchRecord], left: list[int]) -> list[BatchRecord]:
    """``records`` with the source's waiting records after each batch set to ``left``."""
    return [dataclasses.replace(r, left_records=n) for r, n in zip(records, left, strict=True)]


def test_a_growing_source_backlog_is_unstable_though_the_batch_queue_is_short() -> None:
    """Capped batches (100 records each) keep the queue empty while arrivals pile up in
    the source: the query reads less than arrives. A backlog that drains (a catch-up) or
    stays within a few batches is stable."""
    steady = run(1.0, 0.6, 200)
    assert is_stable(steady, final_queue_len=0)
    falling_behind = with_source(steady, [50 * i for i in range(200)])
    assert source_backlog_grows(falling_behind)
    assert not is_stable(falling_behind, final_queue_len=0)
    draining = with_source(steady, [max(0, 100_000 - 1_000 * i) for i in range(200)])
    assert is_stable(draining, final_queue_len=0)
    within_a_batch = with_source(steady, [i % 150 for i in range(200)])
    assert is_stable(within_a_batch, final_queue_len=0)
    assert is_stable(with_source(steady, [None] * 200), final_queue_len=0)


def test_a_few_long_overloaded_batches_are_unstable() -> None:
    """A run stopped after three batches of 10 s that each took 25 s (the join acceptance
    on Spark) has no second half to fit, but its queue plainly grows."""
    few = run(10.0, 25.0, 3)
    assert [r.queue_delay_s for r in few] == pytest.approx([0.0, 15.0, 30.0])
    assert not is_stable(few, final_queue_len=5)
    assert is_stable(run(10.0, 6.0, 3), final_queue_len=0)
    # one batch that ran over its interval with another waiting: the queue grows
    assert not is_stable(run(10.0, 25.0, 1), final_queue_len=1)
    assert is_stable(run(10.0, 6.0, 1), final_queue_len=0)
    # two: a slow host's static join, two batches of 14 s that took 33 s, two waiting
    assert not is_stable(run(14.0, 33.0, 2), final_queue_len=2)
    assert is_stable(run(14.0, 6.0, 2), final_queue_len=1)


def test_too_few_finished_batches_cannot_be_called_stable() -> None:
    """Fewer than two finished batches give no slope: the backlog decides. A run that
    left as many batches waiting as it finished processed far less than it cut."""
    assert not is_stable([], final_queue_len=1)
    assert is_stable([], final_queue_len=0)
    assert not is_stable(run(1.0, 0.5, 1), final_queue_len=59)  # 1 of 60 processed
    assert not is_stable(run(1.0, 0.9, 10), final_queue_len=10)  # flat delays, big backlog
    assert is_stable(run(1.0, 0.9, 10), final_queue_len=1)
    s = summarize(
        run(1.0, 50.0, 1),
        controller="static",
        workload="reduce",
        profile="constant:1e8",
        duration_s=60.0,
        final_queue_len=59,
    )
    assert s.stable is False


def test_a_stopped_run_whose_last_batches_all_ran_over_is_unstable() -> None:
    """Three batches of 14 s that took 19 s each leave one cut queued and a queue delay of
    10 s (under two intervals), yet every batch ran over and the delay grew each time."""
    few = run(14.0, 19.0, 3)
    assert not is_stable(few, final_queue_len=1)
    # the same shape with the last batch back under its interval is not called diverging
    recovering = few[:2] + run(14.0, 19.0, 3)[2:]
    recovering[2] = BatchRecord.from_report(
        BatchReport(2, 14.0, 2, 100, 9.0, 10.0, 42.0, 52.0, 61.0), queue_len=0
    )
    assert is_stable(recovering, final_queue_len=0)


def test_summary_has_the_contract_fields_and_right_means(tmp_path) -> None:
    recs = run(1.0, 0.6, 100)
    s = summarize(
        recs, controller="static", workload="reduce", profile="constant:100", duration_s=100.0
    )
    for key in REQUIRED_SUMMARY_FIELDS:
        assert key in s.to_json()
    assert s.mean_latency_s == pytest.approx(1.6)
    assert s.mean_record_latency_s == pytest.approx(1.1)
    assert s.throughput_rps == pytest.approx(100.0)
    assert s.busy_fraction == pytest.approx(0.6, rel=0.01)
    assert s.stable is True
    write_summary(tmp_path / "summary.json", s)
    assert json.loads((tmp_path / "summary.json").read_text())["batches"] == 100


def test_busy_fraction_never_exceeds_one_when_batches_finish_late() -> None:
    recs = run(1.0, 1.5, 10)  # last batch finishes at 1 + 10 * 1.5 = 16 s
    assert busy_fraction(recs, duration_s=10.0) == pytest.approx(15.0 / 16.0)


def test_jsonl_round_trip_and_missing_file(tmp_path) -> None:
    writer = MetricsWriter(tmp_path / "m" / "metrics.jsonl")
    recs = run(0.5, 0.2, 5)
    for r in recs:
        writer.append(r)
    assert read_jsonl(tmp_path / "m" / "metrics.jsonl") == recs
    with pytest.raises(AdabatchError, match="does not exist"):
        read_jsonl(tmp_path / "nope.jsonl")


def summary(**extra) -> RunSummary:
    return summarize(
        run(1.0, 0.6, 30),
        controller="static",
        workload="reduce",
        profile="constant:100",
        duration_s=30.0,
        skip_s=5.0,
        extra=extra,
    )


def test_summary_json_has_exactly_the_keys_of_summary_json_in_order() -> None:
    s = summary(mode="simulated", seed=3, model={"sigma": 0.1})
    assert list(s.to_json()) == [*SUMMARY_KEYS, "mode", "seed", "model"]
    assert s.to_json()["model"] == {"sigma": 0.1} and s.extra["seed"] == 3
    assert list(summary().to_json()) == SUMMARY_KEYS


def test_an_extra_key_that_names_a_field_sets_it_in_place() -> None:
    s = summary(mode="simulated", stable=False)  # a diverged simulation
    assert s.stable is False and "stable" not in s.extra
    assert list(s.to_json()) == [*SUMMARY_KEYS, "mode"]


def test_summary_round_trips_through_json(tmp_path) -> None:
    s = summary(mode="spark", cpu_s=1.5, controller_params={"rho": 0.7})
    assert RunSummary.from_json(s.to_json()) == s
    write_summary(tmp_path / "summary.json", s)
    assert RunSummary.from_json(json.loads((tmp_path / "summary.json").read_text())) == s


def test_summary_from_a_file_with_nulls_and_unknown_keys(tmp_path) -> None:
    s = summarize([], controller="static", workload="reduce", profile="constant:1", duration_s=0.0)
    write_summary(tmp_path / "summary.json", s.with_values(source="files"))
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["mean_latency_s"] is None and "mean_latency_s" in data["nonfinite_fields"]
    back = RunSummary.from_json(data)
    assert math.isnan(back.mean_latency_s) and back.extra == {"source": "files"}
    assert back.get("source") == "files" and back.get("nosuch") is None
    with pytest.raises(AdabatchError, match="stable"):
        RunSummary.from_json({k: v for k, v in data.items() if k != "stable"})
