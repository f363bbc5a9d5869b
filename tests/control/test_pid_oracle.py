"""The PIDRateEstimator port against Spark's own JVM class, step by step.

Spark 4.3 still ships spark-streaming (DStreams) with
``org.apache.spark.streaming.scheduler.rate.PIDRateEstimator``; we construct it through
py4j and feed it and the port the same random sequences.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from adabatch.control.base import BatchReport
from adabatch.control.pid import PIDController, PIDRateEstimator, seconds_to_millis

pytestmark = pytest.mark.spark

SEQUENCES = 300
STEPS = 20


@pytest.fixture(scope="module")
def jvm_estimator() -> Iterator[Any]:
    from adabatch.spark import get_spark

    spark = get_spark("local[1]", app_name="adabatch-pid-oracle")
    yield spark._jvm.org.apache.spark.streaming.scheduler.rate.PIDRateEstimator


def jvm_compute(est: Any, *args: int) -> float | None:
    out = est.compute(*args)
    return float(out.get()) if out.isDefined() else None


def words(text: str) -> list[str]:
    """The message without numbers (Spark does not print the bad minimum rate)."""
    return [w for w in text.split() if not re.fullmatch(r"-?[0-9.]+", w)]


def random_params(rng: np.random.Generator) -> tuple[int, float, float, float, float]:
    def gain() -> float:
        return 0.0 if rng.random() < 0.2 else float(rng.uniform(0.0, 3.0))

    interval_ms = 1 if rng.random() < 0.05 else int(rng.integers(1, 10_001))
    min_rate = float(rng.choice([1e-3, 1.0, rng.uniform(0.1, 10_000.0)]))
    return interval_ms, gain(), gain(), gain(), min_rate


def random_steps(rng: np.random.Generator) -> list[tuple[int, int, int, int]]:
    """Epoch-like millisecond times, mostly increasing, with repeats and steps back;
    elements, processing and scheduling delays including zeros and extremes."""
    time_ms = int(rng.integers(0, 2**41)) if rng.random() < 0.8 else 0
    steps = []
    for _ in range(STEPS):
        u = rng.random()
        if u < 0.07:
            dt = 0
        elif u < 0.12:
            dt = -int(rng.integers(1, 2_000))
        else:
            dt = int(rng.integers(1, 20_000))
        time_ms += dt
        u = rng.random()
        if u < 0.08:
            elements = 0
        elif u < 0.12:
            elements = int(rng.integers(2**40, 2**50))
        else:
            elements = int(rng.integers(1, 10_000_000))
        processing = 0 if rng.random() < 0.08 else int(rng.integers(1, 30_000))
        u = rng.random()
        if u < 0.3:
            scheduling = 0
        elif u < 0.33:
            scheduling = -int(rng.integers(1, 1_000))
        else:
            scheduling = int(rng.integers(0, 100_000))
        steps.append((time_ms, elements, processing, scheduling))
    return steps


def test_port_matches_jvm_on_random_sequences(jvm_estimator: Any) -> None:
    rng = np.random.default_rng(20240611)
    compared = defined = exact = 0
    for _ in range(SEQUENCES):
        params = random_params(rng)
        ours = PIDRateEstimator(*params)
        theirs = jvm_estimator(*params)
        for step in random_steps(rng):
            a = ours.compute(*step)
            b = jvm_compute(theirs, *step)
            compared += 1
            assert (a is None) == (b is None), (params, step, a, b)
            if a is not None:
                defined += 1
                assert math.isclose(a, b, rel_tol=1e-9), (params, step, a, b)
                exact += a == b
    assert compared == SEQUENCES * STEPS
    # the sequences exercise both outcomes, and the port is bit-for-bit in practice
    assert 0.4 * compared < defined < compared
    assert exact == defined


def test_invalid_constructor_arguments_fail_alike(jvm_estimator: Any) -> None:
    from adabatch.errors import AdabatchError

    for params in [
        (0, 1.0, 0.2, 0.0, 100.0),
        (1000, -1.0, 0.2, 0.0, 100.0),
        (1000, 1.0, -0.1, 0.0, 100.0),
        (1000, 1.0, 0.2, -2.0, 100.0),
        (1000, 1.0, 0.2, 0.0, 0.0),
    ]:
        with pytest.raises(AdabatchError) as ours:
            PIDRateEstimator(*params)
        with pytest.raises(Exception, match="requirement failed") as theirs:
            jvm_estimator(*params)
        # Spark's messages, ours also naming the minimum rate's value
        assert words(str(ours.value)) == words(str(theirs.value))[2:]


def test_controller_rate_limit_matches_jvm_through_report_conversion(
    jvm_estimator: Any,
) -> None:
    """The controller's seconds -> milliseconds conversion, replayed on the JVM class,
    gives the same published rate and admission cap."""
    rng = np.random.default_rng(7)
    ctrl = PIDController(interval=0.8, kp=0.9, ki=0.3, kd=0.05, min_rate=50)
    theirs = jvm_estimator(800, 0.9, 0.3, 0.05, 50.0)
    cut = 1_700_000_000.0
    started = cut
    for i in range(40):
        cut = round(cut + 0.8, 3)
        started = max(cut, started) + float(rng.uniform(0.0, 0.05))
        finished = started + float(rng.uniform(0.3, 1.2))
        rep = BatchReport(
            i,
            0.8,
            2,
            int(rng.integers(500, 5000)),
            finished - started,
            started - cut,
            cut,
            started,
            finished,
        )
        started = finished
        ctrl.observe(rep)
        f, s, c = (seconds_to_millis(t) for t in (rep.finished_at, rep.started_at, rep.cut_at))
        rate = jvm_compute(theirs, f, rep.records, f - s, s - c)
        if rate is not None:
            assert ctrl.rate_limit == int(rate)
            assert ctrl.plan(f / 1000).max_records == max(int(0.8 * int(rate)), 1)
    assert ctrl.rate_limit is not None
