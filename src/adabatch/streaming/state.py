"""The stream's state: controller state and cut schedule, in a file and in the offsets.

Spark's checkpoint holds the offsets of every micro-batch; the state holds what Spark does
not know: the stream clock, the controller's running state, the cut batches still in the
queue and the batch being processed. It lives in two places:

- the **state file** (``statePath``), a local JSON file replaced atomically (write, then
  rename) at every change, so a killed query leaves the last consistent version. A file
  written by a query with other options (source, profile, controller, parameters, queue)
  is refused;
- the **carried state**, the same at each batch's hand-out, inside the batch's end offset
  (:func:`encode_carried`). Spark writes it to its offset log, on whatever filesystem the
  checkpoint is on (HDFS, S3, ABFS, ...), so a restart on a fresh driver whose local
  state file is gone resumes with it. State carried by a query with other options is
  ignored (the controller starts afresh, as without state).
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adabatch.errors import AdabatchError
from adabatch.outputs import dumps_json, write_atomic

if TYPE_CHECKING:
    from adabatch.streaming.options import StreamOptions

STATE_VERSION = 1

# Carried state whose JSON is longer than this travels zlib-compressed and base64-encoded
# (offsets are JSON text): a fixed-point controller's few hundred bytes stay readable.
COMPRESS_ABOVE = 512
COMPRESSED = "z:"
# zlib level 6: measured on a simulated hour of isotonic state, level 9 saves < 1 % more
# bytes for about twice the time.
COMPRESS_LEVEL = 6
# Most bytes a carried state may inflate to: a damaged checkpoint cannot exhaust memory.
MAX_CARRIED_BYTES = 16 * 1024 * 1024
# Longest ``state`` an offset carries. Spark keeps ~100 offset-log files and shows every
# offset twice in each progress event; above this the offsets carry the schedule without
# the controller's state, which starts afresh after a restart. Measured on a simulated
# isotonic controller (benchmarks/offset_state.py --duration 4h): offsets of 7.4 KB after
# 4 h of a 1,000-8,000/s sine, 4.5 KB after 4 h of rates hopping over 500-32,000/s; its
# tables grow with the rates seen, ever slower with time.
MAX_CARRIED_CHARS = 64 * 1024


def load_state(path: str | Path) -> dict[str, Any] | None:
    """The saved state, or ``None`` if there is none yet."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        msg = f"state file {str(path)!r} is unreadable ({exc}); delete it with its checkpoint"
        raise AdabatchError(msg) from None
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        msg = f"state file {str(path)!r} was not written by this adabatch source version"
        raise AdabatchError(msg)
    return data


def save_state(path: str | Path, data: dict[str, Any]) -> None:
    """Replace the state file atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, dumps_json({**data, "version": STATE_VERSION}).encode("utf-8"))


def query_key(fingerprint: dict[str, Any]) -> str:
    """A short digest of a query's options fingerprint (which carried state belongs to)."""
    text = json.dumps(fingerprint, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def encode_carried(data: dict[str, Any]) -> str:
    """The carried state as an offset's ``state`` text: compact JSON, or above
    ``COMPRESS_ABOVE`` characters ``"z:"`` and the base64 of its zlib compression."""
    # plain json.dumps: non-finite floats round-trip as NaN/Infinity inside the string
    text = json.dumps({**data, "version": STATE_VERSION}, separators=(",", ":"))
    if len(text) <= COMPRESS_ABOVE:
        return text
    packed = zlib.compress(text.encode("utf-8"), COMPRESS_LEVEL)
    return COMPRESSED + base64.b64encode(packed).decode("ascii")


def decode_carried(text: str, key: str) -> dict[str, Any] | None:
    """The state an offset carries; ``None`` if it carries none or was written by a query
    whose options fingerprint (:func:`query_key`) is not ``key``."""
    if not text:
        return None
    try:
        if text.startswith(COMPRESSED):
            inflate = zlib.decompressobj()
            raw = inflate.decompress(base64.b64decode(text[len(COMPRESSED) :]), MAX_CARRIED_BYTES)
            if inflate.unconsumed_tail:
                msg = f"inflates to more than {MAX_CARRIED_BYTES} bytes"
                raise ValueError(msg)
            text = raw.decode("utf-8")
        data = json.loads(text)
    except (ValueError, zlib.error) as exc:  # binascii.Error is a ValueError
        msg = f"the controller state in the checkpoint's offsets is unreadable ({exc})"
        raise AdabatchError(msg) from None
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        msg = "the controller state in the checkpoint's offsets is not this adabatch version's"
        raise AdabatchError(msg)
    return data if data.get("query_key") == key else None


def check_same_query(path: str | Path, saved: dict[str, Any], fingerprint: dict[str, Any]) -> None:
    """Refuse a state file written by a different query (one line naming the difference)."""
    old = saved.get("query", {})
    for key in fingerprint:
        if old.get(key) != fingerprint[key]:
            msg = (
                f"state file {str(path)!r} belongs to a different query: {key} was "
                f"{old.get(key)!r}, now {fingerprint[key]!r} (use a new checkpoint and "
                "state path, or the original options)"
            )
            raise AdabatchError(msg)


def fingerprint_before_start(options: StreamOptions, saved: dict[str, Any]) -> dict[str, Any]:
    """``options``' query fingerprint as the saved query's reads, for a check before Spark
    starts: a ``cores`` the caller left unset is filled from Spark's parallelism when the
    stream starts (isotonic), so until then it is the saved query's; the source compares
    it with Spark's when it starts."""
    from adabatch.control import registry

    fingerprint = options.fingerprint()
    saved_cores = saved.get("query", {}).get("params", {}).get("cores")
    if saved_cores is not None:
        fingerprint["params"] = registry.with_cores(
            options.controller, fingerprint["params"], lambda: saved_cores
        )
    return fingerprint


@dataclass(frozen=True)
class StreamStatus:
    """What a watcher (``adabatch run``) reads from the state file."""

    start_time: float | None  # Unix s of stream time 0; None before the stream started
    paused_s: float  # wall seconds the stream clock stood still (warm-up, restarts)
    last_seen: float  # stream time of the last save
    queue_len: int  # cut batches waiting
    in_flight: bool  # a batch is being processed
    handed: int  # batches handed to Spark so far
    saved_at: float  # Unix time of the save (a watcher ignores saves older than its query)

    def stream_time(self, wall: float) -> float | None:
        """Stream time at Unix time ``wall`` (``None`` before the stream started)."""
        if self.start_time is None:
            return None
        return wall - self.start_time - self.paused_s


def read_status(path: str | Path) -> StreamStatus | None:
    """The status in the state file at ``path`` (``None`` if it does not exist yet)."""
    data = load_state(path)
    if data is None:
        return None
    cutter = data.get("cutter") or {}
    return StreamStatus(
        start_time=data.get("start_time"),
        paused_s=float(data.get("paused_s", 0.0)),
        last_seen=float(data.get("last_seen", 0.0)),
        queue_len=len(cutter.get("queue", [])),
        in_flight=cutter.get("in_flight") is not None,
        handed=int(cutter.get("handed_count", 0)),
        saved_at=float(data.get("saved_at", 0.0)),
    )
