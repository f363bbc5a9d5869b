"""The registry of controllers: name -> class, and construction from string parameters."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from adabatch.control.base import Controller
from adabatch.errors import AdabatchError, shown

# name -> "module:Class"; imported lazily so a broken controller cannot break the others.
_ENTRIES: dict[str, str] = {
    "static": "adabatch.control.static:StaticController",
    "fixed-point": "adabatch.control.fixed_point:FixedPointController",
    "gradient": "adabatch.control.gradient:GradientController",
    "binary": "adabatch.control.binary:BinaryController",
    "isotonic": "adabatch.control.isotonic:IsotonicController",
    "pid": "adabatch.control.pid:PIDController",
    "adcom": "adabatch.control.adcom:AdComController",
}


def names() -> list[str]:
    """Registered controller names, in the order ``adabatch controllers`` lists them."""
    return list(_ENTRIES)


def controller_class(name: str) -> type[Controller]:
    """The class registered as ``name``; an :class:`AdabatchError` lists the known names."""
    try:
        target = _ENTRIES[name]
    except KeyError:
        msg = f"unknown controller {shown(name)}: allowed {', '.join(_ENTRIES)}"
        raise AdabatchError(msg) from None
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)


def create(name: str, params: Mapping[str, Any] | None = None) -> Controller:
    """A new controller ``name`` with ``params`` (strings or numbers), validated."""
    return controller_class(name)(**dict(params or {}))


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
