"""The controller state that travels in the offsets Spark logs: a restart on a fresh driver,
whose state file is gone, resumes with the learned controller. Spark's call sequence is
replayed by hand on a clock the test advances, with a processing time that depends on the
batch, so the controllers learn something."""

from __future__ import annotations

import base64
import json
import shutil
import zlib

import pytest

from adabatch.errors import AdabatchError
from adabatch.metrics import read_jsonl
from adabatch.streaming.offsets import INITIAL, SourceOffset
from adabatch.streaming.options import parse_options
from adabatch.streaming.runtime import StreamRuntime
from adabatch.streaming.state import (
    COMPRESS_ABOVE,
    MAX_CARRIED_BYTES,
    decode_carried,
    encode_carried,
    query_key,
)

PARAMS = {
    # p = 0.3 s + 0.2 ms per record at 1000/s: fixed-point settles where p = 0.7 x, at
    # 0.6 s, isotonic near p + 0.05 = x, both far from where they start
    "fixed-point": {},
    "isotonic": {"block_sizing": "false"},
}
SETTLED = {"fixed-point": 0.6, "isotonic": 0.45}  # p(x) = 0.7 x; IsoR(x) + 0.05 < x


class Clock:
    def __init__(self, t: float = 1_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make(tmp_path, clock, controller, name="a", state_file=False, **params):
    opts = {
        "controller": controller,
        "profile": "constant:1000",
        "metricsPath": str(tmp_path / f"{name}.jsonl"),
        **{f"param.{k}": str(v) for k, v in {**PARAMS[controller], **params}.items()},
    }
    if state_file:
        opts["statePath"] = str(tmp_path / "state.json")
    return StreamRuntime(parse_options(opts), clock=clock)


def processing_s(start, end) -> float:
    records = SourceOffset.from_dict(end).offset - SourceOffset.from_dict(start).offset
    return 0.3 + 0.0002 * records


class Spark:
    """Spark's loop over one runtime: poll until a batch is handed out, plan it, run it."""

    def __init__(self, rt, clock, start=None) -> None:
        self.rt, self.clock = rt, clock
        self.start = INITIAL.to_dict() if start is None else start
        self.ends: list[dict] = []
        if start is None:
            rt.latest_offset(self.start)  # Spark's warm-up batch
            rt.latest_offset(self.start)  # the stream starts

    def hand_out(self) -> dict:
        """Poll (at the next cut when nothing is due) until a batch comes; plan it."""
        for _ in range(1000):
            end = self.rt.latest_offset(self.start)
            if end != self.start:
                self.rt.partitions(self.start, end)
                self.ends.append(end)
                return end
            self.clock.t += max(self.rt.cutter.next_cut_at() - self.rt.now(), 0.0) + 0.001
        raise AssertionError("no batch after 1000 polls")

    def finish(self, end: dict) -> None:
        self.clock.t += processing_s(self.start, end)
        self.start = end

    def batches(self, n: int) -> None:
        for _ in range(n):
            self.finish(self.hand_out())


def strip(offset: dict) -> dict:
    """An offset without its carried state."""
    return {k: v for k, v in offset.items() if k != "state"}


def flat(value, path="") -> dict:
    """Nested dicts and lists as one dict of leaves by path (for ``pytest.approx``)."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in flat(item, f"{path}.{key}").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in flat(item, f"{path}[{i}]").items()}
    return {path: value}


def intervals(path) -> list[float]:
    return [r.interval_s for r in read_jsonl(path)]


@pytest.mark.parametrize("controller", ["fixed-point", "isotonic"])
def test_a_replay_on_a_fresh_driver_continues_as_if_never_stopped(tmp_path, controller):
    clock_a, clock_b = Clock(), Clock()
    a = Spark(make(tmp_path, clock_a, controller, "a"), clock_a)
    a.batches(14)
    b = Spark(make(tmp_path, clock_b, controller, "b"), clock_b)
    b.batches(9)
    end = b.hand_out()  # Spark logs batch 10 and dies while running it
    clock_b.t += 3600.0  # a new driver an hour later: no state file, no runtime
    fresh = make(tmp_path, clock_b, controller, "b")
    b2 = Spark(fresh, clock_b, start=b.start)
    fresh.partitions(b.start, end)  # Spark replays batch 10 from its offset log
    b2.finish(end)
    b2.batches(4)
    assert [strip(e) for e in b.ends + b2.ends] == [strip(e) for e in a.ends]
    key = fresh._query_key  # and the same state in them, up to the clock's float rounding
    for mine, theirs in zip(b.ends + b2.ends, a.ends, strict=True):
        assert flat(decode_carried(mine["state"], key)) == pytest.approx(
            flat(decode_carried(theirs["state"], key)), abs=1e-9
        )
    assert intervals(tmp_path / "b.jsonl") == intervals(tmp_path / "a.jsonl")
    assert fresh.lost_reports == 0


@pytest.mark.parametrize("controller", ["fixed-point", "isotonic"])
def test_a_restart_after_a_commit_resumes_the_learned_intervals(tmp_path, controller):
    clock_a, clock_b = Clock(), Clock()
    a = Spark(make(tmp_path, clock_a, controller, "a"), clock_a)
    a.batches(19)
    b = Spark(make(tmp_path, clock_b, controller, "b"), clock_b)
    b.batches(14)  # batch 14 committed; the driver dies before Spark asks for more
    before = intervals(tmp_path / "b.jsonl")  # batches 1-13: batch 14's end was not seen
    clock_b.t += 3600.0
    rt = make(tmp_path, clock_b, controller, "b")
    Spark(rt, clock_b, start=b.start).batches(4)
    after = intervals(tmp_path / "b.jsonl")[len(before) :]  # batches 15-17
    planned = intervals(tmp_path / "a.jsonl")
    assert after[0] == planned[14]  # planned before the restart, carried in the offset
    assert rt.lost_reports == 1  # batch 14 finished while no driver was there to see it
    # a controller that starts afresh plans its slow start instead
    clock_f = Clock()
    fresh = Spark(make(tmp_path, clock_f, controller, "fresh"), clock_f)
    fresh.batches(2)
    assert intervals(tmp_path / "fresh.jsonl")[0] < after[0]
    settled = SETTLED[controller]
    assert before[-3:] == after == [settled] * 3  # as learned before the restart


def test_the_state_file_wins_and_an_older_copy_loses(tmp_path):
    clock = Clock()
    s = Spark(make(tmp_path, clock, "fixed-point", state_file=True), clock)
    s.batches(3)
    shutil.copy(tmp_path / "state.json", tmp_path / "old.json")
    s.batches(6)
    assert s.rt.latest_offset(s.start) == s.start  # batch 9 done, batch 10 not due yet
    observed = s.rt.controller.state()["observed"]
    clock.t += 60.0
    rt = make(tmp_path, clock, "fixed-point", state_file=True)
    rt.latest_offset(s.start)
    assert rt.controller.state()["observed"] == observed  # the file saw batch 9 finish
    assert rt.lost_reports == 0

    shutil.copy(tmp_path / "old.json", tmp_path / "state.json")  # a stale copy
    rt = make(tmp_path, clock, "fixed-point", state_file=True)
    rt.latest_offset(s.start)
    assert rt.controller.state()["observed"] == observed - 1  # from the offset: newer
    assert rt.cutter.handed_count == 9


def test_state_of_other_options_is_ignored_and_old_offsets_still_parse(tmp_path):
    clock = Clock()
    s = Spark(make(tmp_path, clock, "fixed-point"), clock)
    s.batches(5)
    last = SourceOffset.from_dict(s.start)
    rt = make(tmp_path, clock, "fixed-point", rho=0.5)  # the user changed rho
    rt.latest_offset(s.start)
    assert rt.controller.state()["observed"] == 0  # the learned state was for rho 0.7
    assert rt.now() == pytest.approx(last.cut_us / 1e6)  # the clock resumes at the last cut
    old = {k: v for k, v in s.start.items() if k != "state"}  # before offsets carried state
    assert SourceOffset.from_dict(old) == last


def test_offsets_order_and_compare_without_their_state():
    a = SourceOffset(10, 5, 2, 7, state="x")
    b = SourceOffset(10, 5, 2, 7)
    assert a == b and a.key() == b.key() and not a < b
    assert "state" not in b.to_dict() and SourceOffset.from_dict(a.to_dict()).state == "x"
    assert INITIAL.to_dict() == {"offset": 0, "cut_us": 0, "blocks": 0, "start_time_us": 0}
    with pytest.raises(AdabatchError, match="must be a string"):
        SourceOffset.from_dict({**b.to_dict(), "state": 3})
    with pytest.raises(AdabatchError, match="not written by the adabatch source"):
        SourceOffset.from_dict({**b.to_dict(), "colour": "red"})


def test_carried_state_is_compact_then_compressed_and_checked():
    key = query_key({"controller": "fixed-point"})
    small = encode_carried({"query_key": key, "n": 1})
    assert small.startswith("{") and len(small) <= COMPRESS_ABOVE
    assert decode_carried(small, key)["n"] == 1
    big = encode_carried({"query_key": key, "table": list(range(1000))})
    assert big.startswith("z:") and len(big) < len(json.dumps(list(range(1000))))
    assert decode_carried(big, key)["table"] == list(range(1000))
    assert decode_carried(big, query_key({"controller": "isotonic"})) is None
    assert decode_carried("", key) is None
    with pytest.raises(AdabatchError, match="unreadable"):
        decode_carried("z:not base64 zlib", key)
    with pytest.raises(AdabatchError, match="not this adabatch version"):
        decode_carried('{"query_key": "x"}', key)
    bomb = "z:" + base64.b64encode(zlib.compress(b" " * (MAX_CARRIED_BYTES + 10))).decode()
    with pytest.raises(AdabatchError, match="inflates to more than"):
        decode_carried(bomb, key)


def test_a_state_too_long_for_an_offset_carries_the_schedule_only(tmp_path, monkeypatch):
    monkeypatch.setattr("adabatch.streaming.runtime.MAX_CARRIED_CHARS", 200)
    clock = Clock()
    s = Spark(make(tmp_path, clock, "isotonic"), clock)
    s.batches(6)
    carried = decode_carried(s.start["state"], s.rt._query_key)
    assert carried["controller"] is None and carried["cutter"]["handed_count"] == 6
    clock.t += 60.0
    rt = make(tmp_path, clock, "isotonic")
    rt.latest_offset(s.start)
    assert rt.controller.state()["observed"] == 0  # the controller starts afresh
    assert rt.cutter.handed_count == 6  # the schedule and the clock resume
    assert rt.now() == pytest.approx(carried["last_seen"])
