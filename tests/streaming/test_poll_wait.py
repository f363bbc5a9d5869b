"""``latestOffset`` waits, a bounded time, for the controller's next cut instead of
answering "nothing new" to Spark's 10 ms polls: the cut stays on time, the wait never
exceeds its bound, and Spark's own trigger decisions never wait."""

from __future__ import annotations

from runtime_helpers import Clock

from adabatch.batching import Limit
from adabatch.streaming.offsets import INITIAL, SourceOffset
from adabatch.streaming.options import parse_options
from adabatch.streaming.runtime import MAX_POLL_WAIT_S, StreamRuntime


class Waits:
    """The runtime's ``sleep``: moves the hand-set clock and remembers each wait."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.t += seconds


def runtime(tmp_path, clock, waits, **extra):
    opts = {
        "controller": "static",
        "param.interval": "1.0",
        "profile": "constant:100",
        "metricsPath": str(tmp_path / "metrics.jsonl"),
        **extra,
    }
    opts = {k: v for k, v in opts.items() if v is not None}
    return StreamRuntime(parse_options(opts), clock=clock, max_wait_s=MAX_POLL_WAIT_S, sleep=waits)


def started(rt, clock, waits):
    """Spark's warm-up batch and the call that starts the stream (first cut at 1 s)."""
    start = INITIAL.to_dict()
    assert rt.latest_offset(start) == start
    clock.t += 3.0
    assert rt.latest_offset(start) == start
    waits.waits.clear()
    clock.t = rt.start_time  # back to stream time 0 (the call above may have waited)
    return start


def test_a_poll_long_before_the_cut_waits_at_most_the_bound(tmp_path):
    clock = Clock()
    waits = Waits(clock)
    rt = runtime(tmp_path, clock, waits)
    start = started(rt, clock, waits)
    clock.t += 1.0 - MAX_POLL_WAIT_S - 0.05  # the cut lies beyond the bound
    assert rt.latest_offset(start) == start
    assert waits.waits == [MAX_POLL_WAIT_S]


def test_a_poll_just_before_the_cut_hands_the_batch_out_at_its_cut(tmp_path):
    clock = Clock()
    waits = Waits(clock)
    rt = runtime(tmp_path, clock, waits)
    start = started(rt, clock, waits)
    clock.t += 0.9
    end = SourceOffset.from_dict(rt.latest_offset(start))
    assert len(waits.waits) == 1 and 0.1 <= waits.waits[0] < 0.101
    assert end.cut_us == 1_000_000 and end.offset == 100
    assert clock.t - rt.start_time - 1.0 < 0.01  # handed out within 10 ms of the cut


def test_spark_decided_batches_never_wait(tmp_path):
    clock = Clock()
    for extra in ({"controller": "spark-default", "param.interval": None}, {"mode": "advise"}):
        waits = Waits(clock)
        rt = runtime(tmp_path, clock, waits, **extra)
        start = started(rt, clock, waits)
        clock.t += 0.001  # nothing has arrived yet at 100/s
        rt.latest_offset(start)
        assert waits.waits == []


def test_min_rows_and_available_now_never_wait(tmp_path):
    clock = Clock()
    waits = Waits(clock)
    rt = runtime(tmp_path, clock, waits, minRowsPerTrigger="50")
    start = started(rt, clock, waits)
    clock.t += 0.1
    assert rt.latest_offset(start, Limit(min_rows=50)) == start
    assert waits.waits == []
    rt = runtime(tmp_path / "b", clock, waits)
    start = started(rt, clock, waits)
    rt.prepare_available_now()
    clock.t += 0.1
    rt.latest_offset(start)
    assert waits.waits == []
