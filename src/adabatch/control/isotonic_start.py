"""DyBBS's slow start (Zhang et al., ICAC 2016, §III-D, ref. [24]) and the test for a block
interval that has no stable batch interval in reach.

:class:`~adabatch.control.isotonic.IsotonicController` documents both readings of slow
start (``double``, ``tcp``) and why a block interval is left when :func:`out_of_reach`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from adabatch.control.isotonic_model import Entry, Grid, InFlight, Key, quantise
from adabatch.params import Params


def stable_points(table: Mapping[float, Entry], c: float) -> list[float]:
    """The batch intervals of ``table`` measured stable: ``p + c < x``."""
    return [x for x, e in table.items() if e[0] + c < x]


def out_of_reach(table: Mapping[float, Entry], c: float, points: int = 3) -> bool:
    """No stable batch interval is in reach by growing the interval: at least ``points``
    intervals measured, none stable, and processing grows at least as fast as the
    interval (least-squares slope of ``p`` on ``x`` at least 1), so on a convex ``p(x)``
    no larger interval closes the gap ``p + c - x``."""
    if len(table) < points or stable_points(table, c):
        return False
    xs = list(table)
    ps = [table[x][0] for x in xs]
    mx, mp = sum(xs) / len(xs), sum(ps) / len(ps)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxp = sum((x - mx) * (p - mp) for x, p in zip(xs, ps, strict=True))
    return sxp >= sxx


class SlowStart:
    """Slow start while a (rate bin, block interval) has fewer than ``min_points``
    distinct batch intervals; ``params`` are the controller's."""

    def __init__(self, params: Params, grid: Grid, in_flight: InFlight) -> None:
        self._params, self._grid, self._in_flight = params, grid, in_flight
        self._c = params.c

    def interval(
        self,
        key: Key,
        table: Mapping[float, Entry],
        seed: Callable[[Key], float],
        fit: Callable[[Key], float],
    ) -> float | None:
        """The slow-start interval for ``key`` whose Stats are ``table``; None when the fit
        should decide on what is known.

        ``double``: the smallest interval of ``x0 * 2^j`` (up to max_interval) neither
        known nor planned and still unreported, so it doubles at every plan while reports
        lag. ``tcp``: x0 while nothing is measured (again while its report is pending);
        while nothing measured is stable, the largest interval plus twice its shortfall
        ``p + c - x``, at least x0 and at most twice the largest; then IsoR's choice
        (``fit``) on the points known; when that is measured already, one grid step below
        it if nothing below is measured (IsoR cannot see a crossing below its smallest
        point), else the next larger interval neither measured nor pending. x0 is
        ``seed(key)``.
        """
        rate_bin, bl = key
        grid = self._grid
        step = grid.step(bl)
        k_min, k_max = grid.k_range(step)
        pending = self._in_flight.pending(rate_bin, bl)
        stable = bool(stable_points(table, self._c))
        double = self._params.slow_start == "double"
        x0 = seed(key) if double or not stable else 0.0
        if double:
            k = grid.k_at_least(step, x0)
            while k <= k_max:
                x = quantise(k * step)
                if x not in table and x not in pending:
                    return x
                k *= 2
            return None if table else grid.candidate(step, k_max)
        if not table:
            return grid.carry(x0, bl)
        if not stable:
            # nothing stable: grow the largest interval by twice its shortfall p + c - x
            # (the crossing of a slope-1/2 line), at most double it, at least the seed
            largest = max(table)
            shortfall = table[largest][0] + self._c - largest
            target = max(largest + 2.0 * shortfall, x0 if x0 > largest else 0.0)
            target = max(min(target, 2.0 * largest), largest + step)
            return grid.carry(target, bl)
        choice = fit(key)
        if choice not in table and choice not in pending:
            return choice
        k = round(choice / step)
        below = quantise((k - 1) * step)
        if k > k_min and below not in pending and min(table) >= choice:
            return below  # IsoR holds its value below the points: look one step down
        k += 1
        while k <= k_max:
            x = quantise(k * step)
            if x not in table and x not in pending:
                return x
            k += 1
        return None
