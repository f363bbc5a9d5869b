"""Argument parsing shared by the commands: flag values checked by
:meth:`adabatch.params.Param.parse_flag`, with errors naming the flag, the value and what
is allowed (``--seed 'x' is not an integer: allowed an integer >= 0``)."""

from __future__ import annotations

from collections.abc import Sequence

from adabatch.params import Param


def parse_int(text: str, what: str, low: int) -> int:
    """``text`` as an integer >= ``low``; the error names the flag ``what`` and the value."""
    return Param(what, None, what, kind=int, low=low).parse_flag(text)


def parse_float(
    text: str,
    what: str,
    low: float | None = None,
    high: float | None = None,
    *,
    open_low: bool = False,
) -> float:
    """``text`` as a finite number within ``[low, high]`` (``(low, high]`` with
    ``open_low``); the error names the flag ``what``, the value and the range."""
    return Param(what, None, what, low=low, high=high, low_open=open_low).parse_flag(text)


def parse_bounded_int(text: str, what: str, low: int, high: int) -> int:
    """``text`` as an integer from ``low`` to ``high``; the error names ``what`` and the value."""
    return Param(what, None, what, kind=int, low=low, high=high).parse_flag(text)


def parse_choice(text: str, what: str, choices: Sequence[str]) -> str:
    """``text`` (case-insensitive) if it is one of ``choices``; else one line listing them."""
    return Param(what, None, what, kind=str, choices=tuple(choices)).parse_flag(text)
