"""The binary-signal (AIMD) controller of Das et al. §3.2.1.

Its divergence on a superlinear workload is shown next to fixed-point's convergence from
the same start in test_fixed_point.py (one analytic loop for both).
"""

from __future__ import annotations

import json

import pytest

from adabatch.control.base import BatchReport
from adabatch.control.binary import BinaryController
from adabatch.errors import AdabatchError


def report(x: float, p: float, batch_id: int = 0) -> BatchReport:
    return BatchReport(batch_id, x, 2, 100, p, 0.0, x, x, x + p)


def test_additive_increase_when_unstable() -> None:
    c = BinaryController(initial_interval=2.0, step=0.5)
    assert c.plan(0.0).interval_s == 2.0
    assert c.state()["branch"] == "initial"
    c.observe(report(2.0, 1.5))  # 1.5 > 0.7 * 2.0
    assert c.state()["branch"] == "unstable"
    assert c.plan(2.0).interval_s == 2.5
    c.observe(report(2.5, 2.0))
    assert c.plan(4.5).interval_s == 3.0


def test_multiplicative_decrease_when_stable() -> None:
    c = BinaryController(initial_interval=4.0, decrease=0.5)
    c.observe(report(4.0, 2.0))  # 2.0 < 0.7 * 4.0
    assert c.state()["branch"] == "stable"
    assert c.plan(4.0).interval_s == 2.0
    c.observe(report(2.0, 1.0))
    assert c.plan(6.0).interval_s == 1.0


def test_the_signal_uses_rho_and_the_reported_interval() -> None:
    # p = 0.75 x: unstable for rho = 0.7, stable for rho = 0.8.
    tight = BinaryController(initial_interval=2.0, rho=0.7)
    loose = BinaryController(initial_interval=2.0, rho=0.8)
    for c in (tight, loose):
        c.observe(report(2.0, 1.5))
    assert tight.state()["branch"] == "unstable"
    assert loose.state()["branch"] == "stable"


def test_small_decreases_accumulate_below_the_granularity() -> None:
    c = BinaryController(initial_interval=1.0, decrease=0.97)
    c.observe(report(1.0, 0.1))
    assert c.plan(0.0).interval_s == 1.0  # 0.97 rounds back to 1.0 ...
    c.observe(report(1.0, 0.1))
    assert c.plan(0.0).interval_s == 0.9  # ... but 0.9409 is kept, not lost to rounding


def test_clamps_to_both_bounds() -> None:
    c = BinaryController(initial_interval=59.5, step=2.0)
    c.observe(report(59.5, 59.0))
    assert c.plan(0.0).interval_s == 60.0
    assert c.state()["interval"] == 60.0
    c = BinaryController(initial_interval=0.5, min_interval=0.4, decrease=0.1)
    c.observe(report(0.5, 0.01))
    assert c.plan(0.0).interval_s == 0.4


@pytest.mark.parametrize(
    ("params", "needles"),
    [
        ({"decrease": 1.0}, ["'decrease'", "1.0", "(0, 1)"]),
        ({"step": -0.1}, ["'step'", "-0.1", "(0, inf]"]),
        ({"rho": 2}, ["'rho'", "2", "(0, 1)"]),
        ({"initial_interval": 0.05}, ["'initial_interval'", "0.05", "[0.1, 60]"]),
        ({"r": 0.25}, ["'r'", "rho, step, decrease"]),
    ],
)
def test_bad_parameters_name_value_and_range(params: dict, needles: list[str]) -> None:
    with pytest.raises(AdabatchError) as err:
        BinaryController(**params)
    for needle in needles:
        assert needle in str(err.value)


def test_state_round_trips_through_json() -> None:
    c = BinaryController(initial_interval=1.0, decrease=0.97)
    c.observe(report(1.0, 0.1))
    twin = BinaryController(initial_interval=1.0, decrease=0.97)
    twin.restore(json.loads(json.dumps(c.state())))
    assert twin.state() == c.state()
    c.observe(report(1.0, 0.1))
    twin.observe(report(1.0, 0.1))
    assert twin.plan(2.0) == c.plan(2.0)
    assert twin.plan(2.0).interval_s == 0.9


def test_restore_rejects_a_foreign_state() -> None:
    with pytest.raises(AdabatchError, match="binary state branch"):
        BinaryController().restore({"interval": 1.0, "branch": "steep"})
    with pytest.raises(AdabatchError, match="binary state interval"):
        BinaryController().restore({"branch": "stable"})
