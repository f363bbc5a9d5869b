"""AdCom's PI controller on utilisation: sign, skew rule, three-error integral, clamping."""

from __future__ import annotations

import json

import pytest

from adabatch.control import BatchReport, create
from adabatch.control.adcom import AdComController
from adabatch.errors import AdabatchError


def report(interval_s: float, processing_s: float, blocks: tuple[float, ...] = ()) -> BatchReport:
    return BatchReport(
        0,
        interval_s,
        max(len(blocks), 1),
        100,
        processing_s,
        0.0,
        10.0,
        10.0,
        10.0 + processing_s,
        block_processing_s=blocks,
    )


def fine(**params: float) -> AdComController:
    """A controller whose plan shows the interval to 1 ms."""
    return AdComController(granularity=0.001, **params)


def test_utilisation_above_setpoint_lengthens_below_shortens() -> None:
    busy = fine(initial_interval=1.0)
    busy.observe(report(1.0, 0.9))  # u 0.9 > 0.7: e = -0.2
    assert busy.plan(0.0).interval_s > 1.0
    idle = fine(initial_interval=1.0)
    idle.observe(report(1.0, 0.3))  # u 0.3 < 0.7: e = +0.4
    assert idle.plan(0.0).interval_s < 1.0


def test_update_is_eq_2_with_the_documented_sign() -> None:
    ctrl = fine(kp=0.5, ki=0.1, initial_interval=2.0)
    ctrl.observe(report(2.0, 1.0))  # u 0.5, e = 0.2
    assert ctrl.state()["interval_s"] == pytest.approx(2.0 - 0.5 * 0.2 - 0.1 * 0.2)
    ctrl.observe(report(2.0, 1.8))  # u 0.9, e = -0.2
    assert ctrl.state()["interval_s"] == pytest.approx(1.88 + 0.5 * 0.2 - 0.1 * 0.0)
    assert ctrl.state()["errors"] == pytest.approx([0.2, -0.2])


def test_integral_uses_only_the_last_three_errors() -> None:
    ctrl = fine(kp=0.0, ki=1.0, initial_interval=5.0, max_interval=30.0)
    utilisation = [0.2, 0.3, 0.6, 0.65, 0.5]  # errors 0.5, 0.4, 0.1, 0.05, 0.2
    xs = []
    for u in utilisation:
        ctrl.observe(report(5.0, 5.0 * u))
        xs.append(ctrl.state()["interval_s"])
    errors = [0.7 - u for u in utilisation]
    assert ctrl.state()["errors"] == pytest.approx(errors[-3:])
    assert xs[3] - xs[4] == pytest.approx(sum(errors[2:5]))
    assert xs[2] - xs[3] == pytest.approx(sum(errors[1:4]))


def test_error_is_setpoint_minus_mean_instance_utilisation() -> None:
    ctrl = AdComController(setpoint=0.6)
    # serial part 1.5 - 1.2 = 0.3 s holds every block: busy 1.1, 1.5, 1.3 of 2 s
    assert ctrl.error(report(2.0, 1.5, blocks=(0.8, 1.2, 1.0))) == pytest.approx(0.6 - 0.65)
    assert ctrl.error(report(2.0, 1.0)) == pytest.approx(0.1)


def test_overhead_bound_batch_with_tiny_blocks_reads_as_busy() -> None:
    ctrl = fine(initial_interval=1.0)
    rep = report(1.0, 0.9, blocks=(0.02, 0.01))  # p near x, almost all fixed overhead
    assert ctrl.error(rep) == pytest.approx(0.7 - (0.9 + 0.89) / 2)
    ctrl.observe(rep)
    assert ctrl.plan(0.0).interval_s > 1.0


def test_skew_rule_one_saturated_instance_sets_error_to_setpoint_minus_one() -> None:
    ctrl = AdComController(setpoint=0.7)
    # mean utilisation 0.55 would shorten the interval; one block at 100% wins
    skewed = report(1.0, 1.0, blocks=(1.0, 0.1))
    assert ctrl.error(skewed) == pytest.approx(0.7 - 1.0)
    # serial 0.5 s + blocks 0.5 and 0.05: instances at 100% and 55%, mean 0.775
    assert ctrl.error(report(1.0, 1.0, blocks=(0.5, 0.05))) == pytest.approx(0.7 - 1.0)
    # without block times the batch is the one instance: p >= x is saturation too
    assert ctrl.error(report(1.0, 3.0)) == pytest.approx(0.7 - 1.0)
    ctrl = fine(initial_interval=1.0)
    ctrl.observe(skewed)
    assert ctrl.plan(0.0).interval_s > 1.0


def test_interval_is_clamped_and_plan_rounded_to_granularity() -> None:
    ctrl = AdComController(kp=5.0, min_interval=0.2, max_interval=3.0, granularity=0.25)
    for _ in range(10):
        ctrl.observe(report(1.0, 5.0))
    assert ctrl.state()["interval_s"] == 3.0
    assert ctrl.plan(0.0).interval_s == 3.0
    for _ in range(10):
        ctrl.observe(report(3.0, 0.0))
    assert ctrl.state()["interval_s"] == 0.2
    assert ctrl.plan(0.0).interval_s == 0.25  # nearest multiple of 0.25 within range
    ctrl.restore({"interval_s": 1.13, "errors": []})
    assert ctrl.plan(0.0).interval_s == 1.25 and ctrl.state()["interval_s"] == 1.13


def run_linear(ctrl: AdComController, batches: int) -> tuple[list[float], list[float]]:
    """Planned intervals and internal x on p(x) = 0.4 + 0.1 x, with the one-batch loop
    delay: batch n's report arrives after batch n+1 was planned."""
    pending: BatchReport | None = None
    planned, xs = [], []
    for _ in range(batches):
        interval = ctrl.plan(0.0).interval_s
        if pending is not None:
            ctrl.observe(pending)
        pending = report(interval, 0.4 + 0.1 * interval)
        planned.append(interval)
        xs.append(ctrl.state()["interval_s"])
    return planned, xs


X_STAR = 0.4 / (0.7 - 0.1)  # the docstring's reference workload at setpoint 0.7


@pytest.mark.parametrize("start", [0.2, 2.0])
def test_default_gains_converge_on_a_linear_workload_without_overshoot(start: float) -> None:
    _, xs = run_linear(fine(initial_interval=start), 60)
    deviation = [(x - X_STAR) / X_STAR for x in xs]
    assert all((d >= -0.01) if start > X_STAR else (d <= 0.01) for d in deviation)
    assert all(abs(d) < 0.02 for d in deviation[30:])


def test_default_granularity_settles_on_the_neighbouring_granules() -> None:
    planned, _ = run_linear(AdComController(initial_interval=0.2), 80)
    assert set(planned[20:]) <= {0.65, 0.7}  # x* = 0.667 s lies between them
    tail = [(0.4 + 0.1 * x) / x for x in planned[-30:]]
    assert abs(sum(tail) / len(tail) - 0.7) < 0.02


def test_state_round_trip_and_bad_state() -> None:
    ctrl = AdComController()
    for u in (0.9, 0.8, 0.75, 0.6):
        ctrl.observe(report(1.0, u))
    twin = AdComController()
    twin.restore(json.loads(json.dumps(ctrl.state())))
    assert twin.state() == ctrl.state() and twin.plan(0.0) == ctrl.plan(0.0)
    with pytest.raises(AdabatchError, match="not an adcom state"):
        twin.restore({"errors": [0.1]})


def test_setpoint_outside_papers_range_is_named() -> None:
    with pytest.raises(AdabatchError) as exc:
        create("adcom", {"setpoint": "0.9"})
    text = str(exc.value)
    assert "'setpoint'" in text and "0.9" in text and "[0.5, 0.8]" in text


@pytest.mark.parametrize(
    ("params", "text"),
    [
        ({"min_interval": "5", "max_interval": "2", "initial_interval": "3"}, "min_interval"),
        ({"initial_interval": "50"}, "initial_interval"),
        ({"kp": "-0.1"}, "'kp'"),
        ({"granularity": "0"}, "'granularity'"),
    ],
)
def test_parameter_validation(params: dict, text: str) -> None:
    with pytest.raises(AdabatchError, match=text):
        create("adcom", params)


def test_report_with_zero_interval_is_an_error() -> None:
    with pytest.raises(AdabatchError, match="interval_s = 0"):
        AdComController().observe(report(0.0, 1.0))
