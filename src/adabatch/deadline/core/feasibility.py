"""Is a multi-query scenario schedulable in MinBatches? (paper Sec. 4.3)

Sec. 4.3 notes that exact non-preemptive schedulability is NP-complete and uses
non-idling non-preemptive EDF (NINP-EDF) as a heuristic. We make "a feasible schedule
exists" checkable with a sufficient condition: cut every query into its MinBatch jobs (the
``k``-th released when ``k * MinBatchSize`` tuples have arrived, the last when all have,
carrying the final aggregation; all with the query's deadline) and apply the
processor-demand test with non-preemptive blocking: for every release time ``t1`` and
deadline ``t2``,

    sum(C_j : r_j >= t1, d_j <= t2) + max(C_k : r_k < t1, d_k > t2) <= t2 - t1.

If it holds, NINP-EDF over those jobs meets every deadline (George, Rivierre & Spuri 1996:
in a busy interval ending at a miss, only jobs released in it with earlier deadlines run,
plus at most one later-deadline job already started). The multi-query loop with
``strategy="edf"`` is exactly that scheduler, so on scenarios that pass, EDF must meet
every deadline in simulation; LLF, SJF and RR are measured against the same test.

"Arrived" means by both arrival models: the expected one (when the scheduler looks for the
tuples) and the actual one (when they are there), which differ only in a scenario that
gives a query an ``actual_rate``. A slower actual rate moves releases later, and a last
tuple that arrives too late for its query's deadline makes the scenario unschedulable
(without it the test would vouch for a scenario no scheduler can meet). Under a slower
rate the scheduler also processes what has arrived at the expected times (Sec. 4.4), a
job set the test does not model, so there the verdict is a heuristic the simulation
checks rather than a guarantee.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adabatch.deadline.core.cost import fits
from adabatch.deadline.core.multi import MAX_BATCHES, find_min_batch_size
from adabatch.deadline.core.spec import QuerySpec
from adabatch.errors import AdabatchError


@dataclass(frozen=True)
class Job:
    """One MinBatch of a query: released at ``release``, costs ``cost``, due ``deadline``."""

    query: str
    release: float
    cost: float
    deadline: float


@dataclass(frozen=True)
class Feasibility:
    """Result of :func:`check_feasibility`; ``t1``/``t2`` locate the tightest interval."""

    feasible: bool
    jobs: int
    t1: float | None
    t2: float | None
    demand: float
    blocking: float
    slack: float

    def to_json(self) -> dict[str, Any]:
        return {
            "feasible": self.feasible,
            "jobs": self.jobs,
            "t1": self.t1,
            "t2": self.t2,
            "demand": self.demand,
            "blocking": self.blocking,
            "slack": self.slack,
        }


def min_batch_jobs(spec: QuerySpec, rsf: float, c_max: float = math.inf) -> list[Job]:
    """The query's MinBatch jobs, released when their tuples are expected and have
    actually arrived (see module docstring)."""
    size = find_min_batch_size(spec, rsf, c_max).size
    total = spec.total
    full, rest = divmod(total, size)
    count = full + (1 if rest > 0 else 0)
    if count > MAX_BATCHES:
        msg = (
            f"query {spec.id!r}: MinBatchSize {size} cuts its {total} tuples into {count} "
            f"batches: allowed at most {MAX_BATCHES} (raise c_max or rsf)"
        )
        raise AdabatchError(msg)
    added = spec.added_at if spec.added_at is not None else spec.window_start
    jobs = []
    for k in range(1, count + 1):
        upto = min(k * size, total)
        tuples = upto - (k - 1) * size
        cost = spec.cost.cost(tuples)
        if k == count:
            cost += spec.agg_cost.cost(count)
        release = max(added, spec.arrivals.input_time(upto), spec.actual_arrivals.input_time(upto))
        jobs.append(Job(spec.id, release, cost, spec.deadline))
    return jobs


def demand_test(jobs: Sequence[Job]) -> Feasibility:
    """The processor-demand test with non-preemptive blocking over ``jobs``."""
    if not jobs:
        return Feasibility(True, 0, None, None, 0.0, 0.0, math.inf)
    by_release = sorted(jobs, key=lambda j: j.release)
    worst = (math.inf, None, None, 0.0, 0.0)
    for t2 in sorted({j.deadline for j in jobs}):
        inside = [j for j in by_release if j.deadline <= t2]
        outside = [j for j in by_release if j.deadline > t2]
        out_releases = [j.release for j in outside]
        prefix_max: list[float] = []
        running = 0.0
        for j in outside:
            running = max(running, j.cost)
            prefix_max.append(running)
        suffix = 0.0
        # walk releases from the latest down, accumulating the demand of jobs released
        # at or after t1
        i = len(inside) - 1
        while i >= 0:
            t1 = inside[i].release
            while i >= 0 and inside[i].release == t1:
                suffix += inside[i].cost
                i -= 1
            k = bisect.bisect_left(out_releases, t1)  # outside jobs released before t1
            blocking = prefix_max[k - 1] if k > 0 else 0.0
            slack = (t2 - t1) - (suffix + blocking)
            if slack < worst[0]:
                worst = (slack, t1, t2, suffix, blocking)
    slack, t1, t2, demand, blocking = worst
    feasible = fits(0.0, slack)
    return Feasibility(feasible, len(jobs), t1, t2, demand, blocking, slack)


def check_feasibility(
    specs: Sequence[QuerySpec], rsf: float, c_max: float = math.inf
) -> Feasibility:
    """Sufficient test that the scenario is schedulable in MinBatches (module docstring)."""
    jobs: list[Job] = []
    for spec in specs:
        jobs.extend(min_batch_jobs(spec, rsf, c_max))
        if len(jobs) > MAX_BATCHES:
            msg = (
                f"the scenario's queries need more than {MAX_BATCHES} MinBatches: allowed at "
                "most that many (raise c_max or rsf)"
            )
            raise AdabatchError(msg)
    return demand_test(jobs)
