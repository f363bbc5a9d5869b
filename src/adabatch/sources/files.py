"""``files``: a landing directory of JSON-lines, CSV or Parquet files as one live stream.

Like Spark's file source, but every row gets a dense record offset 0, 1, 2, ... that a
controller cuts into batches, so a batch may end in the middle of a large file.

**Writers** land complete files: write to a name starting with ``.`` or ``_`` (never read),
then rename it into place (atomic on one file system). A file that changes size after it
was taken, or is deleted before its rows were read, stops the query with an error naming
it. A taken name is not taken again while its file is there (a name may come back once
its file was committed and deleted). Subdirectories are ignored.

**Discovery** lists the directory (not recursively), at most once per ~20 ms and at least
10x its own cost apart, whenever the runtime asks about a time past the last listing. New
files enter the manifest in (mtime, name) order, each with its rows counted (JSON lines:
lines, a last line without a newline included; CSV: lines minus the header; Parquet: the
footer's row count). A file's **arrival** is its mtime clamped into (the previous listing
or the latest time already answered, this listing]: what :meth:`FilesSource.available`
said about any past time stays true. Files already there at the first listing keep their
mtimes (negative stream times are fine).

``starting_position`` (``startingPosition``; Kafka's ``startingOffsets``): ``earliest``, the
default, takes the files present at a new query's first listing as its backlog; ``latest``
takes them as read and committed: they get no offsets, are never read (a schema is still
inferred from the oldest), and files landing afterwards are numbered from offset 0. Like
committed files they are not taken again while there, their names stay in the manifest
under the ``max_file_age`` rule below, and one that changes size is an error. It acts only
on a query that has never listed: a restored manifest continues as it stood.

``max_files_per_trigger`` (Spark's name) bounds how many files enter the manifest per
listing, so a big backlog enters over several listings (a batch holds what arrived by its
cut: at most ``max_files_per_trigger`` files per listing in its interval). It bounds how
fast a backlog is taken in, not one batch's rows: for that, use ``maxRowsPerTrigger``.

**Manifest** (:meth:`FilesSource.state`, saved in the state file): the files not yet
committed, each ``[name, size, mtime_ns, arrival_us, first_offset, rows(, line index)]``,
and the names committed (or taken as read) whose files are still there, with mtimes within
``max_file_age`` (default 7 days, Spark's ``maxFileAge``) of the newest committed one: at
high file rates with files kept after reading, lower ``max_file_age`` to keep the state
file small. A file older than that which appears later cannot be told from one read and
forgotten: it is an error; only after a restart are such files, present at the first
listing, taken as read (Spark's maxFileAge ignores every such file). Polls that find
nothing leave the manifest's size unchanged; :meth:`FilesSource.commit` shrinks it.

**Schema**: option ``schema`` (Spark DDL; types and casts as :mod:`.ddl` says), or inferred
from the oldest file at each start (:mod:`.files_schema`); give it for a query that restarts
over a changing directory. Bad rows go to ``dead_letter_path`` (default
``<path>/_dead_letter``; :mod:`.files_formats`).
"""

from __future__ import annotations

import bisect
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa

from adabatch.errors import AdabatchError, shown
from adabatch.params import Param
from adabatch.profiles import parse_duration
from adabatch.sources.base import RecordSource
from adabatch.sources.ddl import arrow_schema, format_ddl, parse_ddl
from adabatch.sources.files_formats import (
    FORMATS,
    FileSlice,
    Located,
    count_rows,
    infer_file,
    read_located,
    seek_point,
)

MIN_LIST_GAP_S = 0.02  # the driver polls ~100 times a second; list at most 50 times
LIST_COST_FACTOR = 10  # and spend at most a tenth of the time listing
MANIFEST_VERSION = 1
DEAD_LETTER_DIR = "_dead_letter"
MAX_INFER_FILES = 100  # files tried, oldest first, to infer a schema from
STARTING_POSITIONS = ("earliest", "latest")


@dataclass(slots=True)
class _Entry:
    """One file in the manifest: its rows are offsets ``first .. first+rows-1``."""

    name: str
    size: int
    mtime_ns: int
    arrival_us: int
    first: int
    rows: int
    index: list[list[int]] = field(default_factory=list)

    def to_json(self) -> list[Any]:
        out: list[Any] = [self.name, self.size, self.mtime_ns, self.arrival_us, self.first]
        return [*out, self.rows, self.index] if self.index else [*out, self.rows]

    @classmethod
    def from_json(cls, item: Any) -> _Entry:
        name, size, mtime, arrival, first, rows, *rest = item
        index = [[int(line), int(byte)] for line, byte in (rest[0] if rest else [])]
        return cls(str(name), int(size), int(mtime), int(arrival), int(first), int(rows), index)


def _changed(path: str, was: int, now: int) -> AdabatchError:
    return AdabatchError(
        f"files source: {path} changed size after it was taken ({was} -> {now} bytes): land "
        "complete files under new names (write to a .name or _name file, then rename it)"
    )


class FilesSource(RecordSource):
    """Rows of the files landing in a directory, numbered as they are discovered (see the
    module docstring). ``clock`` (Unix s) is injectable for tests."""

    name = "files"
    LIVE = True
    OPTIONS = (
        Param("path", None, "landing directory (absolute, or relative to the driver)", kind=str),
        Param("format", "json", "file format", kind=str, choices=FORMATS),
        Param(
            "schema",
            None,
            "Spark DDL of the columns, e.g. 'id BIGINT, name STRING' (default: inferred "
            "from the oldest file)",
            kind=str,
            optional=True,
            check=parse_ddl,
        ),
        Param("header", True, "CSV: the first line names the columns", kind=bool),
        Param(
            "max_files_per_trigger",
            None,
            "at most this many new files enter per directory listing (default: all)",
            kind=int,
            low=1,
            optional=True,
        ),
        Param(
            "starting_position",
            "earliest",
            "a new query reads the files already there (earliest) or only those landing "
            "after its first listing (latest)",
            kind=str,
            choices=STARTING_POSITIONS,
        ),
        Param(
            "max_file_age",
            "7d",
            "committed names are remembered this long behind the newest (Spark's maxFileAge)",
            kind=str,
            check=parse_duration,
        ),
        Param(
            "dead_letter_path",
            None,
            f"directory for malformed rows (default <path>/{DEAD_LETTER_DIR})",
            kind=str,
            optional=True,
        ),
    )
    EXAMPLE_OPTIONS: ClassVar[Mapping[str, str]] = {}

    def __init__(
        self,
        path: str,
        *,
        format: str = "json",
        schema: str | None = None,
        header: bool = True,
        max_files_per_trigger: int | None = None,
        starting_position: str = "earliest",
        max_file_age: str = "7d",
        dead_letter_path: str | None = None,
        start_time: float = 0.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        checked = self.parse_options(
            {
                "path": path,
                "format": format,
                "schema": schema,
                "header": header,
                "max_files_per_trigger": max_files_per_trigger,
                "starting_position": starting_position,
                "max_file_age": max_file_age,
                "dead_letter_path": dead_letter_path,
            }
        )
        if not math.isfinite(start_time):
            msg = f"files start_time {start_time!r} must be finite"
            raise AdabatchError(msg)
        self.path = os.path.abspath(str(checked["path"]))
        self.format: str = checked["format"]  # type: ignore[assignment]
        self.header: bool = checked["header"]  # type: ignore[assignment]
        self.max_files: int | None = checked["max_files_per_trigger"]  # type: ignore[assignment]
        self.starting_position: str = checked["starting_position"]  # type: ignore[assignment]
        self.max_age_ns = round(parse_duration(str(checked["max_file_age"])) * 1e9)
        dead = checked["dead_letter_path"]
        self.dead_letter = os.path.abspath(str(dead) if dead else self.path + "/" + DEAD_LETTER_DIR)
        given = checked["schema"]
        self._ddl = None if given is None else format_ddl(parse_ddl(str(given)))
        self.start_time = float(start_time)
        self._start_us = round(start_time * 1e6)
        self.clock = clock
        # the manifest (state / restore)
        self._entries: list[_Entry] = []
        self._next = 0  # offset of the next file's first row
        self._base = 0  # first offset still in the manifest
        self._base_arrival_us: int | None = None  # arrival of the last file forgotten
        self._disc_us: int | None = None  # wall time of the last listing
        self._floor_us: int | None = None  # new arrivals lie after this
        self._committed: dict[str, tuple[int, int]] = {}  # name -> (mtime_ns, size)
        self._newest_committed_ns: int | None = None
        # in memory only
        self._firsts: list[int] = []
        self._ends: list[int] = []
        self._arrivals: list[int] = []
        self._old_ok: set[str] = set()  # present files older than max_file_age, read before
        self._first_listing = True
        self._listed_at: float | None = None
        self._list_gap = MIN_LIST_GAP_S

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], profile: str, *, start_time: float = 0.0
    ) -> FilesSource:
        """A source from string options (``profile`` is not used: files arrive when they
        land). Cheap: nothing is listed or read until asked."""
        return cls(**cls.parse_options(options), start_time=start_time)  # type: ignore[arg-type]

    # -- schema ----------------------------------------------------------------------------

    def spark_schema(self) -> str:
        """The DDL: option ``schema``, or inferred once from the oldest file."""
        if self._ddl is None:
            self._ddl = format_ddl(self._infer())
        elif not os.path.isdir(self.path):
            self._list()  # raises, naming the directory
        return self._ddl

    def arrow_schema(self) -> pa.Schema:
        return arrow_schema(parse_ddl(self.spark_schema()))

    def _infer(self) -> tuple:
        listing = sorted(self._list(), key=lambda f: (f[2], f[0]))
        if not listing:
            msg = (
                f"files source: no files in {self.path} to infer the schema from: give option "
                "schema or land a file first"
            )
            raise AdabatchError(msg)
        for name, size, _ in listing[:MAX_INFER_FILES]:
            if size == 0:
                continue
            try:
                columns = infer_file(os.path.join(self.path, name), self.format, self.header)
            except FileNotFoundError:
                continue
            if columns:
                return columns
        msg = (
            f"files source: cannot infer a schema from the files in {self.path} (no "
            f"{self.format} row in the first lines of the oldest): give option schema"
        )
        raise AdabatchError(msg)

    # -- discovery -------------------------------------------------------------------------

    def _list(self) -> list[tuple[str, int, int]]:
        """``(name, size, mtime_ns)`` of the directory's visible regular files."""
        try:
            listing = os.scandir(self.path)
        except FileNotFoundError:
            msg = f"files source option 'path' = {shown(self.path)}: no such directory"
            raise AdabatchError(msg) from None
        except NotADirectoryError:
            msg = f"files source option 'path' = {shown(self.path)} is not a directory"
            raise AdabatchError(msg) from None
        out = []
        with listing:
            for entry in listing:
                if entry.name.startswith((".", "_")):
                    continue
                try:
                    if not entry.is_file():
                        continue
                    st = entry.stat()
                except FileNotFoundError:
                    continue  # renamed away meanwhile
                out.append((entry.name, st.st_size, st.st_mtime_ns))
        return out

    def _new_files(self, listing: list[tuple[str, int, int]]) -> list[tuple[int, str, int]]:
        """The listed files not taken yet, as ``(mtime_ns, name, size)`` in order; raises
        for a taken file that changed size and for a file too old to tell from one read."""
        known = {e.name: e.size for e in self._entries}
        newest = self._newest_committed_ns
        threshold = None if newest is None else newest - self.max_age_ns
        old_ok: set[str] = set()
        out = []
        for name, size, mtime in listing:
            was = known.get(name, self._committed.get(name, (0, None))[1])
            if was is not None:
                if was != size:
                    raise _changed(os.path.join(self.path, name), was, size)
                continue
            if threshold is not None and mtime < threshold:
                if name in self._old_ok or self._first_listing:
                    old_ok.add(name)
                    continue
                msg = (
                    f"files source: {os.path.join(self.path, name)} landed with an mtime more "
                    f"than max_file_age before the newest file read, so it cannot be told "
                    "from a file read and forgotten: give it a current mtime (touch) or "
                    "raise maxFileAge"
                )
                raise AdabatchError(msg)
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                msg = f"files source: file name {shown(name)} in {self.path} is not UTF-8"
                raise AdabatchError(msg) from None
            out.append((mtime, name, size))
        self._old_ok = old_ok
        listed = {name for name, _, _ in listing}
        for name in [n for n in self._committed if n not in listed]:
            del self._committed[name]  # deleted after its commit: the name may come again
        out.sort()
        return out

    def _discover(self) -> None:
        """List the directory and append its new files to the manifest."""
        began = time.perf_counter()
        wall_us = round(self.clock() * 1e6)
        listing = self._list()
        if self._disc_us is None and self.starting_position == "latest":
            self._take_as_read(listing)
        new = self._new_files(listing)
        if self.max_files is not None:
            new = new[: self.max_files]
        counted = []
        for mtime, name, size in new:
            try:
                rows, index = count_rows(
                    os.path.join(self.path, name), size, self.format, self.header
                )
            except FileNotFoundError:
                continue  # gone before it was taken
            counted.append((mtime, name, size, rows, index))
        for mtime, name, size, rows, index in counted:
            arrival = min(mtime // 1000, wall_us)
            if self._floor_us is not None:
                arrival = max(arrival, self._floor_us + 1)
            self._entries.append(_Entry(name, size, mtime, arrival, self._next, rows, index))
            self._next += rows
        self._disc_us = wall_us if self._disc_us is None else max(self._disc_us, wall_us)
        self._floor_us = wall_us if self._floor_us is None else max(self._floor_us, wall_us)
        self._first_listing = False
        self._listed_at = self.clock()
        self._list_gap = max(MIN_LIST_GAP_S, LIST_COST_FACTOR * (time.perf_counter() - began))
        if counted:
            self._rebuild()

    def _take_as_read(self, listing: list[tuple[str, int, int]]) -> None:
        """``latest``: the files of a new query's first listing join the committed names,
        as if read and committed, so they are never numbered."""
        for name, size, mtime in listing:
            self._committed[name] = (mtime, size)
        if listing:
            self._remember_committed(max(mtime for _, _, mtime in listing))

    def _remember_committed(self, newest: int) -> None:
        """Raise the newest committed mtime to ``newest`` and forget the committed names
        more than ``max_file_age`` older (present ones are then taken as read)."""
        if self._newest_committed_ns is not None:
            newest = max(newest, self._newest_committed_ns)
        self._newest_committed_ns = newest
        threshold = newest - self.max_age_ns
        for name, (mtime, _) in list(self._committed.items()):
            if mtime < threshold:
                del self._committed[name]
                self._old_ok.add(name)

    def _rebuild(self) -> None:
        self._firsts = [e.first for e in self._entries]
        self._ends = [e.first + e.rows for e in self._entries]
        self._arrivals = [e.arrival_us for e in self._entries]

    # -- the record source -----------------------------------------------------------------

    def _stream_s(self, unix_us: int) -> float:
        return (unix_us - self._start_us) / 1e6

    def available(self, now: float) -> int:
        if not math.isfinite(now):
            if math.isnan(now):
                msg = "files source: available(nan)"
                raise AdabatchError(msg)
            return self._next if now > 0 else 0
        t_us = self._start_us + round(now * 1e6)
        if self._disc_us is None or t_us > self._disc_us:
            since = None if self._listed_at is None else self.clock() - self._listed_at
            if since is None or not 0 <= since < self._list_gap:  # or the clock went back
                self._discover()
            assert self._floor_us is not None
            self._floor_us = max(self._floor_us, t_us)  # answered: later files arrive after
        k = bisect.bisect_right(self._arrivals, t_us)
        if k:
            return self._ends[k - 1]
        forgotten = self._base_arrival_us
        return self._base if forgotten is None or t_us >= forgotten else 0

    def arrival_time(self, offset: int) -> float:
        """The file's arrival (stream s); ``inf`` past the discovered records; for records
        already committed and forgotten, the arrival of the last file forgotten."""
        if offset >= self._next:
            return math.inf
        if offset < self._base:
            assert self._base_arrival_us is not None
            return self._stream_s(self._base_arrival_us)
        i = bisect.bisect_right(self._firsts, offset) - 1
        return self._stream_s(self._arrivals[i])

    def locate(self, start: int, end: int) -> Located:
        """The file slices holding records ``start .. end-1``, with the DDL and the
        dead-letter directory: all an executor needs."""
        if start < self._base or end > self._next or end < start:
            msg = (
                f"files source: records {start}..{end - 1} are not in the manifest (it holds "
                f"{self._base}..{self._next - 1}): the state file does not match the checkpoint"
            )
            raise AdabatchError(msg)
        ddl = self.spark_schema()
        skip = 1 if self.format == "csv" and self.header else 0
        slices = []
        i = max(bisect.bisect_right(self._firsts, start) - 1, 0)
        for e in self._entries[i:]:
            if e.first >= end:
                break
            lo, hi = max(start, e.first) - e.first, min(end, e.first + e.rows) - e.first
            if lo < hi:
                path = os.path.join(self.path, e.name)
                seek = seek_point(e.index, lo + skip)
                slices.append(FileSlice(path, e.size, e.rows, lo, hi, e.first + lo, seek))
        return Located(self.format, ddl, self.header, self.dead_letter, tuple(slices))

    def read_block(self, start: int, end: int, located: Any) -> Iterator[pa.RecordBatch]:
        """Executor side: the rows of ``located`` (from :meth:`locate`), never listing."""
        yield from read_located(self.locate(start, end) if located is None else located)

    def records(self, start: int, end: int) -> pa.RecordBatch:
        """Records ``start .. end-1`` read on the driver (malformed rows left out)."""
        schema = self.arrow_schema()
        batches = list(self.read_block(start, end, None)) if end > start else []
        table = pa.Table.from_batches(batches, schema=schema).combine_chunks()
        whole = table.to_batches()
        return whole[0] if whole else pa.RecordBatch.from_pylist([], schema=schema)

    # -- the manifest ----------------------------------------------------------------------

    def commit(self, end: int) -> None:
        """Forget the files whose rows all lie below ``end``; remember their names while
        their mtime is within ``max_file_age`` of the newest committed one."""
        k = 0
        while k < len(self._entries) and self._entries[k].first + self._entries[k].rows <= end:
            k += 1
        if k == 0:
            return
        dropped, self._entries = self._entries[:k], self._entries[k:]
        self._base = dropped[-1].first + dropped[-1].rows
        self._base_arrival_us = dropped[-1].arrival_us
        for e in dropped:
            self._committed[e.name] = (e.mtime_ns, e.size)
        self._remember_committed(max(e.mtime_ns for e in dropped))
        self._rebuild()

    def state(self) -> dict[str, Any]:
        """The manifest (see the module docstring), JSON-able."""
        return {
            "version": MANIFEST_VERSION,
            "next": self._next,
            "base": self._base,
            "base_arrival_us": self._base_arrival_us,
            "discovered_us": self._disc_us,
            "floor_us": self._floor_us,
            "files": [e.to_json() for e in self._entries],
            "committed": [[n, m, s] for n, (m, s) in self._committed.items()],
            "newest_committed_ns": self._newest_committed_ns,
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Resume from :meth:`state`: the same offsets map to the same rows, and new files
        are numbered after the last offset."""
        try:
            if state.get("version") != MANIFEST_VERSION:
                msg = f"version {state.get('version')!r}, not {MANIFEST_VERSION}"
                raise ValueError(msg)
            entries = [_Entry.from_json(item) for item in state["files"]]
            committed = {str(n): (int(m), int(s)) for n, m, s in state["committed"]}
            nxt, base = int(state["next"]), int(state["base"])
            ints = [state[k] for k in ("base_arrival_us", "discovered_us", "floor_us")]
            ints.append(state["newest_committed_ns"])
            base_arrival, disc, floor, newest = (None if v is None else int(v) for v in ints)
            ends = [base] + [e.first + e.rows for e in entries]
            if [e.first for e in entries] != ends[:-1] or ends[-1] != nxt:
                msg = "its files do not number the offsets densely"
                raise ValueError(msg)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            msg = f"files source: the manifest in the state file is unreadable ({exc})"
            raise AdabatchError(msg) from None
        self._entries, self._committed = entries, committed
        self._next, self._base, self._base_arrival_us = nxt, base, base_arrival
        self._disc_us, self._floor_us, self._newest_committed_ns = disc, floor, newest
        self._first_listing = True
        self._rebuild()
