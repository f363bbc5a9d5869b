"""Replayable record sources behind the ``adabatch`` streaming data source.

``source_class(name)`` returns the :class:`~adabatch.sources.base.RecordSource` registered
as ``name`` (the data source's ``source`` option).
"""

from __future__ import annotations

import importlib

from adabatch.errors import AdabatchError
from adabatch.sources.base import RecordSource

# name -> "module:Class", imported on demand.
_ENTRIES = {
    "generator": "adabatch.sources.generator:GeneratorSource",
}


def names() -> list[str]:
    """Registered source names."""
    return list(_ENTRIES)


def source_class(name: str) -> type[RecordSource]:
    """The source class registered as ``name``; an :class:`AdabatchError` lists the names."""
    try:
        target = _ENTRIES[name]
    except (KeyError, TypeError):
        msg = f"unknown source {name!r}: allowed {', '.join(_ENTRIES)}"
        raise AdabatchError(msg) from None
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)


__all__ = ["RecordSource", "names", "source_class"]
