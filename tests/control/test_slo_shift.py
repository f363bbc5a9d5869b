"""A cost that changes and stays changed is learnt by the ``slo`` fit, and the errors of
the batches that ran into it stop setting the margins; a single slow batch stays in them."""

from __future__ import annotations

import json

import pytest

from adabatch.control.base import BatchReport
from adabatch.control.slo import SloController
from adabatch.control.slo_model import Window

# Window at 150,000 records/s on Spark, target 5 s: (interval, records, processing) of
# the batches before a background CPU load and of those it slowed (window-cpu-slo-5s).
BEFORE = [(3.7, 555_000, 0.73), (4.0, 600_000, 0.84), (3.95, 592_499, 0.96),
          (3.85, 577_501, 0.58), (3.85, 577_500, 0.76), (3.95, 592_500, 0.85),
          (3.95, 592_500, 0.77), (3.95, 592_500, 0.75), (3.95, 592_500, 0.83)]  # fmt: skip
LOADED = [(3.95, 592_500, 3.25), (3.25, 310_808, 2.35), (2.35, 310_808, 2.30),
          (2.60, 608_694, 2.52), (2.75, 412_500, 1.90), (2.75, 412_500, 2.41),
          (2.75, 412_500, 2.32)]  # fmt: skip


STEADY = [0.4 + 0.02 * (i % 5) for i in range(30)]


def run(
    ctrl: SloController, processing: list[float], added: list[int] | None = None
) -> list[float]:
    """Batches of 10,000 records/s taking ``processing`` seconds, cut as Spark's batching
    model cuts them: at the end of the planned interval, or when the batch before ends if
    later, the plan asked again after each report; the cut times, and in ``added`` the
    latency errors each report added."""
    plan, start, free, cuts = ctrl.plan(0.0), 0.0, 0.0, []
    for i, p in enumerate(processing):
        cut = max(start + plan.interval_s, free)
        before = ctrl._errors.added
        ctrl.plan(cut)  # the next window opens at the cut
        n = round(10_000 * (cut - start))
        ctrl.observe(BatchReport(i, cut - start, 2, n, p, 0.0, cut, cut, cut + p))
        plan, start, free = ctrl.plan(cut), cut, cut + p
        cuts.append(cut)
        if added is not None:
            added.append(ctrl._errors.added - before)
    return cuts


def feed(ctrl: SloController, batches: list[tuple[float, int, float]]) -> None:
    """Report ``batches`` one after another, each cut when the one before finished."""
    cut = ctrl.state().get("finished") or 0.0
    for x, n, p in batches:
        cut += x
        ctrl.observe(BatchReport(ctrl._observed, x, 2, n, p, 0.0, cut, cut, cut + p))
        ctrl.plan(cut + p)
        cut += p


def test_a_lasting_rise_of_cost_leaves_the_margin_once_the_fit_learnt_it() -> None:
    ctrl = SloController(target=5)
    feed(ctrl, BEFORE)
    feed(ctrl, LOADED[:1])
    assert ctrl.margins().q > 3.5  # the first slow batch counts at once
    feed(ctrl, LOADED[1:])
    assert ctrl.state()["shifts"]["revised"] >= 1
    assert max(ctrl._ratios.values) < 2.5  # 3.25 s against the 1.66 s the fit learnt
    assert ctrl.margins().q < 2.5


@pytest.mark.parametrize("slow", [3.0, 5.0])
def test_a_single_slow_batch_stays_in_the_margin(slow: float) -> None:
    """One batch 7-11 times the others: the controller shortens the next intervals, so no
    later batch is of its size and the fit stays high there; the batches after it take
    less than predicted, so no rise of cost is read into it."""
    ctrl = SloController(target=2)
    cuts = run(ctrl, STEADY + [slow] + [0.45] * 8)
    assert ctrl.state()["shifts"]["revised"] == 0
    assert max(ctrl._ratios.values) > 3.0
    assert cuts[-1] > cuts[len(STEADY)] + 5.0  # eight batches since


def test_a_cost_that_fell_changes_no_error() -> None:
    """After the load the fit predicts less than it did for the slow batches: their
    ratios against it would be larger, and the smaller one they had is kept."""
    ctrl = SloController(target=5)
    feed(ctrl, BEFORE + LOADED)
    loaded = list(ctrl._ratios.values)
    feed(ctrl, [(3.3, 495_000, p) for p in (0.72, 0.68, 0.59, 0.57, 0.54)])
    assert list(ctrl._ratios.values)[: len(loaded)] == loaded


def test_state_round_trips_with_batches_waiting_to_be_looked_at_again() -> None:
    ctrl = SloController(target=5)
    feed(ctrl, BEFORE + LOADED[:2])
    assert ctrl.state()["shifts"]["waiting"]
    twin = SloController(target=5)
    twin.restore(json.loads(json.dumps(ctrl.state())))
    assert twin.state() == ctrl.state()
    feed(ctrl, LOADED[2:])
    feed(twin, LOADED[2:])
    assert twin.state() == ctrl.state()
    assert twin.margins() == ctrl.margins()


@pytest.mark.parametrize("size", [3, 5])
def test_a_window_value_is_revised_in_place_while_it_is_kept(size: int) -> None:
    w = Window(size)
    for v in (5.0, 1.0, 3.0, 4.0):
        w.add(v)
    numbers = {v: i for i, v in enumerate((5.0, 1.0, 3.0, 4.0))}
    w.revise(numbers[3.0], 0.5)
    assert w.value(numbers[3.0]) == 0.5
    assert 0.5 in w.values and 3.0 not in w.values
    assert w.quantile(0) == 0.5 and w.quantile(100) == max(w.values)
    w.revise(numbers[5.0], 9.0)  # gone from a window of 3; kept in one of 5
    assert (9.0 in w.values) == (size == 5)
    assert w.value(numbers[5.0]) == (9.0 if size == 5 else None)


def test_a_window_cut_at_once_behind_a_slow_batch_adds_no_latency_error() -> None:
    """After a 2 s batch the next plan is shorter, and its window, open since that batch
    was cut, is cut at once when it ends: its latency is the slow batch's miss (in that
    batch's ratio and error), not an error of a plan of the rule, so it adds nothing
    behind ``δ``."""
    ctrl = SloController(target=2)
    added: list[int] = []
    cuts = run(ctrl, STEADY + [2.0] + [0.45] * 3, added)
    slow = len(STEADY)
    assert cuts[slow + 1] == pytest.approx(cuts[slow] + 2.0)  # cut when the slow one ended
    assert added[slow] == 1 and added[slow + 1] == 0 and added[slow + 2] == 1
