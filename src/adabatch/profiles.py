"""Rate profiles: how many records per second arrive at stream time ``t`` (seconds).

A profile is parsed from a short string (``--profile`` on the CLI, ``profile`` option of the
Spark source) and answers four questions, all exact up to float rounding:

- ``rate(t)``: records/s at time ``t``;
- ``cumulative(t)``: expected records arrived in ``[0, t]``;
- ``arrival_time(n)``: the first time at which ``cumulative`` reaches ``n`` (its inverse;
  ``math.inf`` if the stream never delivers ``n`` records);
- ``mean_rate(t0, t1)``: mean rate over ``[t0, t1]``.

Grammar (durations accept ``90``, ``90s``, ``500ms``, ``1.5m``, ``2h`` and Spark's forms such
as ``5 seconds`` or ``1 minute``, see :func:`adabatch.params.parse_duration`; rates are records/s):

``constant:R``
    R records/s for ever (R > 0).
``step:R1:R2:AT``
    R1 until AT, then R2.
``steps:R1@0,R2@60s,R3@120s``
    piecewise constant; the first change point must be at 0, times strictly increasing.
``sine:MIN:MAX:PERIOD``
    ``mean + amp * sin(2 pi t / PERIOD)``: starts at the mean (MIN+MAX)/2 and rises first.
``markov:R1,R2,...:DWELL[:SEED]``
    a Markov chain over the listed rates that starts in R1 and, every DWELL seconds (a
    fixed dwell time, not exponential), jumps to a uniformly chosen *other* state.
    Deterministic for SEED (default: the ``seed`` argument of :func:`parse_profile`).
``bursts:BASE:PEAK:EVERY:LENGTH``
    BASE records/s, with a burst of PEAK records/s lasting LENGTH at EVERY, 2*EVERY, ...
    (the stream starts calm); LENGTH < EVERY.
``trace:PATH[:step|:linear]``
    a CSV file with header ``time_s,rate_rps``; times start at 0 and increase strictly.
    ``step`` (default) holds each row's rate until the next row (piecewise constant);
    ``linear`` interpolates linearly between rows. After the last row the last rate holds.

Rates are at most ``MAX_RATE_RPS``; periods, dwell times, burst lengths and change
times lie between ``MIN_PERIOD_S`` (1 ms) and ``MAX_PROFILE_S``, so every profile's
arithmetic stays finite and a generated profile makes a bounded number of rate changes.

All profiles except ``sine`` are piecewise linear in the rate, so ``cumulative`` is a
piecewise quadratic evaluated in O(log segments) and inverted in closed form; ``sine`` has
a closed-form ``cumulative`` and a safeguarded Newton inverse within one period.
"""

from __future__ import annotations

import bisect
import csv
import itertools
import math
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

from adabatch.errors import AdabatchError, shown
from adabatch.inputs import read_text_file

# The duration grammar lives in adabatch.params, a layer below, so that a parameter can
# be a duration; importing it from here, where callers have always found it, still works.
from adabatch.params import DURATION_FORMS, parse_duration

GRAMMAR = (
    "constant:R | step:R1:R2:AT | steps:R1@0,R2@T2,... | sine:MIN:MAX:PERIOD | "
    "markov:R1,R2,...:DWELL[:SEED] | bursts:BASE:PEAK:EVERY:LENGTH | "
    "trace:PATH[:step|:linear]"
)

# Bounds that keep a profile's arithmetic finite and its generated segments few: a rate
# above MAX_RATE_RPS or a time above MAX_PROFILE_S overflows the cumulative count or
# underflows a sine's frequency; a period, dwell or burst below MIN_PERIOD_S makes a
# Markov chain or a burst train generate segments without end.
MAX_RATE_RPS = 1e10
MAX_PROFILE_S = 1e9
MIN_PERIOD_S = 1e-3
# Most rate changes a generated profile (markov, bursts) may make in one run.
MAX_SEGMENTS = 1_000_000
# Largest trace file read (a trace of a day at one row per 10 ms fits).
MAX_TRACE_BYTES = 64 * 1024 * 1024


class RateProfile(ABC):
    """Records per second over stream time ``t >= 0`` (seconds since the stream started)."""

    spec: str

    @abstractmethod
    def rate(self, t: float) -> float:
        """Records/s at time ``t``."""

    @abstractmethod
    def cumulative(self, t: float) -> float:
        """Expected records arrived in ``[0, t]``."""

    @abstractmethod
    def arrival_time(self, n: float) -> float:
        """The first ``t`` with ``cumulative(t) >= n`` (``math.inf`` if never reached)."""

    @abstractmethod
    def first_moment(self, t0: float, t1: float) -> float:
        """``integral of t * rate(t) dt over [t0, t1]`` (for mean arrival times)."""

    def mean_arrival(self, t0: float, t1: float) -> float:
        """Mean arrival time of the records arriving in ``[t0, t1]`` (records as a fluid of
        density ``rate``); the midpoint if none arrive."""
        count = self.cumulative(t1) - self.cumulative(t0)
        if count <= 0:
            return 0.5 * (t0 + t1)
        return min(max(self.first_moment(t0, t1) / count, t0), t1)

    def mean_rate(self, t0: float, t1: float) -> float:
        """Mean records/s over ``[t0, t1]`` (the rate at ``t0`` if the span is empty)."""
        if t1 < t0:
            msg = f"mean_rate needs t0 <= t1, got t0={t0!r}, t1={t1!r}"
            raise AdabatchError(msg)
        if t1 == t0:
            return self.rate(t0)
        return (self.cumulative(t1) - self.cumulative(t0)) / (t1 - t0)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"


class PiecewiseProfile(RateProfile):
    """A rate that is linear on each segment ``[t_i, t_{i+1})``; the last segment is open.

    ``extend(until_t, until_n)`` may append segments on demand (Markov chains, bursts) so
    the profile is unbounded in time without precomputing it.
    """

    def __init__(
        self, spec: str, times: list[float], rates: list[float], slopes: list[float]
    ) -> None:
        self.spec = spec
        self._t: list[float] = []
        self._r: list[float] = []
        self._s: list[float] = []
        self._c: list[float] = []
        for t, r, s in zip(times, rates, slopes, strict=True):
            self._append(t, r, s)

    def _append(self, t: float, r: float, s: float) -> None:
        if self._t:
            dt = t - self._t[-1]
            c = self._c[-1] + self._r[-1] * dt + 0.5 * self._s[-1] * dt * dt
        else:
            c = 0.0
        self._t.append(float(t))
        self._r.append(float(r))
        self._s.append(float(s))
        self._c.append(c)

    def _extend(self, until_t: float, until_n: float) -> None:
        """Append segments until the last starts after ``until_t`` and its cumulative
        exceeds ``until_n``; fixed profiles have nothing to add."""

    def _segment_for_time(self, t: float) -> int:
        self._extend(t, -math.inf)
        return max(bisect.bisect_right(self._t, t) - 1, 0)

    def rate(self, t: float) -> float:
        i = self._segment_for_time(t)
        return self._r[i] + self._s[i] * (t - self._t[i])

    def cumulative(self, t: float) -> float:
        if t <= 0:
            return 0.0
        i = self._segment_for_time(t)
        dt = t - self._t[i]
        return self._c[i] + self._r[i] * dt + 0.5 * self._s[i] * dt * dt

    def first_moment(self, t0: float, t1: float) -> float:
        t0 = max(t0, 0.0)
        if t1 <= t0:
            return 0.0
        total = 0.0
        i = self._segment_for_time(t0)
        self._extend(t1, -math.inf)
        last = len(self._t) - 1
        while True:
            ti, r, s = self._t[i], self._r[i], self._s[i]
            end = t1 if i == last else min(t1, self._t[i + 1])
            a, b = max(t0, ti) - ti, end - ti
            # (ti + tau)(r + s tau) integrated over tau in [a, b]
            total += ti * (r * (b - a) + 0.5 * s * (b * b - a * a)) + (
                0.5 * r * (b * b - a * a) + s * (b**3 - a**3) / 3.0
            )
            if end >= t1:
                return total
            i += 1

    def arrival_time(self, n: float) -> float:
        if n <= 0:
            return 0.0
        self._extend(-math.inf, n)
        # the last segment whose start cumulative is below n holds the answer
        i = bisect.bisect_left(self._c, n) - 1
        m = n - self._c[i]
        r, s = self._r[i], self._s[i]
        if s == 0.0:
            if r <= 0.0:
                return math.inf
            return self._t[i] + m / r
        # >= 0 up to rounding: segment i ends at or above n (the open last one is flat)
        disc = max(r * r + 2.0 * s * m, 0.0)
        # r*dt + s/2*dt^2 = m, in the form that is stable for s -> 0
        return self._t[i] + 2.0 * m / (r + math.sqrt(disc))


class ConstantProfile(PiecewiseProfile):
    """``constant:R``."""

    def __init__(self, spec: str, rate: float) -> None:
        super().__init__(spec, [0.0], [rate], [0.0])


class MarkovProfile(PiecewiseProfile):
    """``markov:R1,...:DWELL[:SEED]``: fixed dwell, uniform jump to another state."""

    def __init__(self, spec: str, states: list[float], dwell_s: float, seed: int) -> None:
        self.states = list(states)
        self.dwell_s = dwell_s
        self._rng = np.random.default_rng(seed)
        self._state = 0
        super().__init__(spec, [0.0], [states[0]], [0.0])

    def _extend(self, until_t: float, until_n: float) -> None:
        k = len(self.states)
        while self._t[-1] <= until_t or self._c[-1] < until_n:
            # uniformly one of the k-1 other states
            step = 1 + int(self._rng.integers(k - 1))
            self._state = (self._state + step) % k
            self._append(self._t[-1] + self.dwell_s, self.states[self._state], 0.0)


class BurstsProfile(PiecewiseProfile):
    """``bursts:BASE:PEAK:EVERY:LENGTH``: bursts at EVERY, 2*EVERY, ..."""

    def __init__(self, spec: str, base: float, peak: float, every_s: float, length_s: float):
        self.base, self.peak, self.every_s, self.length_s = base, peak, every_s, length_s
        self._k = 0  # bursts appended so far
        super().__init__(spec, [0.0], [base], [0.0])

    def _extend(self, until_t: float, until_n: float) -> None:
        while self._t[-1] <= until_t or self._c[-1] < until_n:
            self._k += 1
            start = self._k * self.every_s
            self._append(start, self.peak, 0.0)
            self._append(start + self.length_s, self.base, 0.0)


class SineProfile(RateProfile):
    """``sine:MIN:MAX:PERIOD``: ``mean + amp sin(2 pi t / P)`` with closed-form cumulative."""

    def __init__(self, spec: str, low: float, high: float, period_s: float) -> None:
        self.spec = spec
        self.mean = (low + high) / 2.0
        self.amp = (high - low) / 2.0
        self.period_s = period_s
        self._w = 2.0 * math.pi / period_s

    def rate(self, t: float) -> float:
        return self.mean + self.amp * math.sin(self._w * t)

    def cumulative(self, t: float) -> float:
        if t <= 0:
            return 0.0
        return self.mean * t + self.amp / self._w * (1.0 - math.cos(self._w * t))

    def first_moment(self, t0: float, t1: float) -> float:
        t0 = max(t0, 0.0)
        if t1 <= t0:
            return 0.0
        w, mean, amp = self._w, self.mean, self.amp

        def m(t: float) -> float:  # integral of s (mean + amp sin(w s)) ds from 0 to t
            return 0.5 * mean * t * t + amp * (math.sin(w * t) / (w * w) - t * math.cos(w * t) / w)

        return m(t1) - m(t0)

    def arrival_time(self, n: float) -> float:
        if n <= 0:
            return 0.0
        mean, w, a = self.mean, self._w, self.amp / self._w
        per_period = mean * self.period_s
        k = math.floor(n / per_period)
        m = n - k * per_period  # records still needed inside one period, in [0, per_period)
        if m <= 0.0:
            return k * self.period_s
        # safeguarded Newton on cum(u) - m over one period (cum is increasing)
        lo, hi = 0.0, self.period_s
        tol = 1e-10 * max(m, 1.0)
        u = m / mean
        for _ in range(100):
            f = mean * u + a * (1.0 - math.cos(w * u)) - m
            if f > 0:
                hi = u
            else:
                lo = u
            # stop on the left of the root only: where the rate is ~0 the count is flat, and
            # a |f| test would accept a time past the first one the count reaches m
            if -tol <= f <= 0.0 or hi - lo <= 1e-13 * self.period_s:
                break
            r = mean + self.amp * math.sin(w * u)
            nxt = u - f / r if r > 0 else -1.0
            u = nxt if lo < nxt < hi else 0.5 * (lo + hi)
        return k * self.period_s + u


def _number(text: str, what: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        msg = f"profile {shown(spec)}: {what} {shown(text)} is not a number; grammar: {GRAMMAR}"
        raise AdabatchError(msg) from None
    if not (0 <= value <= MAX_RATE_RPS):
        msg = (
            f"profile {shown(spec)}: {what} {shown(text)} is not allowed: allowed a rate "
            f"from 0 to {MAX_RATE_RPS:g} records/s"
        )
        raise AdabatchError(msg)
    return value


def _duration(
    text: str, what: str, spec: str, *, positive: bool = True, least: float = MIN_PERIOD_S
) -> float:
    """A profile time in seconds: at most ``MAX_PROFILE_S``, and at least ``least`` when
    ``positive`` (else >= 0)."""
    try:
        value = parse_duration(text)
    except AdabatchError:
        msg = (
            f"profile {shown(spec)}: {what} {shown(text)} is not a duration: allowed e.g. "
            f"{DURATION_FORMS}"
        )
        raise AdabatchError(msg) from None
    low = least if positive else 0.0
    if not (low <= value <= MAX_PROFILE_S):
        msg = (
            f"profile {shown(spec)}: {what} {shown(text)} is not allowed: allowed "
            f"{low * 1000:g} ms to {MAX_PROFILE_S:g} s"
        )
        raise AdabatchError(msg)
    return value


def _need_positive(spec: str, rates: list[float]) -> None:
    if max(rates) <= 0:
        msg = f"profile {shown(spec)}: at least one rate must be > 0"
        raise AdabatchError(msg)


def _arity(spec: str, parts: list[str], allowed: tuple[int, ...], form: str) -> None:
    if len(parts) not in allowed:
        msg = f"profile {shown(spec)} is malformed: expected {form}"
        raise AdabatchError(msg)


def check_span(profile: RateProfile, duration_s: float) -> None:
    """Refuse a generated profile (``markov``, ``bursts``) that would change its rate more
    than ``MAX_SEGMENTS`` times in ``duration_s`` of stream: each change is kept in memory."""
    period = getattr(profile, "dwell_s", None) or getattr(profile, "every_s", None)
    if period is None:
        return
    changes = duration_s / period * (1 if isinstance(profile, MarkovProfile) else 2)
    if changes > MAX_SEGMENTS:
        msg = (
            f"profile {shown(profile.spec)} changes its rate about {changes:.3g} times in "
            f"{duration_s:g} s: allowed at most {MAX_SEGMENTS:,} (a longer dwell/period or "
            "a shorter duration)"
        )
        raise AdabatchError(msg)


def parse_profile(text: str, *, seed: int = 0, base_dir: Path | None = None) -> RateProfile:
    """The :class:`RateProfile` described by ``text`` (grammar in the module docstring).

    ``seed`` seeds ``markov`` when its spec has no seed; ``base_dir`` resolves a relative
    ``trace`` path (default: the current directory).

    Examples
    --------
    >>> p = parse_profile("step:1000:3000:60s")
    >>> p.cumulative(90.0)
    150000.0
    >>> p.arrival_time(150000.0)
    90.0
    """
    spec = str(text).strip()
    kind, sep, rest = spec.partition(":")
    kind = kind.strip().lower()
    if not sep:
        msg = f"profile {shown(spec)} is malformed: grammar {GRAMMAR}"
        raise AdabatchError(msg)
    if kind == "trace":
        return _parse_trace(spec, rest, base_dir)
    parts = [p.strip() for p in rest.split(":")]
    if kind == "constant":
        _arity(spec, parts, (1,), "constant:R")
        rate = _number(parts[0], "rate R", spec)
        _need_positive(spec, [rate])
        return ConstantProfile(spec, rate)
    if kind == "step":
        _arity(spec, parts, (3,), "step:R1:R2:AT")
        r1 = _number(parts[0], "rate R1", spec)
        r2 = _number(parts[1], "rate R2", spec)
        at = _duration(parts[2], "change time AT", spec)
        _need_positive(spec, [r1, r2])
        return PiecewiseProfile(spec, [0.0, at], [r1, r2], [0.0, 0.0])
    if kind == "steps":
        _arity(spec, parts, (1,), "steps:R1@0,R2@T2,...")
        return _parse_steps(spec, parts[0])
    if kind == "sine":
        _arity(spec, parts, (3,), "sine:MIN:MAX:PERIOD")
        low = _number(parts[0], "MIN", spec)
        high = _number(parts[1], "MAX", spec)
        period = _duration(parts[2], "PERIOD", spec)
        if low > high:
            msg = f"profile {shown(spec)}: MIN {low:g} must be <= MAX {high:g}"
            raise AdabatchError(msg)
        _need_positive(spec, [high])
        return SineProfile(spec, low, high, period)
    if kind == "markov":
        _arity(spec, parts, (2, 3), "markov:R1,R2,...:DWELL[:SEED]")
        states = [_number(s.strip(), "state rate", spec) for s in parts[0].split(",")]
        if len(states) < 2:
            msg = f"profile {shown(spec)}: markov needs at least two states R1,R2,..."
            raise AdabatchError(msg)
        _need_positive(spec, states)
        dwell = _duration(parts[1], "DWELL", spec)
        chain_seed = seed
        if len(parts) == 3:
            try:
                chain_seed = int(parts[2])
            except ValueError:
                msg = f"profile {shown(spec)}: SEED {shown(parts[2])} is not an integer"
                raise AdabatchError(msg) from None
            if chain_seed < 0:
                msg = f"profile {shown(spec)}: SEED {shown(parts[2])} must be >= 0"
                raise AdabatchError(msg)
        return MarkovProfile(spec, states, dwell, chain_seed)
    if kind == "bursts":
        _arity(spec, parts, (4,), "bursts:BASE:PEAK:EVERY:LENGTH")
        base = _number(parts[0], "BASE", spec)
        peak = _number(parts[1], "PEAK", spec)
        every = _duration(parts[2], "EVERY", spec)
        length = _duration(parts[3], "LENGTH", spec)
        if length >= every:
            msg = f"profile {shown(spec)}: LENGTH {length:g} must be shorter than EVERY {every:g}"
            raise AdabatchError(msg)
        _need_positive(spec, [base, peak])
        return BurstsProfile(spec, base, peak, every, length)
    msg = f"profile {shown(spec)}: unknown shape {shown(kind)}; grammar: {GRAMMAR}"
    raise AdabatchError(msg)


def _parse_steps(spec: str, body: str) -> PiecewiseProfile:
    times: list[float] = []
    rates: list[float] = []
    for item in body.split(","):
        rate_text, at_sign, at_text = item.strip().partition("@")
        if not at_sign:
            msg = f"profile {shown(spec)}: step {shown(item.strip())} is not of the form RATE@TIME"
            raise AdabatchError(msg)
        rates.append(_number(rate_text.strip(), "rate", spec))
        times.append(_duration(at_text.strip(), "time", spec, positive=False))
    if times[0] != 0.0:
        msg = f"profile {shown(spec)}: the first step must be at 0, got {times[0]:g}s"
        raise AdabatchError(msg)
    for a, b in itertools.pairwise(times):
        if b <= a:
            msg = f"profile {shown(spec)}: step times must increase strictly ({a:g}s then {b:g}s)"
            raise AdabatchError(msg)
    _need_positive(spec, rates)
    return PiecewiseProfile(spec, times, rates, [0.0] * len(times))


def _parse_trace(spec: str, rest: str, base_dir: Path | None) -> PiecewiseProfile:
    path_text, mode = rest.strip(), "step"
    head, sep, tail = path_text.rpartition(":")
    if sep and tail.strip().lower() in ("step", "linear"):
        path_text, mode = head, tail.strip().lower()
    if not path_text:
        msg = f"profile {shown(spec)}: trace needs a file path: trace:PATH[:step|:linear]"
        raise AdabatchError(msg)
    path = Path(path_text).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    name = f"trace file {shown(str(path))}"
    text = read_text_file(path, "trace file", MAX_TRACE_BYTES)
    times: list[float] = []
    rates: list[float] = []
    reader = csv.reader(text.splitlines())
    header = [f.strip() for f in next(reader, [])]
    if "time_s" not in header or "rate_rps" not in header:
        # the first line of whatever file was named is not echoed: it may be a secret
        msg = f"{name}: the first line must be a CSV header with columns time_s,rate_rps"
        raise AdabatchError(msg)
    ti, ri = header.index("time_s"), header.index("rate_rps")
    for line_no, row in enumerate(reader, start=2):
        if not row:
            continue
        try:
            t = float(row[ti])
            r = float(row[ri])
        except (IndexError, ValueError):
            msg = f"{name} line {line_no}: time_s, rate_rps must be numbers"
            raise AdabatchError(msg) from None
        if not (0 <= t <= MAX_PROFILE_S and 0 <= r <= MAX_RATE_RPS):
            msg = (
                f"{name} line {line_no}: allowed time_s from 0 to {MAX_PROFILE_S:g} s and "
                f"rate_rps from 0 to {MAX_RATE_RPS:g} records/s"
            )
            raise AdabatchError(msg)
        if times and t < times[-1] + MIN_PERIOD_S:
            msg = (
                f"{name} line {line_no}: time_s must increase by at least "
                f"{MIN_PERIOD_S * 1000:g} ms from the row before"
            )
            raise AdabatchError(msg)
        times.append(t)
        rates.append(r)
    if not times:
        msg = f"{name} has no rows"
        raise AdabatchError(msg)
    if times[0] != 0.0:
        msg = f"{name}: the first time_s must be 0, got {times[0]:g}"
        raise AdabatchError(msg)
    _need_positive(spec, rates)
    if mode == "step":
        slopes = [0.0] * len(times)
    else:
        slopes = [
            (r2 - r1) / (t2 - t1)
            for (t1, r1), (t2, r2) in itertools.pairwise(zip(times, rates, strict=True))
        ] + [0.0]
    return PiecewiseProfile(spec, times, rates, slopes)
