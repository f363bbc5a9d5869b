"""adabatch.sim: discrete-event simulation of batched streaming under any controller.

``workloads`` holds the cost models, ``engine`` the event loop, ``run`` the runs, files and
the static oracle; rate profiles live in :mod:`adabatch.profiles` (shared with Spark).
"""

from adabatch.sim.engine import SimOutcome, run_simulation
from adabatch.sim.run import (
    Scenario,
    SimResult,
    StaticSweep,
    make_scenario,
    parse_grid,
    simulate,
    sweep_static,
    write_run,
    write_sweep,
)
from adabatch.sim.workloads import (
    WORKLOADS,
    Cost,
    CostModel,
    FilterModel,
    JoinModel,
    ReduceModel,
    Resources,
    WindowModel,
    make_workload,
    parse_resources,
    stability_crossings,
)

__all__ = [
    "WORKLOADS",
    "Cost",
    "CostModel",
    "FilterModel",
    "JoinModel",
    "ReduceModel",
    "Resources",
    "Scenario",
    "SimOutcome",
    "SimResult",
    "StaticSweep",
    "WindowModel",
    "make_scenario",
    "make_workload",
    "parse_grid",
    "parse_resources",
    "run_simulation",
    "simulate",
    "stability_crossings",
    "sweep_static",
    "write_run",
    "write_sweep",
]
