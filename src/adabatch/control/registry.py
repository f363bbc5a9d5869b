"""The registry of controllers: name -> class, and construction from string parameters."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from adabatch.control.base import Controller
from adabatch.errors import AdabatchError, shown
from adabatch.registry import Registry

CONTROLLERS: Registry[type[Controller]] = Registry(
    "controller",
    {
        "static": "adabatch.control.static:StaticController",
        "fixed-point": "adabatch.control.fixed_point:FixedPointController",
        "gradient": "adabatch.control.gradient:GradientController",
        "binary": "adabatch.control.binary:BinaryController",
        "isotonic": "adabatch.control.isotonic:IsotonicController",
        "pid": "adabatch.control.pid:PIDController",
        "adcom": "adabatch.control.adcom:AdComController",
        "slo": "adabatch.control.slo:SloController",
    },
)


def names() -> list[str]:
    """Registered controller names, in the order ``adabatch controllers`` lists them."""
    return CONTROLLERS.names()


def controller_class(name: str) -> type[Controller]:
    """The class registered as ``name``; an :class:`AdabatchError` lists the known names."""
    return CONTROLLERS.get(name)


def create(name: str, params: Mapping[str, Any] | None = None) -> Controller:
    """A new controller ``name`` with ``params`` (strings or numbers), validated."""
    return controller_class(name)(**dict(params or {}))


def with_cores(
    name: str, params: Mapping[str, Any], cores: Callable[[], float | None]
) -> dict[str, Any]:
    """``params`` with ``cores`` set to ``cores()`` when controller ``name`` has that
    parameter and ``params`` does not give it (isotonic bounds its blocks by it); unchanged
    for unknown names and when ``cores()`` is None."""
    out = dict(params)
    if "cores" in out or name not in names():
        return out
    if "cores" not in {p.name for p in controller_class(name).PARAMS}:
        return out
    n = cores()
    if n is not None:
        out["cores"] = n
    return out


def parse_params(pairs: list[str] | None) -> dict[str, str]:
    """``["rho=0.7", "r=0.25"]`` -> ``{"rho": "0.7", "r": "0.25"}`` (values checked later)."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            msg = f"--param {shown(pair)} is not of the form name=value"
            raise AdabatchError(msg)
        out[key.strip()] = value.strip()
    return out
