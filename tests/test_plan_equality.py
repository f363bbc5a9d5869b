"""One batching model, two drivers: the simulator and the Spark source plan the same batches.

The same controller, seed and arrival trace (the generator source under ``PROFILE``) run
through the simulator (:func:`adabatch.sim.engine.simulate_arrivals`, a virtual clock) and
through the Spark source's :class:`~adabatch.streaming.runtime.StreamRuntime` (Spark's call
sequence replayed by hand on an injected clock, as in ``tests/streaming/test_runtime.py``).
Each batch takes the processing time of the same batch of one real Spark run
(``tests/data/spark_run_metrics.jsonl``, see ``tests/data/README.md``), whose slow start
keeps several batches waiting at once. The controller's calls, with their arguments and the
plans it returned, must be identical: a driver that changes the order of plan and observe or
the queue's semantics breaks this test. No Spark is started.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from adabatch.control.base import BatchPlan, BatchReport, Controller
from adabatch.metrics import read_jsonl
from adabatch.sim.engine import simulate_arrivals
from adabatch.sim.workloads import Cost, Resources
from adabatch.streaming.offsets import INITIAL
from adabatch.streaming.options import StreamOptions, parse_options
from adabatch.streaming.runtime import StreamRuntime

DATA = Path(__file__).parent / "data" / "spark_run_metrics.jsonl"
PROFILE = "constant:2000"
DURATION_S = 25.0
SEED = 3
# What a batch report must agree on between the drivers (the rest is derived from these).
FIELDS = ("batch_id", "interval_s", "blocks", "records", "cut_at", "started_at", "finished_at")
FIELDS += ("queue_len",)


def processing_times() -> Iterator[float]:
    """The measured processing times, in batch order, over and over."""
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    return itertools.cycle([float(r["processing_s"]) for r in rows])


class Replayed:
    """A cost model that answers each batch with the next measured processing time (no
    per-block times: Spark's reader has none either)."""

    name = "replayed"

    def __init__(self) -> None:
        self.times = processing_times()

    def cost(
        self,
        records: int,
        interval_s: float,
        blocks: int,
        t: float = 0.0,
        rng: np.random.Generator | None = None,
        resources: Resources | None = None,
    ) -> Cost:
        return Cost(next(self.times), ())


def recorded(ctrl: Controller) -> list[tuple[str, float, BatchPlan | None]]:
    """Log every ``plan(now)`` with its plan and every ``observe`` with its finish time."""
    calls: list[tuple[str, float, BatchPlan | None]] = []
    plan, observe = ctrl.plan, ctrl.observe

    def logged_plan(now: float) -> BatchPlan:
        out = plan(now)
        calls.append(("plan", now, out))
        return out

    def logged_observe(report: BatchReport) -> None:
        calls.append(("observe", report.finished_at, None))
        observe(report)

    ctrl.plan = logged_plan  # type: ignore[method-assign]
    ctrl.observe = logged_observe  # type: ignore[method-assign]
    return calls


def options(tmp_path: Path, controller: str, queue: str) -> StreamOptions:
    return parse_options(
        {
            "controller": controller,
            "profile": PROFILE,
            "queue": queue,
            "seed": str(SEED),
            "metricsPath": str(tmp_path / "metrics.jsonl"),
        }
    )


def through_the_simulator(opts: StreamOptions):
    ctrl = opts.build_controller()
    assert ctrl is not None
    calls = recorded(ctrl)
    out = simulate_arrivals(
        ctrl,
        Replayed(),  # type: ignore[arg-type]
        opts.build_source(0.0),
        DURATION_S,
        rng=np.random.default_rng(SEED),
        queue=opts.queue,
    )
    return calls, out.records


class Clock:
    def __init__(self) -> None:
        self.t = 0.0  # the stream starts at Unix time 0: stream time is the clock, exactly

    def __call__(self) -> float:
        return self.t


def through_the_spark_source(opts: StreamOptions):
    """Spark's loop: poll; run a handed-out batch for its measured time and poll again;
    when idle, poll at the instant the next batch falls due (Spark's ~10 ms idle polls,
    taken to zero, which is what the simulator assumes)."""
    clock = Clock()
    rt = StreamRuntime(opts, clock=clock)
    assert rt.controller is not None
    calls = recorded(rt.controller)
    times = processing_times()
    start = INITIAL.to_dict()
    assert rt.latest_offset(start) == start  # Spark's first, empty micro-batch
    assert rt.latest_offset(start) == start  # the stream starts now, at stream time 0
    while clock.t <= DURATION_S:
        end = rt.latest_offset(start)
        if end != start:
            rt.partitions(start, end)
            clock.t += next(times)
            start = end
        else:
            assert rt.cutter is not None
            clock.t = rt.cutter.next_cut_at()
    rt.latest_offset(start)  # the batch running at the end finishes
    return calls, read_jsonl(opts.metrics_path)


def until_the_end(calls, records):
    """What the two runs share: plans and observations up to the simulated duration."""
    calls = [c for c in calls if c[1] <= DURATION_S]
    rows = [tuple(getattr(r, f) for f in FIELDS) for r in records if r.finished_at <= DURATION_S]
    return calls, rows


@pytest.mark.parametrize(
    ("controller", "queue"),
    [
        ("fixed-point", "fifo"),
        ("isotonic", "fifo"),
        ("gradient", "fifo"),
        ("fixed-point", "coalesce"),
    ],
)
def test_simulator_and_spark_source_plan_the_same_batches(tmp_path, controller, queue):
    opts = options(tmp_path, controller, queue)
    sim_calls, sim_rows = until_the_end(*through_the_simulator(opts))
    spark_calls, spark_rows = until_the_end(*through_the_spark_source(opts))
    plans = [c for c in sim_calls if c[0] == "plan"]
    assert len(plans) >= 20 and len(sim_rows) >= 20  # a real run, not a formality
    assert max(r[-1] for r in sim_rows) >= 1  # batches waited: the queue was exercised
    assert spark_calls == sim_calls
    assert spark_rows == sim_rows


def test_the_trace_tells_the_queue_modes_apart(tmp_path):
    # the replayed times keep batches waiting, so a driver that served its queue the other
    # way would plan differently and fail the test above
    fifo, _ = through_the_simulator(options(tmp_path, "fixed-point", "fifo"))
    coalesce, _ = through_the_simulator(options(tmp_path, "fixed-point", "coalesce"))
    assert until_the_end(fifo, [])[0] != until_the_end(coalesce, [])[0]
