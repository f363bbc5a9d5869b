"""The constraint formulation of Sec. 3.2 as a MILP (``scipy.optimize.milp``, HiGHS).

For a given number of batches ``n`` the variables are the batch sizes ``x_i`` (integers
>= 1) and start times ``s_i``; with a linear cost ``c * x + o`` and a fixed rate ``r``:

- (5) ``sum x_i = numTupleTotal``;
- (6) ``s_i + c x_i + o <= s_{i+1}``: a batch ends before the next starts;
- (7) ``s_n + c x_n + o <= deadline - aggCost(n)``: the last one (and the final
  aggregation over ``n`` batches) meets the deadline;
- (8) ``sum_{j<=i} x_j <= r (s_i - windowStart) + 1``: a batch's tuples have arrived when
  it starts (the ``+ 1`` is our arrival convention, :mod:`adabatch.deadline.arrival`;
  with integer sizes it is exactly ``arrived(s_i)``);
- ``s_n >= windowEnd``: the last batch runs after the window closes, as in Function 1.

The cost ``c N + n o + aggCost(n)`` grows with ``n``, so, as the paper does with OR-Tools,
we solve for ``n = 1, 2, ...`` and keep the first feasible ``n``. For a given ``n`` the
cost is fixed; the objective ``max sum i * x_i`` only breaks ties towards schedules that
defer tuples to later batches, as Function 1 does (Case 4: 4 + 4 + 2, not 6 + 2 + 2).
Only linear cost models and fixed rates fit this formulation; Function 1
(:mod:`adabatch.deadline.single`) handles any monotone model and arrival curve.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from adabatch.deadline.arrival import ConstantArrival
from adabatch.deadline.cost import LinearCost
from adabatch.deadline.schedule import Batch, QueryPlan
from adabatch.deadline.spec import QuerySpec
from adabatch.errors import AdabatchError


def solve_batches(spec: QuerySpec, n: int) -> tuple[Batch, ...] | None:
    """A schedule with exactly ``n`` batches satisfying (5)-(8), or ``None``."""
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
    # variable vector: x_1..x_n, s_1..s_n
    size = 2 * n
    rows: list[np.ndarray] = []
    lower: list[float] = []
    upper: list[float] = []

    def add(row: np.ndarray, lo: float, hi: float) -> None:
        rows.append(row)
        lower.append(lo)
        upper.append(hi)

    row = np.zeros(size)
    row[:n] = 1.0
    add(row, total, total)  # (5)
    for i in range(n - 1):  # (6)
        row = np.zeros(size)
        row[n + i] = 1.0
        row[i] = c
        row[n + i + 1] = -1.0
        add(row, -np.inf, -o)
    row = np.zeros(size)  # (7)
    row[n - 1] = c
    row[2 * n - 1] = 1.0
    add(row, -np.inf, deadline_last - o)
    for i in range(n):  # (8)
        row = np.zeros(size)
        row[: i + 1] = 1.0
        row[n + i] = -r
        add(row, -np.inf, 1.0 - r * ws)
    lo_bounds = np.concatenate([np.ones(n), np.full(n, ws)])
    hi_bounds = np.concatenate([np.full(n, float(total)), np.full(n, np.inf)])
    lo_bounds[2 * n - 1] = max(ws, spec.window_end)  # the last batch after the window end
    integrality = np.concatenate([np.ones(n), np.zeros(n)])
    # the cost is fixed once n is; among the schedules, defer tuples to later batches
    # (Function 1's choice) so the answer is the paper's on its worked cases
    objective = np.concatenate([-np.arange(1, n + 1) / n, np.zeros(n)])
    result = milp(
        c=objective,
        constraints=LinearConstraint(np.vstack(rows), np.array(lower), np.array(upper)),
        integrality=integrality,
        bounds=Bounds(lo_bounds, hi_bounds),
    )
    if result.status != 0 or result.x is None:
        return None
    xs = [round(v) for v in result.x[:n]]
    starts = result.x[n:]
    return tuple(
        Batch(float(s), x, float(s) + cost.cost(x), cost.cost(x))
        for x, s in zip(xs, starts, strict=True)
    )


def plan_milp(spec: QuerySpec, max_batches: int = 50) -> QueryPlan:
    """The fewest-batch (hence least-cost) schedule of Sec. 3.2, trying ``n = 1 ..
    max_batches``; infeasible when none of those has a solution."""
    if isinstance(max_batches, bool) or not isinstance(max_batches, int) or max_batches < 1:
        msg = f"max_batches = {max_batches!r}: allowed an integer >= 1"
        raise AdabatchError(msg)
    common = {
        "query": spec.id,
        "deadline": spec.deadline,
        "single_batch_cost": spec.single_batch_cost,
    }
    for n in range(1, min(max_batches, spec.total) + 1):
        batches = solve_batches(spec, n)
        if batches is None:
            continue
        agg = spec.agg_cost.cost(n)
        return QueryPlan(
            feasible=True,
            batches=batches,
            cost=sum(b.cost for b in batches) + agg,
            agg_cost=agg,
            completion=batches[-1].end + agg,
            **common,
        )
    return QueryPlan(
        feasible=False,
        batches=(),
        cost=0.0,
        reason=f"no schedule with at most {max_batches} batches satisfies (5)-(8)",
        **common,
    )
