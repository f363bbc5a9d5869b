"""Schemas of the ``files`` source: inferred from a file, and JSON values cast to them.

Columns, their types and how a value becomes one are :mod:`adabatch.sources.ddl`'s (the
same DDL and casts as the redis source); a CSV field is cast as its text. A JSON value is
cast as it is, except that an object or array in a STRING column becomes its JSON text,
as in Spark's JSON reader.

Inference, when the ``schema`` option is absent, looks at one file: JSON lines the first
parseable object (booleans BOOLEAN, integers BIGINT, other numbers DOUBLE, anything else
STRING, as Spark infers them without nested types); CSV the header (or ``_c0, _c1, ...``)
and the narrowest type every sampled field of a column casts to (INT, BIGINT, DOUBLE,
BOOLEAN for true/false, DATE, TIMESTAMP, else STRING); Parquet the file's schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from adabatch.errors import AdabatchError
from adabatch.sources.ddl import ARROW_TYPES, SUPPORTED, CastError, Column, cast_value

_SNIFFED = ("INT", "BIGINT", "DOUBLE", "BOOLEAN", "DATE", "TIMESTAMP")
_WIDER = {pa.uint8(): "SMALLINT", pa.uint16(): "INT", pa.uint32(): "BIGINT"}


def json_value(value: Any, type_name: str) -> Any:
    """A JSON value as the Python value Arrow stores for ``type_name`` (``None`` for
    null); :class:`~adabatch.sources.ddl.CastError` if it does not fit."""
    if type_name == "STRING" and isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return cast_value(value, type_name)


def from_arrow(schema: pa.Schema, where: str) -> tuple[Column, ...]:
    """Columns for a Parquet file's Arrow schema; an unsupported type names the column."""
    by_arrow = {t: name for name, t in ARROW_TYPES.items()}
    out = []
    for field in schema:
        t = field.type
        name = by_arrow.get(t) or _WIDER.get(t)
        if name is None and pa.types.is_timestamp(t):
            name = "TIMESTAMP"
        elif name is None and pa.types.is_large_string(t):
            name = "STRING"
        elif name is None and pa.types.is_large_binary(t):
            name = "BINARY"
        if name is None:
            msg = (
                f"files source: cannot infer a schema from {where}: column {field.name!r} "
                f"has Arrow type {t}; supported types are {SUPPORTED}: give option schema"
            )
            raise AdabatchError(msg)
        out.append(Column(field.name, name))
    return tuple(out)


def infer_json(obj: Mapping[str, Any]) -> tuple[Column, ...]:
    """Columns for one JSON object, in its field order."""

    def kind(v: Any) -> str:
        if isinstance(v, bool):
            return "BOOLEAN"
        if isinstance(v, int):
            return "BIGINT"
        return "DOUBLE" if isinstance(v, float) else "STRING"

    return tuple(Column(name, kind(v)) for name, v in obj.items())


def _fits(values: Sequence[str], type_name: str) -> bool:
    if type_name == "BOOLEAN":  # not yes/no/1/0: a column of those stays what it looks like
        return all(v.strip().lower() in ("true", "false") for v in values)
    try:
        for v in values:
            cast_value(v, type_name)
    except CastError:
        return False
    return True


def _sniff(values: Sequence[str]) -> str:
    """The narrowest type every non-empty CSV field in ``values`` casts to."""
    present = [v for v in values if v.strip()]
    if not present:
        return "STRING"
    return next((t for t in _SNIFFED if _fits(present, t)), "STRING")


def _unique(names: Sequence[str]) -> list[str]:
    """``names`` with empty ones called ``_c<i>`` and repeats suffixed with their index."""
    out: list[str] = []
    seen: set[str] = set()
    for i, name in enumerate(names):
        name = name.strip() or f"_c{i}"
        if name.lower() in seen:
            name = f"{name}{i}"
        seen.add(name.lower())
        out.append(name)
    return out


def infer_csv(names: Sequence[str], rows: Sequence[Sequence[str]]) -> tuple[Column, ...]:
    """Columns for a CSV header (or ``_c0 ..`` names) and sample rows; rows of another
    width are not sampled."""
    fitting = [r for r in rows if len(r) == len(names)]
    return tuple(
        Column(name, _sniff([r[i] for r in fitting])) for i, name in enumerate(_unique(names))
    )
