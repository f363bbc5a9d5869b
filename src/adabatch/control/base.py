"""The controller contract: one plan per batch out, one report per finished batch in.

Every controller in :mod:`adabatch.control` implements :class:`Controller`. The simulator
(:mod:`adabatch.sim`) and the Spark data source (:mod:`adabatch.streaming`) drive the same
objects through the same two calls:

- ``plan(now)`` is called when the batching component starts a new batch interval (at the
  previous cut, the fixed-point paper's "after every batch has been received and new batch
  is about to start"). It returns the :class:`BatchPlan` of the batch that starts at ``now``.
- ``observe(report)`` is called when a batch has finished processing, with its
  :class:`BatchReport`.

Controllers take time only from these arguments, never from the wall clock, so the
simulator and real Spark drive them unchanged. Their running state is a JSON-able dict
(:meth:`Controller.state`) so it can be written with every metrics record and restored
after a query restart (:meth:`Controller.restore`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from adabatch.errors import AdabatchError
from adabatch.params import Param, Params, parse_values

# Bounds every controller's interval and block parameters share: a plan shorter than a
# millisecond or more than a day, or more blocks than any cluster runs tasks, is a typo
# that would make a run cut without end or allocate without bound.
MIN_INTERVAL_S = 0.001
MAX_INTERVAL_S = 86_400.0
MAX_BLOCKS = 10_000
# Largest record count or rate a parameter may name (records, records/s).
MAX_RECORDS = 10**12
# Largest controller gain (PID, ADCOM): far above any stable setting, finite in products.
MAX_GAIN = 1e6

BLOCKS = Param("blocks", 2, "blocks (input partitions) per batch", kind=int, low=1, high=MAX_BLOCKS)
"""The blocks parameter of every controller that plans a fixed number of blocks."""


@dataclass(frozen=True)
class BatchPlan:
    """What the batching component does next: the batch starting now.

    ``max_records`` caps the records admitted into the batch (admission control, used by
    ``pid``); ``None`` admits everything that arrives during the interval. Records beyond
    the cap stay in the source for later batches; nothing is dropped.

    ``when_free`` cuts the batch at the end of the interval or, if processing is still
    busy then, when it is free, with what has arrived by that moment (Spark's
    processingTime trigger); by default batches are cut on schedule and queue (the
    papers' model). ``replan`` asks for the plan again after every report that arrives
    before its batch is cut, so the cut follows what that report showed.
    ``cut_when_full`` (with ``max_records``) also cuts the batch as soon as that many
    records wait for it, before its interval ends: a rate that rises within the window
    ends the window early instead of making the batch bigger than planned. See
    :mod:`adabatch.batching`.
    """

    interval_s: float
    blocks: int
    max_records: int | None = None
    when_free: bool = False
    replan: bool = False
    cut_when_full: bool = False

    def __post_init__(self) -> None:
        if not (self.interval_s > 0 and math.isfinite(self.interval_s)):
            msg = f"plan interval_s = {self.interval_s!r} must be a positive finite number"
            raise AdabatchError(msg)
        if self.blocks < 1:
            msg = f"plan blocks = {self.blocks!r} must be at least 1"
            raise AdabatchError(msg)
        if self.max_records is not None and self.max_records < 0:
            msg = f"plan max_records = {self.max_records!r} must be >= 0 or None"
            raise AdabatchError(msg)
        if self.cut_when_full and not self.max_records:
            msg = (
                f"plan cut_when_full with max_records = {self.max_records!r}: a cut when "
                "full needs max_records >= 1"
            )
            raise AdabatchError(msg)


@dataclass(frozen=True)
class BatchReport:
    """What happened to one finished batch; all times in seconds on the driver's clock.

    ``cut_at`` is the end of the batch's interval (the cut); the batch holds the records
    that arrived in ``(cut_at - interval_s, cut_at]`` (fewer if ``max_records`` capped it).
    ``queue_delay_s = started_at - cut_at`` and ``processing_s = finished_at - started_at``.
    ``block_processing_s`` optionally gives each block's own busy time (for skew rules).
    ``left_records`` counts the records that had arrived but were in no handed-out batch
    when this one finished (queued batches and the window being filled), and
    ``queued_records`` those of them already cut into queued batches; ``None`` where the
    driver does not know it.
    """

    batch_id: int
    interval_s: float
    blocks: int
    records: int
    processing_s: float
    queue_delay_s: float
    cut_at: float
    started_at: float
    finished_at: float
    block_processing_s: tuple[float, ...] = field(default=())
    left_records: int | None = None
    queued_records: int | None = None

    def __post_init__(self) -> None:
        if not (self.interval_s > 0 and math.isfinite(self.interval_s)):
            msg = f"batch {self.batch_id}: interval_s = {self.interval_s!r} must be > 0"
            raise AdabatchError(msg)
        if not (self.processing_s >= 0 and math.isfinite(self.processing_s)):
            msg = f"batch {self.batch_id}: processing_s = {self.processing_s!r} must be >= 0"
            raise AdabatchError(msg)
        if not math.isfinite(self.queue_delay_s) or self.records < 0:
            msg = (
                f"batch {self.batch_id}: queue_delay_s = {self.queue_delay_s!r} must be "
                f"finite and records = {self.records!r} >= 0"
            )
            raise AdabatchError(msg)
        for name in ("left_records", "queued_records"):
            value = getattr(self, name)
            if value is not None and value < 0:
                msg = f"batch {self.batch_id}: {name} = {value!r} must be >= 0"
                raise AdabatchError(msg)

    @property
    def rate_rps(self) -> float:
        """Data ingestion rate of this batch: records per second of interval."""
        return self.records / self.interval_s if self.interval_s > 0 else 0.0

    @property
    def latency_s(self) -> float:
        """End-to-end batch latency as the papers define it: ``x + q + p``."""
        return self.interval_s + self.queue_delay_s + self.processing_s


@dataclass(frozen=True)
class TargetStatus:
    """A latency target and whether the controller meets it: what a user watches for
    (Spark's progress, the Prometheus gauges, the run summary).

    ``target_s`` is the batch latency ``x + q + p`` the user asked for, at ``percentile``
    (``None``: the controller does not say); ``met`` the controller's verdict;
    ``achievable_s`` the least batch latency it can reach now (``None`` before it knows);
    ``mode`` the name of its decision (one of ``slo``'s modes, e.g. floor); ``reason``,
    when not met, why in a few words ("the processing floor is 0.42 s").
    """

    target_s: float
    met: bool
    achievable_s: float | None
    mode: str
    reason: str | None = None
    percentile: float | None = None

    def __post_init__(self) -> None:
        if not (self.target_s > 0 and math.isfinite(self.target_s)):
            msg = f"latency target = {self.target_s!r} must be a positive finite number"
            raise AdabatchError(msg)
        if self.achievable_s is not None and not (
            self.achievable_s >= 0 and math.isfinite(self.achievable_s)
        ):
            msg = f"achievable latency = {self.achievable_s!r} must be >= 0 and finite, or None"
            raise AdabatchError(msg)
        if self.percentile is not None and not 0 < self.percentile <= 100:
            msg = f"latency target percentile = {self.percentile!r} must be in (0, 100]"
            raise AdabatchError(msg)


class Controller(ABC):
    """Base of every batch-sizing controller.

    Subclasses set ``name`` (the registry key, e.g. ``"fixed-point"``), ``summary`` (one
    line with the paper reference) and ``PARAMS`` (their parameters with the papers'
    defaults). They read parameters from ``self.params`` and implement :meth:`plan`,
    :meth:`observe`, :meth:`state` and :meth:`restore`. A parameter without a default
    (``slo``'s ``target``) must be given; ``EXAMPLE_PARAMS`` holds a value for each, so
    that generic code (the contract tests, ``adabatch controllers``) can build one.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    PARAMS: ClassVar[tuple[Param, ...]] = ()
    EXAMPLE_PARAMS: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, **params: Any) -> None:
        self.params = self.validate(params)
        self._check(self.params)

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> Params:
        """Parse and check ``params`` against ``PARAMS``; unknown names are errors."""
        return parse_values(cls.PARAMS, params, owner=cls.name, holder=f"controller {cls.name!r}")

    def _check(self, params: Params) -> None:
        """Cross-parameter checks (e.g. ``min_interval <= max_interval``); override."""
        return None

    @abstractmethod
    def plan(self, now: float) -> BatchPlan:
        """The plan for the batch whose interval starts at ``now``."""

    @abstractmethod
    def observe(self, report: BatchReport) -> None:
        """Learn from a finished batch."""

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """The running state as a JSON-able dict (for metrics and restarts)."""

    @abstractmethod
    def restore(self, state: Mapping[str, Any]) -> None:
        """Restore the running state written by :meth:`state`."""

    def smallest_interval(self) -> float:
        """The shortest interval this controller can plan, seconds: with a duration it
        bounds how many batches a run cuts. Its ``min_interval`` parameter, else its fixed
        ``interval``, else its ``granularity``, else ``MIN_INTERVAL_S``."""
        for name in ("min_interval", "interval", "granularity"):
            value = self.params.get(name)
            if value is not None:
                return float(value)
        return MIN_INTERVAL_S

    def metrics_state(self) -> dict[str, Any]:
        """The state written with every metrics record: :meth:`state` unless that holds
        large tables (override then with a small summary; ``state`` stays for restarts)."""
        return self.state()

    def target_status(self) -> TargetStatus | None:
        """The latency target and whether it is met, for a controller that has one
        (``slo``); ``None`` for a controller that sizes batches without a target."""
        return None

    def describe(self) -> dict[str, Any]:
        """Name, parameters and running state, as written with every metrics record."""
        return {"controller": self.name, "params": dict(self.params), "state": self.state()}

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({inner})"


def round_to_granularity(x: float, granularity: float) -> float:
    """Round ``x`` to the nearest positive multiple of ``granularity`` (at least one)."""
    steps = max(1, round(x / granularity))
    return round(steps * granularity, 9)


def clamp(x: float, low: float, high: float) -> float:
    """``x`` limited to ``[low, high]``."""
    return min(max(x, low), high)


def check_not_above(owner: str, name: str, value: float, high: float) -> None:
    """Refuse an interval parameter ``name`` = ``value`` above ``max_interval`` = ``high``."""
    if value > high:
        msg = f"{owner} parameter {name!r} = {value:g} must not exceed 'max_interval' = {high:g}"
        raise AdabatchError(msg)


def check_interval_order(owner: str, low: float, high: float, initial: float | None) -> None:
    """The cross-check of every controller with interval bounds: ``min_interval`` (``low``)
    not above ``max_interval`` (``high``), and ``initial_interval``, when set, between them.
    Errors name the parameter, its value and both bounds."""
    check_not_above(owner, "min_interval", low, high)
    if initial is not None and not low <= initial <= high:
        msg = (
            f"{owner} parameter 'initial_interval' = {initial:g} must lie in "
            f"[min_interval, max_interval] = [{low:g}, {high:g}]"
        )
        raise AdabatchError(msg)
