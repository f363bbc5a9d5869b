"""One contract test over every registered controller (river's check-suite idea).

Each controller is driven through plan/observe by a tiny single-server loop on a noisy
linear processing time; the checks hold for any correct controller.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from adabatch.control import BatchPlan, BatchReport, Controller, create, names
from adabatch.errors import AdabatchError


def drive(ctrl: Controller, batches: int, seed: int, rate: float = 2000.0) -> list[BatchPlan]:
    """Cut batches on ctrl's plans, process them one at a time with p = 0.3 + x*rate*5e-5
    times lognormal noise, report each completion before the next cut it precedes."""
    rng = np.random.default_rng(seed)
    plans: list[BatchPlan] = []
    now = 0.0
    server_free = 0.0
    pending: list[BatchReport] = []
    for i in range(batches):
        plan = ctrl.plan(now)
        plans.append(plan)
        cut = now + plan.interval_s
        records = int(rate * plan.interval_s)
        if plan.max_records is not None:
            records = min(records, plan.max_records)
        p = (0.3 + records * 5e-5 * 2 / min(plan.blocks, 2)) * float(rng.lognormal(0, 0.2))
        start = max(cut, server_free)
        finish = start + p
        server_free = finish
        pending.append(
            BatchReport(
                i, plan.interval_s, plan.blocks, records, p, start - cut, cut, start, finish
            )
        )
        now = cut
        for rep in [r for r in pending if r.finished_at <= now]:
            ctrl.observe(rep)
            pending.remove(rep)
    return plans


@pytest.fixture(params=names())
def name(request: pytest.FixtureRequest) -> str:
    return request.param


def test_defaults_construct_and_describe(name: str) -> None:
    ctrl = create(name)
    described = ctrl.describe()
    assert described["controller"] == name
    json.dumps(described)  # JSON-able


def test_unknown_parameter_is_named(name: str) -> None:
    with pytest.raises(AdabatchError, match="no_such_param"):
        create(name, {"no_such_param": "1"})


def test_every_numeric_parameter_rejects_garbage(name: str) -> None:
    for p in create(name).PARAMS:
        if p.kind in (int, float) and p.choices is None:
            with pytest.raises(AdabatchError, match=p.name):
                create(name, {p.name: "not-a-number"})


def test_plans_are_valid_and_deterministic(name: str) -> None:
    a = drive(create(name), 200, seed=7)
    b = drive(create(name), 200, seed=7)
    assert a == b
    for plan in a:
        assert plan.interval_s > 0 and plan.blocks >= 1


def test_state_round_trip_continues_identically(name: str) -> None:
    ctrl = create(name)
    drive(ctrl, 60, seed=3)
    snapshot = json.loads(json.dumps(ctrl.state()))
    twin = create(name)
    twin.restore(snapshot)
    assert twin.state() == ctrl.state()
    assert twin.plan(1000.0) == ctrl.plan(1000.0)


def test_survives_extreme_reports(name: str) -> None:
    ctrl = create(name)
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

    ctrl = create(name)
    drive(ctrl, 30, seed=11)
    twins = [pickle.loads(pickle.dumps(ctrl)), copy.deepcopy(ctrl)]
    state, plan = ctrl.state(), ctrl.plan(500.0)
    for twin in twins:
        assert twin.state() == state
        assert twin.plan(500.0) == plan
    json.dumps(ctrl.metrics_state())
