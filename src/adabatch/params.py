"""One parameter validator for every value a user names by string: controller and source
parameters, Spark source options, simulated cost models and deadline cost fields.

:class:`Param` says a value's type and allowed range and turns a CLI string, a Spark
option or a number into a checked value; :func:`parse_values` checks a whole set of named
values against their params (unknown names refused by :func:`check_names`, missing ones
at their defaults); :meth:`Param.parse_flag` checks the text of a command-line flag;
:class:`Params` holds the checked values read-only with attribute access.

Durations are read here too (:func:`parse_duration`: ``90``, ``90s``, ``500ms``, Spark's
``5 seconds``), so a parameter can be a number of seconds given in any of those forms
(``Param(..., duration=True)``); :mod:`adabatch.profiles` re-exports the grammar.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from adabatch.errors import AdabatchError, shown

Number = int | float

# Units of a duration: ours (90s, 500ms, 1.5m, 2h) and the words Spark accepts in a
# processingTime trigger or a time option ("5 seconds", "1 minute", "100 ms", "10 sec").
_UNIT_NAMES: tuple[tuple[tuple[str, ...], float], ...] = (
    (("us", "micro", "micros", "microsecond", "microseconds"), 1e-6),
    (("ms", "msec", "msecs", "milli", "millis", "millisecond", "milliseconds"), 1e-3),
    (("s", "sec", "secs", "second", "seconds"), 1.0),
    (("m", "min", "mins", "minute", "minutes"), 60.0),
    (("h", "hr", "hrs", "hour", "hours"), 3600.0),
    (("d", "day", "days"), 86400.0),
    (("w", "week", "weeks"), 604800.0),
)
_UNIT_S = {name: seconds for names, seconds in _UNIT_NAMES for name in names}
_DURATION_PART = re.compile(r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)\s*([a-z]+)?\s*")
MAX_DURATION_TEXT = 200  # characters; longer text is not a duration
DURATION_FORMS = (
    "90, 90s, 500ms, 1.5m, 2h, or Spark's '5 seconds', '1 minute', '500 milliseconds', "
    "'2 hours', '10 sec', '1 min', '100 ms', 'interval 1 minute 30 seconds' "
    "(units: us, ms, s, m, h, d, w and their names)"
)


def parse_duration(text: str | float | int) -> float:
    """Seconds from a number of seconds or a duration with units (>= 0, finite).

    Our short forms (``"90"``, ``"90s"``, ``"500ms"``, ``"1.5m"``, ``"2h"``) and Spark's
    (``"5 seconds"``, ``"1 min"``, ``"100 ms"``, ``"interval 1 minute 30 seconds"``),
    case-insensitive; a sum of parts needs a unit on each.

    Examples
    --------
    >>> parse_duration("1 minute 30 seconds")
    90.0
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        value = _duration_text(str(text))
        if value is None:
            msg = f"duration {shown(text)} is not a duration: allowed e.g. {DURATION_FORMS}"
            raise AdabatchError(msg)
    if not math.isfinite(value) or value < 0:
        msg = f"duration {shown(text)} must be a finite number of seconds >= 0"
        raise AdabatchError(msg)
    return value


def _duration_text(text: str) -> float | None:
    """Seconds of a duration's text, ``None`` if it is not one."""
    if len(text) > MAX_DURATION_TEXT:
        return None
    rest = text.strip().lower().removeprefix("interval ")
    parts, pos = [], 0
    while pos < len(rest) or not parts:
        match = _DURATION_PART.match(rest, pos)
        if match is None or match.end() == pos:
            return None
        number, unit = match.groups()
        if unit is not None and unit not in _UNIT_S:
            return None
        parts.append((float(number), unit))
        pos = match.end()
    if len(parts) > 1 and any(unit is None for _, unit in parts):
        return None  # "1 30s": which unit is the 1 in?
    return sum(number * _UNIT_S[unit or "s"] for number, unit in parts)


@dataclass(frozen=True)
class Param:
    """One named value: its (paper) name, default, type and allowed range.

    ``low``/``high`` bound numeric values (``None`` = unbounded); ``low_open``/``high_open``
    make a bound exclusive. ``choices`` restricts string parameters; without choices a
    string parameter is free text, checked by ``check`` when given (a parser that raises
    :class:`AdabatchError` on bad text, e.g. a rate-profile spec's). ``duration`` makes a
    float parameter a number of seconds that may also be written as a duration
    (``2s``, ``1500ms``, ``2 seconds``: :func:`parse_duration`).
    """

    name: str
    default: Any
    help: str
    kind: type = float
    low: Number | None = None
    high: Number | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] | None = None
    optional: bool = False  # default None allowed ("not set")
    check: Callable[[str], object] | None = None
    duration: bool = False

    @property
    def required(self) -> bool:
        """No default and not optional: the caller must give a value."""
        return self.default is None and not self.optional

    def allowed(self) -> str:
        """The allowed values as text, for errors and ``adabatch controllers``."""
        if self.choices is not None:
            return "one of " + ", ".join(self.choices)
        if self.kind is bool:
            return "true or false"
        if self.kind is str:
            return "text" + (" or unset" if self.optional else "")
        lo = "(" if self.low_open else "["
        hi = ")" if self.high_open else "]"
        lo_v = "-inf" if self.low is None else f"{self.low:g}"
        hi_v = "inf" if self.high is None else f"{self.high:g}"
        text = f"{lo}{lo_v}, {hi_v}{hi}"
        if self.kind is int:
            text = "integer in " + text
        elif self.duration:
            text = f"seconds in {text} or a duration (2s, 1500ms, '2 seconds')"
        return text + (" or unset" if self.optional else "")

    def in_words(self, noun: str = "a finite number") -> str:
        """The allowed values in words, for command-line flags and spec fields:
        ``"an integer from 1 to 100"``, ``"a finite number > 0"``, ``"one of fifo,
        coalesce"``; ``noun`` names a non-integer number (``"a finite number of seconds"``).
        """
        if self.choices is not None:
            return "one of " + ", ".join(self.choices)
        low, high, fmt = self.low, self.high, "g"
        if self.duration and noun == "a finite number":
            noun = "a duration in seconds (e.g. 2, 2s, 1500ms, '2 seconds')"
        if self.kind is int:  # whole numbers in full: 9007199254740992, not 9.0072e+15
            noun, fmt = "an integer", "d"
            low = None if low is None else int(low)
            high = None if high is None else int(high)
        if low is not None and high is not None and not (self.low_open or self.high_open):
            return f"{noun} from {low:{fmt}} to {high:{fmt}}"
        bounds = []
        if low is not None:
            bounds.append(f"{'>' if self.low_open else '>='} {low:{fmt}}")
        if high is not None:
            bounds.append(f"{'<' if self.high_open else '<='} {high:{fmt}}")
        return " ".join([noun, " and ".join(bounds)]).strip()

    def parse(self, value: Any, owner: str = "controller", noun: str = "parameter") -> Any:
        """Convert ``value`` (a string from the CLI or a Spark option, or a number) and
        validate it; raise :class:`AdabatchError` naming the parameter otherwise.

        The message starts ``"{owner} {noun} 'name' = value"``, e.g. ``"pid parameter
        'kp' = ..."`` or ``"generator source option 'keys' = ..."``.
        """
        where = f"{owner} {noun} {self.name!r}"
        if self.kind is not str and isinstance(value, str) and len(value) > 100:
            # no number or choice is that long
            msg = f"{where} = {shown(value)} is not allowed: allowed {self.allowed()}"
            raise AdabatchError(msg)
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
            if self.optional:
                return None
            msg = f"{where} must be set: allowed {self.allowed()}"
            raise AdabatchError(msg)
        if self.kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("true", "1", "yes"):
                return True
            if text in ("false", "0", "no"):
                return False
            msg = f"{where} = {shown(value)} is not a boolean: allowed true or false"
            raise AdabatchError(msg)
        if self.choices is not None:
            text = str(value).strip()
            if text not in self.choices:
                msg = f"{where} = {shown(value)} is not allowed: allowed {self.allowed()}"
                raise AdabatchError(msg)
            return text
        if self.kind is str:
            return self._checked_text(str(value).strip(), where)
        try:
            number = self._number(value)
        except (TypeError, ValueError):
            what = "a duration" if self.duration else "a number"
            msg = f"{where} = {shown(value)} is not {what}: allowed {self.allowed()}"
            raise AdabatchError(msg) from None
        fault = self._fault(number)
        if fault is not None:
            msg = f"{where} = {shown(value)} {fault}: allowed {self.allowed()}"
            raise AdabatchError(msg)
        return number

    def parse_flag(self, text: str) -> Any:
        """``text`` given to the command-line flag this param names (``--seed``), checked.

        Flag text is read as typed: an integer in digits only (``1e3`` is refused, not read
        as 1000), a choice in any case (returned in lower case). Errors name the flag, the
        text and the allowed values in words: ``--seed 'x' is not an integer: allowed an
        integer >= 0`` for the wrong kind of value, ``--seed '-1': allowed an integer >= 0``
        for a value outside the allowed ones. Integer, number and choice params only.
        """
        what = f"{self.name} {shown(text)}"
        if self.choices is not None:
            value: Any = text.strip().lower()
            fault = None if value in self.choices else "is not allowed"
        else:
            try:
                # int("1.5"), int("1e3") and float("x") raise
                value = self._number(text) if self.duration else self.kind(text)
            except ValueError:
                kind = "an integer" if self.kind is int else "a number"
                kind = "a duration" if self.duration else kind
                msg = f"{what} is not {kind}: allowed {self.in_words()}"
                raise AdabatchError(msg) from None
            fault = self._fault(value)
        if fault is not None:
            msg = f"{what}: allowed {self.in_words()}"
            raise AdabatchError(msg)
        return value

    def _number(self, value: Any) -> Number:
        """``value`` as this param's kind of number; ``ValueError``/``TypeError`` if it is
        none (a duration's text in any form :func:`parse_duration` reads)."""
        if self.duration and isinstance(value, str):
            seconds = _duration_text(value)
            if seconds is None:
                raise ValueError(value)
            return seconds
        return self.kind(float(value)) if self.kind is float else _as_int(value)

    def _fault(self, number: Number) -> str | None:
        """Why ``number`` is not allowed (``"is not finite"``, ``"is out of range"``), or
        ``None`` when it is."""
        if isinstance(number, float) and not math.isfinite(number):
            return "is not finite"
        too_low = self.low is not None and (
            number <= self.low if self.low_open else number < self.low
        )
        too_high = self.high is not None and (
            number >= self.high if self.high_open else number > self.high
        )
        return "is out of range" if too_low or too_high else None

    def _checked_text(self, text: str, where: str) -> str:
        if self.check is not None:
            try:
                self.check(text)
            except AdabatchError as exc:
                msg = f"{where} = {shown(text)} is not allowed: {exc}"
                raise AdabatchError(msg) from None
        return text


def parse_values(
    params: Iterable[Param],
    values: Mapping[str, Any],
    *,
    owner: str,
    holder: str | None = None,
    noun: str = "parameter",
) -> Params:
    """Every one of ``params`` from ``values`` (each missing one at its default), checked.

    A name in ``values`` that no param has is an error listing the allowed names, worded
    ``"{holder} has no {noun} 'x': allowed {noun}s are ..."`` (``holder`` defaults to
    ``owner``); a bad value is worded as in :meth:`Param.parse`.
    """
    known = {p.name: p for p in params}
    check_names(known.values(), values, holder=holder or owner, noun=noun)
    return Params(
        {
            name: p.parse(values.get(name, p.default), owner=owner, noun=noun)
            for name, p in known.items()
        }
    )


def check_names(params: Iterable[Param], names: Iterable[str], *, holder: str, noun: str) -> None:
    """Refuse any of ``names`` that no param has, worded ``"{holder} has no {noun} 'x':
    allowed {noun}s are ..."`` (the first unknown name in sorted order)."""
    known = [p.name for p in params]
    unknown = sorted(str(name) for name in set(names) - set(known))
    if unknown:
        allowed = ", ".join(known) or "none"
        msg = f"{holder} has no {noun} {shown(unknown[0])}: allowed {noun}s are {allowed}"
        raise AdabatchError(msg)


def _as_int(value: Any) -> int:
    number = float(value)
    if not number.is_integer():
        raise ValueError(value)
    return int(number)


class Params(Mapping[str, Any]):
    """Validated, read-only parameter values with attribute access (``p.rho``)."""

    __slots__ = ("_values",)

    def __init__(self, values: dict[str, Any]) -> None:
        object.__setattr__(self, "_values", dict(values))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # no recursion while unpickling, before _values exists
            raise AttributeError(name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        msg = "parameters are read-only"
        raise AttributeError(msg)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __reduce__(self) -> tuple[type[Params], tuple[dict[str, Any]]]:
        return (Params, (dict(self._values),))

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"Params({inner})"
