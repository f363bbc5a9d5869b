"""Query specs for deadline scheduling (docs/deadline-spec.md).

A :class:`QuerySpec` holds the paper's query attributes (Table 1): window start and end,
deadline, input stream(s) and rate, total tuples, the batch cost model and the
final-aggregation cost model, plus when the query joins (and optionally leaves) a dynamic
multi-query system (Sec. 4). All times are seconds on one time axis.

A :class:`DeadlineScenario` adds the multi-query scheduler settings (strategy, resource slack
factor δ_RSF, C_max) for ``adabatch deadline simulate`` and the runners.

Every numeric field is a :class:`~adabatch.params.Param` here (:data:`TIMES`, :data:`RATE`,
:data:`RSF`, ...), checked by :func:`adabatch.deadline.core.numbers.check_number`; spec files
are read and written by :mod:`adabatch.deadline.core.spec_file`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from adabatch.deadline.core.arrival import (
    TOTAL,
    ArrivalModel,
    ConstantArrival,
    ProfileArrival,
    TraceArrival,
    floor_count,
)
from adabatch.deadline.core.cost import (
    MAX_TUPLES,
    NO_AGG,
    TIME_EPS,
    AggregationCost,
    QueryCost,
)
from adabatch.deadline.core.numbers import check_number
from adabatch.errors import AdabatchError, check_name, shown
from adabatch.params import Param
from adabatch.profiles import parse_profile

STRATEGIES = ("llf", "edf", "sjf", "rr")
"""Multi-query queue orders (Sec. 4.2): least laxity, earliest deadline, shortest job,
round robin."""
TIME_TRIGGERS = ("budget", "always")
"""When a late MinBatch's arrived tuples are processed on time (Sec. 4.4): ``always``, as
the paper does; ``budget``, only while the query stays within its ``(1 + δ_RSF)`` cost
bound or its deadline is at risk (see :mod:`adabatch.deadline.core.multi`)."""

QUERY_FIELDS = (
    "id",
    "query",
    "inputs",
    "window_start",
    "window_end",
    "deadline",
    "rate",
    "total",
    "cost",
    "agg_cost",
    "groups",
    "added_at",
    "removed_at",
    "actual_rate",
    "total_known",
)
SCHEDULER_FIELDS = ("strategy", "rsf", "c_max", "min_batch", "poll_s", "time_trigger")
TOP_FIELDS = ("queries", "defaults", "scheduler")

MAX_TIME = 1e12
"""Largest magnitude of a time in seconds (31,700 years): beyond it the window's tuple
count and the planners' float arithmetic overflow or lose whole seconds."""
MAX_RATE = float(MAX_TUPLES)
"""Largest arrival rate in tuples/s (the most tuples a window may hold)."""
MIN_POLL_S = 1e-3
"""Shortest interval at which the multi-query scheduler looks for input (1 ms)."""
SECONDS = "a finite number of seconds"
TIME_FIELDS = ("window_start", "window_end", "deadline", "added_at", "removed_at")
TIMES = {name: Param(name, None, SECONDS, low=-MAX_TIME, high=MAX_TIME) for name in TIME_FIELDS}
"""The times a user gives, each at most :data:`MAX_TIME` seconds from 0."""
PLANNED_DEADLINE = Param("deadline", None, SECONDS)
"""A deadline a planner tries: finite, possibly beyond :data:`MAX_TIME` (an earliest
completion)."""
RATE = Param("rate", None, "tuples/s", low=0.0, low_open=True, high=MAX_RATE)
GROUPS = Param("groups", None, "groups", kind=int, low=1, high=MAX_TUPLES)
RSF = Param("rsf", 0.5, "a finite number", low=0.0)
"""The resource slack factor δ_RSF (0.5 = 50% above the single-batch cost)."""
C_MAX = Param("c_max", math.inf, "a number of seconds", low=0.0, low_open=True)
"""The longest MinBatch in seconds (inf: no cap)."""
POLL_S = Param("poll_s", 1.0, SECONDS, low=MIN_POLL_S)


QUERY_NAMES: tuple[str, ...] = (
    "cq1", "cq2", "cq3", "cq4", "q1", "q3", "q4", "q6", "q10", "q12", "q14", "q19",
)  # fmt: skip
"""The queries a spec may name: those :mod:`adabatch.deadline.spark.queries` implements
(it checks that its table matches this list)."""


def known_query_names() -> tuple[str, ...]:
    """The query names a spec's ``query`` field accepts."""
    return QUERY_NAMES


@dataclass(frozen=True)
class QuerySpec:
    """One deadline query (the paper's Table 1 attributes); ``query`` names what a Spark
    runner executes (one of ``adabatch.deadline.spark.queries.QUERY_NAMES``, or ``None``).

    ``arrivals`` is the expected input model the planner uses; ``actual`` (simulation only)
    is how tuples really arrive, e.g. a slower profile (Sec. 4.4); ``None`` means as
    expected. ``total_known = False`` makes the multi-query scheduler estimate the total
    from the observed rate instead of trusting ``total`` (Sec. 4.4, last paragraph).
    """

    id: str
    query: str | None
    inputs: tuple[str, ...]
    window_start: float
    window_end: float
    deadline: float
    arrivals: ArrivalModel
    cost: QueryCost
    agg_cost: AggregationCost = NO_AGG
    groups: int | None = None
    added_at: float | None = None
    removed_at: float | None = None
    actual: ArrivalModel | None = None
    total_known: bool = True
    rate: float | str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        check_name(self.id, "query id")
        if self.added_at is None:
            object.__setattr__(self, "added_at", self.window_start)
        for name in TIME_FIELDS:
            value = getattr(self, name)
            if value is None and name == "removed_at":
                continue
            param = PLANNED_DEADLINE if name == "deadline" else TIMES[name]
            check_number(param, value, f"query {self.id!r}: {name}", text=False)
        if not self.window_start < self.window_end:
            msg = (
                f"query {self.id!r}: window_end = {self.window_end!r} must be after "
                f"window_start = {self.window_start!r}"
            )
            raise AdabatchError(msg)
        if self.arrivals.last_arrival > self.window_end + TIME_EPS * max(1.0, self.window_end):
            msg = (
                f"query {self.id!r}: the expected input ({self.total} tuples) arrives until "
                f"{self.arrivals.last_arrival:g}, after window_end = {self.window_end:g}: "
                "allowed a rate and total whose last tuple arrives by the window end"
            )
            raise AdabatchError(msg)
        if self.arrivals.input_time(1) < self.window_start - TIME_EPS:
            msg = (
                f"query {self.id!r}: input starts at {self.arrivals.input_time(1):g}, "
                f"before window_start = {self.window_start:g}"
            )
            raise AdabatchError(msg)
        for what, model in (
            ("one batch of all", self.cost.cost),
            ("the final aggregation of one batch per", self.agg_cost.cost),
        ):
            try:
                seconds = model(self.total)
            except (ArithmeticError, ValueError):
                seconds = math.inf
            if not math.isfinite(seconds):
                msg = (
                    f"query {self.id!r}: {what} {self.total} tuples costs {seconds:g} s: "
                    "allowed cost models whose cost stays finite"
                )
                raise AdabatchError(msg)
        if self.removed_at is not None and self.removed_at < self.added_at:  # type: ignore[operator]
            msg = (
                f"query {self.id!r}: removed_at = {self.removed_at:g} is before "
                f"added_at = {self.added_at:g}"
            )
            raise AdabatchError(msg)

    @property
    def total(self) -> int:
        """Total tuples of the window (``numTupleTotal``)."""
        return self.arrivals.total

    @property
    def actual_arrivals(self) -> ArrivalModel:
        """How tuples really arrive (the expected model unless ``actual`` is set)."""
        return self.arrivals if self.actual is None else self.actual

    @property
    def single_batch_cost(self) -> float:
        """``minCompCost``: all tuples in one batch (no final aggregation needed)."""
        return self.cost.cost(self.total)

    def describe(self) -> dict[str, Any]:
        """A JSON-able summary (for reports; not the spec file format)."""
        return {
            "id": self.id,
            "query": self.query,
            "inputs": list(self.inputs),
            "window_start": self.window_start,
            "window_end": self.window_end,
            "deadline": self.deadline,
            "rate": self.rate,
            "total": self.total,
            "cost": self.cost.to_json(),
            "agg_cost": self.agg_cost.to_json(),
            "added_at": self.added_at,
            "removed_at": self.removed_at,
        }


@dataclass(frozen=True)
class DeadlineScenario:
    """Queries plus the multi-query scheduler settings (Sec. 4, Algorithm 2 inputs)."""

    queries: tuple[QuerySpec, ...]
    strategy: str = "llf"
    rsf: float = 0.5
    c_max: float = math.inf
    min_batch: bool = True
    poll_s: float = 1.0
    time_trigger: str = "budget"

    def __post_init__(self) -> None:
        check_scheduler(self.strategy, self.time_trigger, self.rsf, self.c_max, self.poll_s)
        ids = [q.id for q in self.queries]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            msg = f"query ids must be unique: {shown(dupes)} appear more than once"
            raise AdabatchError(msg)


def check_scheduler(
    strategy: str, time_trigger: str, rsf: float, c_max: float, poll_s: float
) -> None:
    """Check the multi-query scheduler's settings as Python values: the queue order and
    time trigger by name, the numbers by :data:`RSF`, :data:`C_MAX` and :data:`POLL_S`
    (a scenario and a scheduler take the same settings)."""
    for name, value, allowed in (
        ("strategy", strategy, STRATEGIES),
        ("time_trigger", time_trigger, TIME_TRIGGERS),
    ):
        if value not in allowed:
            msg = f"{name} = {shown(value)}: allowed one of {', '.join(allowed)}"
            raise AdabatchError(msg)
    check_number(RSF, rsf, text=False)
    check_number(C_MAX, c_max, text=False, allow_inf=True)
    check_number(POLL_S, poll_s, text=False)


def query_spec(
    id: str,
    *,
    window_start: float,
    window_end: float,
    deadline: float,
    cost: QueryCost,
    rate: float | str | ArrivalModel | None = None,
    total: int | None = None,
    query: str | None = None,
    inputs: Sequence[str] = ("lineitem",),
    agg_cost: AggregationCost = NO_AGG,
    groups: int | None = None,
    added_at: float | None = None,
    removed_at: float | None = None,
    actual_rate: float | str | ArrivalModel | None = None,
    total_known: bool = True,
) -> QuerySpec:
    """A :class:`QuerySpec` from Python values.

    ``query`` names the Spark query a runner executes (``None``: planning and simulation
    only). ``rate`` is tuples/s (a number), a profile string (``adabatch.profiles`` grammar,
    time 0 = window start) or an :class:`ArrivalModel`; ``total`` defaults to what the rate
    delivers over the window (one tuple at the window start, then one per ``1/rate``). With
    a total and no rate, the tuples are spread evenly from window start to window end.

    Examples
    --------
    >>> from adabatch.deadline.core.cost import LinearCost
    >>> q = query_spec("case3", window_start=1, window_end=10, deadline=12, rate=1.0,
    ...                cost=LinearCost(per_tuple=0.5))
    >>> q.total, q.arrivals.input_time(6)
    (10, 6.0)
    """
    check_name(id, "query id")
    check_number(TIMES["deadline"], deadline, f"query {id!r}: deadline", text=False)
    arrivals = _arrival_model(rate, total, window_start, window_end, id)
    actual = None
    if actual_rate is not None:
        actual = _arrival_model(actual_rate, arrivals.total, window_start, None, id)
        if actual.total != arrivals.total:
            msg = (
                f"query {id!r}: actual_rate delivers {actual.total} tuples, the spec "
                f"{arrivals.total}: allowed the same total"
            )
            raise AdabatchError(msg)
    return QuerySpec(
        id=id,
        query=query,
        inputs=tuple(inputs),
        window_start=float(window_start),
        window_end=float(window_end),
        deadline=float(deadline),
        arrivals=arrivals,
        cost=cost,
        agg_cost=agg_cost,
        groups=groups,
        added_at=None if added_at is None else float(added_at),
        removed_at=None if removed_at is None else float(removed_at),
        actual=actual,
        total_known=total_known,
        rate=rate if isinstance(rate, int | float | str) else None,
    )


def _arrival_model(
    rate: float | str | ArrivalModel | None,
    total: int | None,
    start: float,
    end: float | None,
    qid: str,
) -> ArrivalModel:
    if isinstance(rate, ConstantArrival | ProfileArrival | TraceArrival):
        if total is not None and rate.total != total:
            msg = f"query {qid!r}: total = {total} but the arrival model holds {rate.total}"
            raise AdabatchError(msg)
        return rate
    if total is not None:
        check_number(TOTAL, total, f"query {qid!r}: total", text=False)
    if isinstance(rate, bool):
        msg = f"query {qid!r}: rate = {shown(rate)}: allowed tuples/s > 0 or a profile string"
        raise AdabatchError(msg)
    if isinstance(rate, int | float):
        rate = float(check_number(RATE, rate, f"query {qid!r}: rate", text=False))
        if total is None:
            if end is None:
                msg = f"query {qid!r}: total is needed to model arrivals at rate {rate:g}"
                raise AdabatchError(msg)
            total = _window_count((end - start) * rate, qid, f"rate {rate:g}")
        return ConstantArrival(float(start), rate, total)
    if isinstance(rate, str):
        profile = parse_profile(rate)
        if total is None:
            if end is None:
                msg = f"query {qid!r}: total is needed to model arrivals by profile {shown(rate)}"
                raise AdabatchError(msg)
            try:
                expected = profile.cumulative(end - start)
            except (ArithmeticError, ValueError):
                expected = math.inf
            total = _window_count(expected, qid, f"profile {shown(rate)}")
        return ProfileArrival(float(start), profile, total)
    if rate is None:
        if total is None or end is None:
            msg = f"query {qid!r}: give rate (tuples/s or a profile), total, or both"
            raise AdabatchError(msg)
        even = 1.0 if total <= 1 else (total - 1) / (end - start)
        return ConstantArrival(float(start), even, total)
    msg = f"query {qid!r}: rate = {shown(rate)}: allowed a number, a profile string or arrivals"
    raise AdabatchError(msg)


def _window_count(expected: float, qid: str, source: str) -> int:
    """Tuples of a window whose arrivals expect ``expected`` after the first one."""
    if not (math.isfinite(expected) and expected < MAX_TUPLES):
        msg = (
            f"query {qid!r}: the window at {source} holds {expected:g} tuples: allowed at "
            f"most {MAX_TUPLES} (a lower rate or a shorter window)"
        )
        raise AdabatchError(msg)
    return floor_count(max(expected, 0.0)) + 1
