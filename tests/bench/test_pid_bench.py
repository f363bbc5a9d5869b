"""``pid`` experiment: the replayed estimator inputs, the capacity that scales the blog's
cases, the swing, the case choice, and (Spark) the JVM comparison itself."""

from __future__ import annotations

import math

import pytest

from adabatch.bench.experiments.pid import (
    OFFER,
    blog_sweep,
    capacity,
    choose_cases,
    compare_with_jvm,
    estimator_inputs,
    oscillation,
    swing,
)
from adabatch.control.pid import PIDRateEstimator
from adabatch.metrics import BatchRecord
from adabatch.sim import pid_sweep
from adabatch.sim.workloads import make_workload


def test_replayed_inputs_reproduce_the_trajectory() -> None:
    case = pid_sweep.SweepCase(0.4, 1.6, 1.0, 7500.0, 500.0)
    traj = pid_sweep.simulate_pid(case)
    est = PIDRateEstimator(1000, case.kp, case.ki, case.kd, case.min_rate)
    batch = case.initial_batch
    for args, expected in zip(estimator_inputs(case, traj, 5000.0), traj.batch, strict=True):
        rate = est.compute(*args)
        if rate is not None:
            batch = rate * 1000 / 1000
        assert batch == expected


def test_capacity_is_the_batch_processed_in_one_interval() -> None:
    model = make_workload("reduce")
    n = capacity(model)
    assert model.expected_processing(n, 2.0, 2) == pytest.approx(2.0, abs=1e-6)
    slow = make_workload("reduce", {"overhead_s": 2.5})
    with pytest.raises(Exception, match="overhead alone exceeds"):
        capacity(slow)


def rec(n: int) -> BatchRecord:
    return BatchRecord(0, 1.0, 2, n, 0.5, 0.0, 1.0, 1.0, 1.5, 1.5, 1.0, n)


def test_swing_is_the_second_half_spread_in_target_batches() -> None:
    flat = [rec(1000)] * 20
    assert swing(flat, 1000.0) == 0.0
    wild = [rec(1000)] * 10 + [rec(100), rec(3000)] * 5
    assert swing(wild, 1000.0) == pytest.approx(2.9, rel=0.01)
    assert math.isnan(swing([rec(1)] * 4, 1000.0))


def test_oscillation_scores_alternation_not_drift() -> None:
    sliding = [rec(round(100_000 * 0.9**i)) for i in range(20)]
    assert oscillation(sliding) == pytest.approx(-math.log(0.9), rel=1e-3)
    alternating = [rec(2000), rec(200_000)] * 10
    assert oscillation(alternating) == pytest.approx(math.log(100))
    assert oscillation([rec(0), rec(5)] * 5) == pytest.approx(math.log(5))  # no log(0)
    assert math.isnan(oscillation([rec(5)] * 5))


def test_chosen_cases_swing_in_the_simulator_and_spark_gains_close_the_list() -> None:
    model = make_workload("reduce")
    n = capacity(model)
    cases = choose_cases(model, n, f"constant:{OFFER * n:.0f}", 40.0, 2, seed=0)
    assert [c.name for c in cases][-1] == "spark-gains"
    assert len({(c.case.ki, c.case.kd) for c in cases[:-1]}) == len(cases) - 1 >= 1
    assert all(c.klass == "oscillating" for c in cases[:-1])
    assert cases[-1].params["kp"] == 1.0 and cases[-1].params["ki"] == 0.2
    x = cases[0].params["interval"]
    assert cases[0].params["initial_rate"] == round(cases[0].case.initial_batch * n / x / 5000)


@pytest.mark.spark
def test_jvm_estimator_matches_the_port_on_toxic_cases() -> None:
    from adabatch.spark import get_spark

    jvm = get_spark("local[2]")._jvm.org.apache.spark.streaming.scheduler.rate.PIDRateEstimator
    toxic = blog_sweep().toxic()
    result = compare_with_jvm(jvm, toxic[::100])
    assert result.cases == len(toxic[::100]) > 20
    assert result.steps > 20 * result.cases
    assert result.mismatched == ()
