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

import importlib

from adabatch.errors import AdabatchError
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

# name -> "module:Class", imported on demand.
_ENTRIES = {
    "filter": "adabatch.workloads.filter:FilterWorkload",
    "reduce": "adabatch.workloads.reduce:ReduceWorkload",
    "join": "adabatch.workloads.join:JoinWorkload",
    "window": "adabatch.workloads.window:WindowWorkload",
}
assert tuple(_ENTRIES) == WORKLOAD_NAMES


def get_workload(name: str) -> BatchWorkload:
    """The workload called ``name``; an :class:`AdabatchError` lists the known names."""
    try:
        target = _ENTRIES[name]
    except (KeyError, TypeError):
        msg = f"unknown workload {name!r}: allowed {', '.join(WORKLOAD_NAMES)}"
        raise AdabatchError(msg) from None
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)()


__all__ = [
    "DEFAULT_FILTER_WORDS",
    "DEFAULT_KEYS",
    "DEFAULT_WINDOW_S",
    "SOURCE_COLUMNS",
    "WORKLOAD_NAMES",
    "BatchWorkload",
    "Workload",
    "WorkloadConfig",
    "get_workload",
]
