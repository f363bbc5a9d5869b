"""The deadline fields' number checks: adabatch.params.Param plus what a spec needs."""

from __future__ import annotations

import math

import pytest

from adabatch.deadline.core.numbers import allowed, check_number
from adabatch.errors import AdabatchError
from adabatch.params import Param

SECONDS = Param("deadline", None, "a finite number of seconds", low=-1e12, high=1e12)
COUNT = Param("total", None, "tuples", kind=int, low=1, high=2**53)
SLACK = Param("rsf", 0.5, "a finite number", low=0.0)
CAP = Param("c_max", math.inf, "a number of seconds", low=0.0, low_open=True)


def test_allowed_values_in_words() -> None:
    assert allowed(SECONDS) == "a finite number of seconds from -1e+12 to 1e+12"
    assert allowed(COUNT) == "an integer from 1 to 9007199254740992"
    assert allowed(SLACK) == "a finite number >= 0"
    assert allowed(CAP) == "a number of seconds > 0"


@pytest.mark.parametrize(
    ("param", "value", "want"),
    [(SECONDS, "1e3", 1000.0), (SECONDS, -5, -5.0), (COUNT, "1e6", 10**6), (COUNT, 2**53, 2**53)],
)
def test_numbers_and_numeric_text_pass(param: Param, value: object, want: float) -> None:
    assert check_number(param, value) == want


@pytest.mark.parametrize(
    ("param", "value", "reason"),
    [
        (SECONDS, True, "is not a number"),  # YAML reads yes as true
        (SECONDS, "soon", "is not a number"),
        (SECONDS, [1], "is not a number"),
        (SECONDS, math.nan, "is not finite"),
        (SECONDS, 1e308, "is out of range"),
        (COUNT, 2.5, "is not an integer"),
        (COUNT, 2**53 + 1, "is out of range"),  # not rounded into range through a float
        (COUNT, 10**400, "is out of range"),  # beyond the float range: no OverflowError
        (SLACK, -1, "is out of range"),
    ],
)
def test_errors_name_the_value_the_reason_and_what_is_allowed(
    param: Param, value: object, reason: str
) -> None:
    with pytest.raises(AdabatchError) as info:
        check_number(param, value, f"spec.yaml: field {param.name!r}")
    text = str(info.value)
    assert text.startswith(f"spec.yaml: field {param.name!r} = ")
    assert f" {reason}: allowed {allowed(param)}" in text


def test_python_values_keep_their_type_and_inf_passes_where_allowed() -> None:
    with pytest.raises(AdabatchError, match=r"'1\.5' is not a number"):
        check_number(SLACK, "1.5", text=False)
    with pytest.raises(AdabatchError, match=r"3\.0 is not an integer"):
        check_number(COUNT, 3.0, text=False)
    assert check_number(CAP, "inf", allow_inf=True) == math.inf
    assert check_number(CAP, math.inf, text=False, allow_inf=True) == math.inf
    with pytest.raises(AdabatchError, match=r"allowed a number of seconds > 0 \(or inf\)"):
        check_number(CAP, 0, allow_inf=True)
    with pytest.raises(AdabatchError, match="is not finite"):
        check_number(CAP, "-inf", allow_inf=True)
