"""Single-query scheduling under known requirements (paper Sec. 3.1).

:func:`schedule_without_agg_cost` is Function 1 ``ScheduleWithoutAggCost``: it fills the
last batch with what can be processed between the window end and the last batch's
deadline, then works backwards, giving each earlier batch the most tuples that can be
processed between their availability and the next batch's start. :func:`plan_single` adds
the slack-time start (eqs. 2-3), the outer iteration on the final-aggregation cost (eq. 4)
and infeasibility detection with the earliest achievable completion time.

Tuples are integers and a batch processes whole tuples: ``tuples_within`` rounds capacity
down. Every batch is placed at its latest start: the last one ends at its deadline (so it
starts at or after the window end), each earlier one ends when the next starts
(``timePt - Cost(n)``). The paper starts the last batch at the window end and shifts
``timePt`` by the whole available duration; with whole tuples that wastes the rounding
remainder (and can turn a feasible query infeasible), so we shift by the batch's cost. The
two agree whenever capacity is not rounded, as in the paper's examples. With a linear cost
model this backward greedy needs the fewest batches (an exchange argument: moving tuples
from an earlier batch into a later one frees exactly the time it costs); the MILP of
Sec. 3.2 (:mod:`adabatch.deadline.core.milp`) checks that on random instances. For other
monotone models it is the paper's heuristic.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from adabatch.deadline.core.arrival import ArrivalModel
from adabatch.deadline.core.cost import TIME_EPS, AggregationCost, QueryCost, fits
from adabatch.deadline.core.schedule import Batch, QueryPlan
from adabatch.deadline.core.spec import QuerySpec
from adabatch.errors import AdabatchError

MAX_PLAN_BATCHES = 10_000
"""Most batches a single-query plan may have: beyond it a plan is refused, not built (a
runner executes each batch as a Spark job; the paper's plans have a handful)."""


@dataclasses.dataclass(frozen=True)
class _Schedule:
    batches: tuple[Batch, ...]
    reason: str = ""

    @property
    def ok(self) -> bool:
        return not self.reason


def schedule_without_agg_cost(
    arrivals: ArrivalModel, cost: QueryCost, window_end: float, deadline_last_batch: float
) -> tuple[tuple[Batch, ...], str]:
    """Function 1 (Sec. 3.1): the batches, in execution order, that meet
    ``deadline_last_batch`` with the fewest batches, or ``((), reason)`` if none can.

    The last batch ends at ``deadline_last_batch`` and starts no earlier than
    ``window_end``; every other batch ends when the next starts.
    """
    total = arrivals.total
    time_dur_last = deadline_last_batch - window_end
    if not fits(0.0, time_dur_last):
        return (), (
            f"the last batch's deadline {deadline_last_batch:g} is before the window end "
            f"{window_end:g}"
        )
    num_last = min(cost.tuples_within(time_dur_last), total)
    if num_last == 0:
        return (), (
            f"not even one tuple can be processed between the window end {window_end:g} "
            f"and the last batch's deadline {deadline_last_batch:g}"
        )
    last_cost = cost.cost(num_last)
    last_start = max(window_end, deadline_last_batch - last_cost)
    batches = [Batch(last_start, num_last, last_start + last_cost, last_cost)]
    pending = total - num_last
    time_pt = last_start
    while pending > 0:
        if len(batches) >= MAX_PLAN_BATCHES:
            msg = (
                f"a schedule whose last batch ends by {deadline_last_batch!r} needs more than "
                f"{MAX_PLAN_BATCHES} batches: allowed at most {MAX_PLAN_BATCHES} (a later "
                "deadline, or a cost model cheaper per tuple than the input arrives)"
            )
            raise AdabatchError(msg)
        ip_avail_time = arrivals.input_time(pending)
        time_dur = time_pt - ip_avail_time
        num = cost.tuples_within(time_dur) if fits(0.0, time_dur) else 0
        if num > pending:
            num = pending
        if num == 0:
            return (), (
                f"{pending} earlier tuples cannot be processed before {time_pt:g}: the "
                f"{pending}th arrives at {ip_avail_time:g}"
            )
        batch_cost = cost.cost(num)
        start = time_pt - batch_cost
        batches.append(Batch(start, num, time_pt, batch_cost))
        pending -= num
        time_pt = start
    batches.reverse()
    return tuple(batches), ""


AHEAD_COST_TOL = 0.005
"""``ahead`` plans may cost this much more (relative) than the least-cost plan: with a
piecewise-linear model another split of the same batches differs in cost by a little."""


def plan_single(spec: QuerySpec, *, earliest: bool = False, ahead: bool = False) -> QueryPlan:
    """The least-cost schedule of one query that meets its deadline (Sec. 3.1).

    With non-negative slack (eq. 2) one batch starts at ``deadline - minCompCost``
    (eq. 3). Otherwise Function 1 runs with the last batch's deadline reduced by the
    final-aggregation cost of ``k`` batches (eq. 4), starting at ``k = 2`` and growing ``k``
    until the aggregation cost of the batches found is at most the one assumed.
    Infeasible specs get ``feasible=False`` and the earliest achievable completion time;
    ``earliest=True`` computes that time for feasible specs too.

    ``ahead=True`` keeps the cost and moves the slack to the end: of the least-cost plans
    it returns the one that completes first (Function 1 for the earliest deadline whose
    plan costs no more, within :data:`AHEAD_COST_TOL`). Function 1 makes the batch after
    the window end as large as the deadline allows, so a batch that runs 20% over its model
    misses the deadline however early the others ran; on Spark the runner plans ahead.
    """
    try:
        plan = _plan(spec)
        if plan.feasible and ahead:
            plan = _ahead(spec, plan)
        if not plan.feasible or earliest:
            plan = dataclasses.replace(plan, earliest_completion=earliest_completion(spec))
    except AdabatchError as exc:
        msg = f"query {spec.id!r}: {exc}"
        raise AdabatchError(msg) from None
    if not plan.feasible:
        plan = dataclasses.replace(
            plan,
            reason=(
                f"no schedule meets deadline {spec.deadline:g} ({plan.reason}); the "
                f"earliest achievable completion is {plan.earliest_completion:.6g}"
            ),
        )
    return plan


def _plan(spec: QuerySpec) -> QueryPlan:
    total = spec.total
    single = spec.cost.cost(total)
    slack = spec.deadline - spec.window_end - single  # eq. 2
    common = {"query": spec.id, "deadline": spec.deadline, "single_batch_cost": single}
    if fits(0.0, slack):
        # eq. 3, never before the window end: a slack of -1e-9 still "fits"
        start = max(spec.deadline - single, spec.window_end)
        batch = Batch(start, total, start + single, single)
        return QueryPlan(
            feasible=True, batches=(batch,), cost=single, completion=batch.end, **common
        )
    agg = spec.agg_cost
    k = 2
    while True:
        assumed = agg.cost(k)
        batches, reason = schedule_without_agg_cost(
            spec.arrivals, spec.cost, spec.window_end, spec.deadline - assumed
        )
        if not batches:
            return QueryPlan(feasible=False, batches=(), cost=0.0, reason=reason, **common)
        found = agg.cost(len(batches))
        if found <= assumed + TIME_EPS * max(1.0, assumed):
            work = sum(b.cost for b in batches)
            return QueryPlan(
                feasible=True,
                batches=batches,
                cost=work + found,
                agg_cost=found,
                completion=batches[-1].end + found,
                **common,
            )
        # Function 1 needs at least as many batches for any larger k (less time), so
        # acceptance needs an assumed cost of at least `found`: skip the k below it.
        k = _first_k_assuming(agg, found, k + 1, total)
        if k > total:
            return QueryPlan(
                feasible=False,
                batches=(),
                cost=0.0,
                reason="the final-aggregation cost grows faster than batching saves",
                **common,
            )


def _ahead(spec: QuerySpec, plan: QueryPlan) -> QueryPlan:
    """Of the plans costing at most ``plan.cost`` (within the tolerance), the one for the
    earliest deadline."""

    def cheap(p: QueryPlan) -> bool:
        return p.feasible and p.cost <= plan.cost * (1 + AHEAD_COST_TOL)

    _, best = _earliest_deadline(spec, spec.window_end, spec.deadline, cheap)
    return dataclasses.replace(best or plan, deadline=spec.deadline)


def _earliest_deadline(
    spec: QuerySpec, lo: float, hi: float, accept: Callable[[QueryPlan], bool]
) -> tuple[float, QueryPlan | None]:
    """The earliest deadline in ``[lo, hi]`` whose plan ``accept`` takes, with that plan
    (``None`` when only ``hi``, assumed accepted, is). Bisection: a later deadline never
    needs a costlier plan. Snapped to 6 decimals when that is accepted too (10.5, not
    10.4999999990)."""

    def tried(deadline: float) -> QueryPlan | None:
        p = _plan(dataclasses.replace(spec, deadline=deadline))
        return p if accept(p) else None

    if (first := tried(lo)) is not None:
        return lo, first
    top, best = hi, None
    for _ in range(200):
        if hi - lo <= 1e-12 * max(1.0, abs(hi)):
            break
        mid = 0.5 * (lo + hi)
        if (found := tried(mid)) is not None:
            best, hi = found, mid
        else:
            lo = mid
    snapped = round(hi, 6)
    if snapped != hi and snapped <= top and (found := tried(snapped)) is not None:
        return snapped, found
    return hi, best


def _first_k_assuming(agg: AggregationCost, found: float, k: int, total: int) -> int:
    """The smallest ``k' >= k`` with ``agg.cost(k') >= found`` (``total + 1`` if none up
    to ``total``); the cost is non-decreasing in the number of batches."""

    def enough(j: int) -> bool:
        return agg.cost(j) >= found - TIME_EPS * max(1.0, found)

    if k > total or enough(k):
        return k
    lo, step = k, 1  # enough(lo) is false
    while lo + step <= total and not enough(lo + step):
        lo, step = lo + step, step * 2
    hi = min(lo + step, total + 1)  # enough(hi) or hi == total + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if enough(mid):
            hi = mid
        else:
            lo = mid
    return hi


def earliest_completion(spec: QuerySpec) -> float:
    """The earliest deadline the planner can meet for ``spec``; one batch after the window
    end always works, so this is at most ``window_end + minCompCost``."""
    hi = spec.window_end + spec.cost.cost(spec.total)
    deadline, _ = _earliest_deadline(spec, spec.window_end, hi, lambda p: p.feasible)
    return deadline


def plan_problems(spec: QuerySpec, plan: QueryPlan) -> list[str]:
    """Why ``plan`` is not a valid schedule of ``spec`` (empty when it is): all tuples
    once, in arrival order; each batch starts after its tuples arrived and after the
    previous batch; the last starts at or after the window end; batch costs follow the
    cost model; the final aggregation completes by the deadline."""
    if not plan.feasible:
        return ["the plan is marked infeasible"]
    problems = []
    total = sum(b.tuples for b in plan.batches)
    if total != spec.total:
        problems.append(f"the batches hold {total} tuples, the query {spec.total}")
    done = 0
    previous_end = -float("inf")
    for i, b in enumerate(plan.batches):
        done += b.tuples
        if b.tuples < 1:
            problems.append(f"batch {i} holds {b.tuples} tuples")
        if not fits(spec.arrivals.input_time(done), b.start):
            problems.append(
                f"batch {i} starts at {b.start:g} before its last tuple arrives "
                f"({spec.arrivals.input_time(done):g})"
            )
        if not fits(previous_end, b.start):
            problems.append(f"batch {i} starts at {b.start:g} before the previous one ends")
        expected = spec.cost.cost(b.tuples)
        if abs(b.cost - expected) > TIME_EPS * max(1.0, expected) or abs(
            b.end - b.start - b.cost
        ) > TIME_EPS * max(1.0, abs(b.end)):
            problems.append(f"batch {i} cost {b.cost:g} does not match the model ({expected:g})")
        previous_end = b.end
    if plan.batches and not fits(spec.window_end, plan.batches[-1].start):
        problems.append("the last batch starts before the window end")
    agg = spec.agg_cost.cost(len(plan.batches))
    if plan.batches and not fits(previous_end + agg, spec.deadline):
        problems.append(
            f"completion {previous_end + agg:g} is after the deadline {spec.deadline:g}"
        )
    return problems
