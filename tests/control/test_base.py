"""The parameter specs and plan/report records of the controller contract."""

from __future__ import annotations

import pytest

from adabatch.control import BatchPlan, BatchReport, Param, create, parse_params
from adabatch.control.base import round_to_granularity
from adabatch.errors import AdabatchError


def test_param_range_error_names_parameter_value_and_range() -> None:
    p = Param("rho", 0.7, "slack", low=0.0, high=1.0, low_open=True, high_open=True)
    with pytest.raises(AdabatchError) as exc:
        p.parse("1.0", owner="fixed-point")
    text = str(exc.value)
    assert "'rho'" in text and "'1.0'" in text and "(0, 1)" in text


def test_param_parses_strings_numbers_and_bools() -> None:
    assert Param("n", 2, "n", kind=int, low=1).parse("4") == 4
    with pytest.raises(AdabatchError, match="integer"):
        Param("n", 2, "n", kind=int, low=1).parse("2.5")
    assert Param("f", True, "f", kind=bool).parse("false") is False
    with pytest.raises(AdabatchError, match="not finite"):
        Param("x", 1.0, "x").parse("nan")
    assert Param("cap", None, "c", kind=int, low=1, optional=True).parse("none") is None


def test_unknown_controller_lists_known_ones() -> None:
    with pytest.raises(AdabatchError, match=r"unknown controller 'nope'.*static"):
        create("nope")


def test_parse_params_rejects_malformed_pairs() -> None:
    assert parse_params(["interval=1.5", "blocks=4"]) == {"interval": "1.5", "blocks": "4"}
    with pytest.raises(AdabatchError, match="name=value"):
        parse_params(["interval"])


def test_plan_rejects_non_positive_interval_and_zero_blocks() -> None:
    with pytest.raises(AdabatchError, match="interval_s"):
        BatchPlan(0.0, 1)
    with pytest.raises(AdabatchError, match="blocks"):
        BatchPlan(1.0, 0)


def test_report_latency_is_interval_plus_queue_plus_processing() -> None:
    rep = BatchReport(0, 2.0, 2, 100, 0.5, 0.25, 2.0, 2.25, 2.75)
    assert rep.latency_s == pytest.approx(2.75)
    assert rep.rate_rps == pytest.approx(50.0)


def test_static_controller_plans_its_parameters() -> None:
    ctrl = create("static", {"interval": "1.5", "blocks": "4"})
    assert ctrl.plan(0.0) == BatchPlan(1.5, 4, None)
    with pytest.raises(AdabatchError, match="'interval'"):
        create("static", {"interval": "-1"})


def test_rounding_to_granularity_never_returns_zero() -> None:
    assert round_to_granularity(0.01, 0.1) == pytest.approx(0.1)
    assert round_to_granularity(1.26, 0.1) == pytest.approx(1.3)
