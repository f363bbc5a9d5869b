"""The numbers of deadline specs, scheduler settings and cost models, checked by
:class:`adabatch.params.Param` (the project's one validator).

Each numeric field is declared once as a ``Param`` (type and allowed range; its ``help`` is
the noun the error uses, e.g. ``"a finite number of seconds"``) and checked by
:func:`check_number`, which adds what a spec needs on top of ``Param.parse``: booleans are not
numbers (YAML reads ``yes`` as one), an integer beyond the float range is out of range
rather than a crash, and ``inf`` passes where a field allows it (``c_max``). Errors read
``LABEL = VALUE is out of range: allowed a finite number of seconds >= 0.001``, the
allowed values in words (docs/deadline-spec.md).

Examples
--------
>>> from adabatch.params import Param
>>> poll = Param("poll_s", 1.0, "seconds", low=1e-3)
>>> check_number(poll, "0.5")
0.5
>>> check_number(poll, 0)
Traceback (most recent call last):
...
adabatch.errors.AdabatchError: poll_s = 0 is out of range: allowed seconds >= 0.001
"""

from __future__ import annotations

import math
from typing import Any

from adabatch.errors import AdabatchError, shown
from adabatch.params import Param


def allowed(param: Param) -> str:
    """The values ``param`` allows, in words (:meth:`Param.in_words`, the param's ``help``
    naming the number): ``"an integer from 1 to 100"``, ``"a finite number > 0"``, ``"a
    finite number of seconds from -1e+12 to 1e+12"``."""
    return param.in_words(param.help)


def check_number(
    param: Param,
    value: Any,
    label: str | None = None,
    *,
    text: bool = True,
    allow_inf: bool = False,
) -> Any:
    """``value`` converted and checked by ``param``; an :class:`AdabatchError` naming
    ``label`` (default: the param's name), the value and :func:`allowed` otherwise.

    ``text=False`` takes Python values, not spec text: no strings, and an integer field
    only an ``int``. ``allow_inf`` lets ``+inf`` through (written ``inf`` in a spec).
    """
    label = param.name if label is None else label
    number = value
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        number = None
    elif not text and not isinstance(value, int if param.kind is int else int | float):
        number = None  # a Python value has the field's type: an int for an integer
    elif isinstance(value, int) and not math.isfinite(_as_float(value)):
        number = math.inf if value > 0 else -math.inf  # beyond the float range
    if allow_inf and number is not None and _as_float(number) == math.inf:
        return math.inf
    if number is not None:
        try:
            checked = param.parse(number, owner=label)
        except AdabatchError:
            pass
        else:
            if param.kind is not int or not isinstance(value, int) or checked == value:
                return checked
    msg = f"{label} = {shown(value)} {_why(param, value, number)}: allowed {allowed(param)}"
    if allow_inf:
        msg += " (or inf)"
    raise AdabatchError(msg)


def _as_float(value: Any) -> float:
    """``value`` as a float (an integer beyond the float range as +-inf); ``nan`` when it
    is no number."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf
    except (TypeError, ValueError):
        return math.nan


def _why(param: Param, value: Any, number: Any) -> str:
    """Why ``value`` (checked as ``number``) failed ``param``: not a number (or not an
    ``int`` for an integer field given a Python value), not finite, not whole, or out of
    range."""
    if number is None:
        whole = isinstance(value, float) and param.kind is int
        return "is not an integer" if whole else "is not a number"
    if isinstance(value, int):
        return "is out of range"
    try:
        as_float = float(number)
    except (TypeError, ValueError):
        return "is not a number"
    if not math.isfinite(as_float):
        return "is not finite"
    if param.kind is int and not as_float.is_integer():
        return "is not an integer"
    return "is out of range"
