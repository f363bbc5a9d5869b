"""``dybbs`` (DyBBS Fig. 5): rate levels, the time-weighted per-level latency, OPT's
composite, and the simulator's choice of static pairs."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from adabatch.bench.experiments import dybbs
from adabatch.bench.experiments.dybbs import (
    SCENARIOS,
    StaticChoice,
    best_pair,
    level_shares,
    time_weighted,
)
from adabatch.bench.model import Settings
from adabatch.profiles import parse_profile
from adabatch.sim.workloads import make_workload


def test_levels_and_their_shares_of_time() -> None:
    sine, markov = SCENARIOS[0], SCENARIOS[1]
    assert sine.level_of(60_000) == 0 and sine.level_of(300_000) == 2
    assert markov.levels == (60_000, 180_000, 300_000)
    for s in (sine, markov):
        shares = level_shares(s, parse_profile(s.profile), 45.0)
        assert sum(shares.values()) == pytest.approx(1.0)
    shares = level_shares(sine, parse_profile(sine.profile), 35.0)
    assert set(shares) == {0, 1, 2}


def test_time_weighting_and_a_missing_level() -> None:
    shares = {0: 0.25, 1: 0.75}
    assert time_weighted({0: 2.0, 1: 1.0}, shares) == pytest.approx(1.25)
    assert math.isnan(time_weighted({0: 2.0}, shares))


def test_best_pair_is_the_lowest_stable_latency(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dybbs, "INTERVALS", (0.1, 0.5, 1.0, 4.0))
    monkeypatch.setattr(dybbs, "BLOCKS", (1, 2))
    monkeypatch.setattr(dybbs, "SIM_SEEDS", (0,))
    model = make_workload("reduce", {"sigma": 0.0})
    x, k = best_pair(model, parse_profile("constant:100000"), 40.0)
    # 0.1 s is below the overhead (unstable); 4 s is stable but slow
    assert (x, k) in {(0.5, 2), (1.0, 2)}
    latency = {
        pair: dybbs._sim_latency(model, parse_profile("constant:100000"), 40.0, *pair)
        for pair in ((0.5, 2), (1.0, 2), (4.0, 2))
    }
    assert latency[(x, k)][0] == min(v[0] for v in latency.values() if v[1])


def test_static_pairs_are_deduplicated_and_capped() -> None:
    c = StaticChoice((1.0, 2), ((0.5, 2), (1.0, 2), (2.0, 4)), "test")
    assert c.pairs() == [(1.0, 2), (0.5, 2), (2.0, 4)]
    c = StaticChoice((1.0, 2), ((0.5, 1), (0.75, 2), (2.0, 4)), "test")
    assert len(c.pairs()) == dybbs.MAX_STATIC and c.pairs()[0] == (1.0, 2)


def test_full_runs_compare_like_for_like_baselines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """FPI at 2 blocks and at the paper's 100 ms; isotonic from 100 ms told the cores."""
    monkeypatch.setattr(dybbs, "INTERVALS", (0.5, 1.0))
    monkeypatch.setattr(dybbs, "BLOCKS", (1, 2))
    monkeypatch.setattr(dybbs, "SIM_SEEDS", (0,))
    monkeypatch.setattr(dybbs, "SCENARIOS", (SCENARIOS[3],))
    settings = Settings(tmp_path, quick=False, master="local[3]")
    by_name = {c.name: c for c in dybbs.Dybbs().configs(settings)}
    assert by_name["join-markov-isotonic"].params == {"block_interval": 0.1, "cores": 3}
    assert by_name["join-markov-isotonic-fixed-blocks"].params == {
        "block_interval": 0.1,
        "block_sizing": False,
    }
    assert by_name["join-markov-fixed-point-100ms"].params == {"block_interval": 0.1}
    assert dict(by_name["join-markov-fixed-point"].params) == {}  # one block per core: 2
    quick = dybbs.Dybbs().configs(Settings(tmp_path, quick=True))
    assert not any(c.name.endswith("fixed-point-100ms") for c in quick)  # runs stay short


def test_the_cores_spark_runs_on() -> None:
    assert dybbs.spark_cores("local[2]") == 2 and dybbs.spark_cores(" local[8] ") == 8
    assert dybbs.spark_cores("local[*]") == (os.cpu_count() or 2)
    assert dybbs.spark_cores("spark://host:7077") == dybbs.spark_cores("local[0]") == 2
