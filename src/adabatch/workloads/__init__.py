"""The papers' workloads as real Spark queries: filter, reduce, join, window (§5.1).

``get_workload(name)`` returns the workload ``adabatch run`` attaches to the source's
streaming DataFrame::

    cfg = WorkloadConfig(name="reduce", out_dir=out, run_id="run-1", keys=1000)
    workload = get_workload(cfg.name)
    workload.check(cfg)                       # database reachable, tables created
    query = (workload.start(df, cfg)          # a DataStreamWriter with foreachBatch set
             .option("checkpointLocation", str(out / "checkpoint"))
             .trigger(processingTime="0 seconds")
             .queryName("reduce")
             .start())
"""

from __future__ import annotations

from adabatch.registry import Registry
from adabatch.workloads.base import (
    DEFAULT_FILTER_WORDS,
    DEFAULT_KEYS,
    DEFAULT_WINDOW_S,
    SOURCE_COLUMNS,
    WORKLOAD_NAMES,
    BatchWorkload,
    Workload,
    WorkloadConfig,
)

WORKLOADS: Registry[type[BatchWorkload]] = Registry(
    "workload",
    {
        "filter": "adabatch.workloads.filter:FilterWorkload",
        "reduce": "adabatch.workloads.reduce:ReduceWorkload",
        "join": "adabatch.workloads.join:JoinWorkload",
        "window": "adabatch.workloads.window:WindowWorkload",
    },
)
assert tuple(WORKLOADS.names()) == WORKLOAD_NAMES


def get_workload(name: str) -> BatchWorkload:
    """The workload called ``name``; an :class:`AdabatchError` lists the known names."""
    return WORKLOADS.get(name)()


__all__ = [
    "DEFAULT_FILTER_WORDS",
    "DEFAULT_KEYS",
    "DEFAULT_WINDOW_S",
    "SOURCE_COLUMNS",
    "WORKLOADS",
    "WORKLOAD_NAMES",
    "BatchWorkload",
    "Workload",
    "WorkloadConfig",
    "get_workload",
]
