"""What the schedulers need from whatever runs the batches: the executor interface.

The same scheduling code drives a simulation (costs come from the cost models, the clock
is virtual) and Spark (costs are measured, the clock is the wall clock): it only talks to
an :class:`Executor`. A batch of a query holds the tuples with 0-based indices
``[offset, offset + tuples)`` of that query's input in arrival order.

:func:`run_plan` executes a single-query :class:`~adabatch.deadline.core.schedule.QueryPlan`
(Sec. 3) on an executor; the multi-query loop (:mod:`adabatch.deadline.core.multi`) decides
batches on line (Sec. 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from adabatch.deadline.core.cost import fits
from adabatch.deadline.core.schedule import QueryPlan
from adabatch.errors import AdabatchError


@runtime_checkable
class Executor(Protocol):
    """Runs batches and keeps the clock, in seconds on the specs' time axis.

    - ``now()``: the current time.
    - ``wait_until(t)``: return once ``now() >= t`` (a simulation jumps; Spark sleeps
      while input lands).
    - ``available(query_id, at)``: tuples of the query that have arrived by ``at``
      (``at <= now()``), counted from its first tuple.
    - ``arrival_time(query_id, n)``: when the query's ``n``-th tuple (1-based) arrives, if
      the executor knows in advance (a simulation, a replay of landed files); ``None``
      when unknown, and the scheduler then polls.
    - ``run_batch(query_id, offset, tuples, at)``: process that batch now (``at`` is
      ``now()``), return its cost in seconds; ``now()`` has advanced past it on return.
    - ``run_final(query_id, batches, at)``: the final aggregation over the query's
      ``batches`` partial results; return its cost in seconds.
    """

    def now(self) -> float: ...

    def wait_until(self, t: float) -> None: ...

    def available(self, query_id: str, at: float) -> int: ...

    def arrival_time(self, query_id: str, n: int) -> float | None: ...

    def run_batch(self, query_id: str, offset: int, tuples: int, at: float) -> float: ...

    def run_final(self, query_id: str, batches: int, at: float) -> float: ...


_T = TypeVar("_T")


def query_entry(entries: Mapping[str, _T], query_id: str) -> _T:
    """An executor's entry for ``query_id``; an :class:`AdabatchError` listing the known
    ids for a query it was not given."""
    try:
        return entries[query_id]
    except KeyError:
        msg = f"unknown query {query_id!r}: allowed one of {sorted(entries)}"
        raise AdabatchError(msg) from None


@dataclass(frozen=True)
class BatchRun:
    """One executed batch (or final aggregation, ``tuples == 0`` and ``kind == "final"``).

    ``kind`` says why it ran: ``"min-batch"`` (a MinBatch was ready), ``"time"`` (its
    expected input time passed with fewer tuples, Sec. 4.4), ``"last"`` (the rest of the
    input), ``"available"`` (the baseline without MinBatchSize, Sec. 7.4), ``"plan"``
    (a single-query plan's batch) or ``"final"``.
    """

    query: str
    kind: str
    offset: int
    tuples: int
    start: float
    end: float
    cost: float

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "kind": self.kind,
            "offset": self.offset,
            "tuples": self.tuples,
            "start": self.start,
            "end": self.end,
            "cost": self.cost,
        }


@dataclass(frozen=True)
class PlanRun:
    """What happened when a single-query plan ran: its batches, completion and cost."""

    query: str
    runs: tuple[BatchRun, ...]
    completion: float
    deadline: float
    cost: float

    @property
    def met(self) -> bool:
        return fits(self.completion, self.deadline)

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "met": self.met,
            "completion": self.completion,
            "deadline": self.deadline,
            "cost": self.cost,
            "batches": [r.to_json() for r in self.runs],
        }


def run_plan(plan: QueryPlan, executor: Executor, *, early: bool = True) -> PlanRun:
    """Run ``plan``'s batches in order, then the final aggregation when there is more than
    one batch.

    A plan's starts are latest starts: Function 1 builds the schedule backwards from the
    deadline, so the first batch (the remainder) is planned as late as it can be, long after
    its tuples arrived. With ``early`` each batch starts as soon as its last tuple has
    arrived (when the executor knows when that is) and the previous batch has finished,
    never later than planned: the same batches at the same cost, with the slack moved to
    the end where it absorbs a batch that runs longer than its model. On the Spark runner
    (SF 0.1) 9 of 10 late plans were late because the first batch, started at
    its latest start, overran into the last one. ``early=False`` keeps the planned starts.
    """
    if not plan.feasible:
        msg = f"query {plan.query!r} has no feasible plan: {plan.reason}"
        raise AdabatchError(msg)
    runs: list[BatchRun] = []
    offset = 0
    for batch in plan.batches:
        ready = executor.arrival_time(plan.query, offset + batch.tuples) if early else None
        executor.wait_until(batch.start if ready is None else min(batch.start, ready))
        at = executor.now()
        seconds = executor.run_batch(plan.query, offset, batch.tuples, at)
        end = executor.now()  # a real executor may also have waited for input to land
        runs.append(BatchRun(plan.query, "plan", offset, batch.tuples, end - seconds, end, seconds))
        offset += batch.tuples
    if len(plan.batches) > 1:
        at = executor.now()
        seconds = executor.run_final(plan.query, len(plan.batches), at)
        end = executor.now()
        runs.append(BatchRun(plan.query, "final", offset, 0, end - seconds, end, seconds))
    completion = runs[-1].end if runs else executor.now()
    return PlanRun(
        query=plan.query,
        runs=tuple(runs),
        completion=completion,
        deadline=plan.deadline if plan.deadline is not None else completion,
        cost=sum(r.cost for r in runs),
    )
