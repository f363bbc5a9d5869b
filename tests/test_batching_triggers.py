"""The batching model under Spark's trigger semantics: the end of the input
(``Trigger.AvailableNow``) and ``minRowsPerTrigger`` bounded by ``maxTriggerDelay``."""

from __future__ import annotations

import math

import pytest

from adabatch.batching import NO_LIMIT, BatchCutter, Limit
from adabatch.control import registry
from batching_helpers import Scripted, arrival, constant


def drain(cutter: BatchCutter, now: float, processing_s: float = 0.3, limit=NO_LIMIT):
    """Spark under availableNow: poll, run what comes, stop at the first poll without a
    batch. Returns the batches handed out and the time the query ended."""
    handed = []
    while True:
        batch = cutter.poll(now, limit).handed
        if batch is None:
            return handed, now
        handed.append(batch)
        now += processing_s


def test_backlog_drains_in_the_planned_windows_then_stops():
    ctl = Scripted([1.0, 2.0, 4.0])
    cutter = BatchCutter(ctl, constant(100))
    cutter.end_at = 10.0  # the target: what arrived by stream time 10
    handed, _ = drain(cutter, 10.0)
    # windows 0-1, 1-3, 3-7, then the last, shortened window 7-10 ending at the target
    assert [(b.start, b.end) for b in handed] == [(0, 100), (100, 300), (300, 700), (700, 1000)]
    assert [b.interval_s for b in handed] == [1.0, 2.0, 4.0, 3.0]
    assert all(b.cut_at <= 10.0 for b in handed)
    # every batch was observed, the last by the poll that ended the query
    assert [r.records for r in ctl.reports] == [100, 200, 400, 300]


def test_nothing_arrives_after_the_target_however_long_the_drain_takes():
    cutter = BatchCutter(Scripted([1.0]), constant(100))
    cutter.end_at = 3.0
    handed, ended = drain(cutter, 3.0, processing_s=5.0)  # stream time runs far past 3 s
    assert ended > 15.0
    assert handed[-1].end == 300 and cutter.next_offset == 300
    assert [b.cut_at for b in handed] == [1.0, 2.0, 3.0]


def test_a_cut_on_the_target_leaves_no_empty_last_batch():
    cutter = BatchCutter(Scripted([1.0]), constant(100))
    cutter.end_at = 2.0
    handed, _ = drain(cutter, 2.0)
    assert [(b.start, b.end) for b in handed] == [(0, 100), (100, 200)]


def test_capped_plans_still_drain_everything_up_to_the_target():
    ctl = Scripted([1.0], max_records=40)
    cutter = BatchCutter(ctl, constant(100))
    cutter.end_at = 2.0
    handed, _ = drain(cutter, 2.0)
    assert sum(b.records for b in handed) == 200
    assert max(b.records for b in handed) == 40
    assert [b.start for b in handed] == [40 * i for i in range(5)]


def test_spark_default_drains_in_one_batch_or_split_by_max_rows():
    cutter = BatchCutter(None, constant(100))
    cutter.end_at = 5.0
    handed, _ = drain(cutter, 5.0)
    assert [(b.start, b.end) for b in handed] == [(0, 500)]
    cutter = BatchCutter(None, constant(100))
    cutter.end_at = 5.0
    handed, _ = drain(cutter, 5.0, limit=Limit(max_rows=200))
    assert [(b.start, b.end) for b in handed] == [(0, 200), (200, 400), (400, 500)]


def test_min_rows_does_not_hold_back_the_end_of_the_input():
    cutter = BatchCutter(Scripted([1.0]), constant(100))
    cutter.end_at = 2.5
    handed, _ = drain(cutter, 2.5, limit=Limit(min_rows=1000))
    assert [(b.start, b.end) for b in handed] == [(0, 250)]


def test_fixed_point_slow_start_windows_drain_a_backlog():
    ctl = registry.create("fixed-point", {})
    cutter = BatchCutter(ctl, constant(1000))
    cutter.end_at = 25.0
    handed, _ = drain(cutter, 25.0)
    # slow start doubles the interval at every cut: 0.1, 0.2, 0.4, ... up to the target
    intervals = [round(b.interval_s, 6) for b in handed]
    assert intervals[:5] == [0.1, 0.2, 0.4, 0.8, 1.6]
    assert sum(b.records for b in handed) == 25_000
    assert all(b.records == round(b.interval_s * 1000) for b in handed)


def test_max_trigger_delay_releases_the_batch_when_its_oldest_record_has_waited():
    limit = Limit(min_rows=1000, max_delay_s=2.5)
    cutter = BatchCutter(Scripted([1.0]), constant(100), arrival_time=arrival(100))
    assert cutter.poll(1.0, limit).handed is None
    assert cutter.poll(2.0, limit).handed is None
    # the first record arrived at 0.01 s: at 2.5 s it has waited 2.49 s, at 2.51 s enough
    assert cutter.poll(2.5, limit).handed is None
    assert cutter.oldest_waiting_arrival() == pytest.approx(0.01)
    batch = cutter.poll(2.51, limit).handed
    assert (batch.start, batch.end, batch.cuts) == (0, 200, 2)
    # without a delay the same batch is still held
    cutter = BatchCutter(Scripted([1.0]), constant(100), arrival_time=arrival(100))
    assert all(cutter.poll(t, Limit(min_rows=1000)).handed is None for t in (1.0, 2.0, 9.0))


def test_max_trigger_delay_counts_from_the_first_record_not_from_empty_windows():
    # nothing arrives before 5 s; then 100/s
    def available(t):
        return max(math.floor((t - 5.0) * 100 + 1e-9), 0)

    limit = Limit(min_rows=1000, max_delay_s=2.0)
    cutter = BatchCutter(Scripted([1.0]), available, arrival_time=lambda n: 5.0 + (n + 1) / 100)
    for t in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0):
        assert cutter.poll(t, limit).handed is None  # empty windows wait, no record waits
    assert cutter.poll(7.0, limit).handed is None  # first record at 5.01: waited 1.99 s
    batch = cutter.poll(7.02, limit).handed
    assert (batch.start, batch.end) == (0, 200)


def test_without_arrival_times_a_record_counts_from_its_window_start():
    limit = Limit(min_rows=1000, max_delay_s=2.0)
    cutter = BatchCutter(Scripted([1.0]), constant(100))
    assert cutter.poll(1.0, limit).handed is None
    assert cutter.oldest_waiting_arrival() == 0.0
    assert cutter.poll(2.0, limit).handed is not None


def test_max_trigger_delay_in_spark_default_mode():
    limit = Limit(min_rows=500, max_delay_s=1.0)
    cutter = BatchCutter(None, constant(100), arrival_time=arrival(100))
    held = [cutter.poll(t, limit).handed for t in (0.2, 0.5, 0.9)]
    assert held == [None, None, None]
    batch = cutter.poll(1.02, limit).handed  # record 0 arrived at 0.01 s
    assert (batch.start, batch.end) == (0, 102)
    # enough rows go out at once, whatever the delay
    cutter = BatchCutter(None, constant(1000), arrival_time=arrival(1000))
    assert cutter.poll(0.6, limit).handed.records == 600
