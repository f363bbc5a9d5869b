"""Writing the generator's records in real time into a landing directory or a Redis Stream:
what ``adabatch produce`` does, so that the live sources (``files``, ``redis``) have
someone to read from.

:func:`produce` writes record ``n`` of :class:`~adabatch.sources.generator.GeneratorSource`
once its arrival time (the rate profile's) has passed on the wall clock, from stream time
0 (the call) to ``duration_s``:

- ``files:DIR``: every ``file_every_s`` one file with the records that arrived in that
  span, ``part-<seq>-<first offset>.<ext>`` (names sort in time order; a later run into the
  same directory continues the sequence), written as ``.part-...tmp`` and renamed into
  place, so a reader never sees a partial file. JSON lines (``event_time`` an ISO-8601 UTC
  string with microseconds and ``Z``), CSV with a header (the same strings), or Parquet
  (the generator's Arrow schema).
- ``redis://HOST:PORT[/DB]/STREAM``: every :data:`REDIS_TICK_S` one pipeline of ``XADD``
  with auto ids, every field a string; ``maxlen`` trims approximately (off by default).

A producer that falls behind writes late but never drops a record; the progress says by
how much. A ``stop`` event ends the run after the file or pipeline in hand.

:func:`landed_totals` reads back everything that landed (per key: records and value sum),
the independent oracle of the exactly-once checks; :func:`generator_totals` is what the
generator's first ``count`` records sum to.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

from adabatch.errors import AdabatchError, shown
from adabatch.profiles import check_span, parse_profile
from adabatch.report.progress import ProgressLine
from adabatch.runs.source_spec import FORMATS, SourceSpec, parse_target

if TYPE_CHECKING:
    import pyarrow as pa

    from adabatch.sources.generator import GeneratorSource

REDIS_TICK_S = 0.05  # one XADD pipeline per this much wall time
MIN_FILE_EVERY_S = 0.1
MAX_FILE_EVERY_S = 3600.0
MAX_DURATION_S = 86_400.0  # a day; with MIN_FILE_EVERY_S at most 864,000 files a run
MAX_MAXLEN = 10**12
CHUNK_RECORDS = 50_000  # records generated and written at once (bounds memory)
BEHIND_NOTE_S = 1.0  # the progress says "behind" once writing lags arrival this much
REDIS_TIMEOUT_S = 5.0
FILE_PREFIX = "part-"
EXTENSIONS = {"json": "json", "csv": "csv", "parquet": "parquet"}
_PART = re.compile(r"^part-(\d+)-")
Totals = dict[int, tuple[int, float]]


@dataclass(frozen=True)
class ProduceStatus:
    """What the progress line shows: stream time written up to, records and files (or
    XADD pipelines) so far, the profile's rate now, and how late writing runs."""

    t_s: float
    duration_s: float
    records: int
    units: int
    unit: str
    rate: float
    behind_s: float

    def text(self) -> str:
        text = (
            f"t {self.t_s:6.1f}/{self.duration_s:g}s  records {self.records:,}  "
            f"{self.unit} {self.units:,}  profile {self.rate:,.0f}/s"
        )
        if self.behind_s >= BEHIND_NOTE_S:
            text += f"  BEHIND by {self.behind_s:.1f}s (writing cannot keep up; nothing dropped)"
        return text


class ProduceProgress(ProgressLine):
    """The live progress line of :func:`produce` (an ``on_progress``): rewritten on a
    terminal, a line every ``every_s`` seconds of stream time in a log."""

    def __init__(self, stream: TextIO | None = None, every_s: float = 5.0) -> None:
        super().__init__(stream, every_s=every_s, tty_every_s=0.2)

    def __call__(self, status: ProduceStatus) -> None:
        self.show(status.text(), at=status.t_s)


@dataclass(frozen=True)
class ProduceResult:
    """A finished (or stopped) run: records written (offsets ``0 .. records-1``), files or
    XADD pipelines, wall time, the largest lag behind arrival, and whether it was stopped."""

    target: SourceSpec
    records: int
    units: int
    unit: str
    wall_s: float
    max_behind_s: float
    interrupted: bool

    @property
    def rate(self) -> float:
        """Records per second of wall time achieved."""
        return self.records / self.wall_s if self.wall_s > 0 else 0.0

    def summary_line(self) -> str:
        """One line: what was written where, how fast, and whether it lagged or stopped."""
        what = "entries" if self.target.name == "redis" else "records"
        offsets = f" (offsets 0..{self.records - 1})" if self.records else ""
        text = (
            f"wrote {self.records:,} {what}{offsets} in {self.units:,} {self.unit} to "
            f"{self.target.shown} in {self.wall_s:.1f} s: {self.rate:,.0f} records/s"
        )
        if self.max_behind_s >= BEHIND_NOTE_S:
            text += f"; fell behind arrival by up to {self.max_behind_s:.1f} s"
        if self.interrupted:
            text += "; stopped early"
        return text


def check_file_every(seconds: float) -> float:
    """``--file-every`` in seconds, within ``MIN_FILE_EVERY_S .. MAX_FILE_EVERY_S``."""
    if not (MIN_FILE_EVERY_S <= seconds <= MAX_FILE_EVERY_S):
        msg = (
            f"--file-every {seconds:g} s is not allowed: allowed {MIN_FILE_EVERY_S:g} s to "
            f"{MAX_FILE_EVERY_S:g} s"
        )
        raise AdabatchError(msg)
    return seconds


def check_produce_inputs(profile: str, duration_s: float, *, seed: int = 0) -> None:
    """The profile and the duration (without the ``spark`` extra): a positive duration up
    to a day, a profile that parses and does not change its rate too often."""
    if not (0 < duration_s <= MAX_DURATION_S):
        msg = (
            f"--duration {duration_s:g} s is not allowed: allowed more than 0 s and at most "
            f"{MAX_DURATION_S:g} s"
        )
        raise AdabatchError(msg)
    check_span(parse_profile(profile, seed=seed), duration_s)


def build_generator(
    profile: str,
    *,
    seed: int = 0,
    keys: int = 1000,
    source_options: Mapping[str, Any] | None = None,
    start_time: float = 0.0,
) -> GeneratorSource:
    """The generator a producer writes from (its options checked, one line if bad)."""
    from adabatch.sources.generator import GeneratorSource

    options = {"seed": seed, "keys": keys, **dict(source_options or {})}
    return GeneratorSource.from_options(options, profile, start_time=start_time)


def produce(
    target: SourceSpec | str,
    profile: str,
    duration_s: float,
    *,
    seed: int = 0,
    keys: int = 1000,
    source_options: Mapping[str, Any] | None = None,
    file_format: str = "json",
    file_every_s: float = 1.0,
    maxlen: int | None = None,
    on_progress: Callable[[ProduceStatus], None] | None = None,
    stop: threading.Event | None = None,
) -> ProduceResult:
    """Write the generator's records along ``profile`` for ``duration_s`` of wall time into
    ``target`` (see the module docstring); returns what was written."""
    spec = parse_target(target) if isinstance(target, str) else target
    check_produce_inputs(profile, duration_s, seed=seed)
    checked = build_generator(profile, seed=seed, keys=keys, source_options=source_options)
    _warm_up(checked)
    if spec.name == "files":
        if file_format not in FORMATS:
            msg = f"--format {shown(file_format)} is not allowed: allowed {', '.join(FORMATS)}"
            raise AdabatchError(msg)
        step_s, catch_up = check_file_every(file_every_s), False
        sink: _Sink = _FilesSink(Path(spec.option("path")), file_format)
    else:
        if maxlen is not None and not (1 <= maxlen <= MAX_MAXLEN):
            msg = f"--maxlen {maxlen} is not allowed: allowed 1 to {MAX_MAXLEN}"
            raise AdabatchError(msg)
        sink = _RedisSink(spec, maxlen)
        step_s, catch_up = REDIS_TICK_S, True
    stop = threading.Event() if stop is None else stop
    try:
        t0 = time.time()
        gen = build_generator(
            profile, seed=seed, keys=keys, source_options=source_options, start_time=t0
        )
        written, behind = _write_along(
            gen, sink, t0, duration_s, step_s, catch_up, on_progress, stop
        )
        wall = time.time() - t0
    finally:
        sink.close()
    return ProduceResult(spec, written, sink.units, sink.unit, wall, behind, stop.is_set())


def _warm_up(gen: GeneratorSource) -> None:
    """Run the code that makes and formats records once before the clock starts: the
    first call costs a few hundred milliseconds (imports, Arrow kernels), which would
    otherwise put a short run behind at once."""
    batch = gen.records(0, 1)
    _json_lines(batch)
    list(_string_rows(batch))
    _with_text_times(batch)


def _write_along(
    gen: GeneratorSource,
    sink: _Sink,
    t0: float,
    duration_s: float,
    step_s: float,
    catch_up: bool,
    on_progress: Callable[[ProduceStatus], None] | None,
    stop: threading.Event,
) -> tuple[int, float]:
    """The real-time loop: every ``step_s`` of wall time, write what has arrived since the
    last step (``catch_up``: up to now, in one step, when late; else span by span).
    Returns the records written and the largest lag behind arrival."""
    total = gen.available(duration_s)
    written, step, max_behind = 0, 0, 0.0
    while written < total and not stop.is_set():
        step += 1
        due = min(step * step_s, duration_s)
        wait = t0 + due - time.time()
        if wait > 0 and stop.wait(wait):
            break
        if catch_up:
            due = min(max(due, time.time() - t0), duration_s)
            step = max(step, math.floor(due / step_s))
        hi = min(gen.available(due), total)
        if hi > written:
            sink.write(gen, written, hi)
            written = hi
        behind = max(time.time() - t0 - due, 0.0)
        max_behind = max(max_behind, behind)
        if on_progress is not None:
            rate = float(gen.profile.rate(min(due, duration_s)))
            status = ProduceStatus(due, duration_s, written, sink.units, sink.unit, rate, behind)
            on_progress(status)
    return written, max_behind


# -- sinks ---------------------------------------------------------------------------------


class _Sink:
    """Where a producer writes: ``write(gen, lo, hi)`` writes records ``lo .. hi-1``."""

    unit = "writes"
    units = 0

    def write(self, gen: GeneratorSource, lo: int, hi: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the sink holds (a connection)."""


def _chunks(gen: GeneratorSource, lo: int, hi: int) -> Iterator[pa.RecordBatch]:
    for a in range(lo, hi, CHUNK_RECORDS):
        yield gen.records(a, min(a + CHUNK_RECORDS, hi))


def iso_times(batch: pa.RecordBatch) -> np.ndarray:
    """``event_time`` as ISO-8601 UTC strings with microseconds and ``Z``."""
    us = batch.column("event_time").to_numpy(zero_copy_only=False).astype("datetime64[us]")
    return np.char.add(np.datetime_as_string(us, unit="us"), "Z")


def _json_lines(batch: pa.RecordBatch) -> str:
    cols = batch.to_pydict()
    times = iso_times(batch)
    lines = [
        f'{{"offset":{o},"event_time":"{t}","key":{k},"value":{float(v)!r},'
        f'"line":{json.dumps(line)},"stream":{json.dumps(s)}}}'
        for o, t, k, v, line, s in zip(
            cols["offset"], times, cols["key"], cols["value"], cols["line"], cols["stream"],
            strict=True,
        )
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def _with_text_times(batch: pa.RecordBatch) -> pa.RecordBatch:
    import pyarrow as pa

    i = batch.schema.get_field_index("event_time")
    return batch.set_column(i, "event_time", pa.array(iso_times(batch), type=pa.string()))


class _FilesSink(_Sink):
    """One file per write, renamed into place; the sequence continues an earlier run's."""

    unit = "files"

    def __init__(self, directory: Path, file_format: str) -> None:
        self.dir = directory
        self.format = file_format
        self.dir.mkdir(parents=True, exist_ok=True)
        self.seq = next_sequence(self.dir)

    def write(self, gen: GeneratorSource, lo: int, hi: int) -> None:
        name = f"{FILE_PREFIX}{self.seq:06d}-{lo:012d}.{EXTENSIONS[self.format]}"
        tmp = self.dir / f".{name}.tmp"
        try:
            self._write_file(tmp, _chunks(gen, lo, hi))
            os.replace(tmp, self.dir / name)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self.seq += 1
        self.units += 1

    def _write_file(self, path: Path, batches: Iterator[pa.RecordBatch]) -> None:
        if self.format == "json":
            with path.open("w", encoding="utf-8") as fh:
                for batch in batches:
                    fh.write(_json_lines(batch))
        elif self.format == "csv":
            import pyarrow.csv as pacsv

            writer = None
            try:
                for batch in map(_with_text_times, batches):
                    writer = writer or pacsv.CSVWriter(str(path), batch.schema)
                    writer.write_batch(batch)
            finally:
                if writer is not None:
                    writer.close()
        else:
            import pyarrow.parquet as pq

            from adabatch.sources.generator import ARROW_SCHEMA

            with pq.ParquetWriter(str(path), ARROW_SCHEMA) as writer:
                for batch in batches:
                    writer.write_batch(batch)


def next_sequence(directory: Path) -> int:
    """The number after the highest ``part-<seq>-`` file in ``directory`` (0 if none)."""
    seqs = [int(m.group(1)) for p in directory.iterdir() if (m := _PART.match(p.name))]
    return max(seqs, default=-1) + 1


def redis_client(spec: SourceSpec) -> Any:
    """A connected client for ``spec``'s server, or one line saying it cannot be reached;
    a key that exists and is not a stream is refused too."""
    import redis

    url, stream = spec.option("url"), spec.option("stream")
    where = str(spec.shown)
    client = redis.Redis.from_url(
        url, socket_connect_timeout=REDIS_TIMEOUT_S, socket_timeout=REDIS_TIMEOUT_S
    )
    try:
        client.ping()
        kind = client.type(stream)
    except redis.RedisError as exc:
        client.close()
        msg = f"cannot reach Redis for {where}: {_one_line(exc)}"
        raise AdabatchError(msg) from None
    kind = kind.decode() if isinstance(kind, bytes) else str(kind)
    if kind not in ("none", "stream"):
        client.close()
        msg = f"{where}: key {shown(stream)} holds a {kind}, not a stream: name another key"
        raise AdabatchError(msg)
    return client


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]


class _RedisSink(_Sink):
    """``XADD`` pipelines with auto ids, every field a string."""

    unit = "pipelines"

    def __init__(self, spec: SourceSpec, maxlen: int | None) -> None:
        self.spec = spec
        self.stream = spec.option("stream")
        self.maxlen = maxlen
        self.client = redis_client(spec)

    def write(self, gen: GeneratorSource, lo: int, hi: int) -> None:
        import redis

        trim = {} if self.maxlen is None else {"maxlen": self.maxlen, "approximate": True}
        try:
            for batch in _chunks(gen, lo, hi):
                pipe = self.client.pipeline(transaction=False)
                for fields in _string_rows(batch):
                    pipe.xadd(self.stream, fields, **trim)
                pipe.execute()
                self.units += 1
        except redis.RedisError as exc:
            msg = f"writing to {self.spec.shown} failed at offset {lo}: {_one_line(exc)}"
            raise AdabatchError(msg) from None

    def close(self) -> None:
        self.client.close()


def _string_rows(batch: pa.RecordBatch) -> Iterator[dict[str, str]]:
    cols = batch.to_pydict()
    times = iso_times(batch)
    for i in range(batch.num_rows):
        yield {
            "offset": str(cols["offset"][i]),
            "event_time": str(times[i]),
            "key": str(cols["key"][i]),
            "value": repr(float(cols["value"][i])),
            "line": cols["line"][i],
            "stream": cols["stream"][i],
        }


# -- the oracle ----------------------------------------------------------------------------


def add_totals(totals: Totals, keys: np.ndarray, values: np.ndarray) -> Totals:
    """``totals`` with the records ``keys``/``values`` added (per key: count, value sum)."""
    if len(keys) == 0:
        return totals
    uniq, inverse = np.unique(np.asarray(keys, dtype=np.int64), return_inverse=True)
    counts = np.bincount(inverse, minlength=len(uniq))
    sums = np.bincount(inverse, weights=np.asarray(values, dtype=np.float64), minlength=len(uniq))
    for k, c, s in zip(uniq.tolist(), counts.tolist(), sums.tolist(), strict=True):
        n, v = totals.get(k, (0, 0.0))
        totals[k] = (n + c, v + s)
    return totals


def generator_totals(
    profile: str,
    count: int,
    *,
    seed: int = 0,
    keys: int = 1000,
    source_options: Mapping[str, Any] | None = None,
) -> Totals:
    """Per key (records, value sum) of the generator's records ``0 .. count-1``: what a
    producer with the same options wrote in a run of ``count`` records."""
    gen = build_generator(profile, seed=seed, keys=keys, source_options=source_options)
    totals: Totals = {}
    for batch in _chunks(gen, 0, count):
        add_totals(totals, batch.column("key").to_numpy(), batch.column("value").to_numpy())
    return totals


def landed_totals(target: SourceSpec | str) -> Totals:
    """Per key (records, value sum) of everything that landed in ``target``: every visible
    file of a landing directory (names not starting with ``.`` or ``_``; ``.json``,
    ``.csv``, ``.parquet``) or every entry of a Redis Stream."""
    spec = parse_target(target) if isinstance(target, str) else target
    if spec.name == "files":
        return _files_totals(Path(spec.option("path")))
    return _redis_totals(spec)


def _files_totals(directory: Path) -> Totals:
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.json as pajson
    import pyarrow.parquet as pq

    columns = pa.schema([pa.field("key", pa.int64()), pa.field("value", pa.float64())])
    totals: Totals = {}
    for path in sorted(directory.iterdir()):
        if path.name.startswith((".", "_")) or not path.is_file():
            continue
        kind = path.suffix.lower().lstrip(".")
        if kind in ("json", "jsonl"):
            parse = pajson.ParseOptions(explicit_schema=columns, unexpected_field_behavior="ignore")
            table = pajson.read_json(path, parse_options=parse)
        elif kind == "csv":
            convert = pacsv.ConvertOptions(column_types=columns, include_columns=["key", "value"])
            table = pacsv.read_csv(path, convert_options=convert)
        elif kind == "parquet":
            table = pq.read_table(path, columns=["key", "value"])
        else:
            continue
        add_totals(totals, table.column("key").to_numpy(), table.column("value").to_numpy())
    return totals


def _redis_totals(spec: SourceSpec) -> Totals:
    client = redis_client(spec)
    stream, low = spec.option("stream"), "-"
    totals: Totals = {}
    try:
        while True:
            entries = client.xrange(stream, min=low, max="+", count=CHUNK_RECORDS)
            if not entries:
                return totals
            try:
                keys = [int(fields[b"key"]) for _, fields in entries]
                values = [float(fields[b"value"]) for _, fields in entries]
            except (KeyError, ValueError):
                msg = f"{spec.shown}: an entry near {entries[0][0]!r} has no integer key/value"
                raise AdabatchError(msg) from None
            add_totals(totals, np.array(keys), np.array(values))
            low = "(" + entries[-1][0].decode()
    finally:
        client.close()
