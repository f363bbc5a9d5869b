"""The PIDRateEstimator port (guards, arithmetic) and the pid controller (plan, observe)."""

from __future__ import annotations

import json

import pytest

from adabatch.control import BatchReport, create
from adabatch.control.pid import PIDController, PIDRateEstimator, seconds_to_millis, to_long
from adabatch.errors import AdabatchError


def report(
    batch_id: int,
    records: int,
    cut_at: float,
    started_at: float,
    finished_at: float,
    interval_s: float = 1.0,
) -> BatchReport:
    return BatchReport(
        batch_id,
        interval_s,
        2,
        records,
        finished_at - started_at,
        started_at - cut_at,
        cut_at,
        started_at,
        finished_at,
    )


def test_first_valid_call_only_records_the_processing_rate() -> None:
    est = PIDRateEstimator(1000, 1.0, 0.2, 0.0, 100.0)
    assert est.compute(0, 5000, 1250, 0) is None  # time 0 > latest_time -1: valid
    assert est.first_run is False
    assert est.latest_rate == 4000.0
    assert est.latest_error == 0.0
    assert est.latest_time == 0


def test_hand_computed_step() -> None:
    est = PIDRateEstimator(1000, 1.0, 0.2, 0.1, 100.0)
    assert est.compute(1000, 5000, 1000, 0) is None  # latest_rate 5000
    # processing rate 4000; error 1000; historical 500 * 4000 / 1000 = 2000;
    # dError (1000 - 0) / 1 s = 1000; 5000 - 1000 - 0.2*2000 - 0.1*1000 = 3500
    assert est.compute(2000, 4000, 1000, 500) == 3500.0
    assert est.latest_rate == 3500.0 and est.latest_error == 1000.0
    # processing rate 3000 over 2 s: error 500, dError (500 - 1000) / 2 = -250
    assert est.compute(4000, 3000, 1000, 0) == 3500.0 - 500.0 - 0.0 + 0.1 * 250.0


@pytest.mark.parametrize(
    ("time_ms", "elements", "processing_ms"),
    [(1000, 10, 100), (999, 10, 100), (3000, 0, 100), (3000, 10, 0), (3000, -5, 100)],
)
def test_guards_skip_without_touching_state(
    time_ms: int, elements: int, processing_ms: int
) -> None:
    est = PIDRateEstimator(1000, 1.0, 0.2, 0.0, 100.0)
    est.compute(1000, 5000, 1000, 0)
    before = (est.latest_time, est.latest_rate, est.latest_error, est.first_run)
    assert est.compute(time_ms, elements, processing_ms, 0) is None
    assert (est.latest_time, est.latest_rate, est.latest_error, est.first_run) == before


def test_min_rate_floors_the_estimate() -> None:
    est = PIDRateEstimator(1000, 1.0, 0.2, 0.0, 2500.0)
    est.compute(1000, 5000, 1000, 0)
    # 10 ms for 10 records = 1000/s: error 4000 -> 1000, below the floor
    assert est.compute(2000, 10, 10, 0) == 2500.0
    assert est.latest_rate == 2500.0


def test_negative_scheduling_delay_is_not_guarded_as_in_spark() -> None:
    est = PIDRateEstimator(1000, 0.0, 1.0, 0.0, 1.0)
    est.compute(1000, 5000, 1000, 0)
    assert est.compute(2000, 5000, 1000, -200) == 5000.0 + 1000.0


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ((0, 1.0, 0.2, 0.0, 100.0), "Specified batch interval 0 in PIDRateEstimator is invalid"),
        ((1000, -1.0, 0.2, 0.0, 100.0), "Proportional term -1.0"),
        ((1000, 1.0, -0.2, 0.0, 100.0), "Integral term -0.2"),
        ((1000, 1.0, 0.2, -0.5, 100.0), "Derivative term -0.5"),
        ((1000, 1.0, 0.2, 0.0, 0.0), "Minimum rate 0.0 in PIDRateEstimator should be > 0"),
    ],
)
def test_constructor_validation(args: tuple, text: str) -> None:
    with pytest.raises(AdabatchError, match=text):
        PIDRateEstimator(*args)


def test_seconds_to_millis_and_to_long() -> None:
    assert seconds_to_millis(1.001) == 1001  # 1.001 * 1000 = 1000.9999999999999
    assert seconds_to_millis(2.9999) == 2999
    assert seconds_to_millis(0.0) == 0
    assert seconds_to_millis(1_700_000_000.1234) == 1_700_000_000_123
    assert to_long(3999.99) == 3999 and to_long(-2.5) == -2
    assert to_long(float("nan")) == 0 and to_long(1e300) == 2**63 - 1


def test_plan_uncapped_until_first_estimate_then_capped() -> None:
    ctrl = PIDController(interval=1.0, blocks=3)
    plan = ctrl.plan(0.0)
    assert (plan.interval_s, plan.blocks, plan.max_records) == (1.0, 3, None)
    ctrl.observe(report(0, 5000, 1.0, 1.0, 2.0))  # first run: 5000/s, no estimate
    assert ctrl.plan(2.0).max_records is None
    ctrl.observe(report(1, 5000, 2.0, 2.0, 3.25))  # 4000/s -> 5000 - 1000 = 4000
    assert ctrl.rate_limit == 4000
    assert ctrl.plan(3.0).max_records == 4000


def test_initial_rate_caps_before_the_first_estimate() -> None:
    ctrl = create("pid", {"interval": "0.5", "initial_rate": "3000"})
    assert ctrl.plan(0.0).max_records == 1500
    ctrl.observe(report(0, 1500, 0.5, 0.5, 1.0, interval_s=0.5))
    assert ctrl.plan(0.5).max_records == 1500  # still the initial rate (first run)


def test_admission_cap_truncates_rate_then_records() -> None:
    ctrl = PIDController(interval=1.5, kp=1.0, ki=0.0, kd=0.0)
    ctrl.observe(report(0, 6000, 1.5, 1.5, 2.5, interval_s=1.5))  # 6000/s
    ctrl.observe(report(1, 7000, 3.0, 3.0, 4.167, interval_s=1.5))  # 7000 / 1167 ms
    rate = 7000 / 1167 * 1000  # error 6000 - rate; new = 6000 - error = rate
    assert ctrl.estimator.latest_rate == rate
    assert ctrl.rate_limit == int(rate) == 5998
    assert ctrl.plan(4.5).max_records == int(1.5 * 5998) == 8997


def test_observe_converts_timestamps_like_spark_batch_info() -> None:
    ctrl = PIDController(kp=0.5, ki=0.3, kd=0.1)
    twin = PIDRateEstimator(1000, 0.5, 0.3, 0.1, 100.0)
    reports = [
        report(0, 4000, 10.0, 10.0, 10.801),
        report(1, 4200, 11.0, 11.2505, 12.0015),  # 751 ms processing, 250 ms queue
        report(2, 3900, 12.0, 12.0015, 12.9001),
    ]
    for rep in reports:
        ctrl.observe(rep)
        finished, started, cut = (
            seconds_to_millis(rep.finished_at),
            seconds_to_millis(rep.started_at),
            seconds_to_millis(rep.cut_at),
        )
        twin.compute(finished, rep.records, finished - started, started - cut)
    assert ctrl.estimator.latest_time == 12900
    assert ctrl.estimator.latest_rate == twin.latest_rate
    assert ctrl.estimator.latest_error == twin.latest_error


def test_state_round_trips_through_json() -> None:
    ctrl = PIDController()
    for i, (records, p) in enumerate([(5000, 1.0), (5000, 1.25), (4000, 0.9), (4500, 1.1)]):
        ctrl.observe(report(i, records, i + 1.0, i + 1.0, i + 1.0 + p))
    twin = PIDController()
    twin.restore(json.loads(json.dumps(ctrl.state())))
    assert twin.state() == ctrl.state()
    nxt = report(9, 4800, 10.0, 10.0, 11.05)
    ctrl.observe(nxt)
    twin.observe(nxt)
    assert twin.state() == ctrl.state() and twin.plan(11.0) == ctrl.plan(11.0)
    with pytest.raises(AdabatchError, match="not a pid state"):
        twin.restore({"latest_rate": 1.0})


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({"kp": "-1"}, "kp"),
        ({"min_rate": "0"}, "min_rate"),
        ({"initial_rate": "0"}, "initial_rate"),
    ],
)
def test_parameter_validation_names_the_parameter(params: dict, name: str) -> None:
    with pytest.raises(AdabatchError, match=f"'{name}'"):
        create("pid", params)
