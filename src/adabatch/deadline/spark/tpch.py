"""TPC-H input for the deadline runner: tables from tpchgen-cli, split into landing files.

The paper (Sec. 6.1, 7.1) streams TPC-H ``orders`` and ``lineitem`` as many timestamped
files, one of each per time step, and keeps ``part``, ``customer``, ``nation`` and
``supplier`` static. We do the same:

1. :func:`generate_tables` runs ``tpchgen-cli parquet`` at a scale factor into
   ``ROOT/tables/`` (the full tables; DuckDB's oracle reads them too).
2. :func:`build_landing` cuts ``orders`` into ``slots`` contiguous ranges of orderkeys with
   equally many orders, and ``lineitem`` into the same ranges, so every order lands
   together with *all* its lineitems and ``orders ⋈ lineitem`` is exact within any set of
   whole slots (the paper's assumption for stream-stream joins, Sec. 6.1). Slot ``i`` is
   one Parquet file per stream in ``ROOT/staging/<stream>/``, with an extra ``ts`` column
   (its arrival time as a UTC timestamp from :data:`TS_ORIGIN_US`, the paper's added
   timestamp, Sec. 7.1).
3. ``ROOT/manifest.json`` (:class:`Manifest`) lists every slot with its arrival time,
   orderkey range, tuple counts and cumulative offsets per stream: a replayable arrival
   trace. Slot ``i`` arrives at ``window_start + i / rate`` (``rate`` in slots per second),
   so the first slot arrives at the window start and the last at the window end.
4. :class:`Feeder` releases slots in real time: at each slot's arrival it renames the
   slot's files from ``staging/`` into ``ROOT/landing/<stream>/`` (an atomic rename, so a
   Spark file source never sees half a file). :class:`StreamClock` maps the specs' time
   axis to the wall clock (``time_scale`` real seconds per spec second).

Scale used by the tests: SF 0.01 (15 000 orders, 60 175 lineitems); by the bench:
:data:`DEFAULT_SCALE_FACTOR` (1.5 million orders, 6 million lineitems) in
:data:`DEFAULT_SLOTS` slots.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from adabatch.deadline.core.arrival import TraceArrival
from adabatch.deadline.core.numbers import check_number
from adabatch.errors import AdabatchError
from adabatch.outputs import mark_dir, remove_tree, write_atomic
from adabatch.params import Param

STREAMS = ("orders", "lineitem")
"""Tables that arrive as a stream of landing files."""

STATIC_TABLES = ("part", "customer", "nation", "supplier")
"""Tables that stay whole and do not change during a query (paper Sec. 6.1)."""

ALL_TABLES = (*STREAMS, *STATIC_TABLES)

DEFAULT_SCALE_FACTOR = 1.0
DEFAULT_SLOTS = 1600
DEFAULT_RATE = 50.0
"""The landing data of ``adabatch deadline`` by default: SF 1 in 1600 slots at 50 slots/s,
a 32 s window. The tightest deadline, 0.1D after the window end (D: the whole window in
one batch), must hold a last one-slot batch and the final aggregation, which cost about
0.1-0.7 s on local[2] whatever the scale. D grows with the number of files more than with
the data (CQ1 at SF 1: 1.3 s in 400 files, 4.0 s in 1000), so it is the files that make
room: measured at 1600 slots, D is 3.8-11.9 s and the last step at most 6.2% of D; at SF 0.1
in 240 slots (D of 1-2.4 s), 21 of 72 single-query deadlines were
infeasible before running."""

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 2

TS_ORIGIN_US = 1_577_836_800_000_000
"""The ``ts`` of spec time 0: 2020-01-01T00:00:00Z in microseconds. Not the Unix epoch:
Spark's initial watermark is the epoch, and a join drops rows at or before the watermark."""


SCALE_FACTOR = Param("scale_factor", 0.01, "a finite number", low=0.0, low_open=True)
"""The TPC-H scale factor (1 = about 1 GB of tables)."""
SLOTS = Param("slots", 50, "landing files per stream", kind=int, low=2)
SLOT_RATE = Param("rate", 1.0, "slots per second", low=0.0, low_open=True)
TIME_SCALE = Param("time_scale", 1.0, "real seconds per spec second", low=0.0, low_open=True)
WINDOW_START = Param("window_start", 0.0, "a finite number of seconds")


def generate_tables(scale_factor: float, tables_dir: str | Path) -> Path:
    """Generate the TPC-H tables at ``scale_factor`` as Parquet with ``tpchgen-cli``.

    Skips the work when ``tables_dir`` already holds the tables of that scale factor
    (recorded in ``tables_dir/tpch.json``). Returns ``tables_dir``.
    """
    sf = check_number(SCALE_FACTOR, scale_factor, "scale factor", text=False)
    out = Path(tables_dir)
    stamp = out / "tpch.json"
    if stamp.is_file() and all((out / f"{t}.parquet").is_file() for t in ALL_TABLES):
        recorded = json.loads(stamp.read_text(encoding="utf-8"))
        if recorded.get("scale_factor") == sf:
            return out
    # the venv's scripts directory is not on PATH when its python is run by path
    exe = shutil.which("tpchgen-cli") or shutil.which(
        "tpchgen-cli", path=str(Path(sys.executable).parent)
    )
    if exe is None:
        msg = "tpchgen-cli is not installed: allowed `pip install tpchgen-cli`"
        raise AdabatchError(msg)
    out.mkdir(parents=True, exist_ok=True)
    cmd = [exe, "parquet", "-s", f"{sf:g}", "-o", str(out), "--overwrite", "--quiet"]
    for table in ALL_TABLES:
        cmd += ["-T", table]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        first = (proc.stderr or proc.stdout).strip().splitlines()
        msg = f"tpchgen-cli failed at scale factor {sf:g}: {first[0] if first else '?'}"
        raise AdabatchError(msg)
    write_atomic(stamp, (json.dumps({"scale_factor": sf}) + "\n").encode("utf-8"))
    return out


@dataclass(frozen=True)
class Slot:
    """One landing step: an orders file and a lineitem file over the same orderkeys.

    ``offsets[s]`` is the number of ``s`` tuples in earlier slots, so the slot holds that
    stream's tuples ``offsets[s] .. offsets[s] + tuples[s] - 1`` (0-based, arrival order).
    """

    index: int
    arrival_s: float
    orderkey_lo: int
    orderkey_hi: int
    files: dict[str, str]
    tuples: dict[str, int]
    offsets: dict[str, int]


@dataclass(frozen=True)
class Manifest:
    """Where every slot of the stream lies and when it arrives (``ROOT/manifest.json``)."""

    root: Path
    scale_factor: float
    rate: float
    window_start: float
    slots: tuple[Slot, ...]

    @property
    def window_end(self) -> float:
        """Arrival of the last slot."""
        return self.slots[-1].arrival_s

    @property
    def tables_dir(self) -> Path:
        return self.root / "tables"

    @property
    def staging_dir(self) -> Path:
        return self.root / "staging"

    @property
    def landing_dir(self) -> Path:
        return self.root / "landing"

    def table_path(self, table: str) -> Path:
        """The full Parquet file of ``table`` (static tables and the DuckDB oracle)."""
        if table not in ALL_TABLES:
            msg = f"table {table!r} is not a TPC-H table here: allowed {', '.join(ALL_TABLES)}"
            raise AdabatchError(msg)
        return self.tables_dir / f"{table}.parquet"

    def landing_path(self, slot: Slot, stream: str) -> Path:
        return self.landing_dir / slot.files[stream]

    def staging_path(self, slot: Slot, stream: str) -> Path:
        return self.staging_dir / slot.files[stream]

    def total(self, stream: str) -> int:
        _check_stream(stream)
        last = self.slots[-1]
        return last.offsets[stream] + last.tuples[stream]

    def arrivals(self, stream: str, time_offset: float = 0.0) -> TraceArrival:
        """The arrival trace of ``stream``: each slot's tuples at its arrival time
        (shifted by ``time_offset``). Slots without tuples of the stream are left out."""
        _check_stream(stream)
        rows = [(s.arrival_s + time_offset, s.tuples[stream]) for s in self.slots]
        rows = [(t, c) for t, c in rows if c > 0]
        return TraceArrival(tuple(t for t, _ in rows), tuple(c for _, c in rows))

    def slot_of(self, stream: str, tuple_index: int) -> int:
        """Index of the slot holding ``stream``'s tuple ``tuple_index`` (0-based)."""
        _check_stream(stream)
        if not 0 <= tuple_index < self.total(stream):
            msg = (
                f"tuple {tuple_index} of {stream} is outside the stream: allowed "
                f"0 .. {self.total(stream) - 1}"
            )
            raise AdabatchError(msg)
        lo, hi = 0, len(self.slots) - 1
        while lo < hi:  # the first slot whose end is beyond tuple_index
            mid = (lo + hi) // 2
            s = self.slots[mid]
            if s.offsets[stream] + s.tuples[stream] > tuple_index:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def to_json(self) -> dict[str, Any]:
        return {
            "version": MANIFEST_VERSION,
            "scale_factor": self.scale_factor,
            "rate_slots_per_s": self.rate,
            "window_start": self.window_start,
            "window_end": self.window_end,
            "streams": list(STREAMS),
            "static_tables": {t: f"tables/{t}.parquet" for t in STATIC_TABLES},
            "totals": {s: self.total(s) for s in STREAMS},
            "slots": [asdict(s) for s in self.slots],
        }

    def save(self) -> Path:
        path = self.root / MANIFEST_NAME
        return write_atomic(path, (json.dumps(self.to_json(), indent=1) + "\n").encode("utf-8"))


def _check_stream(stream: str) -> None:
    if stream not in STREAMS:
        msg = f"stream {stream!r} is not a landing stream: allowed {', '.join(STREAMS)}"
        raise AdabatchError(msg)


def load_manifest(root: str | Path) -> Manifest:
    """Read ``ROOT/manifest.json`` written by :func:`build_landing`."""
    root = Path(root)
    path = root / MANIFEST_NAME
    if not path.is_file():
        msg = (
            f"no TPC-H landing data in {str(root)!r} ({MANIFEST_NAME} is missing): "
            "run prepare() / `adabatch deadline run --data DIR` to create it"
        )
        raise AdabatchError(msg)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != MANIFEST_VERSION:
            msg = f"{path}: version {data.get('version')!r}: allowed {MANIFEST_VERSION}"
            raise AdabatchError(msg)
        slots = tuple(
            Slot(
                index=int(s["index"]),
                arrival_s=float(s["arrival_s"]),
                orderkey_lo=int(s["orderkey_lo"]),
                orderkey_hi=int(s["orderkey_hi"]),
                files={k: str(v) for k, v in s["files"].items()},
                tuples={k: int(v) for k, v in s["tuples"].items()},
                offsets={k: int(v) for k, v in s["offsets"].items()},
            )
            for s in data["slots"]
        )
        return Manifest(
            root=root,
            scale_factor=float(data["scale_factor"]),
            rate=float(data["rate_slots_per_s"]),
            window_start=float(data["window_start"]),
            slots=slots,
        )
    except (KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
        msg = f"{path} is malformed ({exc!r}): rebuild it with prepare()"
        raise AdabatchError(msg) from None


def build_landing(
    root: str | Path, *, slots: int, rate: float, window_start: float = 0.0
) -> Manifest:
    """Split ``ROOT/tables/{orders,lineitem}.parquet`` into ``slots`` slot files in
    ``ROOT/staging/`` and write the manifest (see the module docstring)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(root)
    check_number(SLOTS, slots, text=False)
    rate = check_number(SLOT_RATE, rate, text=False)
    check_number(WINDOW_START, window_start, text=False)
    tables = {}
    for stream in STREAMS:
        path = root / "tables" / f"{stream}.parquet"
        if not path.is_file():
            msg = f"table file {str(path)!r} is missing: generate the tables first"
            raise AdabatchError(msg)
        table = pq.read_table(path)
        # tpchgen writes string_view columns; plain strings read everywhere
        schema = pa.schema(
            [
                pa.field(f.name, pa.string() if pa.types.is_string_view(f.type) else f.type)
                for f in table.schema
            ]
        )
        tables[stream] = table.cast(schema)
    orders = tables["orders"].sort_by("o_orderkey")
    lineitem = tables["lineitem"].sort_by(
        [("l_orderkey", "ascending"), ("l_linenumber", "ascending")]
    )
    if orders.num_rows < slots:
        msg = f"slots = {slots} exceeds the {orders.num_rows} orders: allowed at most that many"
        raise AdabatchError(msg)
    okeys = orders["o_orderkey"].to_numpy()
    lkeys = lineitem["l_orderkey"].to_numpy()
    orphans = np.setdiff1d(np.unique(lkeys), okeys)
    if orphans.size:
        msg = f"lineitem has {orphans.size} orderkeys without an order (e.g. {orphans[0]})"
        raise AdabatchError(msg)
    staging = root / "staging"
    landing = root / "landing"
    for d in (staging, landing):  # only directories an earlier build made (marked)
        remove_tree(d, inside=root, what="TPC-H data directory")
        mark_dir(d, what="TPC-H data directory")
    for stream in STREAMS:
        (staging / stream).mkdir(parents=True)
        (landing / stream).mkdir(parents=True)
    bounds = np.linspace(0, orders.num_rows, slots + 1).round().astype(np.int64)
    offsets = dict.fromkeys(STREAMS, 0)
    out: list[Slot] = []
    for i in range(slots):
        a, z = int(bounds[i]), int(bounds[i + 1])
        lo, hi = int(okeys[a]), int(okeys[z - 1])
        la = int(np.searchsorted(lkeys, lo, "left"))
        lz = int(np.searchsorted(lkeys, hi, "right"))
        arrival = window_start + i / rate
        parts = {"orders": orders.slice(a, z - a), "lineitem": lineitem.slice(la, lz - la)}
        files, counts, offs = {}, {}, {}
        for stream, part in parts.items():
            ts = pa.array(
                np.full(part.num_rows, TS_ORIGIN_US + round(arrival * 1e6), dtype=np.int64),
                pa.timestamp("us", tz="UTC"),
            )
            part = part.append_column("ts", ts)
            name = f"{stream}/slot-{i:05d}.parquet"
            pq.write_table(part, staging / name)
            files[stream] = name
            counts[stream] = part.num_rows
            offs[stream] = offsets[stream]
            offsets[stream] += part.num_rows
        out.append(Slot(i, arrival, lo, hi, files, counts, offs))
    manifest = Manifest(root, _scale_of(root), rate, float(window_start), tuple(out))
    manifest.save()
    return manifest


def _scale_of(root: Path) -> float:
    stamp = root / "tables" / "tpch.json"
    if stamp.is_file():
        return float(json.loads(stamp.read_text(encoding="utf-8"))["scale_factor"])
    return math.nan


def prepare(
    root: str | Path,
    *,
    scale_factor: float,
    slots: int,
    rate: float,
    window_start: float = 0.0,
) -> Manifest:
    """Tables plus landing slots in ``root``, reusing what is there when it matches.

    Every slot is put back in staging (nothing landed): call :class:`Feeder` to release.
    """
    root = Path(root)
    generate_tables(scale_factor, root / "tables")
    try:
        manifest = load_manifest(root)
    except AdabatchError:
        manifest = None
    same = (
        manifest is not None
        and manifest.scale_factor == float(scale_factor)
        and len(manifest.slots) == slots
        and manifest.rate == float(rate)
        and manifest.window_start == float(window_start)
    )
    if not same:
        return build_landing(root, slots=slots, rate=rate, window_start=window_start)
    assert manifest is not None
    Feeder(manifest, StreamClock(manifest.window_start)).reset()
    return manifest


# ---------------------------------------------------------------------------------------
# Real time


@dataclass(frozen=True)
class StreamClock:
    """Maps spec time (seconds on the specs' axis) to the wall clock.

    Spec time ``origin`` is the real instant ``t0`` (``time.monotonic()``); one spec second
    lasts ``time_scale`` real seconds.
    """

    origin: float
    t0: float = 0.0
    time_scale: float = 1.0

    def __post_init__(self) -> None:
        check_number(TIME_SCALE, self.time_scale, text=False)

    @classmethod
    def starting_now(cls, origin: float, time_scale: float = 1.0) -> StreamClock:
        return cls(origin, time.monotonic(), time_scale)

    def real(self, spec_t: float) -> float:
        """The monotonic real time of spec time ``spec_t``."""
        return self.t0 + (spec_t - self.origin) * self.time_scale

    def spec(self, real_t: float) -> float:
        """The spec time of monotonic real time ``real_t``."""
        return self.origin + (real_t - self.t0) / self.time_scale

    def now(self) -> float:
        return self.spec(time.monotonic())


class Feeder:
    """Releases landing slots at their arrival times by renaming staged files.

    ``start()`` runs a background thread that renames slot ``i``'s files from staging into
    the landing directory at ``clock.real(slot.arrival_s)``; ``release_until(t)`` does it
    synchronously for every slot due by spec time ``t``. ``reset()`` moves everything back.
    """

    def __init__(self, manifest: Manifest, clock: StreamClock) -> None:
        self.manifest = manifest
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self.released: dict[int, float] = {}  # slot index -> spec time of its release

    def reset(self) -> None:
        """Stop releasing and move every landed slot back to staging."""
        self.stop()
        m = self.manifest
        for stream in STREAMS:
            (m.staging_dir / stream).mkdir(parents=True, exist_ok=True)
            (m.landing_dir / stream).mkdir(parents=True, exist_ok=True)
        for slot in m.slots:
            for stream in STREAMS:
                landed, staged = m.landing_path(slot, stream), m.staging_path(slot, stream)
                if landed.exists():
                    os.replace(landed, staged)
        self.released.clear()

    def _release(self, slot: Slot) -> None:
        m = self.manifest
        with self._lock:
            if slot.index in self.released:
                return
            for stream in STREAMS:
                staged, landed = m.staging_path(slot, stream), m.landing_path(slot, stream)
                if landed.exists():
                    continue
                if not staged.exists():
                    msg = (
                        f"slot {slot.index} file {str(staged)!r} is missing from staging: "
                        "rebuild the landing data with prepare()"
                    )
                    raise AdabatchError(msg)
                os.replace(staged, landed)
            self.released[slot.index] = self.clock.now()

    def release_until(self, spec_t: float) -> int:
        """Release every slot arriving by ``spec_t`` now; returns how many are landed."""
        for slot in self.manifest.slots:
            if slot.arrival_s <= spec_t:
                self._release(slot)
        return len(self.released)

    def start(self) -> None:
        """Release slots in a background thread at their arrival times."""
        if self._thread is not None:
            msg = "feeder already started"
            raise AdabatchError(msg)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="adabatch-feeder", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for slot in self.manifest.slots:
                delay = self.clock.real(slot.arrival_s) - time.monotonic()
                if delay > 0 and self._stop.wait(delay):
                    return
                if self._stop.is_set():
                    return
                self._release(slot)
        except BaseException as exc:  # reported by check()/stop() on the caller's thread
            self._error = exc

    def check(self) -> None:
        """Raise the error the release thread hit, if any."""
        if self._error is not None:
            error, self._error = self._error, None
            if isinstance(error, AdabatchError):
                raise error
            msg = f"the landing feeder failed: {error!r}"
            raise AdabatchError(msg) from error

    @property
    def done(self) -> bool:
        return len(self.released) == len(self.manifest.slots)

    def stop(self) -> None:
        """Stop the release thread (slots already landed stay)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self.check()

    def landed_slots(self) -> list[int]:
        """Slots whose files are all in the landing directory right now."""
        m = self.manifest
        return [
            s.index
            for s in m.slots
            if all(m.landing_path(s, stream).exists() for stream in STREAMS)
        ]
