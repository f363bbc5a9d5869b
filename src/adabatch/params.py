"""One parameter validator for every value a user names by string: controller and source
parameters, Spark source options, simulated cost models and deadline cost fields.

:class:`Param` says a value's type and allowed range and turns a CLI string, a Spark
option or a number into a checked value; :func:`parse_values` checks a whole set of named
values against their params (unknown names refused, missing ones at their defaults);
:class:`Params` holds the checked values read-only with attribute access.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from adabatch.errors import AdabatchError, shown

Number = int | float


@dataclass(frozen=True)
class Param:
    """One named value: its (paper) name, default, type and allowed range.

    ``low``/``high`` bound numeric values (``None`` = unbounded); ``low_open``/``high_open``
    make a bound exclusive. ``choices`` restricts string parameters; without choices a
    string parameter is free text, checked by ``check`` when given (a parser that raises
    :class:`AdabatchError` on bad text, e.g. a rate-profile spec's).
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
        return text + (" or unset" if self.optional else "")

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
            number = self.kind(float(value)) if self.kind is float else _as_int(value)
        except (TypeError, ValueError):
            msg = f"{where} = {shown(value)} is not a number: allowed {self.allowed()}"
            raise AdabatchError(msg) from None
        if isinstance(number, float) and not math.isfinite(number):
            msg = f"{where} = {shown(value)} is not finite: allowed {self.allowed()}"
            raise AdabatchError(msg)
        too_low = self.low is not None and (
            number <= self.low if self.low_open else number < self.low
        )
        too_high = self.high is not None and (
            number >= self.high if self.high_open else number > self.high
        )
        if too_low or too_high:
            msg = f"{where} = {shown(value)} is out of range: allowed {self.allowed()}"
            raise AdabatchError(msg)
        return number

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
    unknown = sorted(str(name) for name in set(values) - set(known))
    if unknown:
        allowed = ", ".join(known) or "none"
        msg = f"{holder or owner} has no {noun} {shown(unknown[0])}: allowed {noun}s are {allowed}"
        raise AdabatchError(msg)
    return Params(
        {
            name: p.parse(values.get(name, p.default), owner=owner, noun=noun)
            for name, p in known.items()
        }
    )


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
