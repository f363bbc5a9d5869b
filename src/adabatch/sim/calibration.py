"""Fitting the simulator's cost model to processing times measured on real Spark.

The ``calibrate`` experiment: static runs on real Spark measure ``p(x, rate, k)``
over a grid; :func:`fit` chooses the free parameters of a workload's
:class:`~adabatch.sim.workloads.CostModel` by least squares on the *relative* error of
each cell's mean processing time (a cell = the batches of one interval, blocks and rate);
:func:`write_calibration` writes the JSON that
:meth:`~adabatch.sim.workloads.CostModel.from_calibration` and ``adabatch simulate
--calibration FILE`` read; :func:`prediction_errors` scores a model on held-out cells.

What is fitted and what is known:

- known facts of the runs are set, not fitted: ``cores`` (the master's), ``keys`` and
  ``join_keys`` (the generator's key count), ``per_key_commit``;
- per-batch constants are one term: ``overhead_s`` is fitted and ``commit_s`` held at its
  default (a batch-constant commit is indistinguishable from overhead);
- the free terms are :data:`FREE_PARAMS` of the workload, plus ``straggler`` when the
  model has it and some cell has more blocks than cores (otherwise it has no effect);
- ``sigma`` (the lognormal noise) is the standard deviation of ``log(p / p_model)`` over
  the fitted batches: measured scatter, including what the model does not explain.

The fits of this machine's runs (docs/results.md) are written down once, in
:data:`adabatch.sim.workloads.LOCAL2_FITS`: Reduce's and Join's default per-block costs
are theirs, so the default simulator does not flatter controllers that add blocks. A new
calibration that moves them updates that table (tests/sim/test_workloads.py checks the two
agree within the calibration's 25 %).

Examples
--------
>>> from adabatch.sim.workloads import make_workload
>>> true = make_workload("filter", {"overhead_s": 0.5, "per_record_s": 2e-5, "sigma": 0})
>>> cells = [
...     Cell.from_batches(f"x{x}-k{k}", [(round(r * x), x, k, true.expected_processing(
...         round(r * x), x, k))] * 3)
...     for x in (0.5, 1.0, 2.0) for k in (1, 2, 4) for r in (2000, 8000)
... ]
>>> result = fit("filter", cells, known={"cores": 2.0})
>>> round(result.model.overhead_s, 3), round(result.model.per_record_s * 1e6, 2)
(0.5, 20.0)
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from adabatch.errors import AdabatchError
from adabatch.metrics import BatchRecord
from adabatch.outputs import write_atomic
from adabatch.params import check_names
from adabatch.sim.workloads import WORKLOADS, CostModel, make_workload

# The terms each workload's fit moves (the rest keep their defaults or known values).
FREE_PARAMS: dict[str, tuple[str, ...]] = {
    "filter": ("overhead_s", "per_block_s", "per_record_s"),
    "reduce": ("overhead_s", "per_block_s", "per_record_s"),
    "join": ("overhead_s", "per_block_s", "per_record_s", "per_pair_s"),
    "window": ("overhead_s", "per_block_s", "per_record_s", "per_partial_s"),
}
STRAGGLER = "straggler"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Cell:
    """The measured batches of one configuration cell (one interval, blocks and rate).

    ``records``, ``interval_s``, ``blocks`` and ``processing_s`` are per batch, equally
    long; ``labels`` say where the cell comes from (run, rate, ...).
    """

    name: str
    records: tuple[int, ...]
    interval_s: tuple[float, ...]
    blocks: tuple[int, ...]
    processing_s: tuple[float, ...]
    labels: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.records)
        if n == 0:
            msg = f"calibration cell {self.name!r} has no batches"
            raise AdabatchError(msg)
        if not (len(self.interval_s) == len(self.blocks) == len(self.processing_s) == n):
            msg = f"calibration cell {self.name!r}: per-batch columns differ in length"
            raise AdabatchError(msg)
        if any(not (p > 0 and math.isfinite(p)) for p in self.processing_s):
            msg = f"calibration cell {self.name!r}: processing times must be positive"
            raise AdabatchError(msg)

    @classmethod
    def from_batches(
        cls,
        name: str,
        batches: Iterable[tuple[int, float, int, float]],
        labels: Mapping[str, Any] | None = None,
    ) -> Cell:
        """A cell from ``(records, interval_s, blocks, processing_s)`` tuples."""
        rows = list(batches)
        return cls(
            name,
            tuple(int(r[0]) for r in rows),
            tuple(float(r[1]) for r in rows),
            tuple(int(r[2]) for r in rows),
            tuple(float(r[3]) for r in rows),
            dict(labels or {}),
        )

    @classmethod
    def from_records(
        cls, name: str, records: Sequence[BatchRecord], labels: Mapping[str, Any] | None = None
    ) -> Cell:
        """A cell from metrics records (simulated or measured on Spark)."""
        return cls.from_batches(
            name, ((r.records, r.interval_s, r.blocks, r.processing_s) for r in records), labels
        )

    @property
    def batches(self) -> int:
        return len(self.records)

    @property
    def mean_processing_s(self) -> float:
        return float(np.mean(self.processing_s))

    @property
    def mean_records(self) -> float:
        return float(np.mean(self.records))

    def predicted(self, model: CostModel) -> np.ndarray:
        """The model's noise-free processing time of every batch of the cell."""
        return np.array(
            [
                model.expected_processing(n, x, k)
                for n, x, k in zip(self.records, self.interval_s, self.blocks, strict=True)
            ]
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "labels": dict(self.labels),
            "batches": self.batches,
            "mean_records": self.mean_records,
            "mean_interval_s": float(np.mean(self.interval_s)),
            "blocks": sorted(set(self.blocks)),
            "mean_processing_s": self.mean_processing_s,
        }


@dataclass(frozen=True)
class CellError:
    """How well a model predicts one cell's mean processing time."""

    cell: Cell
    predicted_s: float

    @property
    def measured_s(self) -> float:
        return self.cell.mean_processing_s

    @property
    def relative_error(self) -> float:
        """``(predicted - measured) / measured``: positive when the model is too slow."""
        return (self.predicted_s - self.measured_s) / self.measured_s


@dataclass(frozen=True)
class Fit:
    """A fitted model, which parameters moved, and how well it fits its own cells."""

    workload: str
    model: CostModel
    free: tuple[str, ...]
    known: Mapping[str, Any]
    errors: tuple[CellError, ...]
    success: bool
    message: str

    @property
    def rms_relative_error(self) -> float:
        return float(np.sqrt(np.mean([e.relative_error**2 for e in self.errors])))

    @property
    def max_abs_relative_error(self) -> float:
        return float(max(abs(e.relative_error) for e in self.errors))

    def params(self) -> dict[str, Any]:
        """Every parameter of the fitted model (what the calibration file holds)."""
        return self.model.values()


def free_params(workload: str, cells: Sequence[Cell], cores: float) -> tuple[str, ...]:
    """:data:`FREE_PARAMS` of ``workload``, plus ``straggler`` if the model has it and a
    cell has more blocks than ``cores``."""
    if workload not in FREE_PARAMS:
        msg = f"unknown workload {workload!r}: allowed {', '.join(FREE_PARAMS)}"
        raise AdabatchError(msg)
    names = FREE_PARAMS[workload]
    fields = {f.name for f in dataclasses.fields(WORKLOADS[workload])}
    if STRAGGLER in fields and any(k > cores for c in cells for k in c.blocks):
        names = (*names, STRAGGLER)
    return names


def model_error(model: CostModel, cell: Cell) -> CellError:
    """The model's prediction of the cell's mean processing time (noise-free, on the
    cell's own batch sizes)."""
    return CellError(cell, float(np.mean(cell.predicted(model))))


def prediction_errors(model: CostModel, cells: Sequence[Cell]) -> tuple[CellError, ...]:
    """:func:`model_error` for every cell (e.g. the held-out ones)."""
    return tuple(model_error(model, c) for c in cells)


def fit(
    workload: str,
    cells: Sequence[Cell],
    *,
    known: Mapping[str, Any] | None = None,
    free: Sequence[str] | None = None,
) -> Fit:
    """Least squares on each cell's relative error of mean processing time.

    ``known`` sets parameters that are facts of the runs (``cores``, ``keys``,
    ``join_keys``, ``per_key_commit``); ``free`` overrides :func:`free_params`. Every free
    parameter is bounded below by 0 (and ``straggler`` also above, by 10) and scaled by
    its default; the fit starts from the defaults. ``sigma`` is then set from the scatter
    of ``log(p / p_model)`` over every batch.
    """
    if len(cells) == 0:
        msg = "calibration needs at least one measured cell"
        raise AdabatchError(msg)
    base = make_workload(workload, dict(known or {}))
    names = tuple(free) if free is not None else free_params(workload, cells, base.cores)
    values = base.values()
    check_names(base.parameters(), names, holder=f"workload {workload!r}", noun="model parameter")
    if len(cells) < len(names):
        msg = (
            f"calibration of {workload!r} has {len(cells)} cells for {len(names)} free "
            f"parameters ({', '.join(names)}): measure at least as many cells"
        )
        raise AdabatchError(msg)
    scale = np.array([max(float(values[n]), 1e-9) for n in names])
    measured = np.array([c.mean_processing_s for c in cells])

    def model_at(theta: np.ndarray) -> CostModel:
        return dataclasses.replace(
            base, **{n: float(v) for n, v in zip(names, theta * scale, strict=True)}
        )

    def residuals(theta: np.ndarray) -> np.ndarray:
        m = model_at(theta)
        predicted = np.array([float(np.mean(c.predicted(m))) for c in cells])
        return (predicted - measured) / measured

    upper = np.array(
        [10.0 / s if n == STRAGGLER else np.inf for n, s in zip(names, scale, strict=True)]
    )
    result = least_squares(
        residuals, np.ones(len(names)), bounds=(np.zeros(len(names)), upper), method="trf"
    )
    model = model_at(result.x)
    logs = np.concatenate(
        [np.log(np.array(c.processing_s) / np.maximum(c.predicted(model), 1e-12)) for c in cells]
    )
    model = dataclasses.replace(model, sigma=float(np.std(logs)) if logs.size > 1 else 0.0)
    return Fit(
        workload=workload,
        model=model,
        free=names,
        known=dict(known or {}),
        errors=prediction_errors(model, cells),
        success=bool(result.success),
        message=str(result.message),
    )


def calibration_dict(result: Fit, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The calibration file's content: ``workload`` and ``params`` (what
    :meth:`CostModel.from_calibration` reads) and ``fit`` (how it was obtained)."""
    return {
        "workload": result.workload,
        "params": result.params(),
        "fit": {
            "format": FORMAT_VERSION,
            "free": list(result.free),
            "known": dict(result.known),
            "cells": [
                {**e.cell.to_dict(), "predicted_s": e.predicted_s, "error": e.relative_error}
                for e in result.errors
            ],
            "rms_relative_error": result.rms_relative_error,
            "max_abs_relative_error": result.max_abs_relative_error,
            "success": result.success,
            "message": result.message,
            **dict(meta or {}),
        },
    }


def write_calibration(path: str | Path, result: Fit, meta: Mapping[str, Any] | None = None) -> Path:
    """Write the calibration JSON (see :func:`calibration_dict`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(calibration_dict(result, meta), indent=2, default=_json_default) + "\n"
    return write_atomic(path, text.encode("utf-8"))


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    msg = f"cannot write {value!r} to a calibration file"
    raise TypeError(msg)
