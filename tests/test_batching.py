"""The batching component and batch queue (adabatch.batching) on a clock driven by hand."""

from __future__ import annotations

import itertools
import math

import pytest

from adabatch.batching import BatchCutter, CutBatch, Limit, merge
from adabatch.control import registry
from adabatch.control.base import BatchPlan
from adabatch.errors import AdabatchError
from batching_helpers import Scripted, arrival, constant


def test_cuts_on_schedule_and_measures_processing_and_queue_delay():
    ctrl = Scripted([1.0])
    cutter = BatchCutter(ctrl, constant(100))
    assert cutter.poll(0.5).handed is None  # nothing due before the first cut
    first = cutter.poll(1.02).handed
    assert first == CutBatch(seq=0, start=0, end=100, cut_at=1.0, interval_s=1.0, blocks=2)
    # Spark is busy until 3.5: the cuts at 2.0 and 3.0 wait in the queue
    poll = cutter.poll(3.5)
    assert poll.report is not None
    assert poll.report.processing_s == pytest.approx(2.48)
    assert poll.report.queue_delay_s == pytest.approx(0.02)
    assert poll.queue_len == 2  # both waiting when batch 0 finished
    assert poll.handed.cut_at == 2.0 and poll.handed.records == 100  # fifo: one batch
    poll = cutter.poll(3.6)
    assert poll.report.queue_delay_s == pytest.approx(1.5)
    assert poll.handed.cut_at == 3.0
    assert [r.batch_id for r in ctrl.reports] == [0, 1]
    # plan(t) was called at every cut, at the cut's own time, in order
    assert ctrl.plans == [0.0, 1.0, 2.0, 3.0]


def test_when_free_cuts_after_the_batch_before_and_queues_nothing():
    ctrl = Scripted([1.0], when_free=True)
    cutter = BatchCutter(ctrl, constant(100))
    assert cutter.poll(0.5).handed is None
    assert (cutter.poll(1.0).handed.start, cutter.next_offset) == (0, 100)
    # busy until 3.5: no cut at 2 or 3; the next one comes when the batch finishes and
    # takes everything that arrived meanwhile (Spark's processingTime trigger)
    poll = cutter.poll(3.5)
    assert poll.queue_len == 0 and poll.report.processing_s == pytest.approx(2.5)
    assert (poll.handed.start, poll.handed.end, poll.handed.cut_at) == (100, 350, 3.5)
    assert poll.handed.interval_s == pytest.approx(2.5)
    assert poll.report.left_records == 250  # what the batch cut at 3.5 now holds
    # the window from 1.0 was planned again once batch 0's report was in, then cut
    assert ctrl.plans == [0.0, 1.0, 1.0, 3.5]
    poll = cutter.poll(3.7)  # finished early: the next cut keeps its schedule
    assert poll.report is not None and poll.handed is None
    assert cutter.next_cut_at() == pytest.approx(4.5)
    assert cutter.poll(4.5).handed.records == 100


def test_a_replan_plan_is_made_again_after_a_report_and_keeps_the_schedule():
    # 2 s windows, then 0.5 s: the window from 2.0 is planned at its start and again
    # when batch 0 reports at 2.4, so its cut moves from 4.0 to 2.5
    ctrl = Scripted([2.0, 2.0, 0.5], replan=True)
    cutter = BatchCutter(ctrl, constant(100))
    assert cutter.poll(2.0).handed.cut_at == 2.0
    poll = cutter.poll(2.4)
    assert poll.report is not None and poll.handed is None
    assert ctrl.plans == [0.0, 2.0, 2.0]
    assert cutter.next_cut_at() == pytest.approx(2.5)
    assert cutter.poll(2.5).handed.interval_s == pytest.approx(0.5)
    # a batch still running at its cut is queued as in the papers' model, not waited for
    busy = Scripted([1.0], replan=True)
    cutter = BatchCutter(busy, constant(100))
    cutter.poll(1.0)
    assert cutter.poll(2.5).queue_len == 1


def test_a_stream_started_behind_is_read_one_planned_batch_at_a_time():
    ctrl = Scripted([1.0], max_records=120, when_free=True)
    cutter = BatchCutter(ctrl, constant(100))
    first = cutter.poll(300.0).handed  # 300 s of records wait: one window is cut, not 300
    assert (first.start, first.end, first.cut_at) == (0, 100, 1.0)
    assert ctrl.plans == [0.0, 1.0] and not cutter.queue
    poll = cutter.poll(300.4)
    assert poll.report.left_records == 30040 - 100  # the backlog, reported
    assert (poll.handed.start, poll.handed.end, poll.handed.cut_at) == (100, 220, 300.4)
    again = BatchCutter(Scripted([1.0], max_records=120, when_free=True), constant(100))
    again.restore(cutter.state())
    assert again.poll(300.5).handed == cutter.poll(300.5).handed


def test_a_plan_cut_when_full_ends_its_window_at_its_last_record():
    # 100 records/s, 1 s windows of at most 50: each is cut when its 50th record arrives
    cutter = BatchCutter(
        Scripted([1.0], max_records=50, full=True), constant(100), arrival_time=arrival(100)
    )
    assert cutter.next_cut_at() == pytest.approx(0.5)
    first = cutter.poll(0.5).handed
    assert (first.start, first.end, first.cut_at, first.interval_s) == (0, 50, 0.5, 0.5)
    # without arrival times (or without the flag) the cap only limits what the cut takes
    plain = BatchCutter(Scripted([1.0], max_records=50, full=True), constant(100))
    assert plain.next_cut_at() == 1.0
    capped = BatchCutter(Scripted([1.0], max_records=50), constant(100), arrival_time=arrival(100))
    assert capped.next_cut_at() == 1.0 and capped.poll(1.0).handed.records == 50


class _Live:
    """A live source: a record's arrival is known once a poll has looked (``available``)."""

    def __init__(self, rate: float) -> None:
        self.rate, self.seen = rate, 0

    def available(self, now: float) -> int:
        self.seen = max(self.seen, math.floor(now * self.rate + 1e-9))
        return math.floor(now * self.rate + 1e-9)

    def arrival_time(self, offset: int) -> float:
        return (offset + 1) / self.rate if offset < self.seen else math.inf


def test_a_live_source_is_cut_when_full_at_the_poll_that_sees_it_full():
    live = _Live(100)
    cutter = BatchCutter(
        Scripted([1.0], max_records=50, full=True), live.available, arrival_time=live.arrival_time
    )
    assert cutter.poll(0.3).handed is None and cutter.next_cut_at() == 1.0
    handed = cutter.poll(0.7).handed  # the 50th record arrived at 0.5: cut there
    assert (handed.end, handed.cut_at, handed.interval_s) == (50, 0.5, 0.5)


def test_cut_when_full_needs_a_record_cap():
    with pytest.raises(AdabatchError, match="cut_when_full"):
        BatchPlan(1.0, 2, None, cut_when_full=True)
    with pytest.raises(AdabatchError, match="cut_when_full"):
        BatchPlan(1.0, 2, 0, cut_when_full=True)


def test_coalesce_merges_waiting_batches():
    cutter = BatchCutter(Scripted([1.0]), constant(100), queue="coalesce")
    cutter.poll(1.0)
    poll = cutter.poll(4.2)  # cuts at 2, 3, 4 waited
    assert poll.handed.start == 100 and poll.handed.end == 400
    assert poll.handed.cuts == 3
    assert poll.handed.interval_s == pytest.approx(3.0)
    assert poll.handed.cut_at == 4.0


def test_admission_control_keeps_every_record():
    ctrl = Scripted([1.0], max_records=60)
    cutter = BatchCutter(ctrl, constant(100))
    handed = []
    t = 1.0
    for _ in range(12):
        poll = cutter.poll(t)
        if poll.handed is not None:
            handed.append(poll.handed)
        t += 1.0
    sizes = [b.records for b in handed]
    assert max(sizes) == 60
    # contiguous, no gaps: records beyond the cap stay for the next batch
    assert all(a.end == b.start for a, b in itertools.pairwise(handed))
    assert handed[0].start == 0
    assert cutter.next_offset == sum(sizes)
    # backlog grows by 40 per interval: what is not admitted is still waiting
    assert cutter.waiting_records(t - 1.0) == 100 * int(t - 1.0) - sum(sizes)


def test_read_limits_split_and_wait():
    cutter = BatchCutter(Scripted([1.0]), constant(100))
    poll = cutter.poll(1.0, Limit(max_rows=30))
    assert poll.handed.records == 30
    poll = cutter.poll(1.1, Limit(max_rows=30))
    assert (poll.handed.start, poll.handed.end) == (30, 60)
    assert poll.handed.cut_at == 1.0  # the rest of the same cut
    cutter = BatchCutter(Scripted([1.0]), constant(100))
    assert cutter.poll(1.0, Limit(min_rows=250)).handed is None
    assert cutter.poll(2.0, Limit(min_rows=250)).handed is None
    handed = cutter.poll(3.0, Limit(min_rows=250)).handed
    assert (handed.start, handed.end, handed.cuts) == (0, 300, 3)


def test_spark_default_hands_out_everything_when_idle():
    cutter = BatchCutter(None, constant(100), blocks=3)
    first = cutter.poll(0.5).handed
    assert (first.start, first.end, first.blocks) == (0, 50, 3)
    assert first.interval_s == pytest.approx(0.5)
    # the poll that completes a batch hands out what arrived meanwhile
    poll = cutter.poll(0.8)
    assert poll.report.processing_s == pytest.approx(0.3)
    assert (poll.handed.start, poll.handed.end) == (50, 80)
    assert poll.handed.interval_s == pytest.approx(0.3)
    poll = cutter.poll(0.8)  # finished at once, nothing new arrived: no batch
    assert poll.report is not None and poll.handed is None
    assert cutter.poll(2.0).handed.end == 200


def test_state_round_trip_continues_identically():
    def run(cutter, times):
        return [cutter.poll(t).handed for t in times]

    a = BatchCutter(registry.create("static", {"interval": 0.7}), constant(50))
    b_ctrl = registry.create("static", {"interval": 0.7})
    run(a, [0.7, 1.0, 2.3])
    b = BatchCutter(b_ctrl, constant(50))
    b.restore(a.state())
    assert run(a, [3.0, 3.3, 5.0]) == run(b, [3.0, 3.3, 5.0])


def test_runaway_interval_fails_loudly():
    tiny = Scripted([1e-7])
    cutter = BatchCutter(tiny, constant(1))
    with pytest.raises(AdabatchError, match="too small"):
        cutter.poll(1.0)


def test_merge_keeps_the_last_plan():
    a = CutBatch(0, 0, 10, 1.0, 1.0, 2)
    b = CutBatch(1, 10, 25, 1.5, 0.5, 4)
    m = merge([a, b])
    assert (m.start, m.end, m.blocks, m.interval_s, m.cut_at) == (0, 25, 4, 1.5, 1.5)


def test_a_batch_finishing_at_a_cut_is_observed_before_the_plan():
    # Spark comes back at exactly 2.0, the instant of the next cut: the controller sees the
    # finished batch first and plans the interval from 2.0 knowing it (as the simulator does)
    ctrl = Scripted([1.0])
    calls = []
    ctrl.plan = lambda now, _plan=ctrl.plan: calls.append(("plan", now)) or _plan(now)
    ctrl.observe = lambda rep, _obs=ctrl.observe: (
        calls.append(("observe", rep.finished_at)) or _obs(rep)
    )
    cutter = BatchCutter(ctrl, constant(100))
    cutter.poll(1.0)
    poll = cutter.poll(2.0)
    assert calls == [("plan", 0.0), ("plan", 1.0), ("observe", 2.0), ("plan", 2.0)]
    assert poll.queue_len == 0  # the batch cut at 2.0 was not waiting when batch 0 finished
    assert poll.handed.cut_at == 2.0


def test_the_stream_ends_at_stop_at():
    cutter = BatchCutter(Scripted([1.0]), constant(100), stop_at=2.5)
    assert cutter.poll(1.0).handed.cut_at == 1.0
    poll = cutter.poll(2.4)  # the cut at 2.0 waited; none at 3.0
    assert cutter.next_cut_at() == math.inf
    assert poll.handed.cut_at == 2.0
    cutter.cut_due(10.0)
    assert cutter.next_seq == 2
    # a batch that waits past the end is not handed out
    late = BatchCutter(Scripted([1.0]), constant(100), stop_at=2.0)
    late.poll(1.0)
    poll = late.poll(2.2)
    assert poll.report is not None and poll.handed is None and len(late.queue) == 1


def test_the_steps_the_simulator_calls():
    ctrl = Scripted([0.1, 0.2])
    cutter = BatchCutter(ctrl, constant(100))
    assert cutter.next_cut_at() == 0.1
    (batch,) = cutter.cut_due(0.1)
    assert cutter.hand_out(0.1) is batch
    assert cutter.cut_due(0.35) != [] and cutter.hand_out(0.35) is None  # one at a time
    report = cutter.complete(0.4, block_processing_s=(0.1, 0.2))
    assert report.block_processing_s == (0.1, 0.2) and ctrl.reports == [report]
    handed = cutter.hand_out(0.4)
    # one batch keeps the interval that was planned, not one recomputed from cut times
    assert handed.interval_s == 0.2 and handed.cut_at == 0.1 + 0.2
    with pytest.raises(RuntimeError, match="no batch"):
        BatchCutter(ctrl, constant(1)).complete(1.0)


def test_skip_ahead_cuts_a_downtime_as_one_batch_and_plans_on_from_now():
    ctrl = Scripted([1.0])
    cutter = BatchCutter(ctrl, constant(100))
    cutter.poll(1.0)  # batch 0 handed out at its cut
    assert cutter.skip_ahead(0.5) is None  # nothing due yet
    batch = cutter.skip_ahead(30.25)  # down from 1.0 to 30.25: 29 cuts missed
    assert (batch.start, batch.end, batch.cut_at) == (100, 3025, 30.25)
    assert batch.interval_s == pytest.approx(29.25)
    assert ctrl.plans[-1] == 30.25 and cutter.next_cut_at() == 31.25
    poll = cutter.poll(30.3)  # batch 0's report; the catch-up batch goes out alone
    assert poll.handed.seq == batch.seq and poll.queue_len == 1 and not cutter.queue
    ctrl = Scripted([1.0], max_records=500)
    cutter = BatchCutter(ctrl, constant(100))
    assert cutter.skip_ahead(10.0).records == 500  # a cap still bounds the catch-up
    assert cutter.waiting_records(10.0) == 1000


def test_skip_empty_never_hands_out_a_batch_without_records():
    def bursts(t):  # 50 records arrive at 2.5 s, nothing before or after
        return 50 if t >= 2.5 else 0

    ctrl = Scripted([1.0])
    cutter = BatchCutter(ctrl, bursts, skip_empty=True)
    assert cutter.poll(1.0).handed is None and cutter.poll(2.0).handed is None
    assert not cutter.queue  # the idle intervals were dropped, not queued
    handed = cutter.poll(3.0).handed
    assert (handed.start, handed.end, handed.cut_at) == (0, 50, 3.0)
    assert cutter.poll(5.0).handed is None  # batch 0 reported; the 4.0 and 5.0 cuts idle
    assert [r.records for r in ctrl.reports] == [50]
    assert ctrl.plans == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]  # the schedule kept going
