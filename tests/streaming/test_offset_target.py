"""The latency target in Spark's progress, without Spark: the end offsets a runtime hands
out carry the ``slo`` controller's target status (and a static controller's do not),
offsets with and without it parse and compare alike, a malformed one is one line, and the
Prometheus exporter sets its target gauges from a progress report that carries one."""

from __future__ import annotations

import copy
import json

import pytest
from runtime_helpers import Clock, make

from adabatch.control.base import TargetStatus
from adabatch.errors import AdabatchError
from adabatch.streaming.offsets import INITIAL, SourceOffset
from adabatch.streaming.progress import source_batches

STATUS = TargetStatus(0.3, False, 0.62, "floor", "the processing floor is 0.42 s", 95.0)
START_US = 1_795_684_355_645_278


def test_an_offset_carries_the_target_as_a_small_plain_dict():
    off = SourceOffset(1000, 500_000, 2, START_US, state="s", target=STATUS)
    data = off.to_dict()
    assert data["target"] == {
        "s": 0.3,
        "met": False,
        "achievable_s": 0.62,
        "mode": "floor",
        "reason": "the processing floor is 0.42 s",
    }
    back = SourceOffset.from_dict(json.loads(json.dumps(data)))
    # the percentile stays with the controller: an offset does not carry it
    assert back.target == TargetStatus(0.3, False, 0.62, "floor", STATUS.reason)
    assert back.state == "s"
    met = TargetStatus(2.0, True, None, "start")
    assert SourceOffset(1, target=met).to_dict()["target"] == {
        "s": 2.0,
        "met": True,
        "mode": "start",
    }


def test_offsets_with_and_without_a_target_parse_order_and_compare_alike():
    plain = SourceOffset(1000, 500_000, 2, START_US)
    carrying = SourceOffset(1000, 500_000, 2, START_US, target=STATUS)
    assert plain == carrying and plain.key() == carrying.key() and not plain < carrying
    assert hash(plain) == hash(carrying)
    assert "target" not in plain.to_dict()  # controllers without a target: offsets unchanged
    old = {"offset": 1000, "cut_us": 500_000, "blocks": 2, "start_time_us": START_US}
    assert SourceOffset.from_dict(old).target is None  # written before offsets carried it
    assert INITIAL.to_dict() == {"offset": 0, "cut_us": 0, "blocks": 0, "start_time_us": 0}


GOOD = {"s": 2.0, "met": True, "mode": "target"}


@pytest.mark.parametrize(
    "target",
    [
        "met",
        [2.0, True],
        {"s": 2.0, "met": True},  # no mode
        GOOD | {"colour": "red"},
        GOOD | {"s": True},
        GOOD | {"s": "2"},
        GOOD | {"s": 0},
        GOOD | {"s": -1.0},
        GOOD | {"s": float("nan")},
        GOOD | {"s": 10**400},
        GOOD | {"met": "true"},
        GOOD | {"mode": 3},
        GOOD | {"achievable_s": -0.5},
        GOOD | {"achievable_s": float("inf")},
        GOOD | {"reason": ["floor"]},
    ],
)
def test_a_malformed_target_is_one_line(target):
    data = SourceOffset(1000, 500_000, 2, START_US).to_dict() | {"target": target}
    with pytest.raises(AdabatchError, match=r"^offset field 'target' = .* must hold s \(") as err:
        SourceOffset.from_dict(data)
    assert "\n" not in str(err.value)


def hand_out(rt, clock, start: dict) -> dict:
    """Poll as Spark does, every 10 ms, until a batch is handed out; plan it (polls a
    quarter second apart would add up to 0.25 s of queue delay that Spark does not)."""
    for _ in range(1000):
        end = rt.latest_offset(start)
        if end != start:
            rt.partitions(start, end)
            return end
        clock.t += 0.01
    raise AssertionError("no batch after 1000 polls")


def run_batches(rt, clock, n: int) -> list[dict]:
    """Spark's warm-up batch, then ``n`` batches of 0.2 s processing each."""
    start = INITIAL.to_dict()
    rt.latest_offset(start)  # Spark's warm-up batch
    ends = []
    for _ in range(n):
        end = hand_out(rt, clock, start)
        ends.append(end)
        clock.t += 0.2
        start = end
    return ends


def test_the_slo_controllers_offsets_carry_its_status_at_the_hand_out(tmp_path):
    clock = Clock()
    rt = make(tmp_path, clock, controller="slo", **{"param.interval": None, "param.target": "2"})
    ends = run_batches(rt, clock, 12)
    first = SourceOffset.from_dict(ends[0]).target
    assert first == TargetStatus(2.0, False, None, "start", "no batch has finished yet")
    last = ends[-1]["target"]
    status = rt.controller.target_status()  # no batch reported since the last hand-out
    assert last["s"] == 2.0 and last["met"] is status.met and last["mode"] == status.mode
    assert last["achievable_s"] == pytest.approx(status.achievable_s, abs=1e-6)  # to the µs
    assert all("target" in end for end in ends)


def test_a_static_controllers_offsets_carry_no_target(tmp_path):
    clock = Clock()
    ends = run_batches(make(tmp_path, clock), clock, 3)
    assert ends and not [end for end in ends if "target" in end]


def progress(target: dict | None) -> dict:
    """A progress report as Spark writes it (trimmed), the end offset carrying ``target``."""
    end = {"offset": 1000, "cut_us": 500_000, "blocks": 2, "start_time_us": START_US}
    latest = {"offset": 1011, "cut_us": 505_830, "blocks": 0, "start_time_us": START_US}
    return {
        "id": "d5bbbdf6-a1b9-44c2-933e-3622551a9a77",
        "name": "counts",
        "durationMs": {"triggerExecution": 2309},
        "sources": [
            {
                "startOffset": {"offset": 0, "cut_us": 0, "blocks": 0, "start_time_us": 0},
                "endOffset": end if target is None else end | {"target": target},
                "latestOffset": latest,
            }
        ],
    }


def test_source_batches_read_the_target_from_the_end_offset():
    (b,) = source_batches(progress({"s": 2.0, "met": True, "achievable_s": 1.31, "mode": "target"}))
    assert b.target == TargetStatus(2.0, True, 1.31, "target")
    assert (b.interval_s, b.blocks, b.records, b.backlog_records) == (0.5, 2, 1000, 11)
    # as PySpark's lastProgress has them: offsets as JSON text
    report = progress(GOOD)
    src = report["sources"][0]
    src["endOffset"] = json.dumps(src["endOffset"])
    (text,) = source_batches(report)
    assert text.target == TargetStatus(2.0, True, None, "target")
    (none,) = source_batches(progress(None))
    assert none.target is None


def test_prometheus_target_gauges_follow_the_end_offset():
    pytest.importorskip("prometheus_client")
    from adabatch.streaming.prometheus import PrometheusExporter

    exporter = PrometheusExporter()
    value = exporter.registry.get_sample_value
    query = {"query": "counts"}
    exporter.update(progress(None))  # a controller without a target: no target series
    assert value("adabatch_target_seconds", query) is None
    assert value("adabatch_target_met", query) is None
    exporter.update(progress({"s": 2.0, "met": True, "achievable_s": 1.31, "mode": "target"}))
    assert value("adabatch_target_seconds", query) == 2.0
    assert value("adabatch_target_met", query) == 1.0
    missed = {"s": 0.3, "met": False, "achievable_s": 0.62, "mode": "floor", "reason": "floor"}
    exporter.update(progress(missed))
    assert value("adabatch_target_seconds", query) == 0.3
    assert value("adabatch_target_met", query) == 0.0
    assert value("adabatch_interval_seconds", query | {"source": "0"}) == 0.5
    exporter.forget("d5bbbdf6-a1b9-44c2-933e-3622551a9a77")
    assert value("adabatch_target_seconds", query) is None
    assert value("adabatch_target_met", query) is None


def test_a_progress_report_is_not_changed_by_reading_it():
    report = progress(GOOD)
    before = copy.deepcopy(report)
    source_batches(report)
    assert report == before


def test_saved_target_is_the_controllers_status_as_the_stream_left_it(tmp_path):
    from adabatch.streaming.runtime import saved_target

    clock = Clock()
    rt = make(tmp_path, clock, controller="slo", **{"param.interval": None, "param.target": "2"})
    assert saved_target(rt.options) == TargetStatus(
        2.0, False, None, "start", "no batch has finished yet", 95.0
    )  # no state file yet: a fresh controller's
    run_batches(rt, clock, 12)
    rt.stop()
    assert rt.controller.target_status().met
    assert saved_target(rt.options) == rt.controller.target_status()
    static = make(tmp_path / "static", Clock())
    assert saved_target(static.options) is None
