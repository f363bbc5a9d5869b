"""Argument parsing shared by the commands: values checked with errors naming the option."""

from __future__ import annotations

import math
from collections.abc import Sequence

from adabatch.errors import AdabatchError, shown


def parse_int(text: str, what: str, low: int) -> int:
    """``text`` as an integer >= ``low``; the error names the option ``what`` and the value."""
    try:
        value = int(text)
    except ValueError:
        msg = f"{what} {shown(text)} is not an integer"
        raise AdabatchError(msg) from None
    if value < low:
        msg = f"{what} {shown(text)} must be >= {low}"
        raise AdabatchError(msg)
    return value


def parse_float(
    text: str,
    what: str,
    low: float | None = None,
    high: float | None = None,
    *,
    open_low: bool = False,
) -> float:
    """``text`` as a finite number within ``[low, high]`` (``(low, high]`` with
    ``open_low``); the error names the option ``what``, the value and the range."""
    shown_text = shown(text)
    try:
        value = float(text)
    except ValueError:
        msg = f"{what} {shown_text} is not a number"
        raise AdabatchError(msg) from None
    below = low is not None and (value <= low if open_low else value < low)
    above = high is not None and value > high
    if not math.isfinite(value) or below or above:
        lo = "" if low is None else f" {'>' if open_low else '>='} {low:g}"
        hi = "" if high is None else f" <= {high:g}"
        join = " and" if lo and hi else ""
        msg = f"{what} {shown_text}: allowed a finite number{lo}{join}{hi}"
        raise AdabatchError(msg)
    return value


def parse_bounded_int(text: str, what: str, low: int, high: int) -> int:
    """``text`` as an integer from ``low`` to ``high``; the error names ``what`` and the value."""
    try:
        value = int(text)
    except ValueError:
        msg = f"{what} {shown(text)} is not an integer"
        raise AdabatchError(msg) from None
    if not low <= value <= high:
        msg = f"{what} {shown(text)}: allowed an integer from {low} to {high}"
        raise AdabatchError(msg)
    return value


def parse_choice(text: str, what: str, choices: Sequence[str]) -> str:
    """``text`` (case-insensitive) if it is one of ``choices``; else one line listing them."""
    value = text.strip().lower()
    if value not in choices:
        msg = f"{what} {shown(text)}: allowed one of {', '.join(choices)}"
        raise AdabatchError(msg)
    return value
