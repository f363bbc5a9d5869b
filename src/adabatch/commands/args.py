"""Argument parsing shared by the commands: values checked with errors naming the option."""

from __future__ import annotations

from adabatch.errors import AdabatchError


def parse_int(text: str, what: str, low: int) -> int:
    """``text`` as an integer >= ``low``; the error names the option ``what`` and the value."""
    try:
        value = int(text)
    except ValueError:
        msg = f"{what} {text!r} is not an integer"
        raise AdabatchError(msg) from None
    if value < low:
        msg = f"{what} {text!r} must be >= {low}"
        raise AdabatchError(msg)
    return value
