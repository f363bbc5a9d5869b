"""``pid``: Spark's back-pressure rate estimator (``spark.streaming.backpressure.enabled``).

:class:`PIDRateEstimator` is a line-by-line port of
``org.apache.spark.streaming.scheduler.rate.PIDRateEstimator`` (Spark Streaming, DStreams):
same constructor, same guards, same floating-point operations in the same order, so it
returns the same doubles as the JVM class on the same inputs (checked against the JVM class
by ``tests/control/test_pid_oracle.py``). :class:`PIDController` wraps it the way Spark's
``RateController`` and the Kafka direct stream do: the estimate becomes a records/second
limit, and each batch of a fixed interval admits at most ``limit * interval`` records.
The seed ``spark-pid-backpressure`` studies its (lack of a) stable fixed point; see
:mod:`adabatch.sim.pid_sweep`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from adabatch.control.base import (
    BLOCKS,
    MAX_GAIN,
    MAX_INTERVAL_S,
    MAX_RECORDS,
    MIN_INTERVAL_S,
    BatchPlan,
    BatchReport,
    Controller,
)
from adabatch.errors import AdabatchError
from adabatch.params import Param


def seconds_to_millis(t_s: float) -> int:
    """``t_s`` seconds as whole milliseconds, the way ``System.currentTimeMillis`` reports a
    clock: truncated toward minus infinity, after rounding away float noise below 1 ns
    (so ``1.001`` s is 1001 ms, not 1000).

    Every millisecond value the ``pid`` controller feeds its estimator goes through this one
    function, so any caller (the simulator, the Spark data source, a test against the JVM
    class) can reproduce the estimator's inputs from a :class:`BatchReport`.
    """
    return math.floor(round(t_s * 1000.0, 6))


def to_long(x: float) -> int:
    """Scala/Java ``Double.toLong``: truncation toward zero, NaN -> 0, saturating."""
    if math.isnan(x):
        return 0
    if x >= 2.0**63:
        return 2**63 - 1
    if x <= -(2.0**63):
        return -(2**63)
    return int(x)


def _java_max(a: float, b: float) -> float:
    """``java.lang.Math.max`` for doubles (what Scala's ``Double.max`` calls): NaN wins."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return a if a >= b else b


class PIDRateEstimator:
    """Port of Spark's ``PIDRateEstimator`` (streaming/scheduler/rate/PIDRateEstimator.scala).

    The error is the difference between the rate computed for the previous batch and the
    measured processing rate (records / processing delay); the integral term is the
    scheduling delay turned into a rate (``schedulingDelay * processingRate /
    batchInterval``); the derivative is the change of the error per second since the last
    update. The new rate is ``latestRate - kp*error - ki*historicalError - kd*dError``,
    at least ``min_rate``. The first valid call only records the processing rate and
    returns ``None``, as Spark does.

    Parameters
    ----------
    batch_interval_ms : int
        The batch duration in milliseconds (> 0).
    proportional, integral, derivative : float
        The gains (>= 0); Spark's defaults are 1.0, 0.2 and 0.0.
    min_rate : float
        The smallest rate ever returned, records/second (> 0; Spark's default 100).

    Examples
    --------
    >>> est = PIDRateEstimator(1000, 1.0, 0.2, 0.0, 100.0)
    >>> est.compute(1000, 5000, 1000, 0) is None     # first run: no estimate
    True
    >>> est.compute(2000, 5000, 1250, 0)             # slower: rate 4000/s
    4000.0
    """

    def __init__(
        self,
        batch_interval_ms: int,
        proportional: float = 1.0,
        integral: float = 0.2,
        derivative: float = 0.0,
        min_rate: float = 100.0,
    ) -> None:
        # Spark's require(...) checks, in Spark's order, with Spark's messages.
        if not batch_interval_ms > 0:
            msg = f"Specified batch interval {batch_interval_ms} in PIDRateEstimator is invalid."
            raise AdabatchError(msg)
        if not proportional >= 0:
            msg = f"Proportional term {proportional} in PIDRateEstimator should be >= 0."
            raise AdabatchError(msg)
        if not integral >= 0:
            msg = f"Integral term {integral} in PIDRateEstimator should be >= 0."
            raise AdabatchError(msg)
        if not derivative >= 0:
            msg = f"Derivative term {derivative} in PIDRateEstimator should be >= 0."
            raise AdabatchError(msg)
        if not min_rate > 0:
            msg = f"Minimum rate {min_rate} in PIDRateEstimator should be > 0"
            raise AdabatchError(msg)
        self.batch_interval_ms = int(batch_interval_ms)
        self.proportional = float(proportional)
        self.integral = float(integral)
        self.derivative = float(derivative)
        self.min_rate = float(min_rate)
        self.first_run = True
        self.latest_time = -1
        self.latest_rate = -1.0
        self.latest_error = -1.0  # Scala: `-1L` widened to a double

    def compute(
        self,
        time_ms: int,
        elements: int,
        processing_delay_ms: int,
        scheduling_delay_ms: int,
    ) -> float | None:
        """The new rate in records/second, or ``None`` if Spark would skip this batch.

        Skipped: calls whose ``time_ms`` is not after the last update, batches with no
        elements or no processing delay, and the first valid call (which only records the
        processing rate). All arguments are integers (Scala ``Long``).
        """
        if time_ms > self.latest_time and elements > 0 and processing_delay_ms > 0:
            delay_since_update = float(time_ms - self.latest_time) / 1000
            processing_rate = float(elements) / float(processing_delay_ms) * 1000
            error = self.latest_rate - processing_rate
            historical_error = (
                float(scheduling_delay_ms) * processing_rate / float(self.batch_interval_ms)
            )
            d_error = (error - self.latest_error) / delay_since_update
            new_rate = _java_max(
                self.latest_rate
                - self.proportional * error
                - self.integral * historical_error
                - self.derivative * d_error,
                self.min_rate,
            )
            self.latest_time = time_ms
            if self.first_run:
                self.latest_rate = processing_rate
                self.latest_error = 0.0
                self.first_run = False
                return None
            self.latest_rate = new_rate
            self.latest_error = error
            return new_rate
        return None


class PIDController(Controller):
    """Spark's back pressure on a fixed interval: a records/second cap from the PID estimator.

    How Spark applies the estimate (``RateController.computeAndPublish`` and
    ``DirectKafkaInputDStream.maxMessagesPerPartition``), reproduced here:

    - after every completed batch the estimator gets ``(processingEndTime, records,
      processingDelay, schedulingDelay)``, all ``Long`` milliseconds; here
      ``time = ms(finished_at)``, ``processingDelay = ms(finished_at) - ms(started_at)`` and
      ``schedulingDelay = ms(started_at) - ms(cut_at)``, differences of whole-millisecond
      timestamps as in Spark's ``BatchInfo``, with ``ms`` = :func:`seconds_to_millis`;
    - a returned rate is stored as a ``Long`` (``rateLimit.set(s.toLong)``: truncation);
    - the next batch admits ``(batchDuration_s * rate).toLong`` records (truncation again),
      ``floor(interval_s * floor(rate))``; a rate that truncates to 0 counts as no estimate
      (Spark's ``if (lr > 0) lr else initialRate``). Until the first estimate,
      ``spark.streaming.backpressure.initialRate`` caps the batch (``initial_rate``), or
      nothing does if it is unset. Spark splits the cap over Kafka partitions by lag with a
      floor of one record per partition (``minRatePerPartition``); we cap the batch as a
      whole (``BatchPlan.max_records``) with a floor of one record, so a batch is never
      empty by decree (an empty batch gives the estimator nothing to learn from).

    The interval is fixed (rounded to whole milliseconds, Spark's ``Duration``); only the
    admitted records vary.
    """

    name = "pid"
    summary = "Spark's PIDRateEstimator back pressure on a fixed interval (spark-pid-backpressure)"
    PARAMS = (
        Param(
            "interval",
            1.0,
            "fixed batch interval in seconds",
            low=MIN_INTERVAL_S,
            high=MAX_INTERVAL_S,
        ),
        Param(
            "kp",
            1.0,
            "proportional gain (spark.streaming.backpressure.pid.proportional)",
            low=0,
            high=MAX_GAIN,
        ),
        Param(
            "ki",
            0.2,
            "integral gain (spark.streaming.backpressure.pid.integral)",
            low=0,
            high=MAX_GAIN,
        ),
        Param(
            "kd",
            0.0,
            "derivative gain (spark.streaming.backpressure.pid.derived)",
            low=0,
            high=MAX_GAIN,
        ),
        Param(
            "min_rate",
            100.0,
            "smallest rate, records/s (spark.streaming.backpressure.pid.minRate)",
            low=0,
            high=MAX_RECORDS,
            low_open=True,
        ),
        Param(
            "initial_rate",
            None,
            "records/s cap before the first estimate (spark.streaming.backpressure.initialRate)",
            kind=int,
            low=1,
            high=MAX_RECORDS,
            optional=True,
        ),
        BLOCKS,
    )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.interval_ms = round(self.params.interval * 1000)
        self.estimator = PIDRateEstimator(
            self.interval_ms,
            self.params.kp,
            self.params.ki,
            self.params.kd,
            self.params.min_rate,
        )
        self.rate_limit: int | None = None  # Spark's RateController.rateLimit (None = -1)

    def plan(self, now: float) -> BatchPlan:
        interval_s = self.interval_ms / 1000
        rate = self.rate_limit if self.rate_limit is not None and self.rate_limit > 0 else None
        if rate is None:
            rate = self.params.initial_rate
        max_records = None if rate is None else max(to_long(interval_s * rate), 1)
        return BatchPlan(interval_s, self.params.blocks, max_records)

    def observe(self, report: BatchReport) -> None:
        finished_ms = seconds_to_millis(report.finished_at)
        started_ms = seconds_to_millis(report.started_at)
        cut_ms = seconds_to_millis(report.cut_at)
        rate = self.estimator.compute(
            finished_ms, report.records, finished_ms - started_ms, started_ms - cut_ms
        )
        if rate is not None:
            self.rate_limit = to_long(rate)

    def state(self) -> dict[str, Any]:
        est = self.estimator
        return {
            "latest_rate": est.latest_rate,
            "latest_error": est.latest_error,
            "latest_time_ms": est.latest_time,
            "first_run": est.first_run,
            "rate_limit": self.rate_limit,
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        try:
            latest_rate = float(state["latest_rate"])
            latest_error = float(state["latest_error"])
            latest_time = int(state["latest_time_ms"])
            first_run = bool(state["first_run"])
            limit = state.get("rate_limit")
            rate_limit = None if limit is None else int(limit)
        except (KeyError, TypeError, ValueError) as exc:
            msg = f"pid state {dict(state)!r} is not a pid state: {exc!r}"
            raise AdabatchError(msg) from None
        est = self.estimator
        est.latest_rate = latest_rate
        est.latest_error = latest_error
        est.latest_time = latest_time
        est.first_run = first_run
        self.rate_limit = rate_limit
