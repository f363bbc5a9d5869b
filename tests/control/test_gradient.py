"""The gradient controller of Das et al. §3.2.2: its branches, and the noise that breaks it."""

from __future__ import annotations

import json

import pytest

from adabatch.control import registry
from adabatch.control.base import BatchReport
from adabatch.control.gradient import GradientController, slope
from adabatch.errors import AdabatchError


def report(x: float, p: float, batch_id: int = 0) -> BatchReport:
    return BatchReport(batch_id, x, 2, 100, p, 0.0, x, x, x + p)


def test_slope_two_points_least_squares_and_undefined() -> None:
    assert slope([(1.0, 1.0), (2.0, 3.0)]) == pytest.approx(2.0)
    # Least squares through (1,1), (2,2), (3,4): slope 1.5 (the two-point slope would be 2).
    assert slope([(1.0, 1.0), (2.0, 2.0), (3.0, 4.0)]) == pytest.approx(1.5)
    assert slope([(1.0, 1.0)]) is None
    assert slope([(2.0, 1.0), (2.0, 5.0)]) is None


def test_holds_the_initial_interval_until_a_batch_completes() -> None:
    c = GradientController(initial_interval=2.0)
    assert [c.plan(t).interval_s for t in (0.0, 2.0, 4.0)] == [2.0, 2.0, 2.0]
    assert c.state()["branch"] == "initial"


def test_small_gradient_steps_up_when_unstable_and_down_when_stable() -> None:
    c = GradientController(initial_interval=2.0, step=0.5)
    c.observe(report(2.0, 1.5))  # one point: gradient undefined, counts as small; 1.5 > 1.4
    assert c.state()["branch"] == "unstable"
    assert c.plan(0.0).interval_s == 2.5
    c.observe(report(2.5, 1.6))  # slope 0.2, stable (1.6 < 1.75)
    assert c.state()["gradient"] == pytest.approx(0.2)
    assert c.state()["branch"] == "stable"
    assert c.plan(0.0).interval_s == 2.0


def test_steep_gradient_reduces_even_when_unstable() -> None:
    c = GradientController(initial_interval=2.0, step=0.5)
    c.observe(report(2.0, 1.0))  # stable: 2.0 -> 1.5
    assert c.plan(0.0).interval_s == 1.5
    c.observe(report(2.5, 2.0))  # slope 2 > threshold 1, although 2.0 > 0.7 * 2.5
    assert c.state()["gradient"] == pytest.approx(2.0)
    assert c.state()["branch"] == "steep"
    assert c.plan(0.0).interval_s == 1.0


def test_steep_negative_noise_also_counts_as_steep() -> None:
    c = GradientController(initial_interval=2.0, step=0.5)
    c.observe(report(2.0, 1.0))  # stable: 2.0 -> 1.5
    c.observe(report(1.5, 2.0))  # slope -2: noise (p is monotone in x), still "very steep"
    assert c.state()["gradient"] == pytest.approx(-2.0)
    assert c.state()["branch"] == "steep"
    assert c.plan(0.0).interval_s == 1.0


def test_equal_intervals_count_as_a_small_gradient() -> None:
    c = GradientController(initial_interval=2.0, step=0.5)
    c.observe(report(2.0, 1.0))
    c.observe(report(2.0, 5.0))  # undefined slope: the stability bit decides (unstable)
    assert c.state()["gradient"] is None
    assert c.state()["branch"] == "unstable"


def test_threshold_decides_what_is_steep() -> None:
    c = GradientController(initial_interval=2.0, threshold=3.0)
    c.observe(report(2.0, 1.0))
    c.observe(report(2.5, 2.0))  # slope 2 < 3: small, and unstable
    assert c.state()["branch"] == "unstable"


def test_window_uses_the_least_squares_line_of_the_last_batches() -> None:
    c = GradientController(window=3)
    for i, (x, p) in enumerate([(1.0, 9.0), (1.0, 1.0), (2.0, 2.0), (3.0, 4.0)]):
        c.observe(report(x, p, i))
    assert c.state()["points"] == [[1.0, 1.0], [2.0, 2.0], [3.0, 4.0]]
    assert c.state()["gradient"] == pytest.approx(1.5)
    assert c.state()["branch"] == "steep"


def test_one_outlier_flips_the_decision_fig_7b() -> None:
    # Linear workload p = 1 + 0.4 x around its Type-I point x* = 3.33 (rho = 0.7): the
    # batch at 3.1 s is unstable, so the interval should grow. One slow batch (a rate
    # spike, a straggler) at 3.3 s makes even a four-point least-squares slope steep, and
    # the controller cuts the interval instead, twice, while the system is unstable.
    batches = [(3.0, 2.2), (3.1, 2.24), (3.2, 2.28), (3.3, 4.5), (3.1, 2.24)]
    c = GradientController(initial_interval=3.2, window=4)
    decisions, planned = [], []
    for i, (x, p) in enumerate(batches):
        c.observe(report(x, p, i))
        decisions.append(c.state()["branch"])
        planned.append(c.plan(0.0).interval_s)
    assert decisions == ["unstable", "unstable", "unstable", "steep", "steep"]
    assert planned == [3.3, 3.4, 3.5, 3.4, 3.3]


def test_clamps_to_the_bounds_and_rounds() -> None:
    c = GradientController(initial_interval=0.2, step=0.5, min_interval=0.2)
    c.observe(report(0.2, 0.01))  # stable: down by 0.5, clamped at min
    assert c.plan(0.0).interval_s == 0.2
    c = GradientController(initial_interval=59.9, step=0.5)
    c.observe(report(59.9, 59.0))  # unstable: up, clamped at max
    assert c.plan(0.0).interval_s == 60.0
    c = GradientController(initial_interval=1.0, step=0.04)
    c.observe(report(1.0, 0.9))  # unstable: 1.04, planned on the 0.1 s grid
    assert c.plan(0.0).interval_s == 1.0
    c.observe(report(1.0, 0.9))
    assert c.plan(0.0).interval_s == 1.1  # 1.08: small steps accumulate


@pytest.mark.parametrize(
    ("params", "needles"),
    [
        ({"window": 1}, ["'window'", "1", "integer in [2, inf]"]),
        ({"step": 0}, ["'step'", "0", "(0, inf]"]),
        ({"threshold": -1}, ["'threshold'", "-1", "[0, inf]"]),
        ({"rho": 0}, ["'rho'", "(0, 1)"]),
        ({"min_interval": 3, "max_interval": 2}, ["'min_interval'", "max_interval"]),
    ],
)
def test_bad_parameters_name_value_and_range(params: dict, needles: list[str]) -> None:
    with pytest.raises(AdabatchError) as err:
        GradientController(**params)
    for needle in needles:
        assert needle in str(err.value)


def test_registered_and_state_round_trips_through_json() -> None:
    c = registry.create("gradient", {"window": "3", "initial_interval": "2"})
    for i, (x, p) in enumerate([(2.0, 1.0), (2.1, 1.6), (2.2, 1.4)]):
        c.observe(report(x, p, i))
    twin = GradientController(window=3, initial_interval=2.0)
    twin.restore(json.loads(json.dumps(c.state())))
    assert twin.state() == c.state()
    nxt = report(2.1, 1.3, 3)
    c.observe(nxt)
    twin.observe(nxt)
    assert twin.plan(5.0) == c.plan(5.0)
    assert twin.state() == c.state()


def test_restore_rejects_a_foreign_state() -> None:
    with pytest.raises(AdabatchError, match="gradient state"):
        GradientController().restore({"interval": 1.0, "branch": "type-ii"})
    with pytest.raises(AdabatchError, match="gradient state interval"):
        GradientController().restore({"interval": -1.0, "branch": "stable"})
