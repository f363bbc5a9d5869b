"""DyBBS's block-interval search (Zhang et al., ICAC 2016, §III-C, Algorithm 1 lines 7-11).

Per rate bin, the local optimum (batch interval, latency) found at each block interval,
whether the search is still stepping up, and the block interval a step up started from.
:class:`~adabatch.control.isotonic.IsotonicController` documents the choices the paper
leaves open.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from adabatch.control.isotonic_model import blocks_for, quantise
from adabatch.params import Params

# A local optimum's latency is the mean of its first convergences (line 6 true), then a
# moving average with this weight's inverse; a block-interval step is judged after this
# many convergences: one sliding average of p is ~6 % noisy at 10 % noise per batch.
LATENCY_SAMPLES = 3

# block interval -> (batch interval, mean latency x + p, convergences averaged)
Optima = dict[float, tuple[float, float, int]]


class BlockSearch:
    """The block-interval search of every rate bin; ``params`` are the controller's and
    ``max_blocks`` the most blocks a batch gets (its ``max_blocks``, or fewer cores)."""

    def __init__(self, params: Params, max_blocks: int) -> None:
        self._params = params
        self._max_blocks = max_blocks
        self._local_opt: dict[int, Optima] = {}
        self._searching: dict[int, bool] = {}
        self._probe_from: dict[int, float] = {}  # rate bin -> block interval stepped up from
        self._probe_batches: dict[int, int] = {}  # rate bin -> its batches finished

    def searching(self, rate_bin: int) -> bool:
        """Whether ``rate_bin``'s search still looks for a better block interval."""
        return self._searching.get(rate_bin, True)

    def step(self, rate_bin: int, curr_bl: float, x: float, latency: float) -> float:
        """Lines 7-11 with §III-C's bookkeeping of local optima, once the batch interval
        ``x`` converged with ``latency`` at ``curr_bl``; the next block interval."""
        optima = self._local_opt.setdefault(rate_bin, {})
        old = optima.get(curr_bl)
        n = 1 if old is None else old[2] + 1
        mean = latency if old is None else old[1] + (latency - old[1]) / min(n, LATENCY_SAMPLES)
        optima[curr_bl] = (x, mean, n)
        if n < LATENCY_SAMPLES:  # judge a block interval on a few convergences, not one
            return curr_bl
        stepped_from = self._probe_from.get(rate_bin)
        if stepped_from is not None and stepped_from in optima:
            # step iii: a step up converged; go on only if it lowered the latency
            del self._probe_from[rate_bin]
            if self._beats(optima, curr_bl, stepped_from):
                return self._step_up(rate_bin, curr_bl, x)  # line 8 again
            self._searching[rate_bin] = False
            return self._best(optima, stepped_from)
        searching = self.searching(rate_bin)
        # a settled optimum is left only on twice the evidence: its latency is averaged
        # afresh while the others' are as old as their last visit
        best = self._best(optima, curr_bl, 1 if searching else 2)
        if best == curr_bl:  # line 7
            if searching:
                return self._step_up(rate_bin, curr_bl, x)  # line 8
            return curr_bl  # the global optimum: stay
        # line 10: another local optimum beats the current one (the condition changed, or
        # the search resumes): restart from the best sub-optimal point
        self._searching[rate_bin] = True
        return best

    def revisit(self, rate_bin: int, bl: float) -> float | None:
        """The batch interval of ``bl``'s local optimum when the search moves back to it
        (its next convergences count afresh); ``None`` when ``bl`` has none."""
        optima = self._local_opt[rate_bin]
        known = optima.get(bl)
        if known is None:
            return None
        optima[bl] = (known[0], known[1], 0)
        return known[0]

    def _step_up(self, rate_bin: int, curr_bl: float, x: float) -> float:
        """Line 8: the next block interval up, skipping those that give batch interval
        ``x`` as many blocks as ``curr_bl`` (the same parallelism: nothing to learn); the
        search ends when none is left."""
        p = self._params
        blocks = blocks_for(x, curr_bl, self._max_blocks)
        step = p.block_step
        # every block interval below x / (blocks - 1/2) still gives ``blocks``: start there
        edge = x / (blocks - 0.5) if blocks > 1 else curr_bl
        n = max(1, math.floor((edge - curr_bl) / step) - 1)
        while True:
            step_up = quantise(curr_bl + n * step)
            if step_up > p.max_interval or blocks == 1:
                self._searching[rate_bin] = False
                return curr_bl
            if blocks_for(x, step_up, self._max_blocks) < blocks:
                break
            n += 1
        self._searching[rate_bin] = True
        self._probe_from[rate_bin] = curr_bl
        self._probe_batches[rate_bin] = 0
        return step_up

    def escape(
        self, rate_bin: int, curr_bl: float, x: float, trapped: Callable[[float], bool]
    ) -> float:
        """The block interval to take when ``curr_bl`` has no stable batch interval in
        reach, judged at batch interval ``x``: back to the block interval a step up started
        from, which ends the search there; else up the search's lattice (``block_step``)
        to at most half the blocks, else (``x`` has one block already) down it to at least
        twice the blocks, never below the minimal block interval. Block intervals that are
        ``trapped`` too are passed over, halving (doubling) again. ``curr_bl`` when the
        lattice offers nothing."""
        back = self.back_from_probe(rate_bin)
        if back is not None:
            return back
        for up in (True, False):
            bl = self._walk(curr_bl, x, up, trapped)
            if bl is not None:
                return bl
        return curr_bl

    def probe(self, rate_bin: int) -> tuple[float, float, int] | None:
        """The step up under way: the batch interval and processing time of the local
        optimum it started from (its first plan is that interval) and the batches planned
        with it that finished; None when no step up is under way."""
        stepped_from = self._probe_from.get(rate_bin)
        optimum = None if stepped_from is None else self._local_opt[rate_bin].get(stepped_from)
        if optimum is None:
            return None
        return optimum[0], optimum[1] - optimum[0], self._probe_batches.get(rate_bin, 0)

    def count_probe_batch(self, rate_bin: int) -> None:
        """A batch planned with ``rate_bin``'s current block interval finished: one more for
        its step up, if one is under way."""
        if rate_bin in self._probe_from:
            self._probe_batches[rate_bin] = self._probe_batches.get(rate_bin, 0) + 1

    def back_from_probe(self, rate_bin: int) -> float | None:
        """Step iii for a step up that failed without converging: the block interval it
        started from, which ends the search there; None when no step up is under way."""
        stepped_from = self._probe_from.pop(rate_bin, None)
        if stepped_from is None or stepped_from not in self._local_opt.get(rate_bin, {}):
            return None
        self._searching[rate_bin] = False
        return stepped_from

    def _walk(
        self, bl: float, x: float, up: bool, trapped: Callable[[float], bool]
    ) -> float | None:
        """From ``bl`` along the lattice ``block_interval + m * block_step``: the nearest
        block interval giving ``x`` at most half (``up``) or at least twice (down) the
        blocks of the last trapped one, and not ``trapped`` itself; None past the
        lattice's ends (the minimal block interval, max_interval, one block, max_blocks).
        """
        p, low = self._params, quantise(self._params.block_interval)
        step = p.block_step

        def blocks(m: int) -> int:
            return blocks_for(x, quantise(low + m * step), self._max_blocks)

        m = round((bl - low) / step)
        while True:
            k = blocks(m)
            target = k // 2 if up else min(2 * k, self._max_blocks)
            if target < 1 or target == k:
                return None
            if up:  # round(x / b) <= target  <=>  b > x / (target + 1/2)
                m = max(m + 1, math.ceil((x / (target + 0.5) - low) / step) - 1)
                while blocks(m) > target:
                    m += 1
            else:  # round(x / b) >= target  <=>  b <= x / (target - 1/2)
                m = min(m - 1, math.floor((x / (target - 0.5) - low) / step) + 1)
                while m >= 0 and blocks(m) < target:
                    m -= 1
            new_bl = quantise(low + m * step)
            if m < 0 or new_bl > p.max_interval:
                return None
            if not trapped(new_bl):
                return new_bl

    def has_optimum(self, rate_bin: int, bl: float) -> bool:
        """Whether ``rate_bin``'s batch interval ever converged at block interval ``bl``."""
        return bl in self._local_opt.get(rate_bin, {})

    def best_block_interval(self, rate_bin: int) -> float | None:
        """The block interval of ``rate_bin``'s best local optimum (None: it has none)."""
        optima = self._local_opt.get(rate_bin)
        if not optima:
            return None
        return min(optima, key=lambda bl: (optima[bl][1], bl))

    def _beats(self, optima: Optima, a: float, b: float, margin: int = 1) -> bool:
        """Block interval ``a``'s local optimum is better than ``b``'s by more than
        ``margin`` tolerances."""
        return optima[a][1] < optima[b][1] * (1.0 - margin * self._params.block_tolerance)

    def _best(self, optima: Optima, incumbent: float, margin: int = 1) -> float:
        """``incumbent`` unless another block interval beats it; then the lowest latency."""
        best = min(optima, key=lambda bl: (optima[bl][1], bl))
        return best if self._beats(optima, best, incumbent, margin) else incumbent

    def to_json(self) -> dict[str, Any]:
        """``local_optima``, ``searching`` and ``probe_from`` as JSON-able dicts."""
        return {
            "local_optima": {
                f"{rb}|{bl!r}": [x, lat, n]
                for rb, optima in self._local_opt.items()
                for bl, (x, lat, n) in optima.items()
            },
            "searching": {str(rb): s for rb, s in self._searching.items()},
            "probe_from": {str(rb): bl for rb, bl in self._probe_from.items()},
            "probe_batches": {str(rb): n for rb, n in self._probe_batches.items()},
        }

    def load(self, state: Mapping[str, Any]) -> None:
        """Add what :meth:`to_json` wrote (raises ``TypeError``/``ValueError`` on
        malformed data)."""
        for text, (x, lat, n) in state.get("local_optima", {}).items():
            rb, bl = text.split("|")
            optimum = (float(x), float(lat), int(n))
            self._local_opt.setdefault(int(rb), {})[float(bl)] = optimum
        self._searching = {int(rb): bool(s) for rb, s in state.get("searching", {}).items()}
        self._probe_from = {int(rb): float(bl) for rb, bl in state.get("probe_from", {}).items()}
        self._probe_batches = {int(rb): int(n) for rb, n in state.get("probe_batches", {}).items()}
