"""Query specs: the arrival convention, YAML/TOML loading, and errors that say what is wrong."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from adabatch.deadline.core.arrival import ConstantArrival, ProfileArrival, TraceArrival
from adabatch.deadline.core.cost import LinearCost, PiecewiseLinearCost
from adabatch.deadline.core.spec import known_query_names, query_spec
from adabatch.deadline.core.spec_file import load_scenario, load_specs
from adabatch.errors import AdabatchError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "deadline"


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_fixed_rate_convention_matches_the_papers_example() -> None:
    q = query_spec("c", window_start=1, window_end=10, deadline=12, rate=1.0, cost=LinearCost(0.5))
    assert q.total == 10
    assert [q.arrivals.input_time(n) for n in (1, 6, 8, 10)] == [1.0, 6.0, 8.0, 10.0]
    assert q.arrivals.arrived(5.999) == 5
    assert q.arrivals.arrived(6.0) == 6
    assert q.arrivals.arrived(0.5) == 0
    assert q.arrivals.arrived(99.0) == 10
    assert q.single_batch_cost == 5.0
    assert q.added_at == 1.0


def test_total_without_rate_spreads_tuples_over_the_window() -> None:
    q = query_spec("e", window_start=0, window_end=100, deadline=200, total=11, cost=LinearCost(1))
    assert isinstance(q.arrivals, ConstantArrival)
    assert q.arrivals.input_time(1) == 0.0
    assert q.arrivals.input_time(11) == pytest.approx(100.0)
    assert q.arrivals.input_time(6) == pytest.approx(50.0)


def test_rate_and_total_that_overrun_the_window_are_rejected() -> None:
    with pytest.raises(AdabatchError, match="after window_end"):
        query_spec(
            "late", window_start=0, window_end=10, deadline=20, rate=1.0, total=20,
            cost=LinearCost(1),
        )  # fmt: skip


def test_profile_rate_follows_the_profile() -> None:
    q = query_spec(
        "p", window_start=100, window_end=160, deadline=200, rate="step:10:20:30s",
        cost=LinearCost(0.01),
    )  # fmt: skip
    assert isinstance(q.arrivals, ProfileArrival)
    # 10/s for 30 s then 20/s for 30 s: 900 expected, +1 for the tuple at the start
    assert q.total == 901
    assert q.arrivals.input_time(301) == pytest.approx(130.0)
    assert q.arrivals.arrived(145.0) == 300 + 15 * 20 + 1


def test_yaml_and_toml_examples_load_to_the_same_specs() -> None:
    a = load_specs(EXAMPLES / "paper-cases.yaml")
    b = load_specs(EXAMPLES / "paper-cases.toml")
    assert [q.id for q in a] == ["case1", "case2", "case3", "case4"]
    assert [q.deadline for q in a] == [16.0, 15.0, 12.0, 11.0]
    for x, y in zip(a, b, strict=True):
        assert (x.id, x.deadline, x.total, x.cost, x.inputs) == (
            y.id,
            y.deadline,
            y.total,
            y.cost,
            y.inputs,
        )
        assert x.total == 10 and x.cost == LinearCost(0.5, 0.0)


def test_every_example_loads() -> None:
    for path in sorted(EXAMPLES.glob("*.y*ml")) + sorted(EXAMPLES.glob("*.toml")):
        scenario = load_scenario(path)
        assert scenario.queries, path


def test_scheduler_section_and_overrides(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
scheduler: {strategy: edf, rsf: 0.3, c_max: 12, min_batch: true, time_trigger: Always}
queries:
  - {id: a, window_start: 0, window_end: 10, deadline: 30, rate: 2,
     cost: {kind: linear, per_tuple: 0.1, overhead: 1}}
""",
    )
    sc = load_scenario(path)
    assert (sc.strategy, sc.rsf, sc.c_max, sc.min_batch) == ("edf", 0.3, 12.0, True)
    assert sc.time_trigger == "always"
    sc = load_scenario(path, strategy="rr", rsf=None, min_batch=False, time_trigger="budget")
    assert (sc.strategy, sc.rsf, sc.min_batch, sc.time_trigger) == ("rr", 0.3, False, "budget")


def test_cost_from_a_profile_file_brings_its_aggregation_model(tmp_path: Path) -> None:
    profile = {
        "query": "q6",
        "cost": {"kind": "piecewise", "breakpoints": [[0, 1.0], [1000, 3.0], [5000, 7.0]]},
        "agg_cost": {"kind": "linear", "per_tuple": 0.2, "overhead": 0.5},
    }
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "q6.json").write_text(json.dumps(profile))
    path = write(
        tmp_path,
        """
queries:
  - {id: a, window_start: 0, window_end: 10, deadline: 30, rate: 2,
     cost: profiles/q6.json}
""",
    )
    (q,) = load_specs(path)
    assert isinstance(q.cost, PiecewiseLinearCost)
    assert q.cost.cost(3000) == pytest.approx(5.0)
    assert q.agg_cost.cost(1) == 0.0
    assert q.agg_cost.cost(4) == pytest.approx(0.5 + 0.8)


def test_arrival_traces_inline_and_from_csv(tmp_path: Path) -> None:
    (tmp_path / "arrivals.csv").write_text("time_s,count\n0,100\n1,100\n2.5,50\n")
    path = write(
        tmp_path,
        """
queries:
  - {id: inline, window_start: 0, window_end: 3, deadline: 9,
     rate: {arrivals: [[0, 100], [1, 100], [2.5, 50]]}, cost: {kind: linear, per_tuple: 0.01}}
  - {id: file, window_start: 0, window_end: 3, deadline: 9,
     rate: {arrivals: arrivals.csv}, cost: {kind: linear, per_tuple: 0.01}}
""",
    )
    a, b = load_specs(path)
    for q in (a, b):
        assert isinstance(q.arrivals, TraceArrival)
        assert q.total == 250
        assert q.arrivals.input_time(150) == 1.0
        assert q.arrivals.arrived(2.4) == 200


def test_unknown_query_names_are_rejected_when_the_runner_lists_them(tmp_path: Path) -> None:
    from adabatch.deadline.spark.queries import QUERIES

    assert known_query_names() == tuple(QUERIES)
    path = write(
        tmp_path,
        """
queries:
  - {id: a, query: q99, window_start: 0, window_end: 10, deadline: 30, rate: 2,
     cost: {kind: linear, per_tuple: 0.1}}
""",
    )
    with pytest.raises(AdabatchError, match="'q99'"):
        load_specs(path)


GOOD = (
    "{id: a, window_start: 0, window_end: 10, deadline: 30, rate: 2, "
    "cost: {kind: linear, per_tuple: 0.1}}"
)


@pytest.mark.parametrize(
    ("query", "needles"),
    [
        (GOOD.replace("deadline: 30, ", ""), ["'a'", "'deadline'", "required"]),
        (GOOD.replace("deadline: 30", "deadline: soon"), ["'a'", "'deadline'", "'soon'"]),
        (GOOD.replace("window_end: 10", "window_end: -1"), ["'window_end'", "-1", "after"]),
        (GOOD.replace("rate: 2", "rate: -2"), ["'rate'", "-2", "allowed"]),
        (GOOD.replace("rate: 2", "rate: 'wavy:3'"), ["'rate'", "wavy", "unknown shape"]),
        (GOOD.replace("rate: 2", "rate: 2, colour: red"), ["'a'", "colour", "allowed"]),
        (GOOD.replace("kind: linear", "kind: cubic"), ["'cost'", "'cubic'", "linear"]),
        (GOOD.replace("per_tuple: 0.1", "per_tuple: -0.1"), ["'cost'", "-0.1", "allowed"]),
        (GOOD.replace("per_tuple: 0.1", "per_tuple: 0.1, speed: 3"), ["'cost'", "speed"]),
        (
            GOOD.replace(
                "cost: {kind: linear, per_tuple: 0.1}",
                "cost: {kind: piecewise, breakpoints: [[0, 1], [10, 5], [20, 3]]}",
            ),
            ["'cost'", "non-decreasing"],
        ),
        (
            GOOD.replace(
                "cost: {kind: linear, per_tuple: 0.1}",
                "cost: {kind: expr, expr: \"__import__('os').getcwd()\"}",
            ),
            ["'cost'", "allowed"],
        ),
        (
            GOOD.replace("cost: {kind: linear, per_tuple: 0.1}", "cost: nowhere.json"),
            ["'cost'", "nowhere.json", "existing JSON"],
        ),
        (GOOD.replace("rate: 2", "rate: 2, total: 1000"), ["'a'", "after window_end"]),
        (GOOD.replace("rate: 2", "rate: 2, total: 2.5"), ["'total'", "2.5", "integer"]),
        (GOOD.replace("rate: 2", "rate: 2, added_at: 5, removed_at: 1"), ["removed_at"]),
    ],
)
def test_malformed_queries_name_file_query_field_and_value(
    tmp_path: Path, query: str, needles: list[str]
) -> None:
    path = write(tmp_path, f"queries:\n  - {query}\n")
    with pytest.raises(AdabatchError) as info:
        load_specs(path)
    text = str(info.value)
    assert str(path) in text
    for needle in needles:
        assert needle in text, (needle, text)
    assert "\n" not in text


@pytest.mark.parametrize(
    ("text", "name", "needles"),
    [
        ("queries: [\n", "bad.yaml", ["not valid YAML"]),
        ("[[queries]\n", "bad.toml", ["not valid TOML"]),
        ("queries: []\n", "empty.yaml", ["'queries'", "non-empty list"]),
        ("- 1\n- 2\n", "list.yaml", ["mapping"]),
        (f"querys:\n  - {GOOD}\n", "typo.yaml", ["querys", "allowed"]),
        (f"queries:\n  - {GOOD}\n  - {GOOD}\n", "dupe.yaml", ["'queries[1].id'", "unique", "'a'"]),
        (f"scheduler: {{strategy: fifo}}\nqueries:\n  - {GOOD}\n", "s.yaml", ["'fifo'", "llf"]),
        (f"scheduler: {{rsf: -1}}\nqueries:\n  - {GOOD}\n", "r.yaml", ["rsf", "-1"]),
        (
            f"scheduler: {{time_trigger: never}}\nqueries:\n  - {GOOD}\n",
            "t.yaml",
            ["time_trigger", "'never'", "budget, always"],
        ),
        (f"queries:\n  - {GOOD}\n", "spec.ini", ["'.ini'", ".yaml"]),
    ],
)
def test_malformed_files(tmp_path: Path, text: str, name: str, needles: list[str]) -> None:
    path = write(tmp_path, text, name)
    with pytest.raises(AdabatchError) as info:
        load_scenario(path)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


def test_missing_file() -> None:
    with pytest.raises(AdabatchError, match="does not exist"):
        load_specs("/nonexistent/spec.yaml")


def test_actual_rate_must_deliver_the_same_total() -> None:
    q = query_spec(
        "v", window_start=0, window_end=99, deadline=200, rate=1.0, actual_rate="constant:0.5",
        cost=LinearCost(0.1),
    )  # fmt: skip
    assert q.total == 100
    assert q.actual_arrivals.last_arrival == pytest.approx(198.0)
    assert q.arrivals.last_arrival == pytest.approx(99.0)
    assert math.isfinite(q.actual_arrivals.input_time(100))


@pytest.mark.parametrize(
    "module", ["cost", "numbers", "spec", "multi", "arrival", "single", "simulate"]
)
def test_docstring_examples(module: str) -> None:
    import doctest
    import importlib

    mod = importlib.import_module(f"adabatch.deadline.core.{module}")
    failures, _ = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert failures == 0


def test_written_scenarios_load_back_unchanged(tmp_path: Path) -> None:
    from adabatch.deadline.core.simulate import generate_scenario, simulate_schedule
    from adabatch.deadline.core.spec_file import write_scenario

    scenario = dataclasses.replace(generate_scenario(4, 0.3, seed=8), time_trigger="always")
    for name in ("s.yaml", "s.json"):
        back = load_scenario(write_scenario(scenario, tmp_path / name))
        assert back == scenario
        assert simulate_schedule(back) == simulate_schedule(scenario)
