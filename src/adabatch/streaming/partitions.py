"""A batch's blocks: its input partitions, each a contiguous slice of arrival time.

In the papers' model (Spark Streaming's block interval, DyBBS §2) a batch of interval ``x``
is made of ``k`` blocks, each holding the records that arrived during ``x / k`` of it. Here
the batch's time span runs from the arrival of its first record to that of its last, split
into ``k`` equal slices; because records are numbered in arrival order, each block is a
contiguous range of offsets.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import InputPartition

from adabatch.sources.base import RecordSource


@dataclass(frozen=True)
class BlockPartition(InputPartition):
    """Block ``index`` of a batch: records ``start .. end-1`` (picklable, no state);
    ``located`` is what a live source's executor needs to read them (its ``locate``)."""

    start: int
    end: int
    index: int
    start_time: float  # Unix s of stream time 0, for event_time
    located: Any = None


def block_bounds(source: RecordSource, start: int, end: int, blocks: int) -> list[int]:
    """``blocks + 1`` offsets ``start = b_0 <= b_1 <= ... <= b_k = end``; block ``i`` is
    ``b_i .. b_{i+1}-1``, the records that arrived in the ``i``-th of ``k`` equal slices of
    the batch's arrival span."""
    if blocks < 1:
        msg = f"blocks = {blocks!r} must be at least 1"
        raise ValueError(msg)
    if end - start <= 1:
        return [start] + [end] * blocks
    t_lo = source.arrival_time(start)
    t_hi = source.arrival_time(end - 1)
    bounds = [start]
    for i in range(1, blocks):
        t = t_lo + (t_hi - t_lo) * i / blocks
        # records arrived strictly before the slice boundary belong to earlier blocks
        b = source.available(t) if t < t_hi else end
        if source.arrival_time(b - 1) == t and b - 1 >= start:
            b -= 1
        bounds.append(min(max(b, bounds[-1]), end))
    bounds.append(end)
    return bounds


def batch_partitions(
    source: RecordSource, start: int, end: int, blocks: int, start_time: float
) -> list[BlockPartition]:
    """The ``blocks`` input partitions of the batch ``start .. end-1`` (some may be empty)."""
    bounds = block_bounds(source, start, end, blocks)
    return [
        BlockPartition(
            lo,
            hi,
            i,
            start_time,
            source.locate(lo, hi) if hi > lo else None,
        )
        for i, (lo, hi) in enumerate(itertools.pairwise(bounds))
    ]
