"""Spark DDL schemas for sources that read text: parse, print, map to Arrow, cast values.

A source whose records arrive as text (a Redis Stream's field values, CSV or JSON files)
takes its schema as a Spark DDL string such as ``"key INT, value DOUBLE, ts TIMESTAMP"``
and turns every value into its column's type. Supported types (Spark's aliases in
brackets): STRING, BOOLEAN, TINYINT (BYTE), SMALLINT (SHORT), INT (INTEGER), BIGINT (LONG),
FLOAT (REAL), DOUBLE, DATE, TIMESTAMP, BINARY.

How text becomes a value (:func:`cast_value`):

- integers: decimal digits with an optional sign; out of the type's range is an error;
- FLOAT, DOUBLE: any decimal or exponent form (``1.5``, ``-2e3``, ``nan``, ``inf``);
- BOOLEAN: ``true``/``t``/``yes``/``y``/``1`` or ``false``/``f``/``no``/``n``/``0``, any case;
- DATE: ISO 8601 (``2024-05-01``); TIMESTAMP: ISO 8601 (``2024-05-01T12:00:00.5Z``; no
  offset means UTC) or a number of seconds since the Unix epoch;
- STRING: UTF-8 text; BINARY: the bytes as they are.

An empty text is null for every type but STRING and BINARY, as in Spark's CSV reader; a
missing value (``None``) is null for every type. Python values of the column's kind (an
``int`` for BIGINT, a ``datetime`` for TIMESTAMP, ...) pass through, checked.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from adabatch.errors import AdabatchError, shown

MAX_DDL_CHARS = 100_000
MAX_COLUMNS = 1_000

ARROW_TYPES: dict[str, pa.DataType] = {
    "STRING": pa.string(),
    "BOOLEAN": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "BINARY": pa.binary(),
}
"""Spark's type name -> the Arrow type a source yields for it (what Spark converts from)."""

ALIASES = {"BYTE": "TINYINT", "SHORT": "SMALLINT", "INTEGER": "INT", "LONG": "BIGINT"}
ALIASES["REAL"] = "FLOAT"
SUPPORTED = ", ".join(ARROW_TYPES)

_INT_BITS = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}
_FLOAT32_MAX = 3.4028234663852886e38
_TRUE = frozenset({"true", "t", "yes", "y", "1"})
_FALSE = frozenset({"false", "f", "no", "n", "0"})
_INTEGER = re.compile(r"[+-]?[0-9]+")
# Text that both Python's float() and Arrow's cast read, and read alike (RE2 syntax).
_FLOAT_TEXT = r"^[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)(e[+-]?[0-9]+)?|inf|infinity|nan)$"
_BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_ONE_US = dt.timedelta(microseconds=1)
# Spark's timestamps span years 1-9999: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z
_MIN_SECONDS, _MAX_SECONDS = -62_135_596_800.0, 253_402_300_799.0


@dataclass(frozen=True)
class Column:
    """One column of a schema: its name and its Spark type (canonical, upper case)."""

    name: str
    type: str

    def ddl(self) -> str:
        """``name TYPE``, the name in backticks unless it is a plain identifier."""
        return f"{quote_name(self.name)} {self.type}"


class CastError(AdabatchError):
    """A value that does not fit its column's type; ``index`` is its row in the column."""

    def __init__(self, value: Any, type_name: str, reason: str, index: int = -1) -> None:
        self.value = value
        self.type_name = type_name
        self.reason = reason
        self.index = index
        super().__init__(f"value {shown(value, 80)} does not cast to {type_name}: {reason}")


def quote_name(name: str) -> str:
    """A column name as DDL writes it: bare if an identifier, else in backticks."""
    if _BARE_NAME.fullmatch(name):
        return name
    return "`" + name.replace("`", "``") + "`"


def _split_columns(text: str) -> list[str]:
    """``text`` split at the commas that are outside backticks and parentheses."""
    parts, depth, quoted, current = [], 0, False, []
    for ch in text:
        if ch == "`":
            quoted = not quoted
        elif not quoted and ch in "(<":
            depth += 1
        elif not quoted and ch in ")>":
            depth -= 1
        elif ch == "," and not quoted and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return parts


def _column(part: str, what: str) -> Column:
    """One ``name TYPE [NOT NULL]`` item of a DDL string."""
    item = part.strip()
    if item.startswith("`"):
        match = re.match(r"`((?:[^`]|``)*)`", item)
        if match is None:
            msg = f"{what} column {shown(item, 80)} has an unclosed backtick"
            raise AdabatchError(msg)
        name, rest = match.group(1).replace("``", "`"), item[match.end() :]
    else:
        match = re.match(r"(\S+)(\s.*)?$", item, re.S)
        name, rest = (match.group(1), match.group(2) or "") if match else ("", "")
        if not _BARE_NAME.fullmatch(name):
            msg = (
                f"{what} column {shown(item, 80)}: write each column as NAME TYPE "
                "(a name that is not a plain identifier goes in backticks)"
            )
            raise AdabatchError(msg)
    spelled = " ".join(rest.split())
    if spelled.upper().endswith(" NOT NULL"):
        spelled = spelled[: -len(" NOT NULL")]
    if not spelled or not name:
        msg = f"{what} column {shown(item, 80)}: write each column as NAME TYPE"
        raise AdabatchError(msg)
    canonical = ALIASES.get(spelled.upper(), spelled.upper())
    if canonical not in ARROW_TYPES:
        msg = (
            f"{what} column {shown(name, 80)} has type {shown(spelled, 80)}: supported "
            f"types are {SUPPORTED}"
        )
        raise AdabatchError(msg)
    return Column(name, canonical)


def parse_ddl(text: str, what: str = "schema") -> tuple[Column, ...]:
    """The columns of a Spark DDL string (``"key INT, value DOUBLE"``).

    Names are case-insensitive as in Spark, so two that differ in case only are an error;
    ``what`` names the schema in messages (``"redis source option 'schema'"``).

    >>> [c.ddl() for c in parse_ddl("key integer, `my value` double")]
    ['key INT', '`my value` DOUBLE']
    """
    if not isinstance(text, str) or not text.strip():
        msg = f"{what} is empty: give columns as NAME TYPE, e.g. 'key INT, value DOUBLE'"
        raise AdabatchError(msg)
    if len(text) > MAX_DDL_CHARS:
        msg = f"{what} has {len(text)} characters: at most {MAX_DDL_CHARS}"
        raise AdabatchError(msg)
    parts = _split_columns(text)
    if len(parts) > MAX_COLUMNS:
        msg = f"{what} has {len(parts)} columns: at most {MAX_COLUMNS}"
        raise AdabatchError(msg)
    columns = tuple(_column(part, what) for part in parts)
    seen: dict[str, str] = {}
    for c in columns:
        if c.name.lower() in seen:
            msg = f"{what} names column {shown(c.name, 80)} twice (names ignore case)"
            raise AdabatchError(msg)
        seen[c.name.lower()] = c.name
    return columns


def format_ddl(columns: Iterable[Column]) -> str:
    """The canonical DDL string of ``columns`` (``parse_ddl(format_ddl(c)) == c``)."""
    return ", ".join(c.ddl() for c in columns)


def arrow_schema(columns: Iterable[Column]) -> pa.Schema:
    """The Arrow schema a source yields for ``columns`` (nullable fields)."""
    return pa.schema([pa.field(c.name, ARROW_TYPES[c.type]) for c in columns])


# -- values ---------------------------------------------------------------------------------


def _text(value: str | bytes, type_name: str) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise CastError(value, type_name, "not UTF-8 text") from None
    return value


def _integer(value: Any, type_name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str | bytes):
        raise CastError(value, type_name, "not an integer")
    if isinstance(value, int):
        number = value
    else:
        text = _text(value, type_name).strip()
        if not _INTEGER.fullmatch(text):
            raise CastError(value, type_name, "not an integer")
        number = int(text)
    bits = _INT_BITS[type_name]
    if not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
        raise CastError(value, type_name, f"out of its range ({bits}-bit signed)")
    return number


def _floating(value: Any, type_name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str | bytes):
        raise CastError(value, type_name, "not a number")
    try:
        number = float(_text(value, type_name) if isinstance(value, bytes) else value)
    except (ValueError, OverflowError):
        raise CastError(value, type_name, "not a number") from None
    if type_name == "FLOAT" and math.isfinite(number) and abs(number) > _FLOAT32_MAX:
        raise CastError(value, type_name, "out of its range (32-bit float)")
    return number


def _boolean(value: Any, type_name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str | bytes):
        text = _text(value, type_name).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise CastError(value, type_name, "not a boolean (true/false, yes/no, t/f, y/n, 1/0)")


def _date(value: Any, type_name: str) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if not isinstance(value, str | bytes):
        raise CastError(value, type_name, "not a date")
    text = _text(value, type_name).strip()
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise CastError(value, type_name, "not an ISO 8601 date (2024-05-01)") from None


def _timestamp_us(value: Any, type_name: str) -> int:
    """Microseconds since the Unix epoch (UTC)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not _MIN_SECONDS <= value <= _MAX_SECONDS:
            raise CastError(value, type_name, "not a number of seconds in years 1-9999")
        return round(value * 1_000_000)
    if isinstance(value, dt.datetime):
        stamp = value
    else:
        if not isinstance(value, str | bytes):
            raise CastError(value, type_name, "not a timestamp")
        text = _text(value, type_name).strip()
        try:
            seconds = float(text)
        except ValueError:
            seconds = None
        if seconds is not None:
            return _timestamp_us(seconds, type_name)
        try:
            stamp = dt.datetime.fromisoformat(text)
        except ValueError:
            reason = "not an ISO 8601 timestamp (2024-05-01T12:00:00Z) nor Unix seconds"
            raise CastError(value, type_name, reason) from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return (stamp - _EPOCH) // _ONE_US


def _string(value: Any, type_name: str) -> str:
    if isinstance(value, str | bytes):
        return _text(value, type_name)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _binary(value: Any, type_name: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise CastError(value, type_name, "not bytes or text")


_CONVERTERS: dict[str, Callable[[Any, str], Any]] = {
    "STRING": _string,
    "BOOLEAN": _boolean,
    **dict.fromkeys(_INT_BITS, _integer),
    "FLOAT": _floating,
    "DOUBLE": _floating,
    "DATE": _date,
    "TIMESTAMP": _timestamp_us,
    "BINARY": _binary,
}


def cast_value(value: Any, type_name: str) -> Any:
    """``value`` (text, bytes or a Python value) as the Python value Arrow stores for
    ``type_name``, or ``None`` (see the module docstring); :class:`CastError` otherwise.
    TIMESTAMP values come back as microseconds since the Unix epoch."""
    if value is None:
        return None
    if type_name not in ("STRING", "BINARY") and value in ("", b""):
        return None
    return _CONVERTERS[type_name](value, type_name)


def _python_array(values: Sequence[Any], type_name: str) -> pa.Array:
    """``values`` cast one by one (the reference rules; slow)."""
    convert = _CONVERTERS[type_name]
    out: list[Any] = []
    append = out.append
    for i, value in enumerate(values):
        try:
            if value is None or (type_name not in ("STRING", "BINARY") and value in ("", b"")):
                append(None)
            else:
                append(convert(value, type_name))
        except CastError as err:
            err.index = i
            raise
    if type_name == "TIMESTAMP":
        return pa.array(out, type=pa.int64()).cast(ARROW_TYPES[type_name])
    return pa.array(out, type=ARROW_TYPES[type_name])


def _fast_array(text: pa.Array, type_name: str) -> pa.Array | None:
    """Arrow's own cast of a binary array where it gives exactly what the rules above
    give; ``None`` where it cannot tell (the caller then casts value by value)."""
    if type_name == "BINARY":
        return text
    if type_name == "STRING":
        return text.cast(pa.string())  # ArrowInvalid unless UTF-8
    text = pc.if_else(pc.equal(pc.binary_length(text), 0), pa.scalar(None, pa.binary()), text)
    text = text.cast(pa.string())
    if type_name in _INT_BITS:
        if pc.all(pc.match_substring_regex(text, r"^-?[0-9]+$")).as_py() is False:
            return None
        return text.cast(ARROW_TYPES[type_name])  # ArrowInvalid when out of range
    if type_name in ("FLOAT", "DOUBLE"):
        if pc.all(pc.match_substring_regex(text, _FLOAT_TEXT, ignore_case=True)).as_py() is False:
            return None
        wide = text.cast(pa.float64())
        if type_name == "DOUBLE":
            return wide
        too_big = pc.and_(pc.is_finite(wide), pc.greater(pc.abs(wide), _FLOAT32_MAX))
        if pc.any(too_big).as_py():
            return None
        return wide.cast(pa.float32(), safe=False)
    if type_name == "BOOLEAN":
        word = pc.utf8_trim(pc.ascii_lower(text), characters=" \t\n\r\x0b\x0c")
        yes, no = pc.is_in(word, pa.array(sorted(_TRUE))), pc.is_in(word, pa.array(sorted(_FALSE)))
        if pc.all(pc.or_(pc.or_(yes, no), pc.is_null(word))).as_py() is False:
            return None
        return pc.if_else(pc.is_null(word), pa.scalar(None, pa.bool_()), yes)
    return None


def cast_array(text: pa.Array, type_name: str) -> pa.Array:
    """A binary or string Arrow array (one value per row, null where missing) cast to
    ``type_name`` by the rules of :func:`cast_value`, with Arrow's vectorised casts where
    they agree with those rules; :class:`CastError` (with ``index``) on a bad value."""
    try:
        fast = _fast_array(text.cast(pa.binary()), type_name)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        fast = None
    if fast is not None:
        return fast
    return _python_array(text.to_pylist(), type_name)


def column_array(values: Sequence[Any], type_name: str) -> pa.Array:
    """``values`` (text, bytes, Python values or ``None``) cast to ``type_name`` as one
    Arrow array; the first value that does not cast raises :class:`CastError` carrying its
    ``index``. Text goes through :func:`cast_array`'s vectorised path."""
    try:
        text = pa.array(values, type=pa.binary())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return _python_array(values, type_name)  # Python values, not text
    return cast_array(text, type_name)
