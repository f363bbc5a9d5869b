"""DyBBS's model of processing time: the Stats table, the grid of batch intervals and IsoR.

Q. Zhang et al., "Adaptive Block and Batch Sizing for Batched Stream Processing System",
ICAC 2016, §III-B and §III-D. :class:`~adabatch.control.isotonic.IsotonicController`
holds one :class:`Stats`; its choices of how the model is fit and read are documented
there.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from itertools import pairwise
from typing import Any

from scipy.optimize import isotonic_regression

# (rate bin, block interval): the scope of one isotonic fit and one local optimum.
Key = tuple[int, float]
# One Stats entry: [sliding average of p, samples, sequence number of its latest sample]
Entry = list[float]

EPS = 1e-9
# Floor of a Stats point's weight in the isotonic fit (weights decay with age).
MIN_WEIGHT = 1e-12


def quantise(value: float) -> float:
    """Intervals as Stats keys: rounded so that k * step from any path agrees."""
    return round(value, 6)


class Stats:
    """The paper's Stats: per (rate bin, block interval), per batch interval, the
    processing time as a weighted sliding average (new sample weight ``alpha``)."""

    def __init__(self, alpha: float) -> None:
        self._alpha = alpha
        self._tables: dict[Key, dict[float, Entry]] = {}
        self._seq: dict[Key, int] = {}  # latest sequence number per key

    def table(self, key: Key) -> dict[float, Entry]:
        """Batch interval -> entry for ``key`` (empty if nothing was measured)."""
        return self._tables.get(key, {})

    def entries(self) -> int:
        """Number of (key, batch interval) entries."""
        return sum(len(t) for t in self._tables.values())

    def add(self, key: Key, x: float, processing_s: float) -> None:
        """One batch of interval ``x`` processed in ``processing_s`` under ``key``."""
        seq = self._seq[key] = self._seq.get(key, 0) + 1
        table = self._tables.setdefault(key, {})
        entry = table.get(x)
        if entry is None:
            table[x] = [processing_s, 1, seq]
        else:
            entry[0] = (1.0 - self._alpha) * entry[0] + self._alpha * processing_s
            entry[1] += 1
            entry[2] = seq

    def fit(self, key: Key) -> tuple[list[float], list[float]]:
        """IsoR's points for ``key``: the sorted batch intervals and the isotonic fit of
        their processing times, each weighted by ``(1 - alpha) ** age``."""
        table = self.table(key)
        xs = sorted(table)
        fit = [table[x][0] for x in xs]
        if any(a > b for a, b in pairwise(fit)):  # monotone data is its own fit
            latest = self._seq[key]
            decay = 1.0 - self._alpha
            weights = [max(decay ** (latest - table[x][2]), MIN_WEIGHT) for x in xs]
            fit = isotonic_regression(fit, weights=weights).x.tolist()
        return xs, fit

    def to_json(self) -> dict[str, list[Any]]:
        """``"rate_bin|block_interval|x" -> [p, samples, seq]``."""
        return {
            f"{rb}|{bl!r}|{x!r}": [p, n, seq]
            for (rb, bl), table in self._tables.items()
            for x, (p, n, seq) in table.items()
        }

    def load(self, data: Mapping[str, Any]) -> None:
        """Add the entries :meth:`to_json` wrote (raises ``TypeError``/``ValueError`` on
        malformed data)."""
        for text, (p, n, seq) in data.items():
            rb, bl, x = text.split("|")
            key = (int(rb), float(bl))
            self._tables.setdefault(key, {})[float(x)] = [float(p), int(n), int(seq)]
            self._seq[key] = max(self._seq.get(key, 0), int(seq))


class Grid:
    """Candidate batch intervals ``k * step`` within ``[min_interval, max_interval]``;
    ``step`` is ``granularity``, or with it unset the block interval (the paper's grid)."""

    def __init__(self, min_interval: float, max_interval: float, granularity: float | None):
        self._min, self._max = min_interval, max_interval
        self._granularity = None if granularity is None else quantise(granularity)
        self._k_ranges: dict[float, tuple[int, int]] = {}

    def step(self, block_interval: float) -> float:
        """The grid step of batch intervals planned with ``block_interval``."""
        return block_interval if self._granularity is None else self._granularity

    def k_range(self, step: float) -> tuple[int, int]:
        """Candidates on grid ``step``: k * step, k in [k_min, k_max].

        When no multiple lies in [min_interval, max_interval] the largest one at or below
        max_interval (at least one step) is the only candidate.
        """
        found = self._k_ranges.get(step)
        if found is None:
            k_max = max(1, math.floor(self._max / step + EPS))
            k_min = min(max(1, math.ceil(self._min / step - EPS)), k_max)
            found = self._k_ranges[step] = (k_min, k_max)
        return found

    def candidate(self, step: float, k: int) -> float:
        """The batch interval ``k * step`` with k limited to the candidate range."""
        k_min, k_max = self.k_range(step)
        return quantise(min(max(k, k_min), k_max) * step)

    def k_at_least(self, step: float, x: float) -> int:
        """The k of the smallest grid interval at or above ``x``, within the range."""
        k_min, k_max = self.k_range(step)
        return min(max(math.ceil(x / step - EPS), k_min), k_max)

    def carry(self, x: float, block_interval: float) -> float:
        """Batch interval ``x`` on ``block_interval``'s grid, rounded up."""
        step = self.step(block_interval)
        return self.candidate(step, self.k_at_least(step, x))


class InFlight:
    """Plans not yet reported, so that a report finds the Stats key it was planned for:
    (interval, blocks, block interval, rate bin planned for), oldest first."""

    # More than this only when the engine drops or merges batches; then the oldest go.
    KEPT = 256

    def __init__(self) -> None:
        self._plans: deque[tuple[float, int, float, int | None]] = deque()

    def add(self, x: float, blocks: int, block_interval: float, rate_bin: int | None) -> None:
        """A plan handed out."""
        self._plans.append((x, blocks, block_interval, rate_bin))
        if len(self._plans) > self.KEPT:
            self._plans.popleft()

    def pending(self, rate_bin: int, block_interval: float) -> set[float]:
        """The batch intervals planned for ``(rate_bin, block_interval)`` and unreported."""
        return {e[0] for e in self._plans if e[3] == rate_bin and e[2] == block_interval}

    def take(self, x: float, blocks: int) -> tuple[float, int | None] | None:
        """The block interval and planned-for rate bin of the oldest plan of ``x`` and
        ``blocks``, forgetting it and every older plan (reports arrive in plan order; older
        unmatched plans were dropped or merged by the engine); ``None`` when no plan
        matches."""
        for i, entry in enumerate(self._plans):
            if entry[0] == x and entry[1] == blocks:
                for _ in range(i + 1):
                    self._plans.popleft()
                return entry[2], entry[3]
        return None

    def to_json(self) -> list[list[Any]]:
        return [list(entry) for entry in self._plans]

    def load(self, data: list[Any]) -> None:
        """Add the plans :meth:`to_json` wrote (raises ``TypeError``/``ValueError``)."""
        for x, blocks, bl, rb in data:
            planned_for = None if rb is None else int(rb)
            self._plans.append((float(x), int(blocks), float(bl), planned_for))


def blocks_for(interval_s: float, block_interval: float, max_blocks: int) -> int:
    """Blocks of a batch: ``round(x / block interval)`` in [1, max_blocks]."""
    k = math.floor(interval_s / block_interval + 0.5 + EPS)
    return min(max(1, k), max_blocks)


def first_stable(
    step: float, xs: list[float], fit: list[float], c: float, k_range: tuple[int, int]
) -> int:
    """The smallest k in ``k_range`` with ``IsoR(k * step) + c < k * step``.

    ``IsoR`` is ``fit`` at the sorted intervals ``xs``, linear in between and constant
    outside (§III-B); it is linear on each piece, so the inequality is solved once per
    piece instead of tested at every candidate. Returns the range's largest k when no
    candidate satisfies it.
    """
    k_min, k_max = k_range
    n = len(xs)
    k = k_min
    for j in range(-1, n):  # piece j spans [xs[j], xs[j + 1]]; -1 and n - 1 are open
        if j == -1:
            slope, at_zero, k_end = 0.0, fit[0], math.floor(xs[0] / step + EPS)
        elif j == n - 1:
            slope, at_zero, k_end = 0.0, fit[-1], k_max
        else:
            slope = (fit[j + 1] - fit[j]) / (xs[j + 1] - xs[j])
            at_zero = fit[j] - slope * xs[j]
            k_end = math.floor(xs[j + 1] / step + EPS)
        k_end = min(k_end, k_max)
        if k > k_end:
            continue
        if slope < 1.0:  # at_zero + slope * x + c < x  <=>  x > threshold
            threshold = (at_zero + c) / (1.0 - slope)
            k = max(k, math.floor(threshold / step)) if threshold < k_end * step else k_end + 1
            while k <= k_end:
                x = quantise(k * step)
                if at_zero + slope * x + c < x:
                    return k
                k += 1
        else:  # steeper than the stability line: only the piece's first x can pass
            x = quantise(k * step)
            if at_zero + slope * x + c < x:
                return k
        k = k_end + 1
    return k_max
