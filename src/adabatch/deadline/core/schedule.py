"""A query's batch schedule: what the single-query planners return and runners execute.

JSON form (``adabatch deadline plan --json`` prints one per query)::

    {"query": "q6", "feasible": true,
     "batches": [{"start": 7.0, "tuples": 6, "end": 10.0, "cost": 3.0},
                 {"start": 10.0, "tuples": 4, "end": 12.0, "cost": 2.0}],
     "cost": 5.0, "agg_cost": 0.0, "completion": 12.0, "deadline": 12.0,
     "single_batch_cost": 5.0, "earliest_completion": null, "reason": ""}

Batches are in execution order; batch ``i`` holds tuples ``offset_i + 1 .. offset_i +
tuples`` where ``offset_i`` is the sum of the earlier batches' tuples; the last batch
starts at or after the window end. ``cost`` includes the final aggregation (``agg_cost``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adabatch.errors import AdabatchError


@dataclass(frozen=True)
class Batch:
    """One planned batch: starts at ``start``, processes ``tuples`` tuples for ``cost``
    seconds, and ends at ``end = start + cost``."""

    start: float
    tuples: int
    end: float
    cost: float

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start, "tuples": self.tuples, "end": self.end, "cost": self.cost}


@dataclass(frozen=True)
class QueryPlan:
    """The schedule of one query, or why there is none.

    ``earliest_completion`` is the earliest deadline any schedule could meet (set for
    infeasible plans, where it is the number the user needs, and otherwise when asked).
    """

    query: str
    feasible: bool
    batches: tuple[Batch, ...]
    cost: float
    agg_cost: float = 0.0
    completion: float | None = None
    deadline: float | None = None
    single_batch_cost: float | None = None
    earliest_completion: float | None = None
    reason: str = ""

    @property
    def num_batches(self) -> int:
        return len(self.batches)

    @property
    def sizes(self) -> list[int]:
        """Tuples per batch in execution order."""
        return [b.tuples for b in self.batches]

    def offsets(self) -> list[int]:
        """Tuples before each batch (batch ``i`` holds tuples ``offsets[i] + 1 ..``)."""
        out, running = [], 0
        for b in self.batches:
            out.append(running)
            running += b.tuples
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "feasible": self.feasible,
            "batches": [b.to_json() for b in self.batches],
            "cost": self.cost,
            "agg_cost": self.agg_cost,
            "completion": self.completion,
            "deadline": self.deadline,
            "single_batch_cost": self.single_batch_cost,
            "earliest_completion": self.earliest_completion,
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QueryPlan:
        """The plan of :meth:`to_json` output (``end``/``cost`` of a batch may be absent)."""
        try:
            batches = tuple(
                Batch(
                    float(b["start"]),
                    int(b["tuples"]),
                    float(b.get("end", b["start"])),
                    float(b.get("cost", 0.0)),
                )
                for b in data["batches"]
            )
            return cls(
                query=str(data["query"]),
                feasible=bool(data["feasible"]),
                batches=batches,
                cost=float(data["cost"]),
                agg_cost=float(data.get("agg_cost", 0.0)),
                completion=data.get("completion"),
                deadline=data.get("deadline"),
                single_batch_cost=data.get("single_batch_cost"),
                earliest_completion=data.get("earliest_completion"),
                reason=str(data.get("reason", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            msg = f"plan JSON is malformed ({exc!r}): needs query, feasible, batches, cost"
            raise AdabatchError(msg) from None
