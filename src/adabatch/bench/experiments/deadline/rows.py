"""The rows of ``results.json``, one dataclass per section, and the file as a whole.

Each row reads itself from the JSON the bench wrote (``from_json``, tolerant of rows from
earlier versions that lack later fields) and writes the same keys back in the same order
(``to_json``), so a resumed bench keeps its rows byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adabatch.deadline.spark.baseline import MEASURED
from adabatch.deadline.spark.cost_profile import CostProfile, cost_profile_from_json


def _tuple(items: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if items is None else tuple(items)


def _list(items: Sequence[str] | None) -> list[str] | None:
    return None if items is None else list(items)


@dataclass(frozen=True)
class DataFacts:
    """The landing data the bench ran on."""

    scale_factor: float
    slots: int
    rate_slots_per_s: float
    window_s: float
    orders: int
    lineitem: int

    def to_json(self) -> dict[str, Any]:
        return {
            "scale_factor": self.scale_factor,
            "slots": self.slots,
            "rate_slots_per_s": self.rate_slots_per_s,
            "window_s": self.window_s,
            "orders": self.orders,
            "lineitem": self.lineitem,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DataFacts:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class SingleRow:
    """One query alone with deadline ``window end + factor·D`` on the Spark runner (Fig. 6).

    ``d`` is D (``"D"`` in the JSON). A plan that ran to its end has ``ran`` and the
    measured ``completion``, ``late_s``, ``correct`` and ``differences``; a run that
    failed has ``error``; an infeasible plan neither.
    """

    run: int
    query: str
    factor: float
    d: float
    deadline: float
    feasible: bool
    planned_batches: int
    planned_cost: float | None = None
    earliest_completion: float | None = None
    load_avg: float | None = None
    met: bool = False
    batches: int | None = 0
    cost: float | None = None
    normalised_cost: float | None = None
    ran: bool = False
    completion: float | None = None
    late_s: float | None = None
    correct: bool | None = None
    differences: tuple[str, ...] | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run": self.run,
            "query": self.query,
            "factor": self.factor,
            "D": self.d,
            "deadline": self.deadline,
            "feasible": self.feasible,
            "planned_batches": self.planned_batches,
            "planned_cost": self.planned_cost,
            "earliest_completion": self.earliest_completion,
            "load_avg": self.load_avg,
            "met": self.met,
            "batches": self.batches,
            "cost": self.cost,
        }
        if self.error is not None:
            out["error"] = self.error
            return out
        out["normalised_cost"] = self.normalised_cost
        if self.ran:
            out.update(
                completion=self.completion,
                late_s=self.late_s,
                correct=self.correct,
                differences=_list(self.differences),
            )
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SingleRow:
        return cls(
            run=data.get("run", 1),
            query=data["query"],
            factor=data["factor"],
            d=data["D"],
            deadline=data["deadline"],
            feasible=data["feasible"],
            planned_batches=data["planned_batches"],
            planned_cost=data.get("planned_cost"),
            earliest_completion=data.get("earliest_completion"),
            load_avg=data.get("load_avg"),
            met=data["met"],
            batches=data.get("batches"),
            cost=data.get("cost"),
            normalised_cost=data.get("normalised_cost"),
            ran="completion" in data,
            completion=data.get("completion"),
            late_s=data.get("late_s"),
            correct=data.get("correct"),
            differences=_tuple(data.get("differences")),
            error=data.get("error"),
        )


@dataclass(frozen=True)
class BaselineRow:
    """One query as a Structured Streaming query under one trigger (Fig. 5): the
    streaming run's measurements (``StreamingRun.to_json`` without the answer, keys in
    its order: :data:`~adabatch.deadline.spark.baseline.MEASURED`), D, and its cost
    relative to D (``None`` when the run failed)."""

    run: int
    query: str
    trigger: str
    batches: int
    cost: float
    data_batches: int | None = None
    wall_s: float | None = None
    completion: float | None = None
    deadline: float | None = None
    met: bool | None = None
    failure: str | None = None
    memory_failure: bool | None = None
    max_state_bytes: int | None = None
    correct: bool | None = None
    differences: tuple[str, ...] | None = None
    d: float | None = None
    load_avg: float | None = None
    ratio_to_single_batch: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            **{k: getattr(self, k) for k in MEASURED},
            "correct": self.correct,
            "differences": _list(self.differences),
            "D": self.d,
            "load_avg": self.load_avg,
            "ratio_to_single_batch": self.ratio_to_single_batch,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BaselineRow:
        fields = {k: data.get(k) for k in cls.__dataclass_fields__ if k not in ("d", "run")}
        fields["differences"] = _tuple(data.get("differences"))
        return cls(run=data.get("run", 1), d=data.get("D"), **fields)


@dataclass(frozen=True)
class SimulationRow:
    """One strategy in one simulated multi-query scenario (Fig. 7, 8, 10, 11).

    ``time_trigger``, ``late_s`` and ``c_max`` are ``None`` in rows written before the
    bench recorded them (those ran under the paper's ``always`` rule)."""

    figure: str
    delta: float
    rate: str
    rsf: float
    min_batch: bool
    strategy: str
    schedulable: bool
    all_met: bool
    missed: tuple[str, ...]
    normalised_cost: float
    total_cost: float
    single_batch_cost: float
    batches: int
    time_trigger: str | None = None
    late_s: float | None = None
    c_max: float | None = None

    @property
    def trigger(self) -> str:
        """The time trigger the row ran under (``always`` before the option existed)."""
        return self.time_trigger if self.time_trigger is not None else "always"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "figure": self.figure,
            "delta": self.delta,
            "rate": self.rate,
            "rsf": self.rsf,
            "min_batch": self.min_batch,
            "time_trigger": self.time_trigger,
            "late_s": self.late_s,
            "c_max": self.c_max,
            "strategy": self.strategy,
            "schedulable": self.schedulable,
            "all_met": self.all_met,
            "missed": list(self.missed),
            "normalised_cost": self.normalised_cost,
            "total_cost": self.total_cost,
            "single_batch_cost": self.single_batch_cost,
            "batches": self.batches,
        }
        optional = ("time_trigger", "late_s", "c_max")
        return {k: v for k, v in out.items() if k not in optional or v is not None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SimulationRow:
        fields = {k: data.get(k) for k in cls.__dataclass_fields__}
        fields["missed"] = tuple(data["missed"])
        return cls(**fields)


@dataclass(frozen=True)
class MultiRow:
    """One strategy of the multi-query loop on Spark: the scheduler's result as its JSON
    (``ScheduleResult.to_json``) and, per query, whether the answer equals DuckDB's."""

    strategy: str
    result: Mapping[str, Any]
    correct: Mapping[str, bool | None]

    @property
    def all_met(self) -> bool:
        return bool(self.result["all_met"])

    @property
    def normalised_cost(self) -> float:
        return self.result["normalised_cost"]

    @property
    def batches(self) -> int:
        return self.result["batches"]

    def to_json(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "result": dict(self.result),
            "correct": dict(self.correct),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MultiRow:
        return cls(data["strategy"], data["result"], data["correct"])


def rows_from_json(cls: Any, data: Sequence[Mapping[str, Any]] | None) -> list[Any] | None:
    """``cls.from_json`` of every row in ``data``; ``None`` for a section not there."""
    return None if data is None else [cls.from_json(r) for r in data]


def _json(rows: Sequence[Any] | None) -> list[dict[str, Any]] | None:
    return None if rows is None else [r.to_json() for r in rows]


@dataclass
class BenchResults:
    """``results.json``: what the bench measured so far. A section is ``None`` until it
    ran (or was kept from the run ``--resume`` continues); ``profiles`` are the profile
    files' JSON by query, ``config`` the JSON of the config that ran."""

    config: dict[str, Any]
    machine: dict[str, Any]
    data: DataFacts
    runs: int = 1
    profiles: dict[str, dict[str, Any]] | None = None
    elapsed_s: float | None = None
    single: list[SingleRow] | None = None
    baseline: list[BaselineRow] | None = None
    simulation: list[SimulationRow] | None = None
    spark_multi: list[MultiRow] | None = None

    def cost_profiles(self) -> dict[str, CostProfile]:
        """The saved profiles, by query, in the order they were profiled."""
        return {
            q: cost_profile_from_json(p, f"profile {q!r} in results.json")
            for q, p in (self.profiles or {}).items()
        }

    def to_json(self) -> dict[str, Any]:
        out = {
            "config": self.config,
            "machine": self.machine,
            "runs": self.runs,
            "data": self.data.to_json(),
            "profiles": self.profiles,
            "elapsed_s": self.elapsed_s,
            "single": _json(self.single),
            "baseline": _json(self.baseline),
            "simulation": _json(self.simulation),
            "spark_multi": _json(self.spark_multi),
        }
        return {k: v for k, v in out.items() if v is not None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BenchResults:
        return cls(
            config=data["config"],
            machine=data["machine"],
            data=DataFacts.from_json(data["data"]),
            runs=data.get("runs", 1),
            profiles=data.get("profiles"),
            elapsed_s=data.get("elapsed_s"),
            single=rows_from_json(SingleRow, data.get("single")),
            baseline=rows_from_json(BaselineRow, data.get("baseline")),
            simulation=rows_from_json(SimulationRow, data.get("simulation")),
            spark_multi=rows_from_json(MultiRow, data.get("spark_multi")),
        )
