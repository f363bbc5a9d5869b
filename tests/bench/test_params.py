"""``params`` (fixed-point Fig. 21): the simulated rho x r grid and its figure."""

from __future__ import annotations

import numpy as np

from adabatch.bench.experiments.params import param_grid, plot_grids
from adabatch.sim.workloads import make_workload


def test_grid_latency_falls_with_rho_and_r_only_acts_on_the_superlinear_join(tmp_path) -> None:
    reduce = param_grid(
        make_workload("reduce", {"sigma": 0.0}),
        "constant:150000",
        source="test",
        rhos=(0.5, 0.7),
        rs=(0.1, 0.4),
        seeds=(0,),
        duration_s=120.0,
        warmup_s=30.0,
    )
    assert reduce.stable.min() == 1.0
    assert (reduce.latency[0] > reduce.latency[1]).all()  # rho 0.5 slower than 0.7
    # Reduce is linear: no Type-II test ever fires, r changes nothing
    assert np.allclose(reduce.latency[:, 0], reduce.latency[:, 1])
    join = param_grid(
        make_workload("join", {"sigma": 0.25}),
        "constant:8500",
        source="test",
        rhos=(0.5, 0.9),
        rs=(0.1, 0.4),
        seeds=(0, 1),
        duration_s=200.0,
        warmup_s=50.0,
    )
    assert not np.allclose(join.latency[:, 0], join.latency[:, 1])
    assert reduce.best() == (0.7, 0.1) or reduce.best() == (0.7, 0.4)
    fig = plot_grids([reduce, join], tmp_path / "heat.png")
    assert fig.path.stat().st_size > 10_000
