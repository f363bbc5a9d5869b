"""One parameter validator for every value a user names by string: controller and source
parameters, Spark source options, simulated cost models and deadline cost fields.

:class:`Param` says a value's type and allowed range and turns a CLI string, a Spark
option or a number into a checked value; :class:`Params` holds the checked values
read-only with attribute access.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adabatch.errors import AdabatchError, shown

Number = int | float


@dataclass(frozen=True)
class Param:
    """One controller parameter: its paper name, default, type and allowed range.

    ``low``/``high`` bound numeric values (``None`` = unbounded); ``low_open``/``high_open``
    make a bound exclusive. ``choices`` restricts string parameters.
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

    def allowed(self) -> str:
        """The allowed values as text, for errors and ``adabatch controllers``."""
        if self.choices is not None:
            return "one of " + ", ".join(self.choices)
        if self.kind is bool:
            return "true or false"
        lo = "(" if self.low_open else "["
        hi = ")" if self.high_open else "]"
        lo_v = "-inf" if self.low is None else f"{self.low:g}"
        hi_v = "inf" if self.high is None else f"{self.high:g}"
        text = f"{lo}{lo_v}, {hi_v}{hi}"
        if self.kind is int:
            text = "integer in " + text
        return text + (" or unset" if self.optional else "")

    def parse(self, value: Any, owner: str = "controller") -> Any:
        """Convert ``value`` (a string from the CLI or a Spark option, or a number) and
        validate it; raise :class:`AdabatchError` naming the parameter otherwise."""
        where = f"{owner} parameter {self.name!r}"
        if isinstance(value, str) and len(value) > 100:  # no number is that long
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
        msg = "controller parameters are read-only"
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
