"""The replayable record source behind the ``adabatch`` streaming data source.

A source numbers its records 0, 1, 2, ... (the *offset*) and knows, for each, the stream
time at which it arrives. Everything it returns is a pure function of its configuration and
the offsets asked for, so a restarted query that asks for the same offsets reads exactly
the same records (ARCHITECTURE.md, "How a controller steers real Spark").

Stream time is seconds since the stream started (the rate profile's ``t``); the source's
``start_time`` (seconds since the Unix epoch) turns it into the ``event_time`` column.

A *live* source (``LIVE = True``: files landing in a directory, a Redis Stream) reads
records that others write, in wall-clock time. It numbers them as it discovers them and
keeps the numbering in a compact manifest (:meth:`RecordSource.state`) that the runtime
saves with its state file, next to the query's checkpoint; the stream clock never pauses
(records keep arriving while the query is down), and executors read a block from what
:meth:`RecordSource.locate` put into its partition, without the manifest.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from adabatch.params import Param, parse_values

if TYPE_CHECKING:
    import pyarrow as pa

# Records per partition handed to Arrow at once inside ``read`` (bounds executor memory).
CHUNK_RECORDS = 65_536


class RecordSource(ABC):
    """A replayable stream of records: offsets in, Arrow record batches out.

    Subclasses set ``name`` (the ``source`` option value), ``OPTIONS`` (their options,
    validated by :meth:`parse_options`) and ``EXAMPLE_OPTIONS`` (string options that build
    a small working instance: the contract suite in ``tests/sources`` runs every registered
    source with them), and implement the abstract methods below.
    """

    name: ClassVar[str]
    LIVE: ClassVar[bool] = False
    OPTIONS: ClassVar[tuple[Param, ...]] = ()
    EXAMPLE_OPTIONS: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def parse_options(cls, options: Mapping[str, Any]) -> dict[str, object]:
        """Validate the source's own options (strings) into typed values with defaults.

        Unknown names are errors listing the allowed ones.
        """
        owner = f"{cls.name} source"
        return dict(parse_values(cls.OPTIONS, options, owner=owner, noun="option"))

    @classmethod
    @abstractmethod
    def from_options(
        cls, options: Mapping[str, Any], profile: str, *, start_time: float = 0.0
    ) -> RecordSource:
        """A source from its string options, a rate profile spec and the Unix time (s) of
        stream time 0."""

    @abstractmethod
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema of :meth:`records` (what Spark's ``schema()`` converts to)."""

    @abstractmethod
    def spark_schema(self) -> str:
        """The schema as a Spark DDL string."""

    @abstractmethod
    def arrival_time(self, offset: int) -> float:
        """Stream time at which record ``offset`` arrives (``math.inf`` if it never does)."""

    @abstractmethod
    def available(self, now: float) -> int:
        """Number of records arrived by stream time ``now``: offsets ``0 .. available-1``."""

    @abstractmethod
    def records(self, start: int, end: int) -> pa.RecordBatch:
        """Records ``start .. end-1``; a pure function of the configuration and offsets."""

    def mean_arrival(self, start: int, end: int) -> float:
        """Mean arrival time of records ``start .. end-1`` (``nan`` if empty).

        Every record for small ranges; otherwise up to 129 records spread evenly and
        mirrored about the middle, so the mean is exact whenever arrival is linear in the
        offset (a constant rate).
        """
        if end <= start:
            return math.nan
        picks = np.linspace(start, end - 1, num=min(65, end - start)).round().astype(np.int64)
        picks = np.unique(np.concatenate([picks, start + end - 1 - picks]))
        return float(np.mean([self.arrival_time(int(n)) for n in picks]))

    # -- live sources ----------------------------------------------------------------------
    # A live source must keep, for every stream time ``t`` up to its last discovery,
    # ``available(t)`` and ``arrival_time`` fixed: a discovery only appends records whose
    # arrival lies after the previous discovery (the cutter asks about past cut times).

    def state(self) -> dict[str, Any] | None:
        """The manifest a restarted driver needs to map offsets to the same records
        (JSON-able, compact: it must not grow with polls that find nothing); ``None`` for a
        source that is a pure function of its options."""
        return None

    def restore(self, state: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook
        """Resume from :meth:`state` (called on a fresh driver before any other call)."""

    def commit(self, end: int) -> None:  # noqa: B027 - optional hook
        """Spark finished every record below ``end``: they are never read again, so the
        manifest may forget them."""

    def locate(self, start: int, end: int) -> Any:
        """What an executor needs to read records ``start .. end-1`` without the manifest
        (small and picklable; it travels in the input partition); ``None`` by default."""
        return None

    def read_block(self, start: int, end: int, located: Any) -> Iterator[pa.RecordBatch]:
        """Executor side: records ``start .. end-1`` in Arrow batches of at most
        ``CHUNK_RECORDS``, from :meth:`locate`'s answer."""
        for lo in range(start, end, CHUNK_RECORDS):
            yield self.records(lo, min(lo + CHUNK_RECORDS, end))

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections (the query stopped)."""
