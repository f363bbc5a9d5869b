"""The offsets the ``adabatch`` source gives Spark, and how they order.

Spark stores every micro-batch's end offset in its checkpoint (the offset log) and replays
a batch from it after a restart. So an offset carries all that ``partitions(start, end)``
needs to rebuild the batch without any other state: the record offset, the number of
blocks, and the source's start time (for ``event_time``); plus the stream time of the cut,
so a restarted stream's clock can resume where it stopped. Spark requires JSON values of
primitive types, so times are integer microseconds.

With a controller, an offset also carries ``state``: what the controller learned and the
cut schedule at the batch's hand-out, as one string
(:func:`adabatch.streaming.state.encode_carried`). Spark's offset log keeps it wherever the
checkpoint lives, so a query restarted on a fresh driver resumes with the learned
controller. It takes no part in the order or equality of offsets, and offsets written
without it still parse.

With a controller that has a latency target (``slo``), an offset also carries ``target``:
the controller's :class:`~adabatch.control.base.TargetStatus` at the batch's hand-out, as
a small plain dict (``{"s": 2.0, "met": true, "achievable_s": 1.31, "mode": "target"}``,
plus ``"reason"`` when not met), so a user sees it in ``query.lastProgress`` under
``sources[i].endOffset.target``. Like ``state`` it is outside order and equality and
optional; offsets of controllers without a target are unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adabatch.control.base import TargetStatus
from adabatch.errors import AdabatchError

_FIELDS = ("offset", "cut_us", "blocks", "start_time_us")
STATE_FIELD = "state"
TARGET_FIELD = "target"
_OPTIONAL = frozenset({STATE_FIELD, TARGET_FIELD})
# The keys of ``target``: seconds, verdict, achievable seconds, mode, reason.
_TARGET_KEYS = frozenset({"s", "met", "achievable_s", "mode", "reason"})
MAX_REASON_CHARS = 200  # a reason longer than this is clipped: offsets stay small


def to_us(seconds: float) -> int:
    """Seconds to integer microseconds (how times travel in offsets)."""
    return round(seconds * 1_000_000)


@dataclass(frozen=True, order=True)
class SourceOffset:
    """The end of a batch: records ``< offset`` are in it or earlier batches.

    ``cut_us`` is the stream time of the batch's cut, ``blocks`` its input partitions and
    ``start_time_us`` the Unix time of stream time 0 (0 before the stream started).
    Offsets order by ``(offset, cut_us)``: batches of zero records still move the cut.
    ``state`` is the carried controller state ("" for none) and ``target`` the controller's
    latency target status (``None`` for none), both outside order and equality.
    """

    offset: int
    cut_us: int = 0
    blocks: int = 0
    start_time_us: int = 0
    state: str = field(default="", compare=False)
    target: TargetStatus | None = field(default=None, compare=False)

    def key(self) -> tuple[int, int]:
        """The order of batch ends: records first, then the cut time."""
        return (self.offset, self.cut_us)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: int(getattr(self, name)) for name in _FIELDS}
        if self.state:
            out[STATE_FIELD] = self.state
        if self.target is not None:
            out[TARGET_FIELD] = target_to_dict(self.target)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SourceOffset:
        """Parse an offset from Spark's checkpoint; errors say the checkpoint is foreign."""
        if not isinstance(data, Mapping) or set(data) - _OPTIONAL != set(_FIELDS):
            msg = (
                f"offset {data!r} in the checkpoint was not written by the adabatch source "
                "(a checkpoint of a different query?)"
            )
            raise AdabatchError(msg)
        values = {}
        for name in _FIELDS:
            value = data[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                msg = f"offset field {name!r} = {value!r} in the checkpoint must be an integer >= 0"
                raise AdabatchError(msg)
            values[name] = value
        state = data.get(STATE_FIELD, "")
        if not isinstance(state, str):
            msg = f"offset field {STATE_FIELD!r} in the checkpoint must be a string"
            raise AdabatchError(msg)
        target = data.get(TARGET_FIELD)
        return cls(**values, state=state, target=None if target is None else parse_target(target))


def target_to_dict(status: TargetStatus) -> dict[str, Any]:
    """The ``target`` an offset carries: seconds to the microsecond, the verdict, the mode,
    and the reason when not met (``achievable_s`` only when the controller knows it)."""
    out: dict[str, Any] = {"s": round(status.target_s, 6), "met": bool(status.met)}
    if status.achievable_s is not None:
        out["achievable_s"] = round(status.achievable_s, 6)
    out["mode"] = status.mode
    if status.reason is not None:
        out["reason"] = status.reason[:MAX_REASON_CHARS]
    return out


def parse_target(data: Any) -> TargetStatus:
    """The ``target`` field of an offset (see :func:`target_to_dict`); one line if malformed."""
    msg = (
        f"offset field {TARGET_FIELD!r} = {str(data)[:MAX_REASON_CHARS]!r} in the checkpoint "
        "must hold s (seconds > 0), met (true or false), mode (text), and optionally "
        "achievable_s (seconds >= 0) and reason (text)"
    )
    if not isinstance(data, Mapping) or not {"s", "met", "mode"} <= set(data) <= _TARGET_KEYS:
        raise AdabatchError(msg)
    achievable, reason = data.get("achievable_s"), data.get("reason")
    well_typed = (
        _is_number(data["s"])
        and (achievable is None or _is_number(achievable))
        and isinstance(data["met"], bool)
        and isinstance(data["mode"], str)
        and (reason is None or isinstance(reason, str))
    )
    if not well_typed:
        raise AdabatchError(msg)
    try:
        return TargetStatus(
            float(data["s"]),
            data["met"],
            None if achievable is None else float(achievable),
            data["mode"],
            reason,
        )
    except (AdabatchError, OverflowError):
        raise AdabatchError(msg) from None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


INITIAL = SourceOffset(offset=0)
