"""Issue 4, acceptance on real Spark (slow, left out of CI; about 6 minutes).

Reduce: with a per-key commit to SQLite over 4,000 keys at 8,000 records/s the processing
time grows with the keys a batch touches (the paper's Reduce), and fixed-point settles at
about 1.5 s on local[2] (measured 2026-11-23 on a quiet machine: interval 1.52 s, CV 0.15,
queue delay < 0.13 s). Static at 0.5 s is below the processing time and diverges.

Join: Spark's per-batch join costs about 0.3 s of overhead plus ~4 ns per output row, so
with one key at 12,000 records/s fixed-point settles near 0.6 s while the Type-II crossing
(p = x on the rising side) lies near 9 s. For p = a + b*x + q*x**2 with rho = 0.7 the
Type-II crossing is always more than 2.45 times the Type-I point, so the issue's "static
at 2x the converged interval diverges" cannot hold on this workload; static at 10 s does.
"""

from __future__ import annotations

import numpy as np
import pytest

from adabatch.streaming.run import RunConfig, run_spark

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REDUCE = {"profile": "constant:8000", "keys": 4000, "per_key_commit": True}
JOIN = {"profile": "constant:12000", "keys": 1}


def test_fixed_point_converges_on_reduce(tmp_path):
    cfg = RunConfig(
        workload="reduce",
        controller="fixed-point",
        duration_s=120.0,
        out_dir=tmp_path,
        master="local[2]",
        **REDUCE,
    )
    result = run_spark(cfg)
    after = [r for r in result.records if r.cut_at >= 20.0]
    x = np.array([r.interval_s for r in after])
    assert result.summary["stable"]
    assert 1.0 <= float(np.median(x)) <= 3.0
    assert all(r.queue_delay_s < r.interval_s for r in after)
    assert float(np.std(x) / np.mean(x)) < 0.25


def test_static_below_processing_time_diverges(tmp_path):
    cfg = RunConfig(
        workload="reduce",
        controller="static",
        params={"interval": 0.5},
        duration_s=60.0,
        out_dir=tmp_path,
        master="local[2]",
        **REDUCE,
    )
    result = run_spark(cfg)
    assert result.summary["mean_processing_s"] > 0.5
    assert result.summary["stable"] is False
    assert result.summary["final_queue_len"] >= 3


def test_join_fixed_point_stable_where_a_long_static_interval_diverges(tmp_path):
    adaptive = run_spark(
        RunConfig(
            workload="join",
            controller="fixed-point",
            duration_s=60.0,
            out_dir=tmp_path / "fixed-point",
            master="local[2]",
            **JOIN,
        )
    )
    assert adaptive.summary["stable"]
    converged = float(np.median([r.interval_s for r in adaptive.records if r.cut_at >= 20.0]))
    static = run_spark(
        RunConfig(
            workload="join",
            controller="static",
            params={"interval": 10.0},
            duration_s=90.0,
            out_dir=tmp_path / "static",
            master="local[2]",
            **JOIN,
        )
    )
    assert 2 * converged < 10.0
    # superlinear: a batch of 10 s takes longer than 10 s although one of ~0.6 s takes less
    assert static.summary["mean_processing_s"] > 10.0
    assert static.summary["stable"] is False
