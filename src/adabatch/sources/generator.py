"""``generator``: synthetic records that are a pure function of (seed, offset).

Columns (the workloads in :mod:`adabatch.workloads` rely on them)::

    offset BIGINT, event_time TIMESTAMP, key INT, value DOUBLE, line STRING, stream STRING

- ``event_time``: the record's arrival time, ``start_time`` + the rate profile's arrival
  time of the record; record ``n`` arrives when the profile's cumulative count reaches
  ``n + 1``.
- ``key``: ``0 .. keys-1``, uniform or Zipf (``P(key = i) ∝ (i+1)^-zipf_s``, key 0 the
  most frequent); with ``keys_profile`` the key count varies with the arrival time.
- ``value``: an integer-valued double in ``[0, 1000)``, so per-key sums are exact in any
  summation order (exactly-once checks compare them for equality).
- ``line``: ``words_per_line`` words drawn uniformly from :data:`VOCABULARY`.
- ``stream``: ``'left'`` or ``'right'`` with probability 1/2 each (the join's two streams).

Randomness is counter-based: every field of record ``n`` comes from a SplitMix64 hash of
``(seed, field, n)``, so any slice of offsets is generated independently and identically,
in any order, on any executor, before and after a restart.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from adabatch.errors import AdabatchError
from adabatch.params import Param
from adabatch.profiles import RateProfile, parse_profile
from adabatch.sources.base import RecordSource

# Common English words plus the default filter words of the ``filter`` workload.
VOCABULARY: tuple[str, ...] = (
    "spark", "stream", "batch", "the", "of", "and", "to", "in", "is", "it", "that", "for",
    "on", "was", "with", "as", "by", "at", "from", "this", "be", "or", "an", "are", "not",
    "but", "which", "have", "one", "all", "were", "their", "when", "there", "can", "more",
    "time", "data", "record", "event", "window", "join", "key", "value", "filter", "reduce",
    "query", "node", "task", "block", "interval", "queue", "delay", "latency", "rate",
    "load", "peak", "burst", "signal", "sensor", "click", "user", "page", "video", "trade",
    "price", "order", "city", "river", "mountain", "forest", "ocean", "north", "south",
    "east", "west", "red", "green", "blue", "black", "white", "small", "large", "fast",
    "slow", "early", "late", "new", "old", "first", "last", "high", "low", "open", "close",
    "start", "stop", "read", "write", "commit", "merge",
)  # fmt: skip

VALUE_RANGE = 1000  # ``value`` is an integer in [0, VALUE_RANGE) stored as a double

_MASK = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)

# Field numbers of the hash streams; words use _F_WORD + position in the line.
_F_KEY, _F_VALUE, _F_STREAM, _F_WORD = 1, 2, 3, 16

ARROW_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64()),
        pa.field("event_time", pa.timestamp("us", tz="UTC")),
        pa.field("key", pa.int32()),
        pa.field("value", pa.float64()),
        pa.field("line", pa.string()),
        pa.field("stream", pa.string()),
    ]
)
SPARK_SCHEMA = (
    "offset BIGINT, event_time TIMESTAMP, key INT, value DOUBLE, line STRING, stream STRING"
)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (Steele, Lea, Flood 2014) on a uint64 array, wrapping."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def _stream_key(seed: int, field: int) -> np.uint64:
    """A well-mixed 64-bit key per (seed, field) stream."""
    mixed = _splitmix64(np.array([(seed * 0x100 + field) & _MASK], dtype=np.uint64))
    return np.uint64(mixed[0])


def hash_bits(seed: int, field: int, offsets: np.ndarray) -> np.ndarray:
    """64 pseudo-random bits per offset for the stream ``(seed, field)``."""
    with np.errstate(over="ignore"):
        x = offsets.astype(np.uint64) * _GOLDEN + _stream_key(seed, field)
        return _splitmix64(x)


def hash_uniform(seed: int, field: int, offsets: np.ndarray) -> np.ndarray:
    """Uniform doubles in ``[0, 1)`` per offset (the top 53 bits of :func:`hash_bits`)."""
    return (hash_bits(seed, field, offsets) >> np.uint64(11)).astype(np.float64) * 2.0**-53


@functools.lru_cache(maxsize=8)
def _zipf_cdf(keys: int, s: float) -> np.ndarray:
    weights = np.arange(1, keys + 1, dtype=np.float64) ** -s
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


class GeneratorSource(RecordSource):
    """Synthetic records arriving in real time along a rate profile.

    Parameters
    ----------
    profile
        The rate profile (records/s over stream time).
    seed, keys, distribution, zipf_s, words_per_line
        See ``OPTIONS``.
    start_time
        Unix time (s) of stream time 0; ``event_time`` = ``start_time`` + arrival time.

    Examples
    --------
    >>> from adabatch.profiles import parse_profile
    >>> src = GeneratorSource(parse_profile("constant:100"), seed=7)
    >>> src.available(1.0), src.arrival_time(99)
    (100, 1.0)
    >>> src.records(10, 13).column("offset").to_pylist()
    [10, 11, 12]
    """

    name = "generator"
    OPTIONS = (
        Param("seed", 0, "seed of every record field (and of markov profiles)", kind=int, low=0),
        Param("keys", 1000, "number of distinct keys 0..keys-1", kind=int, low=1),
        Param(
            "distribution",
            "uniform",
            "key distribution",
            kind=str,
            choices=("uniform", "zipf"),
        ),
        Param("zipf_s", 1.0, "Zipf exponent s (distribution=zipf)", low=0.0, low_open=True),
        Param("words_per_line", 8, "words in each line", kind=int, low=1, high=1000),
        Param(
            "keys_profile",
            None,
            "time-varying key count: a rate-profile spec whose value at a record's arrival "
            "is the number of keys then (overrides keys), e.g. steps:500@0,40000@40s",
            kind=str,
            optional=True,
            check=parse_profile,
        ),
    )
    EXAMPLE_OPTIONS: ClassVar[Mapping[str, str]] = {
        "seed": "7",
        "keys": "50",
        "distribution": "zipf",
        "words_per_line": "3",
    }

    def __init__(
        self,
        profile: RateProfile,
        *,
        seed: int = 0,
        keys: int = 1000,
        distribution: str = "uniform",
        zipf_s: float = 1.0,
        words_per_line: int = 8,
        keys_profile: str | None = None,
        start_time: float = 0.0,
    ) -> None:
        checked = self.parse_options(
            {
                "seed": seed,
                "keys": keys,
                "distribution": distribution,
                "zipf_s": zipf_s,
                "words_per_line": words_per_line,
                "keys_profile": keys_profile,
            }
        )
        self.profile = profile
        self.seed: int = checked["seed"]  # type: ignore[assignment]
        self.keys: int = checked["keys"]  # type: ignore[assignment]
        self.distribution: str = checked["distribution"]  # type: ignore[assignment]
        self.zipf_s: float = checked["zipf_s"]  # type: ignore[assignment]
        self.words_per_line: int = checked["words_per_line"]  # type: ignore[assignment]
        spec = checked["keys_profile"]
        self.keys_profile = None if spec is None else parse_profile(str(spec))
        if not math.isfinite(start_time):
            msg = f"generator start_time {start_time!r} must be finite"
            raise AdabatchError(msg)
        self.start_time = float(start_time)

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], profile: str, *, start_time: float = 0.0
    ) -> GeneratorSource:
        """A source from string options (Spark's) and a profile spec."""
        values = cls.parse_options(options)
        rate = parse_profile(profile, seed=int(values["seed"]))  # type: ignore[call-overload]
        return cls(rate, start_time=start_time, **values)  # type: ignore[arg-type]

    def arrow_schema(self) -> pa.Schema:
        return ARROW_SCHEMA

    def spark_schema(self) -> str:
        return SPARK_SCHEMA

    def arrival_time(self, offset: int) -> float:
        return self.profile.arrival_time(offset + 1)

    def available(self, now: float) -> int:
        if now <= 0:
            return 0
        m = max(math.floor(self.profile.cumulative(now) + 1e-9), 0)
        # settle float rounding against arrival_time so that both agree exactly
        while m > 0 and self.arrival_time(m - 1) > now:
            m -= 1
        while self.arrival_time(m) <= now:
            m += 1
        return m

    def arrival_times(self, start: int, end: int) -> np.ndarray:
        """Arrival times (stream seconds) of records ``start .. end-1``."""
        at = self.profile.arrival_time
        return np.fromiter((at(n + 1) for n in range(start, end)), float, count=end - start)

    def key_counts(self, arrival: np.ndarray) -> np.ndarray:
        """Keys in effect at each arrival time: ``keys``, or ``keys_profile`` rounded."""
        if self.keys_profile is None:
            return np.full(len(arrival), self.keys, dtype=np.int64)
        rate = self.keys_profile.rate
        return np.fromiter((max(1, round(rate(t))) for t in arrival), np.int64, len(arrival))

    def keys_of(self, offsets: np.ndarray, arrival: np.ndarray | None = None) -> np.ndarray:
        """The ``key`` column for ``offsets`` (``arrival``: their arrival times, needed
        only with ``keys_profile``)."""
        u = hash_uniform(self.seed, _F_KEY, offsets)
        if self.keys_profile is None:
            counts = np.full(len(offsets), self.keys, dtype=np.int64)
        else:
            if arrival is None:
                arrival = np.array([self.arrival_time(int(n)) for n in offsets])
            counts = self.key_counts(arrival)
        if self.distribution == "uniform":
            idx = np.floor(u * counts).astype(np.int64)
        else:
            idx = np.empty(len(offsets), dtype=np.int64)
            for k in np.unique(counts):
                sel = counts == k
                idx[sel] = np.searchsorted(_zipf_cdf(int(k), self.zipf_s), u[sel], side="right")
        return np.minimum(idx, counts - 1).astype(np.int32)

    def records(self, start: int, end: int) -> pa.RecordBatch:
        if start < 0 or end < start:
            msg = f"generator records({start}, {end}): need 0 <= start <= end"
            raise AdabatchError(msg)
        offsets = np.arange(start, end, dtype=np.int64)
        arrival = self.arrival_times(start, end)
        arrival_us = np.round(arrival * 1e6).astype(np.int64)
        event_us = np.int64(round(self.start_time * 1e6)) + arrival_us
        value = np.floor(hash_uniform(self.seed, _F_VALUE, offsets) * VALUE_RANGE)
        left = hash_uniform(self.seed, _F_STREAM, offsets) < 0.5
        vocab = np.array(VOCABULARY, dtype=object)
        words = [
            pa.array(
                vocab[
                    (hash_uniform(self.seed, _F_WORD + j, offsets) * len(VOCABULARY)).astype(
                        np.int64
                    )
                ],
                type=pa.string(),
            )
            for j in range(self.words_per_line)
        ]
        line = pc.binary_join_element_wise(*words, " ") if len(words) > 1 else words[0]
        stream = pa.array(np.where(left, "left", "right"), type=pa.string())
        return pa.RecordBatch.from_arrays(
            [
                pa.array(offsets, type=pa.int64()),
                pa.array(event_us, type=pa.timestamp("us", tz="UTC")),
                pa.array(self.keys_of(offsets, arrival), type=pa.int32()),
                pa.array(value, type=pa.float64()),
                line,
                stream,
            ],
            schema=ARROW_SCHEMA,
        )
