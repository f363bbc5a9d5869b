"""The Redis side of the ``redis`` source: its URL, stream ids, discovery (one round trip
that finds the entries written after an id) and reading a block's entries into Arrow.

A discovery needs, of the new entries, only their count and the ids where each manifest
segment starts and ends, plus three facts from ``XINFO STREAM``: the last id the stream
ever generated, its length and, on Redis 7, the entries ever added to it (which tells
whether entries were trimmed or deleted before the driver saw them). A Lua script gets
them inside Redis, so the entries' fields never travel to the driver; where scripting is
off (``EVAL`` refused), a plain ``XINFO`` and ``XRANGE`` get the same.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import redis
from redis.exceptions import NoScriptError

from adabatch.errors import AdabatchError, shown
from adabatch.sources.ddl import CastError, Column, column_array, format_ddl, parse_ddl
from adabatch.urls import redact_url

URL_SCHEMES = ("redis", "rediss", "unix")
URL_FORMS = "redis://HOST:PORT[/DB], rediss://HOST:PORT[/DB] or unix://PATH"
FIX = (
    "keep entries until the query has read them (a larger MAXLEN, or trim by MINID below "
    "the last id read), and start a new query (new checkpoint and state file) to go on "
    "without them"
)
MAX_KEY_CHARS = 1024
Entry = tuple[bytes, dict[bytes, bytes]]  # an XRANGE entry: id and fields

# KEYS[1]: the stream; ARGV: first id to take (inclusive), COUNT (0: XINFO only), entries
# per segment. Returns {} without the stream, {'WRONGTYPE', type} for another kind of key,
# else {last-generated-id, entries-added (-1 before Redis 7), length, n, first_1, last_1,
# first_2, ...}: the first and last id of each segment of the n entries found.
DISCOVER_LUA = """
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then return {} end
if kind ~= 'stream' then return {'WRONGTYPE', kind} end
local info = redis.call('XINFO', 'STREAM', KEYS[1])
local out = {'', -1, 0, 0}
for i = 1, #info, 2 do
  if info[i] == 'last-generated-id' then out[1] = info[i + 1] end
  if info[i] == 'entries-added' then out[2] = info[i + 1] end
  if info[i] == 'length' then out[3] = info[i + 1] end
end
local count = tonumber(ARGV[2])
if count == 0 then return out end
local e = redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', count)
local size = tonumber(ARGV[3])
out[4] = #e
for i = 1, #e, size do
  out[#out + 1] = e[i][1]
  out[#out + 1] = e[math.min(i + size - 1, #e)][1]
end
return out
"""
DISCOVER_SHA = hashlib.sha1(DISCOVER_LUA.encode()).hexdigest()
MAX_SEQ = 2**64 - 1


def parse_id(text: str) -> tuple[int, int]:
    """A stream id ``"ms-seq"`` as a pair that orders like Redis orders ids."""
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def successor(text: str) -> str:
    """The smallest id after ``text`` (XRANGE's exclusive start, on any Redis version)."""
    ms, seq = parse_id(text)
    return f"{ms + 1}-0" if seq == MAX_SEQ else f"{ms}-{seq + 1}"


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class Found:
    """What one discovery found: the stream's last generated id ("" without the stream),
    the entries ever added to it (``None`` before Redis 7 or without the stream) and its
    length, and the new entries as ``(first_id, last_id, count)`` pieces."""

    last_generated: str = ""
    added: int | None = None
    length: int = 0
    pieces: tuple[tuple[str, str, int], ...] = field(default=())

    @property
    def total(self) -> int:
        """Entries found."""
        return sum(count for _, _, count in self.pieces)


def _pieces(ids: list[str], total: int, size: int) -> tuple[tuple[str, str, int], ...]:
    """``(first, last, count)`` per segment from the flat ``[first_1, last_1, ...]``."""
    pairs = list(zip(ids[0::2], ids[1::2], strict=True))
    return tuple(
        (first, last, size if j < len(pairs) - 1 else total - size * (len(pairs) - 1))
        for j, (first, last) in enumerate(pairs)
    )


class Discoverer:
    """Runs discoveries against one stream, by script while Redis allows scripts."""

    def __init__(self, stream: str, segment_entries: int) -> None:
        self.stream = stream
        self.size = segment_entries
        self.scripting = True

    def fetch(self, client: redis.Redis, first: str, count: int) -> Found:
        """Entries from id ``first`` on, at most ``count`` (0: only the stream's ids)."""
        if self.scripting:
            args = (self.stream, first, count, self.size)
            try:
                try:
                    reply = client.evalsha(DISCOVER_SHA, 1, *args)
                except NoScriptError:
                    reply = client.eval(DISCOVER_LUA, 1, *args)
            except redis.ResponseError:
                self.scripting = False  # EVAL refused (ACL, scripting off): ask plainly
            else:
                return self._from_script(reply)
        return self._plain(client, first, count)

    def _from_script(self, reply: list) -> Found:
        if not reply:
            return Found()
        if _text(reply[0]) == "WRONGTYPE":
            self._wrong_type(_text(reply[1]))
        added = int(reply[1])
        ids = [_text(v) for v in reply[4:]]
        pieces = _pieces(ids, int(reply[3]), self.size)
        return Found(_text(reply[0]), None if added < 0 else added, int(reply[2]), pieces)

    def _plain(self, client: redis.Redis, first: str, count: int) -> Found:
        kind = _text(client.type(self.stream))
        if kind == "none":
            return Found()
        if kind != "stream":
            self._wrong_type(kind)
        info = client.xinfo_stream(self.stream)
        last_gen = _text(info.get("last-generated-id"))
        added = info.get("entries-added")
        added = None if added is None else int(added)
        length = int(info.get("length", 0))
        if count == 0:
            return Found(last_gen, added, length)
        entries = client.xrange(self.stream, first, "+", count=count)
        ids: list[str] = []
        for i in range(0, len(entries), self.size):
            ids += [_text(entries[i][0]), _text(entries[min(i + self.size, len(entries)) - 1][0])]
        return Found(last_gen, added, length, _pieces(ids, len(entries), self.size))

    def _wrong_type(self, kind: str) -> None:
        msg = f"WRONGTYPE key {self.stream!r} holds a {kind}, not a stream"
        raise redis.ResponseError(msg)


# -- URLs and messages ----------------------------------------------------------------------


def check_url(url: str) -> None:
    """``url`` is a Redis URL redis-py can connect with; the error hides any password."""
    parts = urlsplit(url)
    where = f"redis source option 'url' = {shown(redact_url(url))}"
    if parts.scheme.lower() not in URL_SCHEMES:
        msg = f"{where} is not allowed: allowed {URL_FORMS}"
        raise AdabatchError(msg)
    if parts.scheme.lower() == "unix":
        if not parts.path:
            msg = f"{where} names no socket path: allowed {URL_FORMS}"
            raise AdabatchError(msg)
        return
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        msg = f"{where} has a bad port: allowed {URL_FORMS}"
        raise AdabatchError(msg) from None
    db = parts.path.strip("/")
    if not parts.hostname or not (db == "" or db.isdigit()):
        msg = f"{where} is not allowed: allowed {URL_FORMS}"
        raise AdabatchError(msg)


def check_key(text: str) -> None:
    """A stream key is at most :data:`MAX_KEY_CHARS` characters."""
    if len(text) > MAX_KEY_CHARS:
        msg = f"a stream key of {len(text)} characters is too long (at most {MAX_KEY_CHARS})"
        raise AdabatchError(msg)


def check_id_column(text: str) -> None:
    """An id column's name is a name a DDL column may have."""
    parse_ddl(f"`{text.replace('`', '``')}` STRING", what="idColumn")


def one_line(exc: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(exc).split()) or type(exc).__name__


@contextlib.contextmanager
def talking(url: str, stream: str, doing: str) -> Iterator[None]:
    """Redis's errors as one :class:`AdabatchError` line naming the URL and the stream."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        msg = (
            f"redis source cannot reach {redact_url(url)} ({one_line(exc)}) while {doing} "
            f"stream {stream!r}: is Redis running there? (option url)"
        )
        raise AdabatchError(msg) from None
    except redis.RedisError as exc:
        msg = f"redis source: {redact_url(url)} refused {doing} stream {stream!r}: {one_line(exc)}"
        raise AdabatchError(msg) from None


# -- reading --------------------------------------------------------------------------------


def infer_columns(entries: Sequence[Entry], what: str) -> tuple[Column, ...]:
    """Columns for the fields of ``entries`` in order of first appearance: BIGINT where
    every value is an integer, else DOUBLE where every value is a number, else STRING."""
    fields: dict[bytes, list[bytes]] = {}
    for _, entry in entries:
        for name, value in entry.items():
            fields.setdefault(name, []).append(value)
    inferred = []
    for name, values in fields.items():
        kind = "STRING"
        for candidate in ("BIGINT", "DOUBLE"):
            try:
                column_array(values, candidate)
            except CastError:
                continue
            kind = candidate
            break
        inferred.append(Column(name.decode("utf-8", errors="replace"), kind))
    return parse_ddl(format_ddl(inferred), what=what)


def fetch_pieces(
    client: redis.Redis, stream: str, pieces: Sequence[Sequence[Any]], where: str
) -> list[Entry]:
    """The entries of ``pieces`` (``[first_offset, count, first_id, last_id, skip, take]``)
    in one round trip: each segment is read whole and must hold all its ``count`` entries
    (else an error naming the ids: they were trimmed or deleted); ``where`` names the
    stream in messages."""
    pipe = client.pipeline(transaction=False)
    for _, count, first_id, last_id, _, _ in pieces:
        pipe.xrange(stream, first_id, last_id, count=count)
    results = pipe.execute()
    rows: list[Entry] = []
    for (first, count, first_id, last_id, skip, take), got in zip(pieces, results, strict=True):
        if len(got) != count:
            msg = (
                f"redis source: {where} lost entries the query has not read: "
                f"{count - len(got)} of the {count} entries {first_id} .. {last_id} (offsets "
                f"{first}..{first + count - 1}) are gone (trimmed by XTRIM or XADD "
                f"MAXLEN/MINID, or deleted); {FIX}"
            )
            raise AdabatchError(msg)
        rows.extend(got[skip : skip + take])
    return rows


def entries_batch(
    rows: Sequence[Entry], columns: Sequence[Column], id_column: str | None, where: str
) -> pa.RecordBatch:
    """``rows`` as an Arrow batch of ``columns`` (``id_column``: the entry ids); a value
    that does not cast is an error naming the entry, the field and the value."""
    arrays = []
    for column in columns:
        if column.name == id_column:
            arrays.append(pa.array([r[0].decode() for r in rows], type=pa.string()))
            continue
        key = column.name.encode("utf-8")
        try:
            arrays.append(column_array([fields.get(key) for _, fields in rows], column.type))
        except CastError as err:
            msg = (
                f"redis source: {where} entry {rows[err.index][0].decode()} field "
                f"{column.name!r}: {err} (fix the producer, or declare the field STRING in "
                "option schema)"
            )
            raise AdabatchError(msg) from None
    schema = pa.schema([pa.field(c.name, a.type) for c, a in zip(columns, arrays, strict=True)])
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
