"""The timeline experiment's pick of a static interval when none of its sweep is stable."""

from __future__ import annotations

from pathlib import Path

from adabatch.bench.experiments.timeline import MEAN_GROUP, best_for_mean
from adabatch.bench.model import Config, Outcome
from adabatch.runs.simulated import make_scenario, simulate


def overloaded(name: str, controller: str, params: dict, tmp_path: Path) -> Outcome:
    """An outcome in the mean-rate group whose run diverged (a 0.2 s static interval under
    a reduce load that needs about a second)."""
    sc = make_scenario("reduce", "constant:200000", 30.0, seed=1)
    result = simulate(sc, "static", {"interval": 0.2})
    assert not result.summary.stable
    config = Config(
        name, workload="reduce", controller=controller, profile="constant:200000",
        duration_s=30.0, params=params, group=MEAN_GROUP,
    )  # fmt: skip
    return Outcome(config, result.summary, result.records, tmp_path / name)


def test_spark_triggers_in_the_group_are_not_candidates(tmp_path: Path) -> None:
    static = overloaded("mean-static-0.2s", "static", {"interval": 0.2}, tmp_path)
    default = overloaded("mean-spark-default", "spark-default", {}, tmp_path)
    assert best_for_mean([default, static]) is static
