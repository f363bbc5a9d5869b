"""One contract test over every registered record source (river's check-suite idea).

Each source is built from its ``EXAMPLE_OPTIONS`` and a rate profile, as the ``adabatch``
data source builds it (``from_options``). The checks hold for any correct source: offsets
replay exactly, blocks and read chunks cover a batch once, options are validated by name.
"""

from __future__ import annotations

import math
import pickle
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adabatch.errors import AdabatchError
from adabatch.sources import SOURCES, RecordSource, names, source_class
from adabatch.streaming.options import parse_options
from adabatch.streaming.partitions import batch_partitions, block_bounds

PROFILE = "step:500:2000:3s"
START_TIME = 1.7e9


# Sources that are a pure function of their options; live ones (files, redis) read what
# others wrote and have their own tests of the same properties.
PURE = [n for n in names() if not source_class(n).LIVE]


@pytest.fixture(params=PURE)
def cls(request: pytest.FixtureRequest) -> type[RecordSource]:
    return source_class(request.param)


def build(cls: type[RecordSource], **overrides: str) -> RecordSource:
    options = {**cls.EXAMPLE_OPTIONS, **overrides}
    return cls.from_options(options, PROFILE, start_time=START_TIME)


def table(batches: list[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_batches(batches, schema)


def test_every_registered_name_is_its_class_name() -> None:
    assert names() == SOURCES.names()
    for name in names():
        assert source_class(name).name == name


def test_records_follow_the_schema(cls: type[RecordSource]) -> None:
    src = build(cls)
    batch = src.records(10, 260)
    assert batch.num_rows == 250
    assert batch.schema.equals(src.arrow_schema())
    ddl_names = [field.split()[0] for field in src.spark_schema().split(", ")]
    assert ddl_names == src.arrow_schema().names
    if "offset" in batch.schema.names:
        assert batch.column("offset").to_pylist() == list(range(10, 260))
    assert src.records(42, 42).num_rows == 0


def test_reading_a_range_twice_gives_identical_records(cls: type[RecordSource]) -> None:
    src = build(cls)
    first = src.records(100, 900)
    src.records(5_000, 6_000)  # reading elsewhere in between changes nothing
    assert src.records(100, 900).equals(first)
    # a restarted query builds the source again from the same options
    assert build(cls).records(100, 900).equals(first)


def test_a_seed_decides_the_records(cls: type[RecordSource]) -> None:
    if "seed" not in {p.name for p in cls.OPTIONS}:
        pytest.skip(f"{cls.name} has no seed option")
    a = build(cls, seed="11").records(0, 2_000)
    assert build(cls, seed="11").records(0, 2_000).equals(a)
    assert not build(cls, seed="12").records(0, 2_000).equals(a)


def test_arrivals_and_availability_agree(cls: type[RecordSource]) -> None:
    src = build(cls)
    assert src.available(0.0) == 0
    times = [src.arrival_time(n) for n in range(0, 8_000, 37)]
    assert times == sorted(times)
    for n in (0, 1, 499, 1_500, 1_501, 7_000):
        t = src.arrival_time(n)
        assert src.available(t) > n
        assert src.available(np.nextafter(t, -math.inf)) <= n
    counts = [src.available(t) for t in np.linspace(0, 6, 61)]
    assert counts == sorted(counts)


def test_mean_arrival_is_the_mean_of_the_arrival_times(cls: type[RecordSource]) -> None:
    src = build(cls)
    assert math.isnan(src.mean_arrival(5, 5))
    exact = np.mean([src.arrival_time(n) for n in range(200, 260)])
    assert src.mean_arrival(200, 260) == pytest.approx(exact)


@pytest.mark.parametrize("name", PURE)
@settings(max_examples=30, deadline=None)
@given(
    start=st.integers(0, 4_000),
    length=st.integers(0, 3_000),
    blocks=st.integers(1, 12),
    chunk=st.integers(1, 700),
)
def test_blocks_and_chunks_cover_a_batch_exactly_once(
    name: str, start: int, length: int, blocks: int, chunk: int
) -> None:
    src = build(source_class(name))
    end = start + length
    bounds = block_bounds(src, start, end, blocks)
    assert len(bounds) == blocks + 1
    assert bounds[0] == start and bounds[-1] == end
    assert all(lo <= hi for lo, hi in pairwise(bounds))
    schema = src.arrow_schema()
    whole = table([src.records(start, end)], schema)
    by_block = [src.records(lo, hi) for lo, hi in pairwise(bounds)]
    assert table(by_block, schema).equals(whole)
    # the reader hands each block to Arrow in chunks
    chunks = [src.records(lo, min(lo + chunk, end)) for lo in range(start, end, chunk)]
    assert table(chunks, schema).equals(whole)


def test_block_i_holds_the_records_of_the_i_th_slice_of_arrival_time(
    cls: type[RecordSource],
) -> None:
    src = build(cls)
    start, end, k = 1_000, 5_000, 4  # spans the step from 500/s to 2000/s at 3 s
    bounds = block_bounds(src, start, end, k)
    t_lo, t_hi = src.arrival_time(start), src.arrival_time(end - 1)
    edges = [t_lo + (t_hi - t_lo) * i / k for i in range(k)] + [math.inf]
    for i, (lo, hi) in enumerate(pairwise(bounds)):
        for n in range(lo, hi):
            assert edges[i] <= src.arrival_time(n) < edges[i + 1]


def test_executors_rebuild_the_same_source_from_pickled_options(
    cls: type[RecordSource],
) -> None:
    # The reader pickles only its options and a batch's partitions to the executors,
    # where read() builds the source again (streaming/reader.py).
    options = parse_options({"source": cls.name, "profile": PROFILE, **cls.EXAMPLE_OPTIONS})
    shipped = pickle.loads(pickle.dumps(options))
    assert shipped == options
    here = options.build_source(START_TIME)
    parts = batch_partitions(here, 300, 2_300, 3, START_TIME)
    for part in pickle.loads(pickle.dumps(parts)):
        there = shipped.build_source(part.start_time)
        assert there.records(part.start, part.end).equals(here.records(part.start, part.end))


def test_defaults_parse_and_build(cls: type[RecordSource]) -> None:
    values = cls.parse_options({})
    assert list(values) == [p.name for p in cls.OPTIONS]
    for p in cls.OPTIONS:
        assert values[p.name] == p.parse(p.default)
    assert set(cls.EXAMPLE_OPTIONS) <= set(values)
    cls.from_options(dict(cls.EXAMPLE_OPTIONS), "constant:10")


def test_unknown_options_are_refused_with_the_allowed_ones(cls: type[RecordSource]) -> None:
    with pytest.raises(AdabatchError, match="no option 'no_such_option'") as err:
        cls.from_options({**cls.EXAMPLE_OPTIONS, "no_such_option": "1"}, "constant:10")
    for p in cls.OPTIONS:
        assert p.name in str(err.value)


def bad_values(cls: type[RecordSource]) -> list[tuple[str, str]]:
    """(option, a value it must refuse) for every option whose type says what is bad."""
    out = []
    for p in cls.OPTIONS:
        if p.choices is not None:
            out.append((p.name, "no-such-choice"))
        elif p.kind is bool:
            out.append((p.name, "maybe"))
        elif p.kind in (int, float):
            out.append((p.name, "not-a-number"))
            if p.low is not None:
                out.append((p.name, repr(p.low if p.low_open else p.low - 1)))
            if p.high is not None:
                out.append((p.name, repr(p.high if p.high_open else p.high + 1)))
            if p.kind is int:
                out.append((p.name, "1.5"))
    return out


def test_bad_option_values_name_the_option_the_value_and_what_is_allowed(
    cls: type[RecordSource],
) -> None:
    cases = bad_values(cls)
    assert cases or not cls.OPTIONS
    for option, value in cases:
        param = next(p for p in cls.OPTIONS if p.name == option)
        with pytest.raises(AdabatchError) as err:
            cls.from_options({**cls.EXAMPLE_OPTIONS, option: value}, "constant:10")
        message = str(err.value)
        assert repr(option) in message and repr(value) in message
        assert param.allowed() in message
