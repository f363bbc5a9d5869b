"""A trial, not a bench: ``slo``'s ``m_q`` from its ratios re-read against the current fit.

Each ratio in the window older than the last ``KEEP_RAW`` counts as the lesser of the
ratio measured (``p / p̂`` before the batch) and ``p / p̂`` of the fit now, so a rise in
cost the fit has learnt since stops widening the margin; the latest ones count as
measured, so an onset still counts at once. It patches the controller in this process
only and runs ``benchmarks/slo_trace_sim.py`` with the same arguments:

    REFIT=1 .venv/bin/python benchmarks/slo-trials/margin_refit_trial.py \\
        runs/slo-full/slo/window-cpu-slo-{1,2,5}s --targets 2,5

``REFIT=0`` runs the controller as committed, for the side by side. Not kept: on Spark
the re-read took the spread of a load's batches out of the margin and did worse
(``benchmarks/slo-trials/README.md``).
"""

from __future__ import annotations

import collections
import os
import runpy
import sys
from pathlib import Path
from typing import Any

from adabatch.control.slo import SloController
from adabatch.control.slo_model import Margins, Window, ratio

REFIT = os.environ.get("REFIT", "1") != "0"
KEEP_RAW = int(os.environ.get("KEEP_RAW", "3"))
TRACE_SIM = Path(__file__).resolve().parents[1] / "slo_trace_sim.py"

_observe, _margins = SloController.observe, SloController.margins


def observe(self: SloController, report: Any) -> None:
    """The committed ``observe``, with each batch that gives a ratio kept as ``(n, k, p)``
    beside it."""
    points = self.__dict__.setdefault("_points", collections.deque())
    n, k = report.records, report.blocks
    gives = self._fit.last is not None and self._fit.knows_fixed_cost(n, k)
    if gives and ratio(report.processing_s, self._fit.predict_one(n, k)) is not None:
        points.append((n, k, report.processing_s))
        while len(points) > self._ratios.size:
            points.popleft()
    _observe(self, report)


def margins(self: SloController, *, latest: bool = True, aim: bool = True) -> Margins:
    """The committed margins over the ratios re-read as the module docstring says."""
    if not REFIT or (latest, aim) in self._margins or len(self._ratios) <= KEEP_RAW:
        return _margins(self, latest=latest, aim=aim)
    measured = list(self._ratios.values)
    points = list(self.__dict__.get("_points", ()))
    assert len(points) == len(measured), (len(points), len(measured))
    reread = []
    for i, (r, (n, k, p)) in enumerate(zip(measured, points, strict=True)):
        now = None if i >= len(measured) - KEEP_RAW else ratio(p, self._fit.predict_one(n, k))
        reread.append(r if now is None else min(r, now))
    kept, self._ratios = self._ratios, Window(self._ratios.size)
    self._ratios.load(reread)
    try:
        return _margins(self, latest=latest, aim=aim)
    finally:
        self._ratios = kept


SloController.observe, SloController.margins = observe, margins  # type: ignore[method-assign]
sys.argv = [str(TRACE_SIM), *sys.argv[1:]]
runpy.run_path(str(TRACE_SIM), run_name="__main__")
