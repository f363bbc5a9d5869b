"""DyBBS's rate bins and what one rate bin learns from the others (history reuse).

:class:`RateHistory` is mixed into :class:`~adabatch.control.isotonic.IsotonicController`,
which documents the choices (relative rate bins, seeds, where a new bin's block-interval
search starts) and owns the state these methods read.
"""

from __future__ import annotations

import math

from adabatch.control.isotonic_blocks import BlockSearch
from adabatch.control.isotonic_model import Grid, Key, Stats
from adabatch.control.isotonic_start import stable_points
from adabatch.params import Params


class RateHistory:
    """Rate discretisation and history reuse across rate bins (a mixin: the controller
    sets the attributes below)."""

    params: Params
    _c: float
    _log_ratio: float
    _start_bl: float
    _grid: Grid
    _stats: Stats
    _search: BlockSearch
    _dr_to_bl: dict[int, float]  # Algorithm 1's DR_to_BL
    _settled: dict[int, float]  # rate bin -> latest converged batch interval
    _escaped: dict[int, float]  # rate bin -> x at which it left a trapped block interval

    def _reference(self, rate_bin: int) -> float | None:
        """A rate's best known batch interval: the latest converged one (line 6), else the
        smallest interval measured stable at its current block interval, else None."""
        settled = self._settled.get(rate_bin)
        if settled is not None:
            return settled
        bl = self._dr_to_bl.get(rate_bin)
        table = self._stats.table((rate_bin, bl)) if bl is not None else {}
        return min(stable_points(table, self._c), default=None)

    def _neighbour(self, rate_bin: int) -> tuple[int, float] | None:
        """The nearest other rate bin with a reference interval (ties: the higher rate),
        and that interval."""
        if not self.params.reuse:
            return None
        best: tuple[int, float] | None = None
        for b in self._dr_to_bl:
            if b == rate_bin or (
                best is not None and (abs(b - rate_bin), -b) >= (abs(best[0] - rate_bin), -best[0])
            ):
                continue
            ref = self._reference(b)
            if ref is not None:
                best = (b, ref)
        return best

    def _first_block_interval(self, rate_bin: int) -> float:
        """A new rate bin's block interval: with ``reuse``, that of the nearest rate bin that
        converged (its best local optimum's, else its current one), else the current one
        of the nearest rate bin seen (ties: the higher rate); else the minimal block
        interval ``block_interval``."""
        if not (self.params.reuse and self.params.block_sizing):
            return self._start_bl
        for bins in (self._settled, self._dr_to_bl):
            near = min(
                (b for b in bins if b != rate_bin),
                key=lambda b: (abs(b - rate_bin), -b),
                default=None,
            )
            if near is not None:
                best = self._search.best_block_interval(near)
                return best if best is not None else self._dr_to_bl.get(near, self._start_bl)
        return self._start_bl

    def _seed(self, key: Key) -> float:
        """Where slow start begins for ``key``: the rate's own converged batch interval
        (found with another block interval), else the interval closest to stable at the
        block interval it left with nothing stable in reach, else the nearest known rate's
        reference interval, scaled up by the rate ratio for a higher rate, else
        ``initial_interval``."""
        rate_bin, bl = key
        own = self._settled.get(rate_bin, self._escaped.get(rate_bin))
        if own is not None:
            return self._grid.carry(own, bl)
        near = self._neighbour(rate_bin)
        if near is None:
            return self.params.initial_interval
        rate, near_rate = self.bin_rate(rate_bin), self.bin_rate(near[0])
        scale = max(1.0, rate / near_rate) if near_rate > 0 else 1.0
        return self._grid.carry(min(near[1] * scale, self.params.max_interval), bl)

    def rate_bin(self, rate_rps: float) -> int:
        """The discretised rate: ``round(rate / rate_step)``, or with relative bins
        ``round(log(1 + rate) / log(1 + rate_ratio))``."""
        step = self.params.rate_step
        if step is not None:
            return round(rate_rps / step)
        return round(math.log1p(max(rate_rps, 0.0)) / self._log_ratio)

    def bin_rate(self, rate_bin: int) -> float:
        """The rate at the centre of ``rate_bin``, records/s."""
        step = self.params.rate_step
        if step is not None:
            return rate_bin * step
        return math.expm1(rate_bin * self._log_ratio)
