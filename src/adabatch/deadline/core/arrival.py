"""When a query's input tuples arrive: the paper's ``InputTime`` and ``FindCurrTuples``.

Tuples are numbered ``1..total`` in arrival order. Every model answers:

- ``input_time(n)``: the time at which the first ``n`` tuples have all arrived
  (``InputTime(inputStream, n)`` of Function 1); ``input_time(0)`` is the start;
- ``arrived(t)``: how many tuples have arrived by time ``t`` (inclusive; the paper's
  ``FindCurrTuples``);
- ``last_arrival``: ``input_time(total)``.

Convention (it makes the paper's Sec. 3.1 example exact): the first tuple arrives at the
window start and tuple ``n`` when the expected count since the start reaches ``n - 1``. At
a fixed rate ``r`` tuple ``n`` arrives at ``start + (n - 1) / r``, so a window ``[1, 10]``
at 1 tuple/s holds 10 tuples, the 6th arriving at time 6.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from adabatch.deadline.core.cost import MAX_TUPLES
from adabatch.deadline.core.numbers import check_number
from adabatch.errors import AdabatchError, shown
from adabatch.params import Param
from adabatch.profiles import RateProfile


def floor_count(x: float) -> int:
    """``floor(x)`` robust to float rounding just below an integer."""
    return math.floor(x + 1e-9 * max(1.0, abs(x)))


@runtime_checkable
class ArrivalModel(Protocol):
    """Arrival times of a query's ``total`` input tuples."""

    total: int

    def input_time(self, n: int) -> float: ...

    def arrived(self, t: float) -> int: ...

    @property
    def last_arrival(self) -> float: ...


TOTAL = Param("total", None, "tuples in the window", kind=int, low=1, high=MAX_TUPLES)
"""``numTupleTotal``: the tuples of a query's window."""
ARRIVAL_RATE = Param("rate", None, "a finite number of tuples/s", low=0.0, low_open=True)
TRACE_COUNT = Param("count", None, "tuples arriving at one time", kind=int, low=1)


def _check_total(total: int) -> None:
    check_number(TOTAL, total, "total tuples", text=False)


@dataclass(frozen=True)
class ConstantArrival:
    """``rate`` tuples/s from ``start``: tuple ``n`` arrives at ``start + (n - 1) / rate``."""

    start: float
    rate: float
    total: int

    def __post_init__(self) -> None:
        _check_total(self.total)
        check_number(ARRIVAL_RATE, self.rate, "arrival rate", text=False)

    def input_time(self, n: int) -> float:
        if n <= 1:
            return self.start
        return self.start + (min(n, self.total) - 1) / self.rate

    def arrived(self, t: float) -> int:
        if t < self.start:
            return 0
        return min(self.total, floor_count((t - self.start) * self.rate) + 1)

    @property
    def last_arrival(self) -> float:
        return self.input_time(self.total)


@dataclass(frozen=True)
class ProfileArrival:
    """Arrivals following a rate profile (``adabatch.profiles``) started at ``start``:
    tuple ``n`` arrives when the profile's cumulative count reaches ``n - 1``."""

    start: float
    profile: RateProfile
    total: int

    def __post_init__(self) -> None:
        _check_total(self.total)
        if not math.isfinite(self.profile.arrival_time(float(self.total - 1))):
            msg = f"profile {shown(self.profile.spec)} never delivers {self.total} tuples"
            raise AdabatchError(msg)

    def input_time(self, n: int) -> float:
        if n <= 1:
            return self.start
        return self.start + self.profile.arrival_time(float(min(n, self.total) - 1))

    def arrived(self, t: float) -> int:
        if t < self.start:
            return 0
        return min(self.total, floor_count(self.profile.cumulative(t - self.start)) + 1)

    @property
    def last_arrival(self) -> float:
        return self.input_time(self.total)


@dataclass(frozen=True)
class TraceArrival:
    """A measured arrival trace: ``counts[i]`` tuples arrive at ``times[i]`` (e.g. one
    landed file per row)."""

    times: tuple[float, ...]
    counts: tuple[int, ...]
    _cumulative: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        times = tuple(float(t) for t in self.times)
        counts = tuple(self.counts)
        object.__setattr__(self, "times", times)
        object.__setattr__(self, "counts", counts)
        if not times or len(times) != len(counts):
            msg = "arrival trace needs equally many times and counts, at least one row"
            raise AdabatchError(msg)
        for i, (t, c) in enumerate(zip(times, counts, strict=True)):
            if not math.isfinite(t) or (i > 0 and t <= times[i - 1]):
                msg = f"arrival trace row {i}: time {t!r} must be finite and increase strictly"
                raise AdabatchError(msg)
            check_number(TRACE_COUNT, c, f"arrival trace row {i}: count", text=False)
        cumulative: list[int] = []
        running = 0
        for c in counts:
            running += c
            cumulative.append(running)
        object.__setattr__(self, "_cumulative", tuple(cumulative))
        _check_total(running)

    @property
    def total(self) -> int:
        return self._cumulative[-1]

    def input_time(self, n: int) -> float:
        if n <= 1:
            return self.times[0]
        index = bisect.bisect_left(self._cumulative, min(n, self.total))
        return self.times[index]

    def arrived(self, t: float) -> int:
        index = bisect.bisect_right(self.times, t)
        return 0 if index == 0 else self._cumulative[index - 1]

    @property
    def last_arrival(self) -> float:
        return self.times[-1]


def trace_from_rows(rows: Sequence[Sequence[float]], where: str) -> TraceArrival:
    """A :class:`TraceArrival` from ``[[time, count], ...]`` rows, errors naming ``where``."""
    times: list[float] = []
    counts: list[int] = []
    for i, row in enumerate(rows):
        if not isinstance(row, list | tuple) or len(row) != 2:
            msg = f"{where} row {i} = {shown(row)}: allowed [time_s, count]"
            raise AdabatchError(msg)
        t, c = row
        if isinstance(c, float) and c.is_integer():
            c = int(c)
        if isinstance(t, bool) or not isinstance(t, int | float):
            msg = f"{where} row {i}: time {shown(t)} is not a number"
            raise AdabatchError(msg)
        times.append(float(t))
        counts.append(c)  # type: ignore[arg-type]
    try:
        return TraceArrival(tuple(times), tuple(counts))
    except AdabatchError as exc:
        msg = f"{where}: {exc}"
        raise AdabatchError(msg) from None
