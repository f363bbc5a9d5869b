"""The stream's state file: controller state and cut schedule, kept next to the checkpoint.

Spark's checkpoint holds the offsets of every micro-batch; this JSON file holds what Spark
does not know: the stream clock, the controller's running state, the cut batches still in
the queue and the batch being processed. It is replaced atomically (write, then rename) at
every change, so a killed query leaves the last consistent version. A file written by a
query with other options (source, profile, controller, parameters, queue) is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adabatch.errors import AdabatchError
from adabatch.outputs import dumps_json, write_atomic

STATE_VERSION = 1


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
