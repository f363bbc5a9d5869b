"""adabatch.sim: discrete-event simulation of batched streaming under any controller.

``workloads`` holds the cost models and ``engine`` the event loop; runs, files and the
static oracle are in :mod:`adabatch.runs.simulated`; rate profiles live in
:mod:`adabatch.profiles` (shared with Spark).
"""

from adabatch.sim.engine import ProfileArrivals, SimOutcome, run_simulation, simulate_arrivals
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
    "ProfileArrivals",
    "ReduceModel",
    "Resources",
    "SimOutcome",
    "WindowModel",
    "make_workload",
    "parse_resources",
    "run_simulation",
    "simulate_arrivals",
    "stability_crossings",
]
