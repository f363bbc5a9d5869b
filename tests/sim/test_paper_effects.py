"""The acceptance effects, reproduced in the simulator with the real controllers.

Each test runs whole simulated streams (seconds of CPU) and asserts the direction the papers
report: fixed-point finds the Type-I point of a superlinear workload from above the Type-II
point where the binary controller diverges (fixed-point §3.2.1, §3.3.3); on a sine rate it
stays within 1.3x of the best static interval while the static interval chosen for the mean
rate queues up at the peaks (Fig. 16/17); the gradient controller destabilises under noise
where fixed-point does not (Fig. 18).
"""

from __future__ import annotations

import numpy as np
import pytest

from adabatch.runs.simulated import make_scenario, simulate, sweep_static
from adabatch.sim.workloads import stability_crossings

RHO = 0.7


def test_fixed_point_finds_type_i_of_join_from_above_type_ii_where_binary_diverges() -> None:
    sc = make_scenario("join", "constant:5000", "600s", seed=1, noise=0.05)
    type_i, type_ii = stability_crossings(sc.model, 5000, RHO, 2)[:2]
    assert type_i < 1.0 < 5.0 < type_ii  # a real superlinear workload with both crossings
    start = {"slow_start": False, "initial_interval": round(1.3 * type_ii, 1), "max_interval": 60}

    fp = simulate(sc, "fixed-point", start)
    tail = [r.interval_s for r in fp.records[-100:]]
    assert abs(float(np.mean(tail)) - type_i) <= 0.10 * type_i
    assert fp.summary.stable
    assert any(r.controller_state.get("branch") == "type-ii" for r in fp.records)

    binary = simulate(sc, "binary", {k: v for k, v in start.items() if k != "slow_start"})
    assert not binary.summary.stable
    assert binary.records[-1].interval_s > type_ii  # only ever grew: the unstable side
    half = binary.records[len(binary.records) // 2]
    assert binary.records[-1].queue_delay_s > max(type_ii, 2 * half.queue_delay_s)


def test_fixed_point_on_a_sine_is_near_the_oracle_and_the_mean_rate_interval_queues() -> None:
    sine = make_scenario("reduce", "sine:100000:300000:60s", "900s", seed=3, warmup="60s")
    grid = [round(0.5 + 0.1 * i, 1) for i in range(16)]
    oracle = sweep_static(sine, grid).best
    fp = simulate(sine, "fixed-point").summary
    assert fp.stable
    assert fp.mean_latency_s <= 1.3 * oracle["mean_latency_s"]
    assert fp.max_queue_delay_s < 2 * fp.mean_interval_s

    # the best static interval for the sine's mean rate (200k/s held constant) ...
    at_mean = sweep_static(make_scenario("reduce", "constant:200000", "300s", seed=3), grid)
    x_mean = at_mean.best["interval_s"]
    assert x_mean < oracle["interval_s"]
    # ... is overloaded at every peak: the queue builds to several intervals (Fig. 16)
    static = simulate(sine, "static", {"interval": x_mean})
    s = static.summary
    assert s.max_queue_delay_s > 3 * x_mean
    assert s.overloaded_fraction > 0.2
    overloaded = [r.rate_rps for r in static.records if r.processing_s > r.interval_s]
    above_mean = sum(rate > 200000 for rate in overloaded) / len(overloaded)
    assert above_mean > 0.9  # the peaks do it (noise overloads a few others)


@pytest.mark.parametrize("seed", [1, 2])
def test_gradient_destabilises_under_noise_where_fixed_point_stays_stable(seed: int) -> None:
    sc = make_scenario("reduce", "constant:200000", "1800s", seed=seed, noise=0.3)
    fp = simulate(sc, "fixed-point").summary
    grad = simulate(sc, "gradient").summary
    assert fp.stable and fp.max_queue_delay_s < 3 * fp.mean_interval_s
    # noisy gradient estimates drive the interval down into the unstable zone, again and
    # again: the queue builds to tens of intervals and the tail latency blows up
    assert grad.max_queue_delay_s > 10 * grad.mean_interval_s
    assert grad.p95_latency_s > 2.5 * fp.p95_latency_s
