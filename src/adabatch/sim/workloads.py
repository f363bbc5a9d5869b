"""Cost models: processing time of one batch as a function of its records, interval and blocks.

One frozen dataclass per workload of the fixed-point paper (§5.1, Fig. 13): ``filter``
(linear, cheap), ``reduce`` (linear plus a per-key database commit whose floor grows with
the number of distinct keys), ``join`` (superlinear: two intersections with ``p = rho x``,
Fig. 6b) and ``window`` (processing that *rises* at small intervals because the window is
combined from ``window_s / x`` partial aggregates, Fig. 13d). All share one shape::

    p = (overhead_s + per_block_s * k + serial(n, x)) * f0  +  parallel
    block_i = work(n, x) / k * f_i
    parallel = max(max_i block_i,  sum_i block_i / c * tail(k))
    tail(k) = (1 + s * min(1, cores / k)) / (1 + s)

with ``n`` records, ``k`` blocks, ``c = cores * availability(t)``, ``s = straggler`` and
mean-one lognormal noise factors ``f`` (``sigma``). Without noise the parallel part is
``work / min(k, c) * tail(k)``.

``work`` is CPU time as measured with at most one block per core, where the slowest block
sets the end of the stage: of that parallel time a fraction ``s / (1 + s)`` is the tail in
which the other cores idle (skewed blocks, GC pauses, a core shared with the driver). With
more blocks than cores, cores take the next block as they free up and the tail is that of
a ``cores / k`` times smaller block, so ``tail(k) < 1``. Per-block overhead grows with
``k`` while the tail shrinks as ``1 / k``: the best number of blocks is about
``sqrt(s work / ((1 + s) per_block_s))``. It grows with the records of the batch, and the
best block interval ``x / k`` grows with the batch interval and falls with the rate
(DyBBS §II-C, Fig. 3; Spark's tuning guide recommends 2-3 tasks per core for the same
reason). With ``k <= cores`` (``tail = 1``), the fixed-point controllers' default of one
block per core included, processing times do not depend on ``s``.

The defaults resemble local[2] PySpark 4.3 on this machine (ARCHITECTURE.md, "Measured"):
an overhead-bound groupBy costs ~0.35-0.45 s per micro-batch up to ~10k rows, and the
Reduce and Join models charge each block what ``adabatch bench calibrate`` measured for it
on Spark (:data:`LOCAL2_FITS`, the one place those fits are written down): a model whose
blocks cost less flatters block-hungry controllers. Every parameter can be overridden
(``--model k=v``) or loaded from a calibration JSON file::

    {"workload": "reduce", "params": {"overhead_s": 0.31, "per_record_s": 3.2e-06}}
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from adabatch.errors import AdabatchError
from adabatch.inputs import read_json_file
from adabatch.params import Param, parse_values
from adabatch.profiles import parse_duration

# The fits of ``adabatch bench calibrate`` on local[2] (docs/results.md, "Calibrating the
# simulator on real Spark": Reduce over 1,000 keys, Join over one key), with the facts the
# runs set (cores, keys). Reduce's and Join's default ``per_block_s`` are these; the whole
# set is :func:`local2_workload`. A new calibration on this machine updates them here.
LOCAL2_FITS: dict[str, dict[str, Any]] = {
    "reduce": {
        "overhead_s": 0.08752,
        "per_block_s": 0.04444,
        "per_record_s": 1.055e-06,
        "straggler": 0.0,
        "sigma": 0.097,
        "cores": 2.0,
        "keys": 1000,
        "per_key_commit": False,
    },
    "join": {
        "overhead_s": 0.1892,
        "per_block_s": 0.07269,
        "per_record_s": 0.0,
        "per_pair_s": 4.575e-09,
        "straggler": 0.0,
        "sigma": 0.129,
        "cores": 2.0,
        "join_keys": 1,
    },
}


def _p(default: Any, help_text: str, *, low: float | None = 0.0, low_open: bool = False) -> Any:
    """A model parameter: a dataclass field whose metadata says how to validate it."""
    return field(default=default, metadata={"help": help_text, "low": low, "low_open": low_open})


def expected_distinct_keys(records: float, keys: int) -> float:
    """Expected distinct keys among ``records`` uniform draws from ``keys``:
    ``k (1 - (1 - 1/k)^n)``."""
    if records <= 0:
        return 0.0
    if keys == 1:
        return 1.0
    return -keys * math.expm1(records * math.log1p(-1.0 / keys))


@dataclass(frozen=True)
class Cost:
    """Processing time of one batch and each block's own busy time (seconds)."""

    processing_s: float
    block_s: tuple[float, ...]


@dataclass(frozen=True)
class Resources:
    """Fraction of the cores available over stream time: ``(start_s, end_s, factor)``
    windows; where windows overlap the smallest factor holds, elsewhere 1."""

    windows: tuple[tuple[float, float, float], ...] = ()
    spec: str = ""

    def factor(self, t: float) -> float:
        """Availability in (0, 1] at time ``t``."""
        out = 1.0
        for start, end, f in self.windows:
            if start <= t < end:
                out = min(out, f)
        return out


def parse_resources(text: str | None) -> Resources:
    """``"0.5@60s-120s,0.25@300s-"``: FACTOR@START-END windows (END optional = for ever).

    Examples
    --------
    >>> parse_resources("0.5@60s-120s").factor(90.0)
    0.5
    """
    if text is None or not str(text).strip():
        return Resources()
    grammar = "FACTOR@START-END[,...] with FACTOR in (0, 1], e.g. 0.5@60s-120s"
    windows = []
    for item in str(text).split(","):
        factor_text, at, span = item.strip().partition("@")
        start_text, dash, end_text = span.partition("-")
        if not at or not start_text.strip():
            msg = f"resources {item.strip()!r} is malformed: expected {grammar}"
            raise AdabatchError(msg)
        try:
            factor = float(factor_text)
        except ValueError:
            msg = f"resources {item.strip()!r}: factor {factor_text!r} is not a number"
            raise AdabatchError(msg) from None
        if not 0.0 < factor <= 1.0:
            msg = f"resources {item.strip()!r}: factor {factor_text!r} must be in (0, 1]"
            raise AdabatchError(msg)
        start = parse_duration(start_text.strip())
        end = parse_duration(end_text.strip()) if dash and end_text.strip() else math.inf
        if end <= start:
            msg = f"resources {item.strip()!r}: end must be after start"
            raise AdabatchError(msg)
        windows.append((start, end, factor))
    return Resources(tuple(windows), str(text).strip())


@dataclass(frozen=True)
class CostModel:
    """Shared part of every workload; subclasses add ``serial_s`` and ``work_s`` terms."""

    name: ClassVar[str] = "model"
    summary: ClassVar[str] = ""

    overhead_s: float = _p(0.30, "fixed cost per batch (job scheduling, driver round trips)")
    per_block_s: float = _p(0.02, "cost per block (task launch and result collection)")
    per_record_s: float = _p(4e-6, "CPU seconds per record, divided over the cores")
    cores: float = _p(2.0, "cores processing blocks in parallel (local[2])", low_open=True)
    sigma: float = _p(0.1, "lognormal noise sigma (mean-one factors; 0 = none)")
    straggler: float = _p(
        0.5, "tail of the slowest block at one block per core, as a fraction of the rest"
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            _param(f, self.name).parse(getattr(self, f.name), owner=f"workload {self.name!r}")

    # -- workload-specific terms ------------------------------------------------------
    def serial_s(self, records: float, interval_s: float) -> float:
        """Seconds not divided over the cores (e.g. a database commit)."""
        return 0.0

    def work_s(self, records: float, interval_s: float) -> float:
        """CPU seconds divided over the blocks."""
        return self.per_record_s * records

    # -- the model --------------------------------------------------------------------
    def cost(
        self,
        records: int,
        interval_s: float,
        blocks: int,
        t: float = 0.0,
        rng: np.random.Generator | None = None,
        resources: Resources | None = None,
    ) -> Cost:
        """Processing time of a batch of ``records`` over ``interval_s`` in ``blocks`` blocks,
        started at stream time ``t``; noisy if ``rng`` is given and ``sigma > 0``."""
        cores = self._cores(t, resources)
        fixed = self.overhead_s + self.per_block_s * blocks + self.serial_s(records, interval_s)
        share = self.work_s(records, interval_s) / blocks
        if rng is not None and self.sigma > 0:
            # mean-one lognormal factors: one for the batch, one per block
            sigma, bias = self.sigma, 0.5 * self.sigma * self.sigma
            z = rng.standard_normal(blocks + 1).tolist()
            fixed *= math.exp(sigma * z[0] - bias)
            block_s = tuple(share * math.exp(sigma * x - bias) for x in z[1:])
        else:
            block_s = (share,) * blocks
        parallel = max(max(block_s), sum(block_s) / cores * self.tail(blocks))
        return Cost(fixed + parallel, block_s)

    def expected_processing(
        self,
        records: float,
        interval_s: float,
        blocks: int,
        t: float = 0.0,
        resources: Resources | None = None,
    ) -> float:
        """Processing time without noise."""
        cores = self._cores(t, resources)
        fixed = self.overhead_s + self.per_block_s * blocks + self.serial_s(records, interval_s)
        return fixed + self.work_s(records, interval_s) / min(blocks, cores) * self.tail(blocks)

    def tail(self, blocks: int) -> float:
        """The parallel time's factor for the stragglers' tail: 1 for ``blocks <= cores``,
        falling towards ``1 / (1 + straggler)`` as blocks outnumber the cores."""
        s = self.straggler
        return (1.0 + s * min(1.0, self.cores / blocks)) / (1.0 + s)

    def best_blocks(
        self, rate_rps: float, interval_s: float, max_blocks: int = 256
    ) -> tuple[int, float]:
        """The blocks in ``[1, max_blocks]`` with the least noise-free processing time at a
        constant rate, and that time (DyBBS Fig. 3: the optimum moves with x and rate)."""
        best = min(
            range(1, max_blocks + 1),
            key=lambda k: (self.processing_at_rate(rate_rps, interval_s, k), k),
        )
        return best, self.processing_at_rate(rate_rps, interval_s, best)

    def _cores(self, t: float, resources: Resources | None) -> float:
        return self.cores * (resources.factor(t) if resources is not None else 1.0)

    def processing_at_rate(self, rate_rps: float, interval_s: float, blocks: int) -> float:
        """Noise-free ``p(x)`` at a constant rate: the curves of fixed-point Fig. 13."""
        return self.expected_processing(rate_rps * interval_s, interval_s, blocks)

    # -- parameters -------------------------------------------------------------------
    @classmethod
    def parameters(cls) -> list[Param]:
        """The model's parameters with defaults, help and allowed ranges."""
        return [_param(f, cls.name) for f in dataclasses.fields(cls)]

    def values(self) -> dict[str, Any]:
        """Current parameter values."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def with_overrides(self, overrides: Mapping[str, Any]) -> CostModel:
        """A copy with ``overrides`` (strings or numbers) validated and applied."""
        owner = f"workload {self.name!r}"
        checked = parse_values(self.parameters(), overrides, owner=owner, noun="model parameter")
        return dataclasses.replace(self, **{name: checked[name] for name in overrides})

    @classmethod
    def from_calibration(cls, path: str | Path) -> CostModel:
        """The model with parameters from a calibration JSON file (format in the module
        docstring); a ``workload`` entry, if present, must name this workload."""
        path = Path(path)
        data = read_json_file(path, "calibration file", "write one with `adabatch bench calibrate`")
        if not isinstance(data, dict) or not isinstance(data.get("params"), dict):
            msg = f"calibration file {str(path)!r} needs an object with a 'params' object"
            raise AdabatchError(msg)
        if data.get("workload", cls.name) != cls.name:
            msg = (
                f"calibration file {str(path)!r} is for workload {data['workload']!r}, "
                f"not {cls.name!r}"
            )
            raise AdabatchError(msg)
        return cls().with_overrides(data["params"])


def _param(f: dataclasses.Field, owner: str) -> Param:
    meta = f.metadata
    kind = type(f.default)
    if kind is bool:
        return Param(f.name, f.default, meta["help"], kind=bool)
    return Param(
        f.name, f.default, meta["help"], kind=kind, low=meta["low"], low_open=meta["low_open"]
    )


@dataclass(frozen=True)
class FilterModel(CostModel):
    """Filter (fixed-point §5.1): split, match, count; linear and cheap."""

    name: ClassVar[str] = "filter"
    summary: ClassVar[str] = "linear and cheap: the smallest stable interval (Fig. 13a)"

    overhead_s: float = _p(0.25, "fixed cost per batch (job scheduling, driver round trips)")
    per_record_s: float = _p(1.5e-6, "CPU seconds per record, divided over the cores")


@dataclass(frozen=True)
class ReduceModel(CostModel):
    """Reduce (fixed-point §5.1): aggregate by key, commit each key to a database.

    The commit costs ``commit_s`` per batch plus, with ``per_key_commit``,
    ``commit_per_key_s`` per distinct key, ``k (1 - (1 - 1/k)^n)`` for ``keys`` keys: a
    floor on the processing time that grows with the keys (Fig. 13b, Fig. 19)."""

    name: ClassVar[str] = "reduce"
    summary: ClassVar[str] = "linear plus a per-key commit floor (Fig. 13b)"

    per_block_s: float = _p(
        LOCAL2_FITS["reduce"]["per_block_s"], "cost per block (measured on local[2] Spark)"
    )
    keys: int = _p(1000, "distinct keys in the stream", low=1)
    per_key_commit: bool = _p(True, "commit each distinct key of a batch separately")
    commit_per_key_s: float = _p(2e-5, "commit seconds per distinct key (serial)")
    commit_s: float = _p(0.005, "commit seconds per batch (serial)")

    def distinct_keys(self, records: float) -> float:
        return expected_distinct_keys(records, self.keys)

    def serial_s(self, records: float, interval_s: float) -> float:
        per_key = self.commit_per_key_s * self.distinct_keys(records) if self.per_key_commit else 0
        return self.commit_s + per_key


@dataclass(frozen=True)
class JoinModel(CostModel):
    """Join (fixed-point §5.1, §2.2.2): two streams of n/2 records each, joined on
    ``join_keys`` keys, give ``(n/2)^2 / join_keys`` pairs: superlinear in the interval.

    With the defaults at 5000 records/s and two blocks, ``p = 0.7 x`` is crossed near
    0.7 s (Type I) and 8 s (Type II); above ~9100 records/s no interval is stable."""

    name: ClassVar[str] = "join"
    summary: ClassVar[str] = "superlinear: Type-I and Type-II intersections (Fig. 13c)"

    overhead_s: float = _p(0.30, "fixed cost per batch (job scheduling, driver round trips)")
    per_block_s: float = _p(
        LOCAL2_FITS["join"]["per_block_s"], "cost per block (measured on local[2] Spark)"
    )
    join_keys: int = _p(100, "distinct join keys", low=1)
    per_pair_s: float = _p(2.5e-6, "CPU seconds per joined output pair")

    def work_s(self, records: float, interval_s: float) -> float:
        half = records / 2.0
        return self.per_record_s * records + self.per_pair_s * half * half / self.join_keys


@dataclass(frozen=True)
class WindowModel(CostModel):
    """Window (fixed-point §5.1, §4): Reduce over a sliding ``window_s`` window combined
    from ``ceil(window_s / x)`` per-batch partial aggregates, each costing a task and a
    merge of its keys; the processing time rises at small intervals (Fig. 13d)."""

    name: ClassVar[str] = "window"
    summary: ClassVar[str] = "rises at small intervals: window/x partials (Fig. 13d)"

    window_s: float = _p(20.0, "window length in seconds", low_open=True)
    keys: int = _p(1000, "distinct keys in the stream", low=1)
    per_partial_s: float = _p(0.02, "CPU seconds per partial aggregate (one task each)")
    merge_per_key_s: float = _p(1e-6, "CPU seconds per key per partial aggregate merged")

    def partials(self, interval_s: float) -> int:
        return max(1, math.ceil(self.window_s / interval_s - 1e-9))

    def work_s(self, records: float, interval_s: float) -> float:
        keys = expected_distinct_keys(records, self.keys)
        per_partial = self.per_partial_s + self.merge_per_key_s * keys
        return self.per_record_s * records + self.partials(interval_s) * per_partial


WORKLOADS: dict[str, type[CostModel]] = {
    m.name: m for m in (FilterModel, ReduceModel, JoinModel, WindowModel)
}


def make_workload(
    name: str,
    overrides: Mapping[str, Any] | None = None,
    calibration: str | Path | None = None,
) -> CostModel:
    """The cost model ``name``, from a calibration file if given, then ``overrides``."""
    try:
        cls = WORKLOADS[name]
    except KeyError:
        msg = f"unknown workload {name!r}: allowed {', '.join(WORKLOADS)}"
        raise AdabatchError(msg) from None
    model = cls.from_calibration(calibration) if calibration is not None else cls()
    return model.with_overrides(overrides or {})


def stability_crossings(
    model: CostModel,
    rate_rps: float,
    rho: float,
    blocks: int,
    *,
    low_s: float = 0.01,
    high_s: float = 120.0,
    points: int = 4000,
) -> list[float]:
    """Intervals where the noise-free ``p(x)`` crosses ``rho * x`` in ``[low_s, high_s]``
    (fixed-point Fig. 6/8: the first is Type I, the next Type II), found on a log grid and
    refined by bisection."""
    xs = np.geomspace(low_s, high_s, points)

    def g(x: float) -> float:
        return model.processing_at_rate(rate_rps, x, blocks) - rho * x

    values = [g(float(x)) for x in xs]
    out = []
    for i in range(points - 1):
        if (values[i] > 0) != (values[i + 1] > 0):
            lo, hi = float(xs[i]), float(xs[i + 1])
            for _ in range(60):
                mid = 0.5 * (lo + hi)
                if (g(mid) > 0) == (values[i] > 0):
                    lo = mid
                else:
                    hi = mid
            out.append(0.5 * (lo + hi))
    return out
