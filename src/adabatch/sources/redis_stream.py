"""``redis``: records that producers write to a Redis Stream with ``XADD``.

The driver numbers the stream's entries in id order as it discovers them: offsets 0, 1,
2, ... (``startingPosition`` ``earliest``, the default, numbers every entry the stream holds
when the query starts; ``latest`` only those written after). Each field of an entry is a
column of the ``schema`` option (Spark DDL: ``"key INT, value DOUBLE"``; values are text in
Redis and are cast as :mod:`adabatch.sources.ddl` says; a field an entry lacks is null,
fields outside the schema are ignored). Without ``schema`` the columns are the fields of the
stream's first entries: BIGINT where every value is an integer, else DOUBLE where every
value is a number, else STRING. ``idColumn`` adds the entry's id as a STRING column.

Arrival: a discovery (one ``XRANGE`` after the last id seen, at most one every
:data:`DISCOVERY_INTERVAL_S` and only when the driver asks about a time later than all it
asked before) gives each new entry the time of its id, clamped between the previous
discovery and this one, so ``available(t)`` never changes for a time ``t`` already asked
about. The manifest keeps one segment per :data:`SEGMENT_ENTRIES` entries of a discovery
(first offset, count, first and last id, arrival of the first and last); arrival inside a
segment is interpolated by position. Segments Spark has committed are forgotten.

Executors read a block by the ids of its segments and check that each segment is whole:
entries trimmed (``XTRIM``, ``XADD MAXLEN``) or deleted before the query read them stop the
query with an error naming the ids, as do entries trimmed or deleted before the driver saw
them (found from Redis 7's count of entries ever added). A stream that does not exist yet
has no records: the query waits for a producer (give ``schema`` then; there is nothing to
infer it from). An unreachable server is one error line naming the URL.
"""

from __future__ import annotations

import bisect
import contextlib
import math
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import pyarrow as pa
import redis

from adabatch.errors import AdabatchError, shown
from adabatch.params import Param
from adabatch.sources.base import CHUNK_RECORDS, RecordSource
from adabatch.sources.ddl import Column, format_ddl, parse_ddl
from adabatch.sources.ddl import arrow_schema as ddl_arrow_schema
from adabatch.sources.redis_wire import (
    FIX,
    URL_FORMS,
    Discoverer,
    Found,
    check_id_column,
    check_key,
    check_url,
    entries_batch,
    fetch_pieces,
    infer_columns,
    parse_id,
    successor,
    talking,
)
from adabatch.urls import redact_url

DEFAULT_URL = "redis://127.0.0.1:6379/0"
DISCOVERY_INTERVAL_S = 0.015  # the driver polls ~100 times a second; one XRANGE per 15 ms
SEGMENT_ENTRIES = 4096  # entries per manifest segment at most (a block reads whole segments)
INFER_ENTRIES = 100  # entries whose fields decide an inferred schema

# A manifest segment: [first_offset, count, first_id, last_id, lo_us, hi_us] (Unix µs).
FIRST, COUNT, FIRST_ID, LAST_ID, LO, HI = range(6)


class RedisStreamSource(RecordSource):
    """Entries of a Redis Stream as records (see the module docstring).

    Parameters
    ----------
    url, stream, schema, id_column, starting_position, max_entries_per_poll, timeout
        See ``OPTIONS``.
    start_time
        Unix time (s) of stream time 0.
    clock
        Unix time in seconds (the discovery's wall clock); injected for tests.
    """

    name = "redis"
    LIVE = True
    OPTIONS = (
        Param("url", DEFAULT_URL, f"the Redis server: {URL_FORMS}", kind=str),
        Param("stream", None, "key of the stream producers XADD to", kind=str, check=check_key),
        Param(
            "schema",
            None,
            "Spark DDL of the entries' fields, e.g. 'key INT, value DOUBLE' (default: "
            "inferred from the stream's first entries)",
            kind=str,
            optional=True,
            check=parse_ddl,
        ),
        Param(
            "id_column",
            None,
            "name of an extra STRING column holding the entry id (default: none)",
            kind=str,
            optional=True,
            check=check_id_column,
        ),
        Param(
            "starting_position",
            "earliest",
            "a new query numbers every entry in the stream (earliest) or only new ones (latest)",
            kind=str,
            choices=("earliest", "latest"),
        ),
        Param(
            "max_entries_per_poll",
            20_000,
            "entries one discovery takes at most (XRANGE COUNT)",
            kind=int,
            low=1,
            high=1_000_000,
        ),
        Param("timeout", 5.0, "seconds to wait for Redis", low=0.0, low_open=True, high=60.0),
    )
    EXAMPLE_OPTIONS: ClassVar[Mapping[str, str]] = {
        "stream": "adabatch:example",
        "schema": "key INT, value DOUBLE",
    }

    def __init__(
        self,
        *,
        stream: str,
        url: str = DEFAULT_URL,
        schema: str | None = None,
        id_column: str | None = None,
        starting_position: str = "earliest",
        max_entries_per_poll: int = 20_000,
        timeout: float = 5.0,
        start_time: float = 0.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        values = self.parse_options(
            {
                "url": url,
                "stream": stream,
                "schema": schema,
                "id_column": id_column,
                "starting_position": starting_position,
                "max_entries_per_poll": max_entries_per_poll,
                "timeout": timeout,
            }
        )
        check_url(values["url"])
        if not math.isfinite(start_time):
            msg = f"redis source start_time {start_time!r} must be finite"
            raise AdabatchError(msg)
        self.url: str = values["url"]
        self.stream: str = values["stream"]
        self.schema_option: str | None = values["schema"]
        self.id_column: str | None = values["id_column"]
        self.starting_position: str = values["starting_position"]
        self.max_entries: int = values["max_entries_per_poll"]
        self.timeout: float = values["timeout"]
        self.start_time = float(start_time)
        self._start_us = round(self.start_time * 1e6)
        self._clock = clock
        self._client: redis.Redis | None = None
        self._discoverer = Discoverer(self.stream, SEGMENT_ENTRIES)
        self._columns: tuple[Column, ...] | None = None
        # the manifest (see state())
        self._segments: list[list[Any]] = []
        self._last_id: str | None = None  # None: not positioned in the stream yet
        self._next_offset = 0
        self._base_offset = 0  # offsets below it are committed and forgotten
        self._floor_us = self._start_us  # arrival given to the forgotten ones
        self._bound_us = self._start_us  # every record discovered from now arrives after it
        self._added: int | None = None  # entries ever added to the stream up to _last_id
        self._discovered_at = -math.inf  # time.monotonic() of the last discovery

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], profile: str, *, start_time: float = 0.0
    ) -> RedisStreamSource:
        """A source from string options; the rate profile does not apply (producers
        decide the rate)."""
        return cls(start_time=start_time, **cls.parse_options(options))  # type: ignore[arg-type]

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}

    # -- the connection --------------------------------------------------------------------

    @property
    def client(self) -> redis.Redis:
        """This source's Redis client, connected on first use."""
        if self._client is None:
            self._client = redis.Redis.from_url(
                self.url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout
            )
        return self._client

    def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            with contextlib.suppress(redis.RedisError, OSError):
                client.close()

    def _talking(self, doing: str) -> contextlib.AbstractContextManager[None]:
        return talking(self.url, self.stream, doing)

    # -- schema ----------------------------------------------------------------------------

    def columns(self) -> tuple[Column, ...]:
        """The data columns: the ``schema`` option's, or inferred from the stream."""
        if self._columns is None:
            if self.schema_option is not None:
                columns = parse_ddl(self.schema_option)
            else:
                columns = self._infer_columns()
            if self.id_column is not None:
                clash = [c.name for c in columns if c.name.lower() == self.id_column.lower()]
                if clash:
                    msg = (
                        f"redis source option 'id_column' = {self.id_column!r} names a column "
                        "of the schema too: choose another name"
                    )
                    raise AdabatchError(msg)
            self._columns = columns
        return self._columns

    def _infer_columns(self) -> tuple[Column, ...]:
        with self._talking("reading the first entries of"):
            rows = self.client.xrange(self.stream, "-", "+", count=INFER_ENTRIES)
        if not rows:
            msg = (
                f"redis source: stream {self.stream!r} at {redact_url(self.url)} has no entries "
                "to infer a schema from: give option schema (e.g. 'key INT, value DOUBLE') "
                "or start the query after a producer has written"
            )
            raise AdabatchError(msg)
        what = f"the schema inferred from stream {self.stream!r} (give option schema instead)"
        return infer_columns(rows, what)

    def _all_columns(self, columns: tuple[Column, ...]) -> tuple[Column, ...]:
        extra = () if self.id_column is None else (Column(self.id_column, "STRING"),)
        return columns + extra

    def arrow_schema(self) -> pa.Schema:
        return ddl_arrow_schema(self._all_columns(self.columns()))

    def spark_schema(self) -> str:
        return format_ddl(self._all_columns(self.columns()))

    # -- discovery (driver) ----------------------------------------------------------------

    def discover(self) -> int:
        """Number the entries written since the last discovery (one round trip); return
        how many. :meth:`available` calls it when due."""
        self._discovered_at = time.monotonic()
        positioned = self._last_id is not None
        after = successor(self._last_id) if positioned else "-"
        latest = not positioned and self.starting_position == "latest"
        count = 0 if latest else self.max_entries
        with self._talking("reading"):
            found = self._discoverer.fetch(self.client, after, count)
        wall_us = round(self._clock() * 1e6)
        capped = found.total >= count
        if positioned:
            self._check_nothing_lost(found, capped)
        if found.added is not None:
            self._count_added(found, capped, latest)
        if latest:
            self._last_id = found.last_generated or "0-0"
            return 0
        self._append(found, wall_us)
        return found.total

    def _count_added(self, found: Found, capped: bool, latest: bool) -> None:
        """Keep ``_added``, the entries ever added to the stream up to the last id seen
        (from Redis 7's entries-added). Too high is safe: it can only hide a loss."""
        assert found.added is not None
        if latest or not capped:
            self._added = found.added  # seen up to the stream's last id (or lost: an error)
        elif self._last_id is None:  # a first look from the start that did not reach the end:
            self._added = found.added - found.length + found.total  # all deleted count as before
        elif self._added is not None:
            self._added += found.total

    def _check_nothing_lost(self, found: Found, capped: bool) -> None:
        """Entries after the last id seen were trimmed or deleted unseen: an error."""
        where = f"stream {self.stream!r} at {redact_url(self.url)}"
        recreated = (
            f"redis source: {where} was deleted and written anew (it has fewer entries or ids "
            f"than the query has seen, up to id {self._last_id}); start a new query (new "
            "checkpoint and state file)"
        )
        last = parse_id(self._last_id)  # type: ignore[arg-type]
        if found.last_generated and parse_id(found.last_generated) < last:
            raise AdabatchError(recreated)
        if found.added is None or self._added is None:
            return
        if found.added < self._added:
            raise AdabatchError(recreated)
        lost = found.added - self._added - found.total
        if lost > 0 and not capped:
            msg = (
                f"redis source: {where} lost entries before the query saw them: {lost} "
                f"entries after id {self._last_id} (up to {found.last_generated}) were trimmed "
                f"or deleted; {FIX}"
            )
            raise AdabatchError(msg)

    def _append(self, found: Found, wall_us: int) -> None:
        """Segments for the entries ``found``, arriving after the bound and by ``wall_us``."""
        top = max(wall_us, self._bound_us + 1)
        prev = self._bound_us + 1
        offset = self._next_offset
        for first_id, last_id, count in found.pieces:
            lo = min(max(parse_id(first_id)[0] * 1000, prev), top)
            hi = min(max(parse_id(last_id)[0] * 1000, lo), top)
            self._segments.append([offset, count, first_id, last_id, lo, hi])
            offset += count
            prev = hi
            self._last_id = last_id
        if self._last_id is None:
            self._last_id = "0-0"  # positioned before any entry: the stream is empty
        self._next_offset = offset
        self._bound_us = max(self._bound_us, top)

    # -- offsets and arrival ---------------------------------------------------------------

    def _segment_of(self, offset: int) -> list[Any] | None:
        i = bisect.bisect_right(self._segments, offset, key=lambda s: s[FIRST]) - 1
        return self._segments[i] if i >= 0 else None

    @staticmethod
    def _arrival_us(seg: list[Any], i: int) -> int:
        count, lo, hi = seg[COUNT], seg[LO], seg[HI]
        return lo if count <= 1 else lo + (hi - lo) * i // (count - 1)

    def arrival_time(self, offset: int) -> float:
        if offset >= self._next_offset:
            return math.inf
        if offset < self._base_offset:
            return (self._floor_us - self._start_us) / 1e6  # committed: its time forgotten
        seg = self._segment_of(offset)
        assert seg is not None
        return (self._arrival_us(seg, offset - seg[FIRST]) - self._start_us) / 1e6

    def _count_until(self, limit_us: int) -> int:
        """Records whose arrival (Unix µs) is at most ``limit_us``."""
        i = bisect.bisect_right(self._segments, limit_us, key=lambda s: s[LO]) - 1
        if i < 0:
            return self._base_offset if limit_us >= self._floor_us else 0
        seg = self._segments[i]
        inside = bisect.bisect_right(
            range(seg[COUNT]), limit_us, key=lambda k: self._arrival_us(seg, k)
        )
        return seg[FIRST] + inside

    def available(self, now: float) -> int:
        if math.isnan(now):
            msg = "redis source available(nan): need a stream time"
            raise AdabatchError(msg)
        if math.isinf(now):
            return self._next_offset if now > 0 else 0
        asked_us = self._start_us + math.ceil(now * 1e6)
        due = time.monotonic() - self._discovered_at >= DISCOVERY_INTERVAL_S
        if asked_us > self._bound_us and due:
            self.discover()
        self._bound_us = max(self._bound_us, asked_us)  # later records arrive after `now`
        m = self._count_until(self._start_us + math.floor(now * 1e6))
        while m > 0 and self.arrival_time(m - 1) > now:
            m -= 1
        while self.arrival_time(m) <= now:
            m += 1
        return m

    # -- the manifest ----------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The manifest: position in the stream, bounds and the uncommitted segments."""
        return {
            "stream": self.stream,
            "last_id": self._last_id,
            "next_offset": self._next_offset,
            "base_offset": self._base_offset,
            "floor_us": self._floor_us,
            "bound_us": self._bound_us,
            "added": self._added,
            "schema": None if self._columns is None else format_ddl(self._columns),
            "segments": [list(s) for s in self._segments],
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        if state.get("stream") != self.stream:
            msg = (
                f"redis source: the state file's manifest is for stream "
                f"{shown(state.get('stream'))}, not {self.stream!r}: use matching state"
            )
            raise AdabatchError(msg)
        try:
            segments = [
                [int(s[0]), int(s[1]), str(s[2]), str(s[3]), int(s[4]), int(s[5])]
                for s in state["segments"]
            ]
            last_id = state["last_id"]
            values = [int(state[k]) for k in ("next_offset", "base_offset", "floor_us")]
            bound_us = int(state["bound_us"])
            added = None if state.get("added") is None else int(state["added"])
        except (KeyError, TypeError, ValueError, IndexError):
            msg = "redis source: the state file's manifest is damaged: delete state and checkpoint"
            raise AdabatchError(msg) from None
        self._segments = segments
        self._last_id = None if last_id is None else str(last_id)
        self._next_offset, self._base_offset, self._floor_us = values
        self._bound_us = bound_us
        self._added = added
        if state.get("schema"):
            self._columns = parse_ddl(str(state["schema"]))

    def commit(self, end: int) -> None:
        """Forget the segments wholly below ``end`` (Spark finished them)."""
        keep = 0
        while keep < len(self._segments) and sum(self._segments[keep][:2]) <= end:
            keep += 1
        if keep:
            dropped = self._segments[keep - 1]
            self._base_offset = max(self._base_offset, dropped[FIRST] + dropped[COUNT])
            self._floor_us = dropped[HI]
            del self._segments[:keep]

    # -- reading (executors) ---------------------------------------------------------------

    def locate(self, start: int, end: int) -> dict[str, Any]:
        """The schema and, per segment the block touches, the segment and the slice of it
        to take: ``[first_offset, count, first_id, last_id, skip, take]``."""
        if start < self._base_offset or end > self._next_offset or start > end:
            msg = (
                f"redis source: offsets {start}..{end - 1} are outside the manifest's "
                f"{self._base_offset}..{self._next_offset - 1}"
            )
            raise AdabatchError(msg)
        pieces = []
        i = bisect.bisect_right(self._segments, start, key=lambda s: s[FIRST]) - 1
        at = start
        while at < end:
            seg = self._segments[i]
            take = min(end, seg[FIRST] + seg[COUNT]) - at
            pieces.append([*seg[:4], at - seg[FIRST], take])
            at += take
            i += 1
        return {"schema": format_ddl(self.columns()), "pieces": pieces}

    def read_block(self, start: int, end: int, located: Any = None) -> Iterator[pa.RecordBatch]:
        """Records ``start .. end-1`` by the ids :meth:`locate` gave, in batches of at most
        ``CHUNK_RECORDS`` (one round trip each), every segment checked whole."""
        if end <= start:
            return
        if located is None:
            located = self.locate(start, end)
        columns = self._all_columns(parse_ddl(located["schema"]))
        group: list[list[Any]] = []
        for piece in [*located["pieces"], None]:
            if group and (piece is None or sum(p[5] for p in group) + piece[5] > CHUNK_RECORDS):
                with self._talking("reading"):
                    rows = fetch_pieces(self.client, self.stream, group, self._where)
                yield entries_batch(rows, columns, self.id_column, self._where)
                group = []
            if piece is not None:
                group.append(piece)

    @property
    def _where(self) -> str:
        return f"stream {self.stream!r} at {redact_url(self.url)}"

    def records(self, start: int, end: int) -> pa.RecordBatch:
        """Records ``start .. end-1`` read on the driver (tests, tools)."""
        if end <= start:
            return pa.RecordBatch.from_pylist([], schema=self.arrow_schema())
        batches = list(self.read_block(start, end))
        table = pa.Table.from_batches(batches, self.arrow_schema()).combine_chunks()
        return table.to_batches()[0]
