"""One contract test over every registered controller (river's check-suite idea).

Each controller is driven through plan/observe by the simulator, the same batching model
(:class:`adabatch.batching.BatchCutter`) that the Spark source runs, on a noisy linear
processing time; the checks hold for any correct controller.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from adabatch.control import BatchPlan, BatchReport, Controller, create, names
from adabatch.control.registry import controller_class
from adabatch.errors import AdabatchError
from adabatch.profiles import parse_profile
from adabatch.sim.engine import run_simulation
from adabatch.sim.workloads import make_workload

# p = 0.3 s + 1e-4 s per record over min(blocks, 2) cores, times lognormal noise
LINEAR = {"overhead_s": 0.3, "per_block_s": 0, "per_record_s": 1e-4, "cores": 2, "sigma": 0.2}


def drive(ctrl: Controller, seconds: float, seed: int, rate: float = 2000.0) -> list[BatchPlan]:
    """Simulate ``seconds`` of a constant ``rate`` under ``ctrl``; the plans of the batches
    it processed, in order."""
    out = run_simulation(
        ctrl,
        make_workload("filter", LINEAR),
        parse_profile(f"constant:{rate:g}"),
        seconds,
        seed=seed,
    )
    return [BatchPlan(r.interval_s, r.blocks, r.max_records) for r in out.records]


@pytest.fixture(params=names())
def name(request: pytest.FixtureRequest) -> str:
    return request.param


def make(name: str, **params: object) -> Controller:
    """Controller ``name`` with its required parameters at their examples, and ``params``."""
    return create(name, {**controller_class(name).EXAMPLE_PARAMS, **params})


def test_defaults_construct_and_describe(name: str) -> None:
    ctrl = make(name)
    described = ctrl.describe()
    assert described["controller"] == name
    json.dumps(described)  # JSON-able


def test_a_required_parameter_has_an_example_and_is_named_when_missing(name: str) -> None:
    cls = controller_class(name)
    required = [p.name for p in cls.PARAMS if p.required]
    assert sorted(cls.EXAMPLE_PARAMS) == sorted(required)
    for missing in required:
        given = {k: v for k, v in cls.EXAMPLE_PARAMS.items() if k != missing}
        with pytest.raises(AdabatchError, match=rf"'{missing}' must be set"):
            create(name, given)


def test_unknown_parameter_is_named(name: str) -> None:
    with pytest.raises(AdabatchError, match="no_such_param"):
        make(name, no_such_param="1")


def test_every_numeric_parameter_rejects_garbage(name: str) -> None:
    for p in make(name).PARAMS:
        if p.kind in (int, float) and p.choices is None:
            with pytest.raises(AdabatchError, match=p.name):
                make(name, **{p.name: "not-a-number"})


def test_plans_are_valid_and_deterministic(name: str) -> None:
    a = drive(make(name), 200.0, seed=7)
    b = drive(make(name), 200.0, seed=7)
    assert a == b
    assert len(a) >= 20  # the controller ran for real
    for plan in a:
        assert plan.interval_s > 0 and plan.blocks >= 1


def test_state_round_trip_continues_identically(name: str) -> None:
    ctrl = make(name)
    drive(ctrl, 60.0, seed=3)
    snapshot = json.loads(json.dumps(ctrl.state()))
    twin = make(name)
    twin.restore(snapshot)
    assert twin.state() == ctrl.state()
    assert twin.plan(1000.0) == ctrl.plan(1000.0)


def test_survives_extreme_reports(name: str) -> None:
    ctrl = make(name)
    ctrl.plan(0.0)
    odd = [
        BatchReport(0, 1.0, 2, 0, 0.0, 0.0, 1.0, 1.0, 1.0),  # empty batch, zero time
        BatchReport(1, 1.0, 2, 10**7, 500.0, 0.0, 2.0, 2.0, 502.0),  # huge, very slow
        BatchReport(2, 1.0, 2, 5, 1e-4, 400.0, 3.0, 403.0, 403.0001),  # long queue
    ]
    for rep in odd:
        ctrl.observe(rep)
        plan = ctrl.plan(rep.finished_at)
        assert plan.interval_s > 0 and np.isfinite(plan.interval_s)
        assert plan.blocks >= 1


def test_pickles_and_deep_copies_with_its_state(name: str) -> None:
    import copy
    import pickle

    ctrl = make(name)
    drive(ctrl, 30.0, seed=11)
    twins = [pickle.loads(pickle.dumps(ctrl)), copy.deepcopy(ctrl)]
    state, plan = ctrl.state(), ctrl.plan(500.0)
    for twin in twins:
        assert twin.state() == state
        assert twin.plan(500.0) == plan
    json.dumps(ctrl.metrics_state())
