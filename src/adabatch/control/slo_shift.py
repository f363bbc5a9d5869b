"""A lasting rise of cost is the fit's to learn, not noise for the ``slo`` margins.

The margins of :mod:`adabatch.control.slo` are quantiles of one-step-ahead errors: the
ratio ``p / p̂`` and the latency error behind ``δ``. When the cost of a batch rises and
stays up (CPU taken by other work, more keys), the first batch after the change misses by
far, and the fit follows within a few batches: its bins move toward the new cost. That
first miss is then explained by the fit, yet as an error it would set the margins for the
whole window (``window`` batches; with few ratios a high quantile is nearly their
maximum), on top of a fit that learnt the change already.

So the errors of a batch are looked at again ``SHIFT_AGE`` reports later. The cost rose
with it and stayed up when

- the batch took at least ``SHIFT`` times what the least-squares fit predicted for it;
- the fit now predicts its records at least ``SHIFT`` times what it did;
- and every batch since took at least what was predicted for it: the fit, risen, still
  falls short. (After a single slow batch the fit is too high for a while, and the
  batches after it take less than predicted.)

Then the errors before it are of another cost and are forgotten (the margins start again
from this batch, with the early margin until ``MIN_RATIOS`` ratios are in), and its own
become what the risen fit explains: the ratio ``min(r, p / p̂_now)``, the latency error
``e - (p̂_now - p̂_then)``. A cost that falls is left to the window: after a single slow
batch the fit falls back as well, and the slow batch must stay in the margins as the noise
it is.

(On Spark, window at 150,000 records/s, target 5 s, a background CPU load from 40 s to
80 s: one batch took 3.25 s against 0.80 s predicted, the next three 1.5-1.6 times their
predictions; the fit then predicted 1.47-2.1 s, yet the ratio 4.06 and its latency error
of 2.2 s kept the margin at 3.1-3.8 and ``δ`` at 0.7-1.9 s until the run ended, 40 s after
the load did: the controller called the target out of reach and ran 1-1.7 s intervals
under a 5 s target. Its reports replayed through this rule, each observed and the plan
asked at its cut: the first two slow batches are revised, the margin is 1.6 from the
fourth report after the onset, ``δ`` 0, and the intervals after the load 2.2-2.85 s. Not
3.9 s as before the load: the fit still holds the costs measured under it at other
sizes.)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import astuple, dataclass
from typing import Any

from adabatch.control.slo_model import ProcessingFit, Window

# Reports after a batch when its errors are looked at again.
SHIFT_AGE = 3
# The factor by which the batch missed and the fit rose since, for a rise of cost.
SHIFT = 1.5


@dataclass(frozen=True)
class Evidence:
    """What one predicted batch added to the margins, to look at again later."""

    observed: int  # the report count when it was added
    records: float
    blocks: int
    processing_s: float
    predicted_s: float  # p̂ of the least-squares fit before the batch was learnt
    ratio_number: int  # its number in the ratio window
    error_number: int  # the error window's count before its error (its number if it has one)
    error_s: float | None  # its latency error, if its plan was the rule's


class CostShifts:
    """The batches whose errors are due to be looked at again (module docstring)."""

    def __init__(self) -> None:
        self.waiting: deque[Evidence] = deque()
        self.revised = 0  # batches whose errors were revised

    def add(self, evidence: Evidence) -> None:
        """Remember what a batch added to the margins."""
        self.waiting.append(evidence)

    def revise(self, observed: int, fit: ProcessingFit, ratios: Window, errors: Window) -> None:
        """Look again at the batches ``SHIFT_AGE`` reports old at report count
        ``observed``; where the cost rose with one, start the margins from it."""
        while self.waiting and self.waiting[0].observed <= observed - SHIFT_AGE:
            e = self.waiting.popleft()
            now = fit.predict_one(e.records, e.blocks)
            if not self._rose(e, now):
                continue
            self.revised += 1
            ratios.drop_before(e.ratio_number)
            errors.drop_before(e.error_number)
            r, before = round(e.processing_s / now, 4), ratios.value(e.ratio_number)
            if before is not None and r < before:
                ratios.revise(e.ratio_number, r)
            if e.error_s is not None:
                errors.revise(e.error_number, round(e.error_s - (now - e.predicted_s), 4))

    def _rose(self, e: Evidence, now: float) -> bool:
        """Whether the cost rose with batch ``e`` and stayed up (module docstring)."""
        if not e.predicted_s > 0:
            return False
        if min(e.processing_s, now) < SHIFT * e.predicted_s:
            return False
        since = [w for w in self.waiting if w.observed <= e.observed + SHIFT_AGE]
        return bool(since) and all(w.processing_s >= w.predicted_s for w in since)

    def to_json(self) -> dict[str, Any]:
        """The waiting batches as rows, and the count revised."""
        return {"waiting": [list(astuple(e)) for e in self.waiting], "revised": self.revised}

    def load(self, data: Mapping[str, Any]) -> None:
        """Restore what :meth:`to_json` wrote."""
        rows: Iterable[list[Any]] = data.get("waiting", [])
        self.waiting = deque(_evidence(row) for row in rows)
        self.revised = int(data.get("revised", 0))


def _evidence(row: list[Any]) -> Evidence:
    obs, n, k, p, pred, rn, en, err = row
    return Evidence(
        int(obs),
        float(n),
        int(k),
        float(p),
        float(pred),
        int(rn),
        int(en),
        None if err is None else float(err),
    )
