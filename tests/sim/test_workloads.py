"""Cost models: the shapes of fixed-point Fig. 13 and DyBBS Fig. 3, noise, resources, params."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from adabatch.errors import AdabatchError
from adabatch.sim.workloads import (
    LOCAL2_FITS,
    WORKLOADS,
    JoinModel,
    ReduceModel,
    expected_distinct_keys,
    make_workload,
    parse_resources,
    stability_crossings,
)


def quiet(name: str, **overrides):
    return make_workload(name, {"sigma": 0, **overrides})


def test_expected_distinct_keys_matches_sampling():
    rng = np.random.default_rng(3)
    for keys, n in [(1000, 500), (1000, 5000), (50, 10), (1, 7)]:
        sampled = np.mean([len(np.unique(rng.integers(keys, size=n))) for _ in range(200)])
        assert expected_distinct_keys(n, keys) == pytest.approx(sampled, rel=0.02)
    assert expected_distinct_keys(0, 1000) == 0.0
    assert expected_distinct_keys(1, 1000) == pytest.approx(1.0)


def test_defaults_are_in_the_measured_local2_range():
    # ARCHITECTURE.md: an overhead-bound groupBy costs ~0.35-0.45 s up to ~10k rows
    reduce = quiet("reduce")
    for records in (100, 1000, 10_000):
        assert 0.33 <= reduce.expected_processing(records, 1.0, 2) <= 0.45


def test_the_default_per_block_costs_are_the_local2_fits_docs_results_reports():
    """One source of truth: ``LOCAL2_FITS`` holds what ``adabatch bench calibrate`` fitted on
    Spark (docs/results.md, "Calibrating the simulator"); Reduce and Join charge its
    per-block costs by default. A new calibration that moves a fit by more than the
    calibration's own 25 % fails here: update ``LOCAL2_FITS`` with it."""
    assert ReduceModel().per_block_s == LOCAL2_FITS["reduce"]["per_block_s"]
    assert JoinModel().per_block_s == LOCAL2_FITS["join"]["per_block_s"]
    for name, fit in LOCAL2_FITS.items():
        assert make_workload(name, fit).values() == {**WORKLOADS[name]().values(), **fit}
    docs = Path(__file__).resolve().parents[2] / "docs" / "results.md"
    found = re.findall(
        r"\*\*(reduce|join): fitted cells\*\*.*?\nFitted: (.*?); sigma \(scatter\) = (\d+\.\d+)",
        docs.read_text(encoding="utf-8"),
        re.S,
    )
    assert sorted(name for name, _, _ in found) == ["join", "reduce"]
    for name, line, sigma in found:
        fitted = {k: float(v) for k, v in re.findall(r"(\w+) = ([0-9.e+-]+)", line)}
        for key in ("overhead_s", "per_block_s"):
            assert fitted[key] == pytest.approx(LOCAL2_FITS[name][key], rel=0.25), (name, key)
        assert float(sigma) == pytest.approx(LOCAL2_FITS[name]["sigma"], rel=0.25)


def test_filter_is_linear_and_cheapest():
    f = quiet("filter")
    xs = np.linspace(0.5, 10, 20)
    p = np.array([f.processing_at_rate(20_000, x, 2) for x in xs])
    assert np.allclose(np.diff(p, 2), 0.0, atol=1e-12)  # linear in x
    assert np.all(np.diff(p) > 0)
    for other in ("reduce", "join", "window"):
        assert f.processing_at_rate(5000, 1.0, 2) < quiet(other).processing_at_rate(5000, 1.0, 2)


def test_reduce_commit_floor_grows_with_keys():
    few = quiet("reduce", keys=500, commit_per_key_s=1e-3)
    many = quiet("reduce", keys=20_000, commit_per_key_s=1e-3)
    # with enough records every key is in the batch: the commit sets a floor ~ keys * 1 ms
    assert many.processing_at_rate(6000, 10.0, 2) > 0.9 * 20_000 * 1e-3
    # 500 keys: 0.5 s of commits on top of ~0.5 s of overhead, blocks and work
    assert few.processing_at_rate(6000, 10.0, 2) < 1.1
    # the floor comes from the per-key commit; without it the keys do not matter
    off = quiet("reduce", keys=20_000, commit_per_key_s=1e-3, per_key_commit=False)
    assert off.processing_at_rate(6000, 10.0, 2) < 1.0


def test_join_is_superlinear_with_type1_and_type2_crossings():
    join = quiet("join")
    crossings = stability_crossings(join, 5000, 0.7, 2)
    assert len(crossings) == 2
    type1, type2 = crossings
    assert 0.3 < type1 < 1.0 < 4.0 < type2 < 20.0
    for x in crossings:
        assert join.processing_at_rate(5000, x, 2) == pytest.approx(0.7 * x, rel=1e-6)
    mid = (type1 + type2) / 2
    assert join.processing_at_rate(5000, mid, 2) < 0.7 * mid  # stable zone between them
    assert join.processing_at_rate(5000, 2 * type2, 2) > 1.4 * type2  # unstable beyond
    # second differences positive: superlinear
    p = [join.processing_at_rate(5000, x, 2) for x in (1.0, 2.0, 3.0)]
    assert p[2] - 2 * p[1] + p[0] > 0
    # the stable zone shrinks with the rate and vanishes (fixed-point Fig. 13c)
    zone = [np.diff(stability_crossings(join, r, 0.7, 2))[0] for r in (3000, 5000, 8000)]
    assert zone[0] > zone[1] > zone[2] > 0
    assert stability_crossings(join, 12_000, 0.7, 2) == []


def test_window_rises_at_small_intervals():
    w = quiet("window")
    xs = [0.1, 0.25, 0.5, 1.0, 2.0, 4.0]
    p = [w.processing_at_rate(5000, x, 2) for x in xs]
    assert p[0] > p[1] > p[2] > p[3]  # more partial aggregates at smaller x
    assert p[0] > xs[0] and p[1] > xs[1]  # unstable at small intervals
    assert p[3] < 0.7 * xs[3]  # stable once x is large enough
    crossings = stability_crossings(w, 5000, 0.7, 2)
    assert len(crossings) == 1 and 0.5 < crossings[0] < 1.0


def test_optimum_in_blocks_dybbs_fig3():
    m = quiet("reduce", cores=8)
    blocks = list(range(1, 17))
    p = [m.processing_at_rate(50_000, 2.0, k) for k in blocks]
    best = blocks[int(np.argmin(p))]
    assert 1 < best < 16
    assert p[0] > p[best - 1] < p[-1]


def test_the_best_blocks_grow_with_the_records_and_the_block_interval_moves_fig3():
    m = quiet("reduce")  # local[2]
    # few records: per-block overhead dominates, at most one block per core is best
    assert m.best_blocks(10_000, 1.0)[0] <= 2
    # many records: more blocks than cores shorten the stragglers' tail (~sqrt(work))
    # (at the measured ~0.044 s per block, from ~600k records per 1 s batch)
    ks = [m.best_blocks(rate, 1.0)[0] for rate in (100_000, 600_000, 1_000_000, 3_000_000)]
    assert ks == sorted(ks) and ks[0] <= 3 < ks[1] < ks[-1]
    work = m.work_s(3_000_000, 1.0) * m.straggler / (1 + m.straggler)
    assert ks[-1] == pytest.approx(np.sqrt(work / m.per_block_s), rel=0.1)
    # and it pays off: 2 blocks are 7 % slower at 600k records/s, 12 % at 1M records/s
    assert m.processing_at_rate(600_000, 1.0, 2) > 1.05 * m.best_blocks(600_000, 1.0)[1]
    assert m.processing_at_rate(1_000_000, 1.0, 2) > 1.1 * m.best_blocks(1_000_000, 1.0)[1]

    def best_block_interval(rate: float, x: float) -> float:
        return x / m.best_blocks(rate, x)[0]

    # the optimal block interval moves with the batch interval and with the rate
    assert best_block_interval(400_000, 4.0) > 1.5 * best_block_interval(400_000, 1.0)
    assert best_block_interval(800_000, 2.0) < 0.85 * best_block_interval(200_000, 2.0)


def test_stragglers_change_nothing_up_to_one_block_per_core():
    plain = quiet("join", straggler=0.0)
    tailed = quiet("join", straggler=0.5)
    for k in (1, 2):  # cores = 2
        assert tailed.processing_at_rate(8000, 1.0, k) == plain.processing_at_rate(8000, 1.0, k)
    # beyond the cores, the tail of a smaller block: (1 + s c / k) / (1 + s)
    assert tailed.tail(2) == 1.0 and tailed.tail(4) == pytest.approx(1.25 / 1.5)
    assert tailed.tail(1000) == pytest.approx(1 / 1.5, rel=1e-3)
    work = tailed.work_s(8000, 1.0)
    gain = plain.processing_at_rate(8000, 1.0, 4) - tailed.processing_at_rate(8000, 1.0, 4)
    assert gain == pytest.approx(work / 2 * (1 - 1.25 / 1.5))
    # with noise, more blocks than cores: the cores' share of the work with the tail
    cost = tailed.cost(8000, 1.0, 6, rng=np.random.default_rng(2))
    assert cost.processing_s > tailed.overhead_s + tailed.per_block_s * 6
    noisy = make_workload("join", {"sigma": 0.1})
    means = np.mean(
        [noisy.cost(8000, 1.0, 6, rng=np.random.default_rng(i)).processing_s for i in range(2000)]
    )
    assert means == pytest.approx(noisy.expected_processing(8000, 1.0, 6), rel=0.02)


def test_noise_is_mean_one_lognormal_and_seeded():
    m = make_workload("reduce", {"sigma": 0.3})
    expected = m.expected_processing(5000, 1.0, 2)
    costs = [m.cost(5000, 1.0, 2, rng=np.random.default_rng(i)).processing_s for i in range(4000)]
    # the noise-free value is the mean of the batch factor; block maxima add a little
    assert np.mean(costs) == pytest.approx(expected, rel=0.05)
    assert np.std(np.log(costs)) > 0.1
    a = m.cost(5000, 1.0, 2, rng=np.random.default_rng(7))
    b = m.cost(5000, 1.0, 2, rng=np.random.default_rng(7))
    assert a == b
    assert len(a.block_s) == 2 and a.block_s[0] != a.block_s[1]


def test_no_noise_gives_the_expected_time_and_block_times():
    m = quiet("join")
    cost = m.cost(4000, 1.0, 4, rng=np.random.default_rng(1))
    assert cost.processing_s == pytest.approx(m.expected_processing(4000, 1.0, 4))
    assert sum(cost.block_s) == pytest.approx(m.work_s(4000, 1.0))


def test_resources_scale_the_cores():
    res = parse_resources("0.5@60s-120s,0.25@100s-")
    assert [res.factor(t) for t in (0, 60, 90, 110, 1000)] == [1.0, 0.5, 0.5, 0.25, 0.25]
    m = quiet("filter", cores=2.0)
    full = m.expected_processing(100_000, 1.0, 2, t=0.0, resources=res)
    half = m.expected_processing(100_000, 1.0, 2, t=90.0, resources=res)
    parallel = m.work_s(100_000, 1.0) / 2
    assert half - full == pytest.approx(parallel)  # one core instead of two


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("0.5", "malformed"),
        ("2@1s-5s", "(0, 1]"),
        ("x@1s-5s", "not a number"),
        ("0.5@10s-5s", "end must be after start"),
        ("0.5@soon-5s", "duration"),
    ],
)
def test_resources_errors(text, needle):
    with pytest.raises(AdabatchError) as err:
        parse_resources(text)
    assert needle in str(err.value)


def test_overrides_are_validated():
    m = make_workload("reduce", {"keys": "20000", "per_key_commit": "false", "sigma": "0"})
    assert isinstance(m, ReduceModel)
    assert (m.keys, m.per_key_commit, m.sigma) == (20_000, False, 0.0)
    with pytest.raises(AdabatchError, match=r"no model parameter 'bogus'.*allowed"):
        make_workload("reduce", {"bogus": 1})
    with pytest.raises(AdabatchError, match=r"'cores' = '0'.*out of range"):
        make_workload("join", {"cores": "0"})
    with pytest.raises(AdabatchError, match=r"'keys' = '1.5'"):
        make_workload("window", {"keys": "1.5"})
    with pytest.raises(AdabatchError, match="'overhead_s' = '-1'"):
        make_workload("filter", {"overhead_s": "-1"})
    with pytest.raises(AdabatchError, match=r"unknown workload 'sort'.*filter, reduce"):
        make_workload("sort")


def test_every_model_lists_parameters_with_help():
    for name, cls in WORKLOADS.items():
        params = {p.name: p for p in cls.parameters()}
        assert {"overhead_s", "per_block_s", "per_record_s", "cores", "sigma"} <= set(params)
        assert all(p.help for p in params.values())
        assert cls().name == name


def test_from_calibration(tmp_path):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({"workload": "join", "params": {"per_pair_s": 1e-5}, "r2": 0.9}))
    m = make_workload("join", {"sigma": 0}, calibration=path)
    assert isinstance(m, JoinModel) and m.per_pair_s == 1e-5 and m.sigma == 0
    assert JoinModel.from_calibration(path).per_pair_s == 1e-5
    with pytest.raises(AdabatchError, match="is for workload 'join', not 'reduce'"):
        make_workload("reduce", calibration=path)
    with pytest.raises(AdabatchError, match="does not exist"):
        make_workload("reduce", calibration=tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(AdabatchError, match="not valid JSON"):
        make_workload("reduce", calibration=bad)
    bad.write_text(json.dumps({"params": {"keys": -3}}))
    with pytest.raises(AdabatchError, match="'keys' = -3"):
        make_workload("reduce", calibration=bad)
