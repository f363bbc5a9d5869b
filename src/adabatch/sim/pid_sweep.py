"""The PID back-pressure parameter sweep (seed spark-pid-backpressure, "Constant Throughput
Simulator").

The blog's ``TestPIDController`` loop, in Python, over our port of Spark's estimator
(:class:`adabatch.control.pid.PIDRateEstimator`): a job that processes a constant
``target_rps`` records per second, batches cut every ``interval_s``, and the batch size set
by back pressure. Each case of the cartesian product of ``kp``, ``ki``, ``kd``, initial
batch sizes and minimum rates runs ``iterations`` batches and is classified as
``converged``, ``sluggish``, ``oscillating`` or ``diverging`` (:func:`classify`; the last
two are the blog's "toxic" combinations).
"""

from __future__ import annotations

import csv
import io
import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from adabatch.control.base import MAX_GAIN, MAX_RECORDS
from adabatch.control.pid import PIDRateEstimator, to_long
from adabatch.errors import AdabatchError, shown
from adabatch.outputs import OutputDir, save_figure, write_atomic

CLASSES = ("converged", "sluggish", "oscillating", "diverging")
TOXIC = ("oscillating", "diverging")

# The blog's grid: 10 gains 0, 0.2, ..., 1.8 (it adds 2/10 ten times from 0; we use the
# exact decimals), four initial batch sizes around the 5000 implied by the target, and
# five minimum rates.
DEFAULT_GAINS = tuple(round(0.2 * i, 10) for i in range(10))
DEFAULT_INITIAL_BATCHES = (2500.0, 4500.0, 5500.0, 7500.0)
DEFAULT_MIN_RATES = (100.0, 500.0, 1000.0, 2500.0, 4500.0)
DEFAULT_TARGET_RPS = 5000.0
DEFAULT_ITERATIONS = 100
# Bounds on a sweep's size: values per grid axis, batches per case, and simulated batches
# in all (cases x iterations; the blog's grid of 20,000 cases x 100 takes about 5 s).
MAX_AXIS_VALUES = 1000
MAX_ITERATIONS = 1_000_000
MAX_STEPS = 20_000_000
MAX_CASES = 1_000_000  # grid cases; each runs at least the tail of batches


@dataclass(frozen=True)
class Thresholds:
    """How a trajectory is classified (see :func:`classify`).

    The tail is the last ``tail`` batches; its two halves are compared to tell sustained
    swings from a transient that is dying out.
    """

    tail: int = 20
    throughput_tolerance: float = 0.10  # the blog's assertion: within 10% of the target
    settled_variation: float = 0.05  # tail (max - min) / tail mean below this = settled
    swing: float = 0.10  # last-half (max - min) / target batch at least this = swinging
    sustained: float = 0.5  # last-half swing >= this * previous-half swing = not decaying
    blowup: float = 10.0  # any batch above blowup * target batch = blowing up
    collapse_throughput: float = 0.5  # throughput below this * target ...
    collapse_margin: float = 0.01  # ... with the tail within 1% of min_rate = collapsed
    stop: float = 1e6  # stop simulating a case once a batch exceeds stop * target batch


@dataclass(frozen=True)
class SweepCase:
    """One point of the grid."""

    kp: float
    ki: float
    kd: float
    initial_batch: float
    min_rate: float


@dataclass(frozen=True)
class Trajectory:
    """One simulated case, per batch (the blog's CSV columns)."""

    time_ms: tuple[int, ...]
    scheduling_delay_ms: tuple[int, ...]
    batch: tuple[float, ...]  # batch size after the batch (the next batch's size)
    throughput_rps: tuple[float, ...]  # cumulative records processed / elapsed time
    stopped_early: bool


@dataclass(frozen=True)
class CaseResult:
    """One row of ``cases.csv``."""

    kp: float
    ki: float
    kd: float
    initial_batch: float
    min_rate: float
    iterations: int
    final_batch: float
    max_batch: float
    tail_min: float
    tail_max: float
    tail_variation: float
    last_swing: float
    previous_swing: float
    throughput_rps: float
    throughput_error: float
    klass: str


@dataclass(frozen=True)
class SweepResult:
    """All cases of a sweep and the settings they ran with."""

    results: tuple[CaseResult, ...]
    target_rps: float
    interval_s: float
    iterations: int
    thresholds: Thresholds

    def counts(self) -> dict[str, int]:
        """Number of cases per class, in :data:`CLASSES` order."""
        c = Counter(r.klass for r in self.results)
        return {k: c[k] for k in CLASSES}

    def off_target(self) -> int:
        """Cases failing the blog's own assertion (final throughput within 10%)."""
        tol = self.thresholds.throughput_tolerance
        return sum(1 for r in self.results if not r.throughput_error < tol)

    def toxic(self) -> list[CaseResult]:
        """The oscillating and diverging cases."""
        return [r for r in self.results if r.klass in TOXIC]


def simulate_pid(
    case: SweepCase,
    *,
    target_rps: float = DEFAULT_TARGET_RPS,
    interval_s: float = 1.0,
    iterations: int = DEFAULT_ITERATIONS,
    stop_batch: float = math.inf,
) -> Trajectory:
    """Run the blog's constant-throughput loop for one case.

    Each batch of ``b`` records takes ``ceil(b / target_rps * 1000)`` ms; if nothing is
    queued and it fits in the interval, the next batch starts at the next interval
    boundary, otherwise at once. The estimator sees ``(time, (long) b, processing,
    scheduling delay)``; an estimate ``r`` (records/s) sets the next batch to
    ``r * interval_s`` records (the blog's interval is 1 s, so batch = rate). The
    scheduling delay grows by ``processing - interval`` per batch, floored at 0.
    Integers are the blog's ``long`` milliseconds.
    """
    interval_ms = round(interval_s * 1000)
    estimator = PIDRateEstimator(interval_ms, case.kp, case.ki, case.kd, case.min_rate)
    scheduling_ms = 0
    batch = float(case.initial_batch)
    time_ms = 0
    processed = 0.0
    times: list[int] = []
    delays: list[int] = []
    batches: list[float] = []
    throughputs: list[float] = []
    stopped = False
    for _ in range(iterations):
        processed += batch
        batch_s = batch / target_rps
        batch_ms = math.ceil(batch_s * 1000)
        fits = scheduling_ms == 0 and batch_s <= interval_ms / 1000
        pause_ms = interval_ms - batch_ms if fits else 0
        time_ms += batch_ms + pause_ms
        rate = estimator.compute(time_ms, to_long(batch), batch_ms, scheduling_ms)
        if rate is not None:
            batch = rate * interval_ms / 1000
        scheduling_ms = max(scheduling_ms + batch_ms - interval_ms, 0)
        times.append(time_ms)
        delays.append(scheduling_ms)
        batches.append(batch)
        throughputs.append(processed / time_ms * 1000)
        if not batch <= stop_batch:  # also catches NaN
            stopped = True
            break
    return Trajectory(tuple(times), tuple(delays), tuple(batches), tuple(throughputs), stopped)


def classify(
    traj: Trajectory,
    case: SweepCase,
    *,
    target_rps: float,
    interval_s: float,
    thresholds: Thresholds,
) -> CaseResult:
    """Summarise a trajectory and give it one class, checked in this order:

    ``diverging``: a batch is not finite or exceeds ``blowup`` x the target batch
    (``target_rps * interval_s``: 10x, the OOM the blog warns of), or the tail sits within
    ``collapse_margin`` of ``min_rate`` while throughput is below ``collapse_throughput``
    x target (collapsed onto the floor).
    ``oscillating``: the swing (max - min) of the last ``tail/2`` batches is at least
    ``swing`` x the target batch and at least ``sustained`` x the swing of the ``tail/2``
    before (sustained, not a dying transient).
    ``converged``: throughput within ``throughput_tolerance`` of the target (the blog's
    assertion) and the tail's relative variation (max - min) / mean below
    ``settled_variation``.
    ``sluggish``: anything else (settled away from the target, e.g. with ``kp = 0``, or
    still settling after ``iterations`` batches).
    """
    t = thresholds
    batches = traj.batch
    target_batch = target_rps * interval_s
    tail = batches[-t.tail :]
    half = max(len(tail) // 2, 1)
    last, previous = tail[-half:], tail[:-half] or tail[-half:]
    last_swing = max(last) - min(last)
    previous_swing = max(previous) - min(previous)
    tail_mean = sum(tail) / len(tail)
    tail_variation = (max(tail) - min(tail)) / tail_mean if tail_mean > 0 else math.inf
    throughput = traj.throughput_rps[-1]
    throughput_error = abs(throughput - target_rps) / target_rps
    max_batch = max(batches)
    floor_batch = case.min_rate * interval_s
    collapsed = (
        max(tail) <= floor_batch * (1 + t.collapse_margin)
        and throughput < t.collapse_throughput * target_rps
    )
    if (
        traj.stopped_early
        or not all(math.isfinite(b) for b in batches)
        or max_batch > t.blowup * target_batch
        or collapsed
    ):
        klass = "diverging"
    elif last_swing >= t.swing * target_batch and last_swing >= t.sustained * previous_swing:
        klass = "oscillating"
    elif throughput_error < t.throughput_tolerance and tail_variation < t.settled_variation:
        klass = "converged"
    else:
        klass = "sluggish"
    return CaseResult(
        kp=case.kp,
        ki=case.ki,
        kd=case.kd,
        initial_batch=case.initial_batch,
        min_rate=case.min_rate,
        iterations=len(batches),
        final_batch=batches[-1],
        max_batch=max_batch,
        tail_min=min(tail),
        tail_max=max(tail),
        tail_variation=tail_variation,
        last_swing=last_swing,
        previous_swing=previous_swing,
        throughput_rps=throughput,
        throughput_error=throughput_error,
        klass=klass,
    )


def grid(
    kp: Sequence[float] = DEFAULT_GAINS,
    ki: Sequence[float] = DEFAULT_GAINS,
    kd: Sequence[float] = DEFAULT_GAINS,
    initial_batches: Sequence[float] = DEFAULT_INITIAL_BATCHES,
    min_rates: Sequence[float] = DEFAULT_MIN_RATES,
) -> list[SweepCase]:
    """The cartesian product, validated (gains >= 0, batches and min rates > 0)."""
    for name, values, low_open, high in (
        ("kp", kp, False, MAX_GAIN),
        ("ki", ki, False, MAX_GAIN),
        ("kd", kd, False, MAX_GAIN),
        ("initial batch", initial_batches, True, MAX_RECORDS),
        ("min rate", min_rates, True, MAX_RECORDS),
    ):
        if len(values) == 0:
            msg = f"pid-sweep {name} list is empty: give at least one value"
            raise AdabatchError(msg)
        if len(values) > MAX_AXIS_VALUES:
            msg = (
                f"pid-sweep {name} list has {len(values)} values: allowed at most {MAX_AXIS_VALUES}"
            )
            raise AdabatchError(msg)
        for v in values:
            bad = not math.isfinite(v) or (v <= 0 if low_open else v < 0) or v > high
            if bad:
                allowed = f"{'> 0' if low_open else '>= 0'} and <= {high:g}"
                msg = f"pid-sweep {name} = {shown(v)} is not allowed: allowed values {allowed}"
                raise AdabatchError(msg)
    axes = (kp, ki, kd, initial_batches, min_rates)
    count = math.prod(len(a) for a in axes)
    if count > MAX_CASES:  # counted before the product is built
        msg = f"pid-sweep grid of {count:,} cases: allowed at most {MAX_CASES:,} (fewer values)"
        raise AdabatchError(msg)
    return [SweepCase(*values) for values in itertools.product(*axes)]


def check_size(cases: int, iterations: int) -> None:
    """Refuse a sweep of more than ``MAX_STEPS`` simulated batches in all."""
    if cases * iterations > MAX_STEPS:
        msg = (
            f"pid-sweep of {cases:,} cases x {iterations:,} iterations: allowed at most "
            f"{MAX_STEPS:,} batches in all (fewer values or iterations)"
        )
        raise AdabatchError(msg)


def run_sweep(
    cases: Iterable[SweepCase],
    *,
    target_rps: float = DEFAULT_TARGET_RPS,
    interval_s: float = 1.0,
    iterations: int = DEFAULT_ITERATIONS,
    thresholds: Thresholds | None = None,
) -> SweepResult:
    """Simulate and classify every case (deterministic: no randomness anywhere)."""
    t = thresholds or Thresholds()
    if not (target_rps > 0 and math.isfinite(target_rps)):
        msg = f"pid-sweep target = {target_rps!r} records/s is not allowed: allowed > 0"
        raise AdabatchError(msg)
    if not round(interval_s * 1000) >= 1:
        msg = f"pid-sweep interval = {interval_s!r} s is not allowed: allowed >= 0.001"
        raise AdabatchError(msg)
    if not t.tail <= iterations <= MAX_ITERATIONS:
        msg = (
            f"pid-sweep iterations = {shown(iterations)} is not allowed: allowed {t.tail} to "
            f"{MAX_ITERATIONS:,}"
        )
        raise AdabatchError(msg)
    cases = list(cases)
    check_size(len(cases), iterations)
    stop_batch = t.stop * target_rps * interval_s
    results = []
    for case in cases:
        traj = simulate_pid(
            case,
            target_rps=target_rps,
            interval_s=interval_s,
            iterations=iterations,
            stop_batch=stop_batch,
        )
        results.append(
            classify(traj, case, target_rps=target_rps, interval_s=interval_s, thresholds=t)
        )
    return SweepResult(tuple(results), target_rps, interval_s, iterations, t)


def parse_values(text: str, name: str) -> tuple[float, ...]:
    """``"0:2:0.2"`` (start:stop:step, stop excluded) or ``"0,0.5,1"`` or ``"1"``; at most
    ``MAX_AXIS_VALUES`` values, counted before any is built."""
    text = text.strip()
    ranged = ":" in text
    parts = text.split(":") if ranged else [p for p in text.split(",") if p.strip() != ""]
    if len(parts) > MAX_AXIS_VALUES:
        raise _too_many_values(name, text)
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        numbers = None
    if numbers is None or (ranged and len(numbers) != 3):
        msg = (
            f"--{name} {shown(text)} is not a value list: allowed START:STOP:STEP "
            "(STOP excluded, STEP > 0) or comma-separated numbers"
        )
        raise AdabatchError(msg)
    if not ranged:
        return tuple(numbers)
    start, stop, step = numbers
    if not (math.isfinite(start) and math.isfinite(stop) and step > 0 and stop > start):
        msg = f"--{name} {shown(text)}: allowed finite START < STOP and STEP > 0"
        raise AdabatchError(msg)
    span = (stop - start) / step  # inf for a denormal step: only compared
    if span > MAX_AXIS_VALUES:
        raise _too_many_values(name, text)
    n = math.ceil(span - 1e-9)
    return tuple(round(start + i * step, 10) for i in range(n))


def _too_many_values(name: str, text: str) -> AdabatchError:
    return AdabatchError(
        f"--{name} {shown(text)} has more than {MAX_AXIS_VALUES} values: allowed at most "
        f"{MAX_AXIS_VALUES} (a larger STEP or a shorter list)"
    )


def table_by(result: SweepResult, row: str, col: str, classes: Sequence[str] = TOXIC) -> str:
    """Counts of ``classes`` by two case fields (e.g. ``ki`` x ``kd``) as a text table."""
    rows = sorted({getattr(r, row) for r in result.results})
    cols = sorted({getattr(r, col) for r in result.results})
    count = Counter(
        (getattr(r, row), getattr(r, col)) for r in result.results if r.klass in classes
    )
    per_cell = Counter((getattr(r, row), getattr(r, col)) for r in result.results)
    width = max(6, *(len(f"{c:g}") + 1 for c in cols))
    lines = [f"{row}\\{col}".ljust(8) + "".join(f"{c:g}".rjust(width) for c in cols)]
    for rv in rows:
        lines.append(f"{rv:g}".ljust(8) + "".join(str(count[rv, c]).rjust(width) for c in cols))
    cell = {per_cell[k] for k in per_cell}
    of = f" (of {cell.pop()} cases per cell)" if len(cell) == 1 else ""
    return f"{' + '.join(classes)} by {row} and {col}{of}\n" + "\n".join(lines)


def class_table(result: SweepResult, col: str) -> str:
    """Counts per class (rows) by one case field (columns, e.g. ``kd``) as a text table."""
    cols = sorted({getattr(r, col) for r in result.results})
    count = Counter((r.klass, getattr(r, col)) for r in result.results)
    width = max(6, *(len(f"{c:g}") + 1 for c in cols))
    lines = [f"class\\{col}".ljust(12) + "".join(f"{c:g}".rjust(width) for c in cols)]
    for klass in CLASSES:
        lines.append(klass.ljust(12) + "".join(str(count[klass, c]).rjust(width) for c in cols))
    return f"cases per class by {col}\n" + "\n".join(lines)


def write_csv(results: Sequence[CaseResult], path: Path | tuple[OutputDir, str]) -> None:
    """One row per case; the class column is called ``class`` (to a path, or to a name in
    an :class:`OutputDir`; by a temporary name and a rename)."""
    names = [f.name for f in fields(CaseResult)]
    fh = io.StringIO(newline="")
    writer = csv.writer(fh)
    writer.writerow(["class" if n == "klass" else n for n in names])
    for r in results:
        row = asdict(r)
        writer.writerow([row[n] for n in names])
    if isinstance(path, tuple):
        path[0].write_text(path[1], fh.getvalue())
    else:
        write_atomic(path, fh.getvalue().encode("utf-8"))


def examples(result: SweepResult, per_class: int = 2) -> list[CaseResult]:
    """A few cases of each class for the trajectory plot, spread over the grid."""
    out = []
    for klass in CLASSES:
        members = [r for r in result.results if r.klass == klass]
        if len(members) == 0:
            continue
        step = max(len(members) // per_class, 1)
        out.extend(members[::step][:per_class])
    return out


def plot_examples(
    result: SweepResult, path: Path | tuple[OutputDir, str], per_class: int = 2
) -> None:
    """PNG of example batch-size trajectories, one panel per class (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = examples(result, per_class)
    present = [k for k in CLASSES if any(r.klass == k for r in chosen)]
    fig, axes = plt.subplots(
        1, max(len(present), 1), figsize=(4.2 * max(len(present), 1), 3.6), squeeze=False
    )
    target_batch = result.target_rps * result.interval_s
    for ax, klass in zip(axes[0], present, strict=False):
        for r in (c for c in chosen if c.klass == klass):
            case = SweepCase(r.kp, r.ki, r.kd, r.initial_batch, r.min_rate)
            traj = simulate_pid(
                case,
                target_rps=result.target_rps,
                interval_s=result.interval_s,
                iterations=result.iterations,
                stop_batch=result.thresholds.stop * target_batch,
            )
            label = f"kp={r.kp:g} ki={r.ki:g} kd={r.kd:g} b0={r.initial_batch:g} min={r.min_rate:g}"
            ax.plot(range(1, len(traj.batch) + 1), traj.batch, label=label, lw=1.2)
        ax.axhline(target_batch, color="grey", ls="--", lw=0.8)
        ax.set_yscale("log")
        ax.set_title(klass)
        ax.set_xlabel("batch")
        ax.legend(fontsize=6, loc="best")
    axes[0][0].set_ylabel("batch size (records)")
    fig.suptitle(
        f"PID back pressure at a constant {result.target_rps:g} records/s, "
        f"interval {result.interval_s:g} s",
        fontsize=9,
    )
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
