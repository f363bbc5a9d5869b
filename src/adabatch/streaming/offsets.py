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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adabatch.errors import AdabatchError

_FIELDS = ("offset", "cut_us", "blocks", "start_time_us")
STATE_FIELD = "state"


def to_us(seconds: float) -> int:
    """Seconds to integer microseconds (how times travel in offsets)."""
    return round(seconds * 1_000_000)


@dataclass(frozen=True, order=True)
class SourceOffset:
    """The end of a batch: records ``< offset`` are in it or earlier batches.

    ``cut_us`` is the stream time of the batch's cut, ``blocks`` its input partitions and
    ``start_time_us`` the Unix time of stream time 0 (0 before the stream started).
    Offsets order by ``(offset, cut_us)``: batches of zero records still move the cut.
    ``state`` is the carried controller state ("" for none), outside order and equality.
    """

    offset: int
    cut_us: int = 0
    blocks: int = 0
    start_time_us: int = 0
    state: str = field(default="", compare=False)

    def key(self) -> tuple[int, int]:
        """The order of batch ends: records first, then the cut time."""
        return (self.offset, self.cut_us)

    def to_dict(self) -> dict[str, int | str]:
        out: dict[str, int | str] = {name: int(getattr(self, name)) for name in _FIELDS}
        if self.state:
            out[STATE_FIELD] = self.state
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SourceOffset:
        """Parse an offset from Spark's checkpoint; errors say the checkpoint is foreign."""
        if not isinstance(data, Mapping) or set(data) - {STATE_FIELD} != set(_FIELDS):
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
        return cls(**values, state=state)


INITIAL = SourceOffset(offset=0)
