"""Multi-query deadline scheduling in MinBatches (paper Sec. 4).

Each query gets a MinBatchSize (Sec. 4.1, :func:`find_min_batch_size`): the smallest batch
size whose total cost, processing the whole window in batches of that size plus the final
aggregation, stays within ``(1 + δ_RSF)`` times the single-batch cost, capped so that one
MinBatch costs at most ``C_max`` (the longest a newly urgent query can be blocked by the
non-preemptive scheduler).

One scheduling loop (Algorithm 2, ``ScheduleDynamicLLF``) serves every strategy: whenever
the executor is free it collects the queries whose next batch is ready, orders them by the
strategy's key (:data:`ORDERS`: least laxity, earliest deadline, shortest remaining job,
round robin; ties by admission order, then id, as SimPy orders equal events), and runs
one batch of the first, non-preemptively. A query's batch is ready when

- ``min-batch``: MinBatchSize tuples have arrived (Sec. 4.2);
- ``last``: all its remaining tuples have arrived (the final, possibly smaller batch);
- ``time``: the time at which its next MinBatch was expected (from the expected rate)
  has passed but fewer tuples arrived: the available ones are processed (Sec. 4.4).
  With ``time_trigger="always"`` that is the paper's rule. Every such batch is one more
  than MinBatchSize planned, so under a slower rate the paper's own costs exceed the
  ``(1 + δ_RSF)`` bound (its Fig. 10/11 VR3 and VR4). The default ``"budget"`` keeps the
  bound: it processes the late MinBatch's tuples only while the query's cost so far, this
  batch and the rest in MinBatches stay within ``(1 + δ_RSF)`` times the single-batch
  cost, or when the query's laxity has fallen below the longest batch another query
  could block it with (its deadline is at risk); otherwise it waits for the MinBatch.

After a query's last batch its final aggregation runs at once (when it had more than one
batch) and the query leaves the list. Queries join at ``added_at`` and may leave at
``removed_at``. With ``total_known = False`` the total is estimated from the observed rate
and, as Sec. 4.4 prescribes, every query with available tuples competes, irrespective of
MinBatch readiness. ``min_batch=False`` is the plain EDF/LLF baseline of Sec. 7.4: the
chosen query processes everything that has arrived.

The loop talks only to an :class:`~adabatch.deadline.core.executor.Executor`, so it drives the
simulation and the Spark runner unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from adabatch.deadline.core.cost import TIME_EPS, fits
from adabatch.deadline.core.executor import BatchRun, Executor
from adabatch.deadline.core.numbers import check_number
from adabatch.deadline.core.spec import (
    C_MAX,
    RSF,
    STRATEGIES,
    DeadlineScenario,
    QuerySpec,
    check_scheduler,
)
from adabatch.errors import AdabatchError

MAX_BATCHES = 100_000
"""Most batches one scheduling run may plan or execute (each is kept in the result; the
paper's scenarios need a few hundred)."""
MAX_STEPS = 10 * MAX_BATCHES
"""Most passes of the scheduling loop (a pass runs a batch or waits for input)."""


@dataclass(frozen=True)
class MinBatch:
    """A query's MinBatchSize and what it implies (Sec. 4.1)."""

    size: int
    batches: int
    cost: float
    bound: float
    capped: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # size, batches, cost, bound, capped


def cost_in_batches_of(spec: QuerySpec, size: int, tuples: int | None = None) -> float:
    """Cost of processing ``tuples`` (default: all) in batches of ``size`` plus the final
    aggregation over that many batches (``minCompCost_{BatchSize=x}``)."""
    work, batches = _work_in_batches(spec, spec.total if tuples is None else tuples, size)
    return work + spec.agg_cost.cost(batches)


def _work_in_batches(spec: QuerySpec, tuples: int, size: int) -> tuple[float, int]:
    """The cost of ``tuples`` in batches of ``size`` (the last one smaller), and how many."""
    full, rest = divmod(tuples, size)
    work = full * spec.cost.cost(size) + (spec.cost.cost(rest) if rest > 0 else 0.0)
    return work, full + (1 if rest > 0 else 0)


def find_min_batch_size(spec: QuerySpec, rsf: float, c_max: float = math.inf) -> MinBatch:
    """FindMinBatchSize (Sec. 4.1, Algorithm 2): the smallest ``x`` with
    ``minCompCost_{x} <= (1 + rsf) * minCompCost_{N}``, then capped so ``Cost(x) <= C_max``.

    Found by bisection on ``x``; exact when the cost per tuple does not grow with the
    batch size (linear with overhead, the paper's sublinear fits), and otherwise a size
    that meets the bound.
    """
    check_number(RSF, rsf, text=False)
    check_number(C_MAX, c_max, text=False, allow_inf=True)
    n = spec.total
    bound = (1.0 + rsf) * spec.single_batch_cost
    lo, hi = 0, n  # invariant: hi meets the bound (one batch always does)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(cost_in_batches_of(spec, mid), bound):
            hi = mid
        else:
            lo = mid
    size, capped = hi, False
    if not math.isinf(c_max) and not fits(spec.cost.cost(size), c_max):
        size, capped = max(1, spec.cost.tuples_within(c_max)), True
    batches = -(-n // size)
    return MinBatch(size, batches, cost_in_batches_of(spec, size), bound, capped)


# ---------------------------------------------------------------------------------------
# Queue orders


@dataclass
class QueryState:
    """A query in the scheduler's list (``qList`` of Algorithm 2)."""

    spec: QuerySpec
    order: int
    min_batch: MinBatch | None
    processed: int = 0
    batches: int = 0
    cost: float = 0.0
    last_served: int = -1
    first_start: float | None = None

    @property
    def id(self) -> str:
        return self.spec.id

    def estimated_total(self, arrived: int, now: float) -> int:
        """The total tuples: the spec's, or (``total_known=False``) the arrived count
        extrapolated at the observed rate to the window end (Sec. 4.4)."""
        spec = self.spec
        if spec.total_known:
            return spec.total
        if now >= spec.window_end:
            return arrived
        if arrived >= 2 and now > spec.window_start:
            observed = (arrived - 1) / (now - spec.window_start)
            return max(arrived, math.floor(arrived + observed * (spec.window_end - now)))
        return max(arrived, spec.total)

    def remaining_cost(self, total: int) -> float:
        """FindMinCompCost: the cost of the tuples left in MinBatches (or one batch for
        the baseline) plus the final aggregation over all of the query's batches."""
        spec = self.spec
        left = max(total - self.processed, 0)
        if left == 0:
            return spec.agg_cost.cost(self.batches)
        size = left if self.min_batch is None else self.min_batch.size
        work, more = _work_in_batches(spec, left, size)
        return work + spec.agg_cost.cost(self.batches + more)


OrderKey = Callable[[QueryState, float, int], tuple[float, ...]]
"""``key(state, now, estimated_total)``: smaller runs first."""


def _llf(q: QueryState, now: float, total: int) -> tuple[float, ...]:
    return (q.spec.deadline - now - q.remaining_cost(total),)  # laxity, eq. 9


def _edf(q: QueryState, now: float, total: int) -> tuple[float, ...]:
    return (q.spec.deadline,)


def _sjf(q: QueryState, now: float, total: int) -> tuple[float, ...]:
    return (q.remaining_cost(total),)


def _rr(q: QueryState, now: float, total: int) -> tuple[float, ...]:
    return (float(q.last_served),)


ORDERS: dict[str, OrderKey] = {"llf": _llf, "edf": _edf, "sjf": _sjf, "rr": _rr}
assert tuple(ORDERS) == STRATEGIES


# ---------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class QueryOutcome:
    """How one query fared: completion, deadline met, batches and cost."""

    query: str
    deadline: float
    completion: float | None
    met: bool
    removed: bool
    batches: int
    tuples: int
    cost: float
    single_batch_cost: float
    min_batch: MinBatch | None

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "deadline": self.deadline,
            "completion": self.completion,
            "met": self.met,
            "removed": self.removed,
            "batches": self.batches,
            "tuples": self.tuples,
            "cost": self.cost,
            "single_batch_cost": self.single_batch_cost,
            "min_batch": None if self.min_batch is None else self.min_batch.to_json(),
        }


@dataclass(frozen=True)
class MultiResult:
    """Everything a multi-query run produced."""

    strategy: str
    rsf: float
    c_max: float
    min_batch: bool
    outcomes: tuple[QueryOutcome, ...]
    runs: tuple[BatchRun, ...]
    time_trigger: str = "budget"

    @property
    def finished(self) -> tuple[QueryOutcome, ...]:
        return tuple(o for o in self.outcomes if not o.removed)

    @property
    def all_met(self) -> bool:
        return all(o.met for o in self.finished)

    @property
    def missed(self) -> list[str]:
        return [o.query for o in self.finished if not o.met]

    @property
    def total_cost(self) -> float:
        return sum(o.cost for o in self.finished)

    @property
    def single_batch_cost(self) -> float:
        """Sum over finished queries of the cost of one batch with all their tuples."""
        return sum(o.single_batch_cost for o in self.finished)

    @property
    def normalised_cost(self) -> float:
        """Total cost / sum of single-batch costs (the paper's Fig. 7-11 y axis)."""
        base = self.single_batch_cost
        return math.nan if base == 0 else self.total_cost / base

    @property
    def batches(self) -> int:
        return sum(o.batches for o in self.finished)

    def to_json(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "rsf": self.rsf,
            "c_max": None if math.isinf(self.c_max) else self.c_max,
            "min_batch": self.min_batch,
            "time_trigger": self.time_trigger,
            "all_met": self.all_met,
            "missed": self.missed,
            "total_cost": self.total_cost,
            "single_batch_cost": self.single_batch_cost,
            "normalised_cost": self.normalised_cost,
            "batches": self.batches,
            "queries": [o.to_json() for o in self.outcomes],
        }


# ---------------------------------------------------------------------------------------
# The loop


@dataclass
class _Loop:
    """The scheduling loop's state: queries not yet joined (by ``added_at``), the list
    (``qList``), outcomes and batches so far."""

    waiting: list[QuerySpec]
    order_of: dict[str, int]
    active: list[QueryState] = field(default_factory=list)
    outcomes: dict[str, QueryOutcome] = field(default_factory=dict)
    runs: list[BatchRun] = field(default_factory=list)
    served: int = 0
    steps: int = 0


@dataclass
class _Candidate:
    state: QueryState
    tuples: int
    kind: str
    total: int


@dataclass
class MultiQueryScheduler:
    """Algorithm 2 with an interchangeable queue order (``strategy``).

    Add queries before :meth:`run` (each joins at its ``added_at``); :meth:`run` drives an
    executor until every query has finished or left.

    Examples
    --------
    >>> from adabatch.deadline.core.simulate import SimulatedExecutor
    >>> from adabatch.deadline.core.spec import query_spec
    >>> from adabatch.deadline.core.cost import LinearCost
    >>> q = query_spec("q", window_start=0, window_end=99, deadline=130, rate=1.0,
    ...                cost=LinearCost(per_tuple=0.2, overhead=1.0))
    >>> s = MultiQueryScheduler("edf", rsf=0.5)
    >>> s.add(q)
    >>> r = s.run(SimulatedExecutor([q]))
    >>> r.all_met, r.outcomes[0].batches
    (True, 10)
    """

    strategy: str = "llf"
    rsf: float = 0.5
    c_max: float = math.inf
    min_batch: bool = True
    poll_s: float = 1.0
    time_trigger: str = "budget"
    _specs: list[QuerySpec] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        check_scheduler(self.strategy, self.time_trigger, self.rsf, self.c_max, self.poll_s)

    @classmethod
    def for_scenario(cls, scenario: DeadlineScenario) -> MultiQueryScheduler:
        """A scheduler with ``scenario``'s settings and its queries added."""
        s = scenario
        scheduler = cls(s.strategy, s.rsf, s.c_max, s.min_batch, s.poll_s, s.time_trigger)
        scheduler.extend(s.queries)
        return scheduler

    def add(self, spec: QuerySpec) -> None:
        """Submit a query; it joins the list at ``spec.added_at``."""
        if any(s.id == spec.id for s in self._specs):
            msg = f"query id {spec.id!r} is already scheduled: allowed unique ids"
            raise AdabatchError(msg)
        self._specs.append(spec)

    def extend(self, specs: Iterable[QuerySpec]) -> None:
        for spec in specs:
            self.add(spec)

    def run(self, executor: Executor, horizon: float | None = None) -> MultiResult:
        """Schedule every added query on ``executor`` until all have finished or left.

        ``horizon`` stops waiting at that time: queries still unfinished then (their input
        never completed) are reported with no completion and a missed deadline.
        """
        arrivals = sorted(enumerate(self._specs), key=lambda p: (p[1].added_at, p[0]))
        loop = _Loop([spec for _, spec in arrivals], {spec.id: i for i, spec in arrivals})
        key = ORDERS[self.strategy]
        while loop.waiting or loop.active:
            loop.steps += 1
            if loop.steps > MAX_STEPS or len(loop.runs) > MAX_BATCHES:
                msg = (
                    f"the schedule needs more than {MAX_BATCHES} batches or {MAX_STEPS} "
                    "scheduling steps: allowed at most that many (raise c_max or rsf, or a "
                    "coarser poll_s)"
                )
                raise AdabatchError(msg)
            now = executor.now()
            if horizon is not None and now > horizon:
                self._stop(loop)
                break
            self._admit(loop, now)
            candidates, wake = self._candidates(loop.active, executor, now)
            if not candidates:
                if not self._idle(loop, executor, now, wake):
                    break
                continue
            pick = min(
                candidates,
                key=lambda c: (*key(c.state, now, c.total), c.state.order, c.state.id),
            )
            self._serve(loop, pick, executor)
        ordered = tuple(loop.outcomes[s.id] for s in self._specs if s.id in loop.outcomes)
        return MultiResult(
            self.strategy,
            self.rsf,
            self.c_max,
            self.min_batch,
            ordered,
            tuple(loop.runs),
            time_trigger=self.time_trigger,
        )

    # -- the loop's steps --------------------------------------------------------------

    def _stop(self, loop: _Loop) -> None:
        """At the horizon: every query not yet finished is reported unfinished."""
        for state in loop.active:
            loop.outcomes[state.id] = self._outcome(state, None, removed=False)
        for spec in loop.waiting:
            state = QueryState(spec, loop.order_of[spec.id], None)
            loop.outcomes[spec.id] = self._outcome(state, None, removed=False)

    def _admit(self, loop: _Loop, now: float) -> None:
        """Queries whose ``added_at`` has come join the list with their MinBatchSize;
        those whose ``removed_at`` has come leave it."""
        while loop.waiting and loop.waiting[0].added_at <= now + TIME_EPS:  # type: ignore[operator]
            spec = loop.waiting.pop(0)
            mb = find_min_batch_size(spec, self.rsf, self.c_max) if self.min_batch else None
            if mb is not None and mb.batches > MAX_BATCHES:
                msg = (
                    f"query {spec.id!r}: MinBatchSize {mb.size} cuts its {spec.total} "
                    f"tuples into {mb.batches} batches: allowed at most {MAX_BATCHES} "
                    "(raise c_max or rsf)"
                )
                raise AdabatchError(msg)
            loop.active.append(QueryState(spec, loop.order_of[spec.id], mb))
        for state in list(loop.active):
            removed_at = state.spec.removed_at
            if removed_at is not None and removed_at <= now + TIME_EPS:
                loop.active.remove(state)
                loop.outcomes[state.id] = self._outcome(state, None, removed=True)

    def _idle(self, loop: _Loop, executor: Executor, now: float, wake: list[float]) -> bool:
        """No batch is ready: finish queries that need none, then wait for the next event
        (input, a join, a leave). False when nothing is left to schedule."""
        for state in list(loop.active):
            if self._complete_without_batch(state, executor, now):
                loop.active.remove(state)
                loop.outcomes[state.id] = self._outcome(state, now, removed=False)
        if not loop.active and not loop.waiting:
            return False
        times = [w for w in wake if w > now]
        if loop.waiting:
            times.append(loop.waiting[0].added_at)  # type: ignore[arg-type]
        times += [
            s.spec.removed_at
            for s in loop.active
            if s.spec.removed_at is not None and s.spec.removed_at > now
        ]
        executor.wait_until(min(times) if times else now + self.poll_s)
        return True

    def _serve(self, loop: _Loop, pick: _Candidate, executor: Executor) -> None:
        """Run the picked batch, non-preemptively; after a query's last batch, its final
        aggregation (when it had more than one batch), and it leaves the list."""
        state = pick.state
        at = executor.now()
        seconds = executor.run_batch(state.id, state.processed, pick.tuples, at)
        end = executor.now()  # a real executor may also have waited for input to land
        loop.runs.append(
            BatchRun(state.id, pick.kind, state.processed, pick.tuples, end - seconds, end, seconds)
        )
        if state.first_start is None:
            state.first_start = end - seconds
        state.processed += pick.tuples
        state.batches += 1
        state.cost += seconds
        state.last_served = loop.served
        loop.served += 1
        if not self._input_done(state, executor):
            return
        if state.batches > 1:
            at = executor.now()
            seconds = executor.run_final(state.id, state.batches, at)
            end = executor.now()
            loop.runs.append(
                BatchRun(state.id, "final", state.processed, 0, end - seconds, end, seconds)
            )
            state.cost += seconds
        loop.active.remove(state)
        loop.outcomes[state.id] = self._outcome(state, executor.now(), removed=False)

    # -- helpers -----------------------------------------------------------------------

    def _candidates(
        self, active: list[QueryState], executor: Executor, now: float
    ) -> tuple[list[_Candidate], list[float]]:
        """Ready batches now, and the times at which more could become ready."""
        ready: list[_Candidate] = []
        wake: list[float] = []
        blocking = max(
            (s.spec.cost.cost(s.min_batch.size) for s in active if s.min_batch is not None),
            default=0.0,
        )

        def arrival(state: QueryState, n: int) -> None:
            t = executor.arrival_time(state.id, n)
            wake.append(now + self.poll_s if t is None else t)

        for state in active:
            spec = state.spec
            arrived = executor.available(state.id, now)
            if spec.total_known:
                arrived = min(arrived, spec.total)
            total = state.estimated_total(arrived, now)
            avail = arrived - state.processed
            remaining = total - state.processed
            if self.min_batch is False:
                if avail > 0:
                    ready.append(_Candidate(state, avail, "available", total))
                elif remaining > 0 or not spec.total_known:
                    arrival(state, state.processed + 1)
                continue
            assert state.min_batch is not None
            size = state.min_batch.size
            if not spec.total_known and avail > 0:
                # Sec. 4.4: with an estimated total every query competes on laxity
                kind = "min-batch" if avail >= size else "available"
                ready.append(_Candidate(state, min(avail, size), kind, total))
                continue
            if avail >= size:
                ready.append(_Candidate(state, size, "min-batch", total))
                continue
            if avail > 0 and spec.total_known and avail == remaining:
                ready.append(_Candidate(state, avail, "last", total))
                continue
            due = spec.arrivals.input_time(min((state.batches + 1) * size, spec.total))
            if (
                avail > 0
                and now >= due - TIME_EPS
                and self._time_batch(state, avail, now, blocking)
            ):
                ready.append(_Candidate(state, avail, "time", total))
                continue
            if due > now:
                wake.append(due)
            elif avail > 0:  # a late MinBatch the budget holds back: look again at risk
                wake.append(self._at_risk(state, blocking))
            if spec.total_known:
                arrival(state, min(state.processed + size, spec.total))
                if avail == 0 and due <= now:
                    arrival(state, state.processed + 1)
            else:
                arrival(state, state.processed + 1)
                if now < spec.window_end:
                    wake.append(spec.window_end)
        return ready, wake

    def _time_batch(self, state: QueryState, avail: int, now: float, blocking: float) -> bool:
        """May a late MinBatch's ``avail`` tuples run now (module docstring, ``time``)?"""
        if self.time_trigger == "always":
            return True
        spec, mb = state.spec, state.min_batch
        assert mb is not None
        after = replace(state, processed=state.processed + avail, batches=state.batches + 1)
        projected = state.cost + spec.cost.cost(avail) + after.remaining_cost(spec.total)
        return fits(projected, mb.bound) or now >= self._at_risk(state, blocking) - TIME_EPS

    @staticmethod
    def _at_risk(state: QueryState, blocking: float) -> float:
        """When the query's laxity falls to ``blocking``: from then on a batch of another
        query could make it miss, so a late MinBatch's tuples run on time."""
        return state.spec.deadline - state.remaining_cost(state.spec.total) - blocking

    def _input_done(self, state: QueryState, executor: Executor) -> bool:
        if state.spec.total_known:
            return state.processed >= state.spec.total
        return self._drained(state, executor, executor.now())

    def _complete_without_batch(self, state: QueryState, executor: Executor, now: float) -> bool:
        """An estimated-total query whose window closed with nothing left to process."""
        return not state.spec.total_known and self._drained(state, executor, now)

    @staticmethod
    def _drained(state: QueryState, executor: Executor, now: float) -> bool:
        """The window has closed at ``now`` and every tuple arrived by then is processed."""
        if now < state.spec.window_end:
            return False
        return state.processed >= executor.available(state.id, now)

    def _outcome(self, state: QueryState, completion: float | None, removed: bool) -> QueryOutcome:
        spec = state.spec
        met = completion is not None and not removed and fits(completion, spec.deadline)
        return QueryOutcome(
            query=spec.id,
            deadline=spec.deadline,
            completion=completion,
            met=met,
            removed=removed,
            batches=state.batches,
            tuples=state.processed,
            cost=state.cost,
            single_batch_cost=spec.cost.cost(max(state.processed, 1)),
            min_batch=state.min_batch,
        )
