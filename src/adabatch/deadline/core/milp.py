"""The constraint formulation of Sec. 3.2 as a MILP (``scipy.optimize.milp``, HiGHS).

For a given number of batches ``n`` the variables are the batch sizes ``x_i`` (integers
>= 1) and start times ``s_i``; with a linear cost ``c * x + o`` and a fixed rate ``r``:

- (5) ``sum x_i = numTupleTotal``;
- (6) ``s_i + c x_i + o <= s_{i+1}``: a batch ends before the next starts;
- (7) ``s_n + c x_n + o <= deadline - aggCost(n)``: the last one (and the final
  aggregation over ``n`` batches) meets the deadline;
- (8) ``sum_{j<=i} x_j <= r (s_i - windowStart) + 1``: a batch's tuples have arrived when
  it starts (the ``+ 1`` is our arrival convention, :mod:`adabatch.deadline.core.arrival`;
  with integer sizes it is exactly ``arrived(s_i)``);
- ``s_n >= windowEnd``: the last batch runs after the window closes, as in Function 1.

The cost ``c N + n o + aggCost(n)`` grows with ``n``, so, as the paper does with OR-Tools,
we solve for ``n = 1, 2, ...`` and keep the first feasible ``n``. For a given ``n`` the
cost is fixed; the objective ``max sum i * x_i`` only breaks ties towards schedules that
defer tuples to later batches, as Function 1 does (Case 4: 4 + 4 + 2, not 6 + 2 + 2).
Only linear cost models and fixed rates fit this formulation; Function 1
(:mod:`adabatch.deadline.core.single`) handles any monotone model and arrival curve.

HiGHS holds each constraint to an absolute tolerance of about ``1e-7``, so the problem is
solved scaled: sizes as fractions of the total and times as fractions of the horizon
(window start to deadline). Above :data:`INTEGER_LIMIT` tuples the sizes are continuous
and rounded afterwards (an integrality tolerance cannot tell 1e12 from 1e12 + 1). The
solver's sizes are then timed at their latest starts, as Function 1 places its batches,
and the plan is verified against every constraint (:func:`check_plan`) before it is
returned: a plan that fails is replaced by Function 1's, or reported infeasible.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from adabatch.deadline.core.arrival import ConstantArrival
from adabatch.deadline.core.cost import LinearCost
from adabatch.deadline.core.numbers import check_number
from adabatch.deadline.core.schedule import Batch, QueryPlan
from adabatch.deadline.core.single import plan_problems, plan_single
from adabatch.deadline.core.spec import QuerySpec
from adabatch.errors import AdabatchError
from adabatch.params import Param

INTEGER_LIMIT = 2**20
"""Up to this many tuples the sizes are integer variables; above it they are continuous
and rounded (a relative error below HiGHS's tolerance either way)."""

MAX_MILP_BATCHES = 200
"""Most batches the MILP tries (one solve per count; Function 1's plan covers more)."""
MAX_BATCHES_PARAM = Param("max_batches", None, "batches", kind=int, low=1, high=MAX_MILP_BATCHES)

TIME_LIMIT_S = 30.0
"""HiGHS's time limit per solve: an unfinished solve counts as no schedule found."""

SEARCH_BUDGET_S = 10.0
"""Wall time all solves of one query may take together; past it the search stops and
Function 1's verified plan (or infeasible) is reported, so a plan is bounded in time."""

MARGINS = (0.0, 1e-6)
"""Slack (fraction of the horizon) taken off each scaled constraint: first none, then
ten times HiGHS's feasibility tolerance when the first answer fails verification."""


def solve_batches(
    spec: QuerySpec, n: int, margin: float = 0.0, time_limit_s: float = TIME_LIMIT_S
) -> tuple[Batch, ...] | None:
    """A schedule with exactly ``n`` batches satisfying (5)-(8), or ``None`` (also when
    HiGHS does not finish within ``time_limit_s``); each scaled constraint is tightened
    by ``margin`` (a fraction of the horizon)."""
    cost = spec.cost
    arrivals = spec.arrivals
    if not isinstance(cost, LinearCost) or not isinstance(arrivals, ConstantArrival):
        msg = (
            f"query {spec.id!r}: the MILP needs a linear cost model and a fixed rate, got "
            f"{type(cost).__name__} and {type(arrivals).__name__}: use Function 1 instead"
        )
        raise AdabatchError(msg)
    total = arrivals.total
    if n < 1 or n > total:
        return None
    c, o, r, ws = cost.per_tuple, cost.overhead, arrivals.rate, arrivals.start
    deadline_last = spec.deadline - spec.agg_cost.cost(n)
    horizon = max(spec.deadline, spec.window_end) - ws  # > 0: window_end > window_start
    integer = total <= INTEGER_LIMIT
    # variables: v_1..v_n (sizes: tuples if integer, else fractions of the total),
    # t_1..t_n (starts as fractions of the horizon after the window start)
    k = 1.0 / total if integer else 1.0  # fraction of the total per unit of v
    work = c * total / horizon  # scaled seconds of one whole window's tuples
    over = o / horizon
    size = 2 * n
    rows: list[np.ndarray] = []
    upper: list[float] = []
    lower: list[float] = []

    def add(row: np.ndarray, lo: float, hi: float) -> None:
        rows.append(row)
        lower.append(lo)
        upper.append(hi)

    row = np.zeros(size)
    row[:n] = k
    add(row, 1.0, 1.0)  # (5)
    for i in range(n - 1):  # (6)
        row = np.zeros(size)
        row[n + i] = 1.0
        row[i] = work * k
        row[n + i + 1] = -1.0
        add(row, -np.inf, -over - margin)
    row = np.zeros(size)  # (7)
    row[n - 1] = work * k
    row[2 * n - 1] = 1.0
    add(row, -np.inf, (deadline_last - o - ws) / horizon - margin)
    for i in range(n):  # (8)
        row = np.zeros(size)
        row[: i + 1] = k
        row[n + i] = -r * horizon / total
        add(row, -np.inf, 1.0 / total - margin)
    low_v, high_v = (1.0, float(total)) if integer else (1.0 / total, 1.0)
    lo_bounds = np.concatenate([np.full(n, low_v), np.zeros(n)])
    hi_bounds = np.concatenate([np.full(n, high_v), np.full(n, np.inf)])
    lo_bounds[2 * n - 1] = (spec.window_end - ws) / horizon  # the last batch after the end
    integrality = np.concatenate([np.full(n, 1 if integer else 0), np.zeros(n)])
    # the cost is fixed once n is; among the schedules, defer tuples to later batches
    # (Function 1's choice) so the answer is the paper's on its worked cases
    objective = np.concatenate([-np.arange(1, n + 1) * k / n, np.zeros(n)])
    result = milp(
        c=objective,
        constraints=LinearConstraint(np.vstack(rows), np.array(lower), np.array(upper)),
        integrality=integrality,
        bounds=Bounds(lo_bounds, hi_bounds),
        options={"time_limit": time_limit_s},
    )
    if result.status != 0 or result.x is None:
        return None
    sizes = _whole_sizes(result.x[:n] * k, total)
    if sizes is None:
        return None
    return _latest_starts(sizes, cost, deadline_last)


def _whole_sizes(fractions: np.ndarray, total: int) -> list[int] | None:
    """Integer sizes summing to ``total`` whose running sums are the rounded running sums
    of ``fractions * total``; ``None`` when rounding empties a batch."""
    cumulative = [min(total, max(0, round(float(f) * total))) for f in np.cumsum(fractions)]
    cumulative[-1] = total
    sizes = [b - a for a, b in zip([0, *cumulative[:-1]], cumulative, strict=True)]
    return sizes if all(x >= 1 for x in sizes) else None


def _latest_starts(sizes: list[int], cost: LinearCost, deadline_last: float) -> tuple[Batch, ...]:
    """The batches of ``sizes`` at their latest starts: the last ends at ``deadline_last``,
    each earlier one when the next starts (feasible for these sizes iff any timing is)."""
    batches: list[Batch] = []
    end = deadline_last
    for x in reversed(sizes):
        seconds = cost.cost(x)
        start = end - seconds
        batches.append(Batch(start, x, end, seconds))
        end = start
    batches.reverse()
    return tuple(batches)


def check_plan(spec: QuerySpec, plan: QueryPlan) -> list[str]:
    """Why ``plan`` is not a schedule of ``spec`` that the plan's own numbers describe
    (empty when it is): every constraint of the formulation (:func:`plan_problems`), whole
    finite values, and a reported cost and completion that are the batches' and meet the
    deadline."""
    problems = []
    for i, b in enumerate(plan.batches):
        if isinstance(b.tuples, bool) or not isinstance(b.tuples, int):
            problems.append(f"batch {i} holds {b.tuples!r} tuples, not a whole number")
        if not all(math.isfinite(v) for v in (b.start, b.end, b.cost)):
            problems.append(f"batch {i} has a non-finite start, end or cost")
    if problems:
        return problems
    problems = plan_problems(spec, plan)
    if not plan.feasible or not plan.batches:
        return problems or ["a feasible plan has no batches"]
    agg = spec.agg_cost.cost(len(plan.batches))
    completion = plan.batches[-1].end + agg
    cost = sum(b.cost for b in plan.batches) + agg
    tolerance = 1e-9 * max(1.0, abs(completion))
    if plan.completion is None or not abs(plan.completion - completion) <= tolerance:
        problems.append(
            f"reported completion {plan.completion!r} is not the batches' {completion:g}"
        )
    if plan.deadline != spec.deadline:
        problems.append(f"reported deadline {plan.deadline!r} is not the query's {spec.deadline:g}")
    if not abs(plan.cost - cost) <= 1e-9 * max(1.0, abs(cost)):
        problems.append(f"reported cost {plan.cost!r} is not the batches' {cost:g}")
    return problems


def plan_milp(spec: QuerySpec, max_batches: int = 50) -> QueryPlan:
    """The fewest-batch (hence least-cost) schedule of Sec. 3.2, trying ``n = 1 ..
    max_batches``; infeasible when none of those has a solution.

    Every solver answer is verified (:func:`check_plan`); when one fails even with a
    safety margin, or the solver finds none while Function 1 has a verified plan, that
    plan is returned instead (its ``reason`` says so), else the query is infeasible."""
    check_number(MAX_BATCHES_PARAM, max_batches, text=False)
    common = {
        "query": spec.id,
        "deadline": spec.deadline,
        "single_batch_cost": spec.single_batch_cost,
    }
    give_up = time.monotonic() + SEARCH_BUDGET_S
    for n in range(1, min(max_batches, spec.total) + 1):
        failures: list[str] = []
        for margin in MARGINS:
            left = give_up - time.monotonic()
            if left <= 0:
                why = f"the MILP search stopped at {n} batches after its {SEARCH_BUDGET_S:g} s"
                return _fallback(spec, max_batches, why)
            batches = solve_batches(spec, n, margin, min(TIME_LIMIT_S, left))
            if batches is None:
                continue
            agg = spec.agg_cost.cost(n)
            plan = QueryPlan(
                feasible=True,
                batches=batches,
                cost=sum(b.cost for b in batches) + agg,
                agg_cost=agg,
                completion=batches[-1].end + agg,
                **common,
            )
            failures = check_plan(spec, plan)
            if not failures:
                return plan
        if failures:
            return _fallback(spec, max_batches, f"the MILP's {n}-batch plan fails: {failures[0]}")
    return _fallback(spec, max_batches, "")


def _fallback(spec: QuerySpec, max_batches: int, why: str) -> QueryPlan:
    """Function 1's plan when it is verified, else infeasible with ``why`` (the MILP's
    failure; empty when it found no schedule)."""
    f1 = plan_single(spec)
    if f1.feasible and not check_plan(spec, f1):
        found = why or f"the MILP found no schedule with at most {max_batches} batches"
        return dataclasses.replace(f1, reason=f"{found}; Function 1's verified plan instead")
    reason = f"no schedule with at most {max_batches} batches satisfies (5)-(8)"
    return QueryPlan(
        feasible=False,
        batches=(),
        cost=0.0,
        reason=f"{reason} ({why})" if why else reason,
        query=spec.id,
        deadline=spec.deadline,
        single_batch_cost=spec.single_batch_cost,
    )
