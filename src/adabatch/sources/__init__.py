"""Replayable record sources behind the ``adabatch`` streaming data source.

``source_class(name)`` returns the :class:`~adabatch.sources.base.RecordSource` registered
as ``name`` (the data source's ``source`` option).
"""

from __future__ import annotations

from adabatch.registry import Registry
from adabatch.sources.base import RecordSource

SOURCES: Registry[type[RecordSource]] = Registry(
    "source",
    {
        "generator": "adabatch.sources.generator:GeneratorSource",
        "files": "adabatch.sources.files:FilesSource",
        "redis": "adabatch.sources.redis_stream:RedisStreamSource",
    },
)


def names() -> list[str]:
    """Registered source names."""
    return SOURCES.names()


def source_class(name: str) -> type[RecordSource]:
    """The source class registered as ``name``; an :class:`AdabatchError` lists the names."""
    return SOURCES.get(name)


__all__ = ["SOURCES", "RecordSource", "names", "source_class"]
