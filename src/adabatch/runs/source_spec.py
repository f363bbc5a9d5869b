"""Where records come from or go to, as one string: ``generator``, ``files:DIR`` or
``redis://HOST:PORT[/DB]/STREAM``.

``adabatch run``, ``compare`` and ``bench`` read ``--source SPEC``; ``adabatch produce``
writes to ``--to SPEC`` (the same forms without ``generator``). :func:`parse_source` turns
a spec into the record source's name and its options for the ``adabatch`` data source
(``files``: ``path`` (absolute) and ``format``; ``redis``: ``url`` and ``stream``); a bad
spec is one line naming the value and the allowed forms.

Examples
--------
>>> parse_source("generator").live
False
>>> s = parse_source("redis://127.0.0.1:6379/2/clicks")
>>> s.name, dict(s.options)
('redis', {'stream': 'clicks', 'url': 'redis://127.0.0.1:6379/2'})
"""

from __future__ import annotations

import os
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from adabatch.errors import AdabatchError, shown
from adabatch.urls import redact_url

GENERATOR = "generator"
FILES_PREFIX = "files:"
REDIS_SCHEMES = ("redis", "rediss")
REDIS_DEFAULT_PORT = 6379
FORMATS = ("json", "csv", "parquet")
"""File formats of a landing directory (``json``: JSON lines)."""
DEFAULT_FORMAT = "json"
TARGET_FORMS = "files:DIR or redis://HOST:PORT[/DB]/STREAM"
SOURCE_FORMS = f"{GENERATOR}, {TARGET_FORMS}"
MAX_STREAM_KEY = 256  # characters of a Redis stream key
MAX_DB = 1_000_000  # Redis databases are numbered from 0 (16 by default)
_KEY_CHARS = frozenset(string.ascii_letters + string.digits + "._-:/{}[]@+=")


@dataclass(frozen=True)
class SourceSpec:
    """A parsed spec: the record source's ``name`` (``generator``, ``files``, ``redis``),
    its ``options`` (sorted pairs of strings) and ``text``, the spec in canonical form
    (absolute directory, explicit port and database)."""

    name: str
    options: tuple[tuple[str, str], ...]
    text: str

    @property
    def live(self) -> bool:
        """Whether records come from others' writes (files, Redis), not the generator."""
        return self.name != GENERATOR

    @property
    def shown(self) -> str:
        """``text`` for messages, summaries and titles, any password replaced."""
        return str(redact_url(self.text))

    def option(self, name: str) -> str:
        """One of the ``options`` (``KeyError`` if the spec has none of that name)."""
        return dict(self.options)[name]


def parse_source(text: str, what: str = "--source") -> SourceSpec:
    """``generator``, ``files:DIR`` or ``redis://HOST:PORT[/DB]/STREAM`` as a
    :class:`SourceSpec`; anything else is one line naming ``what``, the value and the forms."""
    spec = str(text).strip()
    if spec.lower() == GENERATOR:
        return SourceSpec(GENERATOR, (), GENERATOR)
    return _parse_live(spec, what, SOURCE_FORMS)


def source_options(
    spec: SourceSpec, seed: int, keys: int, given: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """The record source's own options for the ``adabatch`` data source: the generator's
    ``seed`` and ``keys``, or a live source's location with the generator's schema (so
    every workload finds its columns); ``given`` (``--source-option``) overrides either."""
    if spec.live:
        from adabatch.sources.generator import SPARK_SCHEMA  # needs pyarrow: only here

        out = {**dict(spec.options), "schema": SPARK_SCHEMA}
    else:
        out = {"seed": str(seed), "keys": str(keys)}
    extra = {str(k): str(v) for k, v in (given or {}).items()}
    overridden = {k.lower() for k in extra}
    return {**{k: v for k, v in out.items() if k.lower() not in overridden}, **extra}


def parse_target(text: str, what: str = "--to") -> SourceSpec:
    """``files:DIR`` or ``redis://HOST:PORT[/DB]/STREAM`` (where a producer writes) as a
    :class:`SourceSpec`; anything else, the generator too, is one line."""
    return _parse_live(str(text).strip(), what, TARGET_FORMS)


def _parse_live(spec: str, what: str, forms: str) -> SourceSpec:
    if spec.lower().startswith(FILES_PREFIX):
        return _parse_files(spec, what)
    scheme = spec.partition("://")[0].lower()
    if scheme in REDIS_SCHEMES and "://" in spec:
        return _parse_redis(spec, what)
    msg = f"{what} {shown(redact_url(spec))} is not allowed: allowed {forms}"
    raise AdabatchError(msg)


def _parse_files(spec: str, what: str) -> SourceSpec:
    raw = spec[len(FILES_PREFIX) :].strip()
    if not raw:
        msg = f"{what} {shown(spec)} names no directory: allowed files:DIR (e.g. files:landing/)"
        raise AdabatchError(msg)
    if "\x00" in raw:
        msg = f"{what} {shown(spec)}: a directory path cannot hold a NUL character"
        raise AdabatchError(msg)
    path = Path(os.path.abspath(os.path.expanduser(raw)))
    if (path.exists() or path.is_symlink()) and not path.is_dir():
        msg = f"{what} {shown(spec)}: {shown(str(path))} exists and is not a directory"
        raise AdabatchError(msg)
    options = (("format", DEFAULT_FORMAT), ("path", str(path)))
    return SourceSpec("files", options, f"{FILES_PREFIX}{path}")


def _parse_redis(spec: str, what: str) -> SourceSpec:
    forms = "redis://HOST:PORT[/DB]/STREAM (e.g. redis://127.0.0.1:6379/0/events)"

    def fail(reason: str) -> AdabatchError:
        return AdabatchError(f"{what} {shown(redact_url(spec))} {reason}: allowed {forms}")

    parts = urlsplit(spec)
    if parts.query or parts.fragment or "?" in spec or "#" in spec:
        raise fail("has a query or fragment")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise fail("has a bad port") from None
    if port == 0:
        raise fail("has port 0")
    if not host:
        raise fail("names no host")
    segments = parts.path.lstrip("/").split("/")
    db = 0
    if len(segments) > 1 and segments[0].isdigit():
        db = int(segments[0])
        segments = segments[1:]
        if db >= MAX_DB:
            raise fail(f"names database {db}")
    stream = "/".join(segments)
    if not stream:
        raise fail("names no stream key")
    if len(stream) > MAX_STREAM_KEY or not set(stream) <= _KEY_CHARS:
        raise fail(
            f"has stream key {shown(stream, 60)}: keys are 1-{MAX_STREAM_KEY} letters, digits "
            "or ._-:/{}[]@+="
        )
    netloc = parts.netloc if port is not None else f"{parts.netloc}:{REDIS_DEFAULT_PORT}"
    url = f"{parts.scheme.lower()}://{netloc}/{db}"
    return SourceSpec("redis", (("stream", stream), ("url", url)), f"{url}/{stream}")
