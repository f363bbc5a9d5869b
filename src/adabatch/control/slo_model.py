"""The online model of the ``slo`` controller: processing time from records and blocks,
learnt from the batches observed, and the spread of its errors.

:class:`ProcessingFit` fits ``p(n, k) = a + b·n + c·n² + d·k`` (``n`` records, ``k``
blocks, every coefficient >= 0) by weighted non-negative least squares over a memory of
binned observations; :class:`Window` keeps the last ratios of observed to predicted processing
time (and the controller's other windows), whose quantiles give the margin at a
percentile; :class:`Margins`, :class:`Decision` and :func:`interval_grid` are the values
the decision rule works with. The rule itself is in :mod:`adabatch.control.slo`, where the
choices are explained.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import nnls

from adabatch.control.fixed_point import IntervalBounds

# Most candidate intervals one decision evaluates (a finer grid is sampled geometrically).
MAX_GRID = 4000
# A catch-up batch is the smallest whose records/s come within this share of the best of
# any batch predicted to take at most CATCH_UP_MAX_S, and at most CATCH_UP_GROWTH times
# the largest batch measured (the fit is not trusted further out than that), or as many
# as the largest batch's records/s would read in CATCH_UP_MAX_S if that is more.
CATCH_UP_SHARE = 0.95
CATCH_UP_MAX_S = 10.0
CATCH_UP_GROWTH = 4.0
# Catch-up batches grow past the largest measured only while each step grows the batch
# (GREW) and its records/s (RISE): once they settle, a fit that turns linear over a few
# neighbouring bins of superlinear work would otherwise call a 4x batch cheap.
GREW, RISE = 1.5, 1.25
_EPS = 1e-9
# Most bins the memory keeps; beyond it the least recently updated bin is forgotten.
MAX_BINS = 256
# Bins needed (distinct record counts at some blocks) before the least-squares fit is used.
MIN_BINS = 2
# Samples after which a bin's mean becomes an exponential moving average (weight ALPHA).
ALPHA = 0.3
# A bin's weight in the fit grows with its samples up to this many.
FULL_COUNT = 5
# The n² term is used only with this many bins and when it leaves at most this fraction
# of the linear fit's weighted squared error: noise on a linear cost must not read as
# curvature, which would cap the interval (see the Type-II rule in slo.py).
MIN_CURVED_BINS = 4
CURVED_GAIN = 0.7


class ProcessingFit:
    """``p(n, k) = a + b·n + c·n² + d·k`` with ``a, b, c, d >= 0``, learnt online.

    Every observed batch ``(n, k, p)`` updates one bin of the memory: the bins split the
    record counts in steps of ``bin_ratio`` (bin ``round(log(1 + n) / log(1 + bin_ratio))``)
    per number of blocks, and each holds the mean ``n`` and ``p`` of its samples (a plain
    mean over the first samples, then an exponential moving average with weight
    ``ALPHA``, so a bin follows a change of cost within a few batches). The fit weighs a
    bin by ``max(forget ** age, floor) · min(samples, FULL_COUNT) / FULL_COUNT``, ``age``
    being the batches observed since the bin was last updated: recent behaviour dominates
    (windowed least squares with forgetting), and what was learnt at record counts not
    seen for a while stays in the fit at weight ``floor``, so a rate seen before is
    predicted from its own measurements when it returns.

    Non-negative coefficients keep ``p`` non-decreasing in ``n``: more records never take
    less time, and the fit can be inverted (:meth:`records_within`). ``c`` lets the model
    follow superlinear work (a join's pairs grow with ``n²``); it is fitted only from
    ``MIN_CURVED_BINS`` bins on and kept only where it removes at least ``1 -
    CURVED_GAIN`` of the linear fit's weighted squared error, else ``c = 0``. Until
    ``MIN_BINS`` bins of one block count exist the model is the latest batch scaled in
    proportion above its record count and held below it, ``p(n) = p0 · max(1, n / n0)``:
    pessimistic at both sides, it cannot make a short interval look cheap nor a long one
    look free.
    """

    def __init__(self, forget: float, floor: float, bin_ratio: float) -> None:
        self.forget = forget
        self.floor = floor
        self._log_ratio = math.log1p(bin_ratio)
        self.bins: dict[tuple[int, int], list[float]] = {}  # (k, bin) -> [n, p, count, seen]
        self.observed = 0
        self.last: tuple[float, int, float] | None = None  # latest (n, k, p)
        self.previous: tuple[float, int, float] | None = None  # the one before it
        self._coef: dict[int, np.ndarray | None] = {}  # blocks -> (a, b, c, d) or None

    # ----------------------------------------------------------------- learning

    def add(self, records: float, blocks: int, processing_s: float) -> None:
        """One finished batch of ``records`` in ``blocks`` blocks processed in
        ``processing_s`` seconds."""
        self.observed += 1
        key = (blocks, round(math.log1p(max(records, 0.0)) / self._log_ratio))
        entry = self.bins.get(key)
        if entry is None:
            if len(self.bins) >= MAX_BINS:
                del self.bins[min(self.bins, key=lambda b: (self.bins[b][3], b))]
            self.bins[key] = [float(records), float(processing_s), 1.0, float(self.observed)]
        else:
            count = entry[2] + 1.0
            w = max(1.0 / count, ALPHA)
            entry[0] += w * (records - entry[0])
            entry[1] += w * (processing_s - entry[1])
            entry[2] = count
            entry[3] = float(self.observed)
        self.previous, self.last = self.last, (float(records), blocks, float(processing_s))
        self._coef.clear()

    def fitted(self, blocks: int) -> bool:
        """Whether predictions for ``blocks`` come from the least-squares fit (enough
        distinct record counts), not from the proportional start."""
        return self._coefficients(blocks) is not None

    def coefficients(self, blocks: int) -> tuple[float, float, float, float] | None:
        """``(a, b, c, d)`` of the fit, or ``None`` while the proportional start holds."""
        coef = self._coefficients(blocks)
        return None if coef is None else tuple(float(v) for v in coef)  # type: ignore[return-value]

    def _coefficients(self, blocks: int) -> np.ndarray | None:
        if blocks in self._coef:
            return self._coef[blocks]
        coef = self._solve(blocks)
        self._coef[blocks] = coef
        return coef

    def _solve(self, blocks: int) -> np.ndarray | None:
        """Weighted non-negative least squares over the bins (see the class docstring)."""
        if sum(1 for k, _ in self.bins if k == blocks) < MIN_BINS:
            return None
        rows = np.array(list(self.bins.values()))
        ks = np.array([k for k, _ in self.bins], dtype=float)
        n, p, count, seen = rows.T
        age = self.observed - seen
        w = np.maximum(self.forget**age, self.floor) * np.minimum(count, FULL_COUNT) / FULL_COUNT
        scale = max(float(n.max()), 1.0)
        u = n / scale
        root = np.sqrt(w)
        design = np.column_stack([np.ones_like(u), u, ks, u * u]) * root[:, None]
        beta, resid = nnls(design[:, :3], p * root)
        beta = np.append(beta, 0.0)
        if len(self.bins) >= MIN_CURVED_BINS:
            curved, resid_curved = nnls(design, p * root)
            if resid_curved * resid_curved <= CURVED_GAIN * resid * resid:
                beta = curved
        return np.array([beta[0], beta[1] / scale, beta[3] / (scale * scale), beta[2]])

    # ----------------------------------------------------------------- reading

    def predict(self, records: np.ndarray | float, blocks: int) -> np.ndarray:
        """Predicted mean processing time of batches of ``records`` in ``blocks`` blocks."""
        n = np.maximum(np.asarray(records, dtype=float), 0.0)
        coef = self._coefficients(blocks)
        if coef is not None:
            a, b, c, d = coef
            return a + d * blocks + n * (b + c * n)
        if self.last is None:
            return np.zeros_like(n)
        n0, _, p0 = self.last
        return p0 * np.maximum(1.0, n / max(n0, 1.0))

    def predict_one(self, records: float, blocks: int) -> float:
        """:meth:`predict` for one record count, without numpy's overhead."""
        n = max(float(records), 0.0)
        coef = self._coefficients(blocks)
        if coef is not None:
            a, b, c, d = (float(v) for v in coef)
            return a + d * blocks + n * (b + c * n)
        if self.last is None:
            return 0.0
        n0, _, p0 = self.last
        return p0 * max(1.0, n / max(n0, 1.0))

    def records_within(self, budget: np.ndarray, blocks: int) -> np.ndarray:
        """The most records (not rounded) whose predicted processing time stays within
        ``budget`` seconds; 0 where even an empty batch is predicted over it."""
        budget = np.asarray(budget, dtype=float)
        coef = self._coefficients(blocks)
        if coef is None:
            if self.last is None:
                return np.full_like(budget, np.inf)
            n0, _, p0 = self.last
            if p0 <= 0:
                return np.full_like(budget, np.inf)
            return np.where(budget >= p0, max(n0, 1.0) * budget / p0, 0.0)
        a, b, c, d = coef
        room = budget - (a + d * blocks)
        with np.errstate(divide="ignore", invalid="ignore"):
            if c > 0:
                n = (-b + np.sqrt(b * b + 4.0 * c * np.maximum(room, 0.0))) / (2.0 * c)
            elif b > 0:
                n = room / b
            else:
                n = np.full_like(room, np.inf)
        return np.where(room >= 0, n, 0.0)

    def knows_fixed_cost(self, records: float, blocks: int) -> bool:
        """Whether a batch of ``records`` in ``blocks`` blocks holds at least
        ``1 / CATCH_UP_GROWTH`` of the fewest records measured: below, the fit has no
        evidence of the fixed cost per batch (fitted through the origin, it predicts a
        small batch nearly free), so a miss there is the fit's to learn, not noise."""
        lo = self.fewest_known(blocks)
        return lo > 0 and records >= lo

    def fewest_known(self, blocks: int) -> float:
        """The fewest records of a batch whose fixed cost the fit has evidence of:
        ``1 / CATCH_UP_GROWTH`` of the fewest measured (0 before any)."""
        return self.smallest(blocks) / CATCH_UP_GROWTH

    def largest(self, blocks: int) -> float:
        """The most records of a batch in ``blocks`` blocks the memory holds (0: none)."""
        return self.largest_bin(blocks)[0]

    def smallest(self, blocks: int) -> float:
        """The fewest records of a non-empty batch in ``blocks`` blocks the memory holds (0:
        none); an empty batch (a lull) says nothing of the sizes the fit has seen."""
        sizes = (e[0] for (k, _), e in self.bins.items() if k == blocks and e[0] > 0)
        return min(sizes, default=0.0)

    def largest_bin(self, blocks: int) -> tuple[float, float]:
        """Records and processing seconds of the largest batches in ``blocks`` blocks the
        memory holds (``(0, 0)``: none)."""
        rows = [(e[0], e[1]) for (k, _), e in self.bins.items() if k == blocks]
        return max(rows, default=(0.0, 0.0))

    def still_rising(self, blocks: int) -> bool:
        """Whether the latest batch (in ``blocks`` blocks) was at least ``GREW`` times the
        one before and read ``RISE`` times its records/s: a bigger batch still reads
        faster, so the fit may be followed past what was measured. ``True`` before two
        batches (no evidence either way)."""
        last, before = self.last, self.previous
        if last is None or before is None:
            return True
        (n1, k1, p1), (n0, k0, p0) = last, before
        if k1 != blocks or k0 != blocks or min(p0, p1) <= 0 or n0 <= 0:
            return True
        return n1 >= GREW * n0 and n1 / p1 > RISE * (n0 / p0)

    # ----------------------------------------------------------------- state

    def to_json(self) -> dict[str, Any]:
        """The memory as JSON: ``bins`` rows ``[k, bin, n, p, count, seen]``."""
        return {
            "observed": self.observed,
            "last": None if self.last is None else list(self.last),
            "previous": None if self.previous is None else list(self.previous),
            "bins": [[k, b, *entry] for (k, b), entry in self.bins.items()],
        }

    def load(self, data: Mapping[str, Any]) -> None:
        """Restore what :meth:`to_json` wrote."""
        self.observed = int(data.get("observed", 0))
        last = data.get("last")
        self.last = None if last is None else (float(last[0]), int(last[1]), float(last[2]))
        before = data.get("previous")
        self.previous = (
            None if before is None else (float(before[0]), int(before[1]), float(before[2]))
        )
        self.bins = {}
        for row in data.get("bins", []):
            k, b, n, p, count, seen = row
            self.bins[(int(k), int(b))] = [float(n), float(p), float(count), float(seen)]
        self._coef.clear()


class Window:
    """The last ``size`` values, in arrival order and sorted: quantiles in O(1), an update
    in O(size) moves of a C list (faster than sorting for every quantile)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.values: deque[float] = deque()
        self._sorted: list[float] = []

    def add(self, value: float) -> None:
        """Append ``value``, dropping the oldest beyond ``size``."""
        if len(self.values) >= self.size:
            del self._sorted[bisect.bisect_left(self._sorted, self.values.popleft())]
        self.values.append(value)
        bisect.insort(self._sorted, value)

    def quantile(self, percentile: float) -> float | None:
        """The value at ``percentile`` (0-100), interpolated linearly between order
        statistics as ``numpy.percentile`` does by default; ``None`` while empty."""
        ordered = self._sorted
        if not ordered:
            return None
        pos = (len(ordered) - 1) * percentile / 100.0
        lo = math.floor(pos)
        hi = min(lo + 1, len(ordered) - 1)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)

    def mean(self) -> float | None:
        """The mean of the values, ``None`` while empty."""
        return math.fsum(self.values) / len(self.values) if self.values else None

    def load(self, values: Iterable[float]) -> None:
        """Replace the values (oldest first; only the last ``size`` are kept)."""
        self.values.clear()
        self._sorted = []
        for v in values:
            self.add(float(v))

    def __len__(self) -> int:
        return len(self.values)


def ratio(observed: float, predicted: float) -> float | None:
    """``observed / predicted`` rounded to 4 decimals (compact state, exact round trip),
    ``None`` where the prediction is no positive finite number."""
    if predicted > 0 and math.isfinite(predicted):
        return round(observed / predicted, 4)
    return None


@dataclass(frozen=True)
class Margins:
    """What the decision adds to the model: ``m_q``, ``m_u`` and ``δ`` (module
    docstring)."""

    q: float
    u: float
    delta: float


@dataclass(frozen=True)
class Decision:
    """One outcome of the decision rule (module docstring); ``model_latency_s`` is
    ``L̂ = x + m_q·p̂`` without ``δ``, kept with ``margin`` (its ``m_q``) until the batch
    is reported."""

    mode: str  # start, target, floor, overload, catch-up
    interval_s: float
    max_records: int | None = None
    predicted_latency_s: float | None = None
    achievable_latency_s: float | None = None
    processing_s: float | None = None  # predicted p at the percentile at the plan
    capacity_rps: float | None = None  # overload: the most records/s a stable batch takes
    model_latency_s: float | None = None
    margin: float | None = None


def catch_up_records(
    fit: ProcessingFit, blocks: int, mean_margin: float, cap: int, at_least: float = 0.0
) -> int:
    """Records of one catch-up batch: the smallest ``n`` whose throughput
    ``n / (m_u·p̂(n))`` comes within ``CATCH_UP_SHARE`` of the best among the batches
    predicted to take at most ``CATCH_UP_MAX_S``, and at most ``cap``. Past it a larger
    batch buys little speed and costs memory and latency. Before the fit, the largest
    allowed. The fit is trusted up to ``CATCH_UP_GROWTH`` times the largest batch measured,
    or, if more, to what that batch's records/s read in ``CATCH_UP_MAX_S``: where a batch
    is mostly fixed cost (a fast machine, a small one) the batches grow faster than four
    times per step, and still no batch is predicted past ``CATCH_UP_MAX_S`` at the
    records/s measured. Not past the largest measured at all once a step stopped growing
    the batch and its records/s (:meth:`ProcessingFit.still_rising`). Never fewer than
    ``at_least`` (within ``cap``): the caller's records that must go in one batch for the
    backlog to shrink, past what the fit trusts."""
    floor = min(math.ceil(at_least), cap)
    return max(floor, _catch_up_records(fit, blocks, mean_margin, cap))


def _catch_up_records(fit: ProcessingFit, blocks: int, mean_margin: float, cap: int) -> int:
    top = float(fit.records_within(np.array([CATCH_UP_MAX_S / mean_margin]), blocks)[0])
    n_max, p_max = fit.largest_bin(blocks)
    trusted = max(n_max, 1.0)
    if fit.still_rising(blocks):
        trusted *= CATCH_UP_GROWTH
        if p_max > 0:
            trusted = max(trusted, n_max * CATCH_UP_MAX_S / (mean_margin * p_max))
    top = min(top, trusted, float(cap))
    if not top > 1.0:
        return 1
    if not fit.fitted(blocks):  # the proportional start is flat: measure further out
        return math.floor(top)
    # nor below a quarter of it: a fit that sees no fixed cost per batch (flat
    # records/s) must not shrink the batches to nothing
    ns = np.geomspace(min(top, max(1.0, fit.largest(blocks) / CATCH_UP_GROWTH)), top, 256)
    thr = ns / np.maximum(fit.predict(ns, blocks), _EPS)
    return max(1, math.floor(ns[int(np.flatnonzero(thr >= CATCH_UP_SHARE * thr.max())[0])]))


def interval_grid(bounds: IntervalBounds) -> np.ndarray:
    """The candidate intervals: every multiple of the granularity in the bounds, or at
    most ``MAX_GRID`` of them spread geometrically when there are more."""
    g = bounds.granularity
    first = max(1, math.ceil(bounds.low / g - _EPS))
    last = max(first, math.floor(bounds.high / g + _EPS))
    if last - first + 1 <= MAX_GRID:
        steps = np.arange(first, last + 1, dtype=float)
    else:
        steps = np.unique(np.round(np.geomspace(first, last, MAX_GRID)))
    return np.round(steps * g, 9)
