"""The generator: records are a pure function of (seed, offset); arrivals follow the profile."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adabatch.errors import AdabatchError
from adabatch.profiles import parse_profile
from adabatch.sources import source_class
from adabatch.sources.generator import (
    ARROW_SCHEMA,
    VALUE_RANGE,
    VOCABULARY,
    GeneratorSource,
)


def gen(profile="constant:1000", **kw):
    return GeneratorSource(parse_profile(profile), **kw)


@settings(max_examples=25, deadline=None)
@given(
    a=st.integers(0, 5_000),
    n=st.integers(0, 300),
    split=st.integers(0, 300),
    seed=st.integers(0, 2**40),
)
def test_any_slice_equals_the_same_rows_of_a_larger_one(a, n, split, seed):
    src = gen(seed=seed, start_time=1.7e9)
    whole = src.records(a, a + n)
    cut = a + min(split, n)
    parts = pa.Table.from_batches([src.records(a, cut), src.records(cut, a + n)], ARROW_SCHEMA)
    assert parts.equals(pa.Table.from_batches([whole]))
    # a second source with the same configuration (a restarted query) agrees
    again = gen(seed=seed, start_time=1.7e9).records(a, a + n)
    assert again.equals(whole)


def test_seed_changes_everything_but_offsets_and_times():
    a = gen(seed=1).records(0, 500)
    b = gen(seed=2).records(0, 500)
    assert a.column("offset").equals(b.column("offset"))
    assert a.column("event_time").equals(b.column("event_time"))
    for col in ("key", "value", "line", "stream"):
        assert not a.column(col).equals(b.column(col))


def test_columns_follow_the_schema_and_ranges():
    src = gen(keys=50, words_per_line=5, start_time=1_000.0)
    batch = src.records(0, 20_000)
    assert batch.schema.equals(ARROW_SCHEMA)
    df = batch.to_pandas()
    assert df["offset"].tolist() == list(range(20_000))
    assert df["key"].between(0, 49).all()
    assert set(np.unique(df["key"])) == set(range(50))
    assert df["value"].between(0, VALUE_RANGE - 1).all()
    assert (df["value"] == np.floor(df["value"])).all()
    words = df["line"].str.split(" ")
    assert (words.str.len() == 5).all()
    assert set(w for line in words for w in line) <= set(VOCABULARY)
    assert set(df["stream"]) == {"left", "right"}
    assert abs((df["stream"] == "left").mean() - 0.5) < 0.02
    # event_time is start_time + arrival: record n arrives at (n+1)/rate
    micros = batch.column("event_time").cast(pa.int64()).to_numpy()
    assert micros[:3].tolist() == [1_000_001_000, 1_000_002_000, 1_000_003_000]


def test_spark_converts_the_schema_to_exactly_this_arrow_schema():
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import (
        DoubleType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    spark_type = StructType(
        [
            StructField("offset", LongType()),
            StructField("event_time", TimestampType()),
            StructField("key", IntegerType()),
            StructField("value", DoubleType()),
            StructField("line", StringType()),
            StructField("stream", StringType()),
        ]
    )
    assert to_arrow_schema(spark_type, timezone="UTC").equals(ARROW_SCHEMA)
    names = [f.split()[0] for f in gen().spark_schema().split(", ")]
    assert names == spark_type.fieldNames()


def test_zipf_keys_are_skewed_like_the_law():
    src = gen(keys=100, distribution="zipf", zipf_s=1.0)
    counts = np.bincount(src.keys_of(np.arange(200_000)), minlength=100)
    # P(k) ∝ 1/(k+1): key 0 twice as frequent as key 1, ten times key 9
    assert counts[0] / counts[1] == pytest.approx(2.0, rel=0.05)
    assert counts[0] / counts[9] == pytest.approx(10.0, rel=0.1)
    uniform = np.bincount(gen(keys=100).keys_of(np.arange(200_000)), minlength=100)
    assert uniform.max() / uniform.min() < 1.3


def test_available_and_arrival_time_agree():
    src = gen("step:100:1000:2s")
    assert src.available(0.0) == 0
    assert src.available(1.0) == 100
    assert src.available(3.0) == 1200
    for n in (0, 1, 99, 100, 150, 1199, 5000):
        t = src.arrival_time(n)
        assert src.available(t) == n + 1
        assert src.available(np.nextafter(t, 0)) == n


def test_mean_arrival_is_exact_for_a_constant_rate():
    src = gen("constant:100")
    assert src.mean_arrival(0, 100) == pytest.approx(0.505)
    assert src.mean_arrival(1000, 31_000) == pytest.approx((10.01 + 310.0) / 2)


def test_options_are_validated_with_their_names():
    cls = source_class("generator")
    with pytest.raises(AdabatchError, match="'distribution' = 'normal'"):
        cls.from_options({"distribution": "normal"}, "constant:10")
    with pytest.raises(AdabatchError, match="'zipf_s'"):
        cls.from_options({"zipf_s": "0"}, "constant:10")
    with pytest.raises(AdabatchError, match="no option 'key'"):
        cls.from_options({"key": "3"}, "constant:10")
    with pytest.raises(AdabatchError, match="unknown source"):
        source_class("kafka")
    src = cls.from_options({"seed": "3", "keys": "7"}, "markov:10,20:1s")
    assert (src.seed, src.keys) == (3, 7)


def test_keys_profile_changes_the_key_count_over_time():
    src = gen("constant:1000", keys_profile="steps:5@0,500@2s", seed=4)
    df = src.records(0, 4000).to_pandas()
    early = df[df["offset"] < 1999]["key"]
    late = df[df["offset"] >= 2000]["key"]
    assert set(early) == set(range(5))
    assert late.max() > 400 and late.nunique() > 450
    assert src.records(2500, 2600).equals(src.records(0, 4000).slice(2500, 100))
    cls = source_class("generator")
    with pytest.raises(AdabatchError, match="'keys_profile'"):
        cls.from_options({"keys_profile": "steps:5@1"}, "constant:10")
    assert cls.from_options({"keys_profile": "constant:7"}, "constant:10").keys_profile is not None
