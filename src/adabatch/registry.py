"""One registry shape for everything chosen by name: controllers, sources, workloads,
experiments and commands.

An entry is ``name -> "module:attribute"``, imported on first use, so a broken or
missing module breaks only its own name and importing a registry stays cheap.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from typing import Generic, TypeVar

from adabatch.errors import AdabatchError, shown

T = TypeVar("T")


class Registry(Generic[T]):
    """Named entries of one ``kind`` (``"controller"``, ``"source"``, ...), in order."""

    def __init__(self, kind: str, entries: Mapping[str, str]) -> None:
        for name, target in entries.items():
            module, sep, attribute = target.partition(":")
            if not (sep and module and attribute):
                msg = f"{kind} {name!r} -> {target!r}: want 'module:attribute'"
                raise ValueError(msg)
        self.kind = kind
        self._entries = dict(entries)

    def names(self) -> list[str]:
        """Every registered name, in registration order."""
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._entries

    def target(self, name: str) -> tuple[str, str]:
        """``(module, attribute)`` for ``name``; an :class:`AdabatchError` lists the names."""
        if name not in self:
            msg = f"unknown {self.kind} {shown(name)}: allowed {', '.join(self._entries)}"
            raise AdabatchError(msg)
        module, _, attribute = self._entries[name].partition(":")
        return module, attribute

    def get(self, name: str) -> T:
        """The object registered as ``name``, imported now."""
        module, attribute = self.target(name)
        try:
            loaded = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            msg = f"{self.kind} {name!r} is registered but {module} is not installed"
            raise AdabatchError(msg) from None
        return getattr(loaded, attribute)

    def available(self) -> list[str]:
        """Registered names whose module can be found (without importing it)."""
        return [n for n in self._entries if importlib.util.find_spec(self.target(n)[0])]
