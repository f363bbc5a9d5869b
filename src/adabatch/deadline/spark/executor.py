"""The executor interface on Spark and the wall clock (paper Sec. 6.1).

:class:`SparkExecutor` implements the scheduling core's
:class:`~adabatch.deadline.core.executor.Executor`, so the single-query plans and the
multi-query loop run unchanged on the TPC-H landing data
(:mod:`adabatch.deadline.spark.runner` drives them):

- input lands slot by slot in real time (:class:`~adabatch.deadline.spark.tpch.Feeder`); a
  query's tuples are its primary stream's tuples (:attr:`QueryDef.primary`) in slot order;
- ``run_batch`` runs one Spark job over exactly the landed files of the slots holding the
  batch's tuples and writes its partial aggregate as Parquet. Slots are indivisible (an
  order travels with its lineitems), so a batch ending inside a slot takes the whole slot
  and the next batch starts after it; a batch whose tuples were all taken already runs no
  job and costs nothing. A batch holding the whole input runs the full query as one job;
- ``run_final`` combines the partials (Sec. 6.1) and keeps the answer, which is compared
  with DuckDB's answer on the full tables.

Times are seconds on the specs' axis; with ``time_scale`` one spec second lasts that many
real seconds and measured job times are divided by it. Every Spark job is appended to
``WORKDIR/batches.jsonl``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adabatch.deadline.core.executor import query_entry
from adabatch.deadline.core.spec import QuerySpec
from adabatch.deadline.spark.jobs import (
    answer_differences,
    answer_rows,
    answer_table,
    batch_frames,
    final_frame,
    missing_input_error,
    missing_landing,
    partial_frame,
    run_final,
    run_partial,
    static_frames,
    stream_schema,
)
from adabatch.deadline.spark.queries import QUERY_NAMES, QueryDef, get_query
from adabatch.deadline.spark.tpch import STREAMS, Feeder, Manifest, StreamClock
from adabatch.errors import AdabatchError
from adabatch.outputs import append_text, dumps_json, mark_dir, remove_tree, write_atomic

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

LANDING_GRACE_S = 5.0
"""Real seconds a batch waits for files that are due but not yet renamed into the landing
directory (the feeder thread may lag a few milliseconds) before it fails."""


def check_spec(manifest: Manifest, spec: QuerySpec) -> QueryDef:
    """The query of ``spec``, after checking that the spec describes the landing data."""
    if spec.query is None:
        msg = (
            f"query {spec.id!r} names no query to run on Spark: allowed query = one of "
            f"{', '.join(QUERY_NAMES)}"
        )
        raise AdabatchError(msg)
    qdef = get_query(spec.query)
    total = manifest.total(qdef.primary)
    if spec.total != total:
        msg = (
            f"query {spec.id!r}: total = {spec.total} tuples but the landing data holds "
            f"{total} {qdef.primary} tuples: allowed total = {total}"
        )
        raise AdabatchError(msg)
    if abs(spec.window_start - manifest.window_start) > 1e-9:
        msg = (
            f"query {spec.id!r}: window_start = {spec.window_start:g} but the landing data's "
            f"window starts at {manifest.window_start:g}: allowed {manifest.window_start:g}"
        )
        raise AdabatchError(msg)
    return qdef


@dataclass(frozen=True)
class SparkJob:
    """One Spark job the executor ran: a batch's partial, a whole-input batch or a final
    aggregation. ``slots`` is the inclusive slot range read (``None`` for a final)."""

    query: str
    kind: str
    batch: int
    slots: tuple[int, int] | None
    tuples: int
    requested_tuples: int
    start: float
    end: float
    seconds: float
    real_seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "kind": self.kind,
            "batch": self.batch,
            "slots": None if self.slots is None else list(self.slots),
            "tuples": self.tuples,
            "requested_tuples": self.requested_tuples,
            "start": self.start,
            "end": self.end,
            "seconds": self.seconds,
            "real_seconds": self.real_seconds,
        }


@dataclass
class _QueryState:
    spec: QuerySpec
    qdef: QueryDef
    next_slot: int = 0
    partials: list[Path] = field(default_factory=list)
    schema: Any = None
    answer: pa.Table | None = None


class SparkExecutor:
    """The executor interface on Spark and the wall clock (see the module docstring).

    ``feeder`` (optional) is the running release thread; without one the landing
    directory must already hold the files (e.g. released with ``Feeder.release_until``).
    ``on_job`` is called after every Spark job (progress bars).
    """

    def __init__(
        self,
        spark: SparkSession,
        manifest: Manifest,
        specs: Sequence[QuerySpec],
        workdir: str | Path,
        clock: StreamClock,
        *,
        feeder: Feeder | None = None,
        on_job: Callable[[SparkJob], None] | None = None,
    ) -> None:
        self.spark = spark
        self.manifest = manifest
        self.clock = clock
        self.feeder = feeder
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.jobs: list[SparkJob] = []
        self._on_job = on_job
        self._metrics = self.workdir / "batches.jsonl"
        write_atomic(self._metrics, b"")
        self._wake = threading.Event()
        self._queries: dict[str, _QueryState] = {}
        for spec in specs:
            qdef = check_spec(manifest, spec)
            if spec.id in self._queries:
                msg = f"query id {spec.id!r} appears twice: allowed unique ids"
                raise AdabatchError(msg)
            partials = self._partial_root(spec.id)
            remove_tree(partials, inside=self.workdir / "partials", what="partials directory")
            mark_dir(partials, what="partials directory")
            self._queries[spec.id] = _QueryState(spec, qdef)
            static_frames(spark, manifest, qdef)  # loaded now, not in the first batch
        self._schemas: dict[str, StructType] = {
            s: stream_schema(spark, manifest, s) for s in STREAMS
        }

    # -- the Executor protocol ---------------------------------------------------------

    def now(self) -> float:
        return self.clock.now()

    def wait_until(self, t: float) -> None:
        while True:
            if self.feeder is not None:
                self.feeder.check()
            delay = self.clock.real(t) - time.monotonic()
            if delay <= 0:
                return
            self._wake.wait(min(delay, 1.0))

    def available(self, query_id: str, at: float) -> int:
        state = self._state(query_id)
        primary = state.qdef.primary
        count = 0
        for slot in self.manifest.slots:
            if slot.arrival_s > at or not self._landed(slot.index):
                break
            count = slot.offsets[primary] + slot.tuples[primary]
        return count

    def arrival_time(self, query_id: str, n: int) -> float | None:
        state = self._state(query_id)
        primary = state.qdef.primary
        total = self.manifest.total(primary)
        if n < 1:
            return self.manifest.window_start
        index = self.manifest.slot_of(primary, min(n, total) - 1)
        return self.manifest.slots[index].arrival_s

    def run_batch(self, query_id: str, offset: int, tuples: int, at: float) -> float:
        state = self._state(query_id)
        primary = state.qdef.primary
        total = self.manifest.total(primary)
        if tuples < 1 or offset < 0 or offset + tuples > total:
            msg = (
                f"query {query_id!r}: batch of tuples [{offset}, {offset + tuples}) is outside "
                f"its input: allowed within [0, {total})"
            )
            raise AdabatchError(msg)
        last = len(self.manifest.slots) - 1
        if offset + tuples < total:
            last = self.manifest.slot_of(primary, offset + tuples - 1)
        first = state.next_slot
        batch = len(state.partials)
        if first > last:  # every tuple of this batch rode along with an earlier slot
            return 0.0
        slots = list(range(first, last + 1))
        self._await_landing(slots, query_id)
        start = self.now()
        began = time.monotonic()
        if first == 0 and last == len(self.manifest.slots) - 1:
            kind = "whole"
            frames = batch_frames(self.spark, self.manifest, state.qdef, slots, self._schemas)
            partial = partial_frame(self.spark, state.qdef, frames)
            state.answer = answer_table(final_frame(self.spark, state.qdef, partial))
        else:
            kind = "partial"
            out = self._partial_root(query_id) / f"batch-{batch:05d}"
            state.schema = run_partial(
                self.spark, self.manifest, state.qdef, slots, out, self._schemas
            )
            state.partials.append(out)
        real = time.monotonic() - began
        held = sum(self.manifest.slots[i].tuples[primary] for i in slots)
        self._record(query_id, kind, batch, (first, last), held, tuples, start, real)
        state.next_slot = last + 1
        return real / self.clock.time_scale

    def run_final(self, query_id: str, batches: int, at: float) -> float:
        state = self._state(query_id)
        if not state.partials:
            return 0.0  # the whole input ran as one job and produced the answer
        start = self.now()
        began = time.monotonic()
        state.answer = run_final(self.spark, state.qdef, state.partials, state.schema)
        real = time.monotonic() - began
        self._record(query_id, "final", len(state.partials), None, 0, 0, start, real)
        return real / self.clock.time_scale

    # -- results -----------------------------------------------------------------------

    def answer(self, query_id: str) -> list[tuple[Any, ...]] | None:
        """The query's final answer (rows) once it has completed."""
        table = self._state(query_id).answer
        return None if table is None else answer_rows(table)

    def differences(self, query_id: str, want: list[tuple[Any, ...]]) -> list[str]:
        """Why the query's answer differs from ``want`` (empty if equal)."""
        answer = self.answer(query_id)
        if answer is None:
            return ["no answer"]
        return answer_differences(answer, want, ordered=self._state(query_id).qdef.ordered)

    def spark_batches(self, query_id: str) -> int:
        """Spark jobs that processed input for the query (not counting the final)."""
        return sum(1 for j in self.jobs if j.query == query_id and j.kind != "final")

    # -- helpers -----------------------------------------------------------------------

    def _state(self, query_id: str) -> _QueryState:
        return query_entry(self._queries, query_id)

    def _partial_root(self, query_id: str) -> Path:
        return self.workdir / "partials" / query_id

    def _landed(self, index: int) -> bool:
        if self.feeder is not None:
            return index in self.feeder.released
        slot = self.manifest.slots[index]
        return all(self.manifest.landing_path(slot, s).is_file() for s in STREAMS)

    def _await_landing(self, slots: Sequence[int], query_id: str) -> None:
        """Wait (briefly) for due slots the feeder has not renamed yet; fail clearly."""
        qdef = self._state(query_id).qdef
        gone = missing_landing(self.manifest, qdef, slots)
        if not gone:
            return
        due = all(self.manifest.slots[i].arrival_s <= self.now() for i in slots)
        if self.feeder is not None and due:
            give_up = time.monotonic() + LANDING_GRACE_S
            while gone and time.monotonic() < give_up:
                self.feeder.check()
                self._wake.wait(0.01)
                gone = missing_landing(self.manifest, qdef, slots)
        if gone:
            why = f"the batch reads slots {slots[0]}..{slots[-1]}"
            raise missing_input_error(f"query {query_id!r}", gone, why)

    def _record(
        self,
        query_id: str,
        kind: str,
        batch: int,
        slots: tuple[int, int] | None,
        tuples: int,
        requested: int,
        start: float,
        real: float,
    ) -> None:
        seconds = real / self.clock.time_scale
        job = SparkJob(
            query_id, kind, batch, slots, tuples, requested, start, start + seconds, seconds, real
        )
        self.jobs.append(job)
        append_text(self._metrics, dumps_json(job.to_json(), separators=(",", ":")) + "\n")
        if self._on_job is not None:
            self._on_job(job)
