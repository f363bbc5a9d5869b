"""``Controller.target_status()``: the latency target and its verdict that users watch.

``slo`` gives one at every step of a simulated run, the same verdict as its
``metrics_state()`` (written with every batch), with a reason whenever it is not met;
every other controller has no target and gives ``None``."""

from __future__ import annotations

import json
import re

import pytest

from adabatch.control import create, names
from adabatch.control.base import BatchReport, TargetStatus
from adabatch.control.registry import controller_class
from adabatch.control.slo import SloController
from adabatch.errors import AdabatchError
from adabatch.profiles import parse_profile
from adabatch.sim.engine import run_simulation
from adabatch.sim.workloads import make_workload
from adabatch.streaming.offsets import parse_target, target_to_dict


class Watched(SloController):
    """``slo`` that keeps its target status and metrics state after every report."""

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        self.seen: list[tuple[TargetStatus, dict]] = []

    def observe(self, report: BatchReport) -> None:
        super().observe(report)
        self.seen.append((self.target_status(), self.metrics_state()))


def watched_run(target: float, profile: str, seconds: float = 120.0) -> Watched:
    ctrl = Watched(target=target)
    run_simulation(ctrl, make_workload("reduce"), parse_profile(profile), seconds, seed=1)
    return ctrl


def test_slo_status_before_any_batch_says_why_it_is_not_met():
    status = SloController(target="2 seconds", percentile=99).target_status()
    assert status == TargetStatus(2.0, False, None, "start", "no batch has finished yet", 99.0)


# What the reason of a status that is not met starts with, by mode; None: any reason.
# A floor its batches have not yet confirmed is not out of reach: the latency seen is why.
SEEN = "the observed p95 batch latency is "
REASONS = {
    "floor": "the processing floor is ",
    "overload": "at most ",
    "catch-up": None,  # the backlog, or the latency seen
    "start": None,
    "target": SEEN,  # met by the model, not by what happened
}


@pytest.mark.parametrize(
    ("target", "profile", "feasible"),
    [
        (2.0, "step:5000:20000:60s", True),  # met once learnt, through a rate step
        (0.05, "constant:5000", False),  # out of reach: the processing floor
        (0.5, "constant:300000", False),  # no interval is stable: capped batches
    ],
)
def test_slo_status_is_never_none_and_agrees_with_metrics_state(target, profile, feasible):
    ctrl = watched_run(target, profile)
    assert len(ctrl.seen) > 20
    for status, state in ctrl.seen:
        assert isinstance(status, TargetStatus)
        assert status.target_s == state["target_s"] == target
        assert status.met is state["slo_met"]
        assert status.achievable_s == state["achievable_latency_s"]
        assert status.mode == state["mode"]
        assert status.percentile == 95.0
        assert (status.reason is None) is status.met  # a reason exactly when not met
        floor = status.mode == "floor" and (status.reason or "").startswith(REASONS["floor"])
        assert state["out_of_reach"] is (status.mode == "overload" or floor)
        if not status.met and REASONS.get(status.mode) is not None:
            reason = REASONS[status.mode] if state["out_of_reach"] else SEEN
            assert status.reason.startswith(reason), status
        # what an offset carries is plain JSON and reads back as the same verdict
        carried = json.loads(json.dumps(target_to_dict(status), allow_nan=False))
        back = parse_target(carried)
        assert (back.target_s, back.met, back.mode, back.reason) == (
            status.target_s,
            status.met,
            status.mode,
            status.reason,
        )
    final = ctrl.seen[-1][0]
    if feasible:
        assert final.met and final.mode == "target" and final.achievable_s <= target
    else:
        assert not final.met and final.achievable_s > target


def test_slo_reasons_name_the_floor_and_what_fits():
    reasons = [s.reason for s, _ in watched_run(0.05, "constant:5000").seen]
    assert any(r.startswith("the processing floor is ") for r in reasons)
    # past the capacity: capped batches, at most so many records/s (or a backlog drained)
    reasons = [s.reason for s, _ in watched_run(0.5, "constant:300000").seen]
    assert any(
        re.fullmatch(r"at most [\d,]+ records/s fit in any interval", r)
        or re.fullmatch(r"a backlog of [\d,]+ records is being drained", r)
        for r in reasons
    )


@pytest.mark.parametrize("name", [n for n in names() if n != "slo"])
def test_controllers_without_a_target_give_none(name):
    ctrl = create(name, dict(controller_class(name).EXAMPLE_PARAMS))
    assert ctrl.target_status() is None
    ctrl.observe(BatchReport(0, 1.0, 2, 1000, 0.4, 0.0, 1.0, 1.0, 1.4))
    assert ctrl.target_status() is None


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"target_s": 0.0}, "latency target = 0.0"),
        ({"target_s": float("inf")}, "latency target = inf"),
        ({"achievable_s": -1.0}, "achievable latency = -1.0"),
        ({"achievable_s": float("nan")}, "achievable latency = nan"),
        ({"percentile": 0.0}, r"percentile = 0.0 must be in \(0, 100\]"),
    ],
)
def test_target_status_refuses_impossible_values(values, match):
    fields = {"target_s": 2.0, "met": True, "achievable_s": 1.0, "mode": "target"} | values
    with pytest.raises(AdabatchError, match=match):
        TargetStatus(**fields)
