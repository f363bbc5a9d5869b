"""``dybbs`` (DyBBS Fig. 5): rate levels, the time-weighted per-level latency scored apart
in the learning phase and after it, and the like-for-like configurations."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from adabatch.bench.experiments import dybbs
from adabatch.bench.experiments.dybbs import SCENARIOS, Phase, level_shares, time_weighted
from adabatch.bench.model import Config, Outcome, Settings
from adabatch.metrics import BatchRecord, summarize
from adabatch.profiles import parse_profile


def test_levels_and_their_shares_of_time() -> None:
    sine, markov = SCENARIOS[0], SCENARIOS[1]
    assert sine.level_of(30_000) == 0 and sine.level_of(150_000) == 2
    assert markov.levels == (30_000, 90_000, 150_000)
    for s in (sine, markov):
        shares = level_shares(s, parse_profile(s.profile), 5.0, 45.0)
        assert sum(shares.values()) == pytest.approx(1.0)
    assert set(level_shares(sine, parse_profile(sine.profile), 5.0, 35.0)) == {0, 1, 2}
    # the trough of the sine only: 30,000/s at t = 22.5 s of a 30 s period from the middle
    assert set(level_shares(sine, parse_profile(sine.profile), 21.0, 24.0)) == {0}


def test_time_weighting_and_a_missing_level() -> None:
    shares = {0: 0.25, 1: 0.75}
    assert time_weighted({0: 2.0, 1: 1.0}, shares) == pytest.approx(1.25)
    assert math.isnan(time_weighted({0: 2.0}, shares))


def batch(cut_at: float, interval: float, processing: float) -> BatchRecord:
    """A batch cut at ``cut_at``, started at once: latency = interval + processing."""
    return BatchRecord(
        batch_id=int(cut_at * 10),
        interval_s=interval,
        blocks=2,
        records=1000,
        processing_s=processing,
        queue_delay_s=0.0,
        cut_at=cut_at,
        started_at=cut_at,
        finished_at=cut_at + processing,
        latency_s=interval + processing,
        record_latency_s=interval / 2 + processing,
        rate_rps=1000 / interval,
    )


def test_a_phase_scores_only_the_batches_cut_in_it() -> None:
    """Latency 3 s before t = 20 s, 1 s after: the two phases see 3 and 1."""
    s = dybbs.Scenario6("flat", "reduce", "constant:1000", (1000.0,))
    records = [batch(t, 1.0, 2.0) for t in range(1, 20)] + [
        batch(t, 0.5, 0.5) for t in range(20, 40)
    ]
    config = Config("flat-isotonic", workload="reduce", controller="isotonic", profile=s.profile,
                    duration_s=40.0)  # fmt: skip
    summary = summarize(
        records, controller="isotonic", workload="reduce", profile=s.profile, duration_s=40.0
    )
    outcome = Outcome(config, summary, tuple(records), Path("."))
    profile = parse_profile(s.profile)
    assert Phase("learning", 0.0, 20.0).score(outcome, s, profile) == pytest.approx(3.0)
    assert Phase("after", 20.0, 40.0).score(outcome, s, profile) == pytest.approx(1.0)
    assert math.isnan(Phase("later", 40.0, 60.0).score(outcome, s, profile))


def test_against_the_paper_locates_where_isotonic_loses() -> None:
    """Isotonic's batches wait longer intervals than FPI's and process as fast: the text
    says how it compares with both FPIs, the paper's figure, and that the interval is
    where it loses."""
    s = dybbs.Scenario6("reduce-sine", "reduce", "constant:1000", (1000.0,))
    profile = parse_profile(s.profile)

    def run(name: str, interval: float) -> Outcome:
        records = tuple(batch(t, interval, 0.3) for t in range(1, 40))
        config = Config(name, workload="reduce", controller="isotonic", profile=s.profile,
                        duration_s=40.0)  # fmt: skip
        summary = summarize(
            records, controller="x", workload="reduce", profile=s.profile, duration_s=40.0
        )
        return Outcome(config, summary, records, Path("."))

    named = {
        dybbs.ISOTONIC: run("i", 1.0),
        dybbs.FPI: run("f", 0.5),
        dybbs.FPI_100MS: run("f100", 2.0),
    }
    text = dybbs._against(s, named, Phase("after", 10.0, 40.0), profile)
    assert text.startswith("reduce-sine: isotonic 1.30 s, -43% against FPI at 100 ms blocks")
    assert "(paper -35%)" in text and "+62% against FPI with 2 blocks" in text
    assert "interval +0.50 s, queue +0.00 s, processing +0.00 s" in text
    named[dybbs.FPI] = run("f", 1.5)  # isotonic wins: nothing to locate
    assert "where" not in dybbs._against(s, named, Phase("after", 10.0, 40.0), profile)


def test_full_runs_compare_like_for_like_baselines(tmp_path: Path) -> None:
    """Ten minutes; FPI at 2 blocks and at the paper's 100 ms; isotonic from 100 ms told
    the cores, and without block sizing."""
    settings = Settings(tmp_path, quick=False, master="local[3]")
    configs = dybbs.Dybbs().configs(settings)
    assert len(configs) == 5 * len(SCENARIOS)
    assert [c.role for c in configs[-len(SCENARIOS) :]] == ["spark-default"] * len(SCENARIOS)
    assert {c.duration_s for c in configs} == {600.0}
    by_name = {c.name: c for c in configs}
    assert by_name["join-markov-isotonic"].params == {"block_interval": 0.1, "cores": 3}
    assert by_name["join-markov-isotonic-fixed-blocks"].params == {
        "block_interval": 0.1,
        "block_sizing": False,
    }
    assert by_name["join-markov-fixed-point-100ms"].params == {"block_interval": 0.1}
    assert dict(by_name["join-markov-fixed-point"].params) == {}  # one block per core: 2
    learning, after = dybbs.Dybbs().phases(settings)
    assert (learning.end_s, after.start_s, after.end_s) == (180.0, 180.0, 600.0)
    quick = dybbs.Dybbs().configs(Settings(tmp_path, quick=True))
    assert {c.name for c in quick} == {"reduce-markov-isotonic", "reduce-markov-fixed-point-100ms"}


def test_the_cores_spark_runs_on() -> None:
    assert dybbs.spark_cores("local[2]") == 2 and dybbs.spark_cores(" local[8] ") == 8
    assert dybbs.spark_cores("local[*]") == (os.cpu_count() or 2)
    assert dybbs.spark_cores("spark://host:7077") == dybbs.spark_cores("local[0]") == 2
