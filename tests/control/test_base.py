"""The parameter specs and plan/report records of the controller contract."""

from __future__ import annotations

import pytest

from adabatch.control import BatchPlan, BatchReport, Param, create, parse_params
from adabatch.control.base import round_to_granularity
from adabatch.errors import AdabatchError
from adabatch.params import check_names, parse_values


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


def test_parse_values_fills_defaults_and_refuses_unknown_names() -> None:
    params = (
        Param("n", 2, "n", kind=int, low=1),
        Param("mode", "a", "m", kind=str, choices=("a", "b")),
    )
    assert dict(parse_values(params, {"n": "5"}, owner="thing")) == {"n": 5, "mode": "a"}
    with pytest.raises(
        AdabatchError, match=r"^box 'x' has no option 'nn': allowed options are n, mode$"
    ):
        parse_values(params, {"nn": "1"}, owner="x", holder="box 'x'", noun="option")
    with pytest.raises(
        AdabatchError, match=r"^x option 'mode' = 'c' is not allowed: allowed one of a, b$"
    ):
        parse_values(params, {"mode": "c"}, owner="x", noun="option")


def test_check_names_refuses_names_no_param_has() -> None:
    params = (Param("sigma", 0.1, "noise"), Param("cores", 2.0, "cores"))
    check_names(params, ["cores"], holder="workload 'reduce'", noun="model parameter")
    with pytest.raises(
        AdabatchError,
        match=r"^workload 'reduce' has no model parameter 'rho': "
        r"allowed model parameters are sigma, cores$",
    ):
        check_names(params, ["rho", "sigma"], holder="workload 'reduce'", noun="model parameter")


def test_parse_flag_names_the_flag_the_text_and_the_allowed_values_in_words() -> None:
    seed = Param("--seed", None, "seed", kind=int, low=0, high=9)
    assert seed.parse_flag("7") == 7
    with pytest.raises(
        AdabatchError, match=r"^--seed 'x' is not an integer: allowed an integer from 0 to 9$"
    ):
        seed.parse_flag("x")
    with pytest.raises(AdabatchError, match=r"^--seed '1e3' is not an integer"):
        seed.parse_flag("1e3")  # flags are read strictly; Param.parse takes 1e3 as 1000
    with pytest.raises(AdabatchError, match=r"^--seed '10': allowed an integer from 0 to 9$"):
        seed.parse_flag("10")
    rate = Param("--rate", None, "rate", low=0.0, low_open=True)
    assert rate.parse_flag("2.5") == 2.5
    with pytest.raises(AdabatchError, match=r"^--rate 'inf': allowed a finite number > 0$"):
        rate.parse_flag("inf")
    mode = Param("--queue", None, "queue", kind=str, choices=("fifo", "coalesce"))
    assert mode.parse_flag(" FIFO ") == "fifo"
    with pytest.raises(AdabatchError, match=r"^--queue 'lifo': allowed one of fifo, coalesce$"):
        mode.parse_flag("lifo")


def test_allowed_values_in_words() -> None:
    assert Param("n", 1, "n", kind=int, low=1, high=100).in_words() == "an integer from 1 to 100"
    assert Param("x", 1.0, "x", low=0.0, low_open=True, high=5.0).in_words() == (
        "a finite number > 0 and <= 5"
    )
    assert Param("t", 1.0, "t", low=-1.0, high=1.0).in_words("seconds") == "seconds from -1 to 1"
    assert Param("free", 1.0, "f").in_words() == "a finite number"


def test_free_text_params_are_checked_by_their_parser() -> None:
    def no_digits(text: str) -> None:
        if any(ch.isdigit() for ch in text):
            msg = "digits are not allowed"
            raise AdabatchError(msg)

    p = Param("label", None, "a label", kind=str, optional=True, check=no_digits)
    assert p.parse(" abc ") == "abc" and p.parse("none") is None
    assert p.parse("x" * 500) == "x" * 500  # free text may be long
    with pytest.raises(AdabatchError, match=r"'label' = 'a1' is not allowed: digits are not"):
        p.parse("a1", owner="box")
    assert p.allowed() == "text or unset"


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
