"""Reading the ``files`` source's files: row counts on the driver, row ranges on executors.

The driver counts each file's rows once, when it discovers the file (:func:`count_rows`):
JSON lines and CSV by their lines, Parquet from its footer. For a large text file it keeps
a sparse index (the byte at which every ~8 MiB a line starts), so an executor that reads
rows from the middle seeks close to them instead of scanning from the start.

An executor reads what :class:`Located` lists (:func:`read_located`): per file, a row range,
checked against the size the driver saw (a file deleted, truncated or grown since is an
:class:`AdabatchError` naming it: files must be complete when they land and stay until
read). Blank lines yield nothing. CSV is one row per line (no line breaks inside quoted
fields), its columns matched to the schema by position, empty fields null; with ``header``
(the default here, unlike Spark's) the first line of each file is skipped. Parquet columns
are matched by name, a missing one is null. A row that does not parse or fit the schema goes to the
dead-letter directory as one JSON line ``{"file", "line", "offset", "error", "text"}``
(``line``: 1-based line in the file, for Parquet the 1-based row), in a file named after
the source file and the row range and written atomically (temporary file, then rename), so
a replayed block overwrites it instead of adding duplicates.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import pyarrow as pa

from adabatch.errors import AdabatchError
from adabatch.sources.base import CHUNK_RECORDS
from adabatch.sources.ddl import ARROW_TYPES, Column, arrow_schema, cast_value, parse_ddl
from adabatch.sources.files_schema import from_arrow, infer_csv, infer_json, json_value

FORMATS = ("json", "csv", "parquet")
INDEX_BYTES = 8 << 20  # a line start is indexed about every this many bytes
READ_CHUNK = 1 << 20
MAX_NAME = 180  # longest source-file part of a dead-letter file name
SNIFF_LINES = 1000  # lines of a text file read to infer its schema


@dataclass(frozen=True)
class FileSlice:
    """Rows ``row_lo .. row_hi-1`` of one file (``offset``: the record offset of
    ``row_lo``); ``size``/``rows``: what the driver counted; ``seek``: an indexed
    ``(line, byte)`` at or before the first line to read."""

    path: str
    size: int
    rows: int
    row_lo: int
    row_hi: int
    offset: int
    seek: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class Located:
    """What an executor needs to read one block: the slices and how to parse them."""

    format: str
    ddl: str
    header: bool
    dead_letter: str
    slices: tuple[FileSlice, ...]


def _complete(path: str, size: int) -> None:
    """Raise unless ``path`` still has the ``size`` bytes counted at discovery."""
    try:
        now = os.stat(path).st_size
    except FileNotFoundError:
        msg = (
            f"files source: {path} was deleted before it was read: a landed file must stay "
            "until the query has committed its records"
        )
        raise AdabatchError(msg) from None
    if now != size:
        change = "truncated" if now < size else "grew"
        msg = (
            f"files source: {path} {change} from {size} to {now} bytes after it landed: land "
            "complete files (write to a .name or _name file, then rename it into place)"
        )
        raise AdabatchError(msg)


# -- counting (driver) ---------------------------------------------------------------------


def count_lines(path: str, size: int) -> tuple[int, list[list[int]]]:
    """Lines in the first ``size`` bytes of ``path`` (a last line without a newline
    counts) and the sparse index ``[[line, byte], ...]`` of line starts."""
    lines, pos, last, index = 0, 0, b"\n", []
    with open(path, "rb") as f:
        while pos < size:
            chunk = f.read(min(READ_CHUNK, size - pos))
            if not chunk:
                _complete(path, size)  # raises: the file shrank
                break
            newlines = chunk.count(b"\n")
            lines += newlines
            if newlines and pos + len(chunk) - (index[-1][1] if index else 0) >= INDEX_BYTES:
                start = pos + chunk.rfind(b"\n") + 1
                if start < size:
                    index.append([lines, start])
            pos += len(chunk)
            last = chunk[-1:]
    return lines + (1 if size and last != b"\n" else 0), index


def count_rows(path: str, size: int, fmt: str, header: bool) -> tuple[int, list[list[int]]]:
    """Rows of a landed file (and its line index, for JSON and CSV)."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            with pq.ParquetFile(path) as pf:
                return pf.metadata.num_rows, []
        except (OSError, pa.ArrowException) as exc:
            msg = (
                f"files source: cannot read the Parquet footer of {path} ({exc}); land complete "
                "files (write to a .name or _name file, then rename it into place)"
            )
            raise AdabatchError(msg) from None
    lines, index = count_lines(path, size)
    if fmt == "csv" and header:
        return max(lines - 1, 0), index
    return lines, index


def infer_file(path: str, fmt: str, header: bool) -> tuple[Column, ...] | None:
    """Columns inferred from one file (``None``: nothing to infer from in its first
    lines): JSON from its first parseable object, CSV from its header and sniffed values,
    Parquet from its schema."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return from_arrow(pq.read_schema(path), path)
    with open(path, "rb") as f:
        lines = [raw for raw in itertools.islice(f, SNIFF_LINES) if raw.strip()]
    if fmt == "json":
        for raw in lines:
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj:
                return infer_json(obj)
        return None
    if not lines:
        return None
    texts = [raw.decode("utf-8", errors="replace").rstrip("\r\n") for raw in lines]
    rows = [next(csv.reader((t,))) for t in texts]
    if header:
        return infer_csv(rows[0], rows[1:])
    return infer_csv([f"_c{i}" for i in range(len(rows[0]))], rows)


def seek_point(index: Sequence[Sequence[int]], line: int) -> tuple[int, int]:
    """The last indexed ``(line, byte)`` at or before ``line`` (``(0, 0)``: the start)."""
    best = (0, 0)
    for ln, byte in index:
        if ln > line:
            break
        best = (int(ln), int(byte))
    return best


# -- reading (executors) -------------------------------------------------------------------


class _Rows:
    """Converted rows gathered into Arrow record batches of at most ``CHUNK_RECORDS``."""

    def __init__(self, columns: Sequence[Column]) -> None:
        self.columns = columns
        self.schema = arrow_schema(columns)
        self.values: list[list[Any]] = [[] for _ in columns]

    def add(self, row: Sequence[Any]) -> None:
        for col, v in zip(self.values, row, strict=True):
            col.append(v)

    def full(self) -> bool:
        return len(self.values[0]) >= CHUNK_RECORDS

    def flush(self) -> Iterator[pa.RecordBatch]:
        if self.values[0]:
            arrays = [
                pa.array(v, type=ARROW_TYPES[c.type])
                for v, c in zip(self.values, self.columns, strict=True)
            ]
            self.values = [[] for _ in self.columns]
            yield pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _lines(f: BinaryIO, part: FileSlice, first_line: int) -> Iterator[tuple[int, bytes]]:
    """``(line number, raw line)`` for the slice's lines, from its seek point."""
    line, byte = part.seek
    f.seek(byte)
    want = part.row_hi - part.row_lo
    for raw in f:
        if line >= first_line:
            yield line, raw
            want -= 1
            if want == 0:
                return
        line += 1
    msg = (
        f"files source: {part.path} has fewer lines than the {part.rows} rows counted when it "
        "landed: it was replaced after it landed"
    )
    raise AdabatchError(msg)


def _cast_row(columns: Sequence[Column], values: Sequence[Any], cast: Callable) -> list[Any]:
    out = []
    for c, value in zip(columns, values, strict=True):
        try:
            out.append(cast(value, c.type))
        except ValueError as exc:
            msg = f"column {c.name!r}: {exc}"
            raise ValueError(msg) from None
    return out


def _json_row(columns: Sequence[Column], raw: bytes) -> list[Any]:
    obj = json.loads(raw)
    if not isinstance(obj, dict):
        msg = f"expected a JSON object, got {type(obj).__name__}"
        raise ValueError(msg)
    return _cast_row(columns, [obj.get(c.name) for c in columns], json_value)


def _csv_row(columns: Sequence[Column], raw: bytes) -> list[Any]:
    text = raw.decode("utf-8").rstrip("\r\n")
    fields = next(csv.reader((text,), strict=True))
    if len(fields) != len(columns):
        msg = f"expected {len(columns)} columns, got {len(fields)}"
        raise ValueError(msg)
    return _cast_row(columns, fields, cast_value)


def _text_slice(located: Located, part: FileSlice, bad: list[dict]) -> Iterator[pa.RecordBatch]:
    """A JSON-lines or CSV slice: its good rows as batches, its bad rows into ``bad``."""
    columns = parse_ddl(located.ddl)
    rows = _Rows(columns)
    parse = _json_row if located.format == "json" else _csv_row
    skip = 1 if located.format == "csv" and located.header else 0
    first_line = part.row_lo + skip
    with open(part.path, "rb") as f:
        for line, raw in _lines(f, part, first_line):
            if not raw.strip():
                continue
            try:
                rows.add(parse(columns, raw))
            except (ValueError, RecursionError, csv.Error) as exc:  # bad UTF-8 is a ValueError
                offset = part.offset + line - first_line
                bad.append(_bad(part.path, line + 1, offset, exc, raw))
                continue
            if rows.full():
                yield from rows.flush()
    yield from rows.flush()


def _bad(path: str, line: int, offset: int, exc: Exception, raw: bytes | str) -> dict:
    text = raw.decode("utf-8", errors="replace").rstrip("\r\n") if isinstance(raw, bytes) else raw
    error = f"{type(exc).__name__}: {exc}"
    return {"file": path, "line": line, "offset": offset, "error": error, "text": text}


def _parquet_table(table: pa.Table, columns: Sequence[Column]) -> pa.Table:
    """``table`` with exactly ``columns``: missing ones null, the rest cast (safe)."""
    arrays = []
    for c in columns:
        if c.name in table.column_names:
            arrays.append(table.column(c.name).cast(ARROW_TYPES[c.type], safe=True))
        else:
            arrays.append(pa.nulls(table.num_rows, type=ARROW_TYPES[c.type]))
    return pa.Table.from_arrays(arrays, schema=arrow_schema(columns))


def _parquet_rows(
    table: pa.Table, columns: Sequence[Column], part: FileSlice, row0: int, bad: list[dict]
) -> Iterator[pa.RecordBatch]:
    """Row by row, when a column does not cast as a whole: bad rows into ``bad``."""
    rows = _Rows(columns)
    for i, record in enumerate(table.to_pylist()):
        try:
            rows.add(_cast_row(columns, [record.get(c.name) for c in columns], cast_value))
        except ValueError as exc:
            text = json.dumps(record, default=str, ensure_ascii=False)
            bad.append(
                _bad(part.path, row0 + i + 1, part.offset + row0 - part.row_lo + i, exc, text)
            )
            continue
        if rows.full():
            yield from rows.flush()
    yield from rows.flush()


def _parquet_slice(located: Located, part: FileSlice, bad: list[dict]) -> Iterator[pa.RecordBatch]:
    """A Parquet slice: the row groups it overlaps, cut to its rows."""
    import pyarrow.parquet as pq

    columns = parse_ddl(located.ddl)
    with pq.ParquetFile(part.path) as pf:
        yield from _parquet_groups(pf, columns, part, bad)


def _parquet_groups(
    pf: Any, columns: Sequence[Column], part: FileSlice, bad: list[dict]
) -> Iterator[pa.RecordBatch]:
    if pf.metadata.num_rows != part.rows:
        msg = (
            f"files source: {part.path} has {pf.metadata.num_rows} rows, not the {part.rows} "
            "counted when it landed: it was replaced after it landed"
        )
        raise AdabatchError(msg)
    names = [c.name for c in columns if c.name in pf.schema_arrow.names]
    start = 0
    for i in range(pf.metadata.num_row_groups):
        n = pf.metadata.row_group(i).num_rows
        lo, hi = max(part.row_lo, start), min(part.row_hi, start + n)
        if lo < hi:
            table = pf.read_row_group(i, columns=names).slice(lo - start, hi - lo)
            try:
                fitted = _parquet_table(table, columns)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                yield from _parquet_rows(table, columns, part, lo, bad)
            else:
                yield from fitted.to_batches(max_chunksize=CHUNK_RECORDS)
        start += n
        if start >= part.row_hi:
            break


def dead_letter_name(path: str, row_lo: int, row_hi: int) -> str:
    """The dead-letter file of rows ``row_lo .. row_hi-1`` of ``path`` (deterministic)."""
    base = os.path.basename(path)
    if len(base) > MAX_NAME:
        digest = hashlib.sha256(base.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        base = f"{base[: MAX_NAME - 17]}-{digest}"
    return f"{base}.rows-{row_lo}-{row_hi}.jsonl"


def write_dead_letter(directory: str, part: FileSlice, bad: Sequence[dict]) -> str:
    """Write ``bad`` rows of ``part`` atomically; returns the file written."""
    os.makedirs(directory, exist_ok=True)
    target = os.path.join(directory, dead_letter_name(part.path, part.row_lo, part.row_hi))
    fd, tmp = tempfile.mkstemp(prefix=".dead-letter-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for record in bad:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return target


def read_located(located: Located) -> Iterator[pa.RecordBatch]:
    """Every good row of ``located``'s slices as Arrow batches (at most ``CHUNK_RECORDS``
    rows each); bad rows go to the dead-letter directory, one file per slice."""
    for part in located.slices:
        _complete(part.path, part.size)
        bad: list[dict] = []
        try:
            if located.format == "parquet":
                yield from _parquet_slice(located, part, bad)
            else:
                yield from _text_slice(located, part, bad)
        except FileNotFoundError:
            _complete(part.path, part.size)  # deleted while read: raises, naming it
            raise
        except (OSError, pa.ArrowException) as exc:
            msg = f"files source: cannot read {part.path}: {exc}"
            raise AdabatchError(msg) from None
        if bad:
            write_dead_letter(located.dead_letter, part, bad)
