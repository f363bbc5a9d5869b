"""Test input in the generator's schema, as pure functions of the offset.

The same formulas exist twice: in numpy (the plain computation tests compare against) and as
Spark expressions over the built-in ``rate`` source (a replayable stream whose ``value`` is a
contiguous offset), so streaming tests can regenerate exactly what a batch contained.
"""

from __future__ import annotations

import uuid

import numpy as np
import pandas as pd

VOCAB = ("spark", "stream", "batch", "delay", "queue", "block", "rate", "join")
WORDS_PER_LINE = 3
EVENT_STEP_US = 10_000  # 100 records per second of event time
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def records(start: int, end: int, keys: int) -> pd.DataFrame:
    """Records with offsets ``start .. end - 1`` (pandas, the generator's columns)."""
    o = np.arange(start, end, dtype=np.int64)
    words = np.array(VOCAB)
    lines = [
        " ".join(parts)
        for parts in zip(
            *(words[(o * (2 * i + 3) + i) % len(VOCAB)] for i in range(WORDS_PER_LINE)),
            strict=True,
        )
    ]
    return pd.DataFrame(
        {
            "offset": o,
            "event_time": pd.to_datetime(o * EVENT_STEP_US, unit="us", utc=True),
            "key": ((o * 7919 + 13) % keys).astype(np.int32),
            "value": ((o * 37) % 1000) / 4.0,  # quarters: float sums are exact
            "line": lines,
            "stream": np.where((o // 7) % 2 == 0, "left", "right"),
        }
    )


def spark_frame(spark, start: int, end: int, keys: int):
    """The same records as a static Spark DataFrame."""
    return spark.createDataFrame(records(start, end, keys))


def rate_stream(spark, rows_per_second: int, keys: int):
    """Spark's ``rate`` source turned into the generator's schema (same formulas)."""
    from pyspark.sql import functions as F

    o = F.col("value")
    vocab = F.array(*[F.lit(w) for w in VOCAB])

    def word(i: int):
        return F.element_at(vocab, (F.pmod(o * (2 * i + 3) + i, F.lit(len(VOCAB))) + 1).cast("int"))

    return (
        spark.readStream.format("rate")
        .option("rowsPerSecond", str(rows_per_second))
        .option("numPartitions", "2")
        .load()
        .select(
            o.alias("offset"),
            F.timestamp_micros(o * EVENT_STEP_US).alias("event_time"),
            F.pmod(o * 7919 + 13, F.lit(keys)).cast("int").alias("key"),
            (F.pmod(o * 37, F.lit(1000)) / 4.0).alias("value"),
            F.concat_ws(" ", *[word(i) for i in range(WORDS_PER_LINE)]).alias("line"),
            F.when(F.floor(o / 7) % 2 == 0, F.lit("left"))
            .otherwise(F.lit("right"))
            .alias("stream"),
        )
    )


GEN_SEED = 11
GEN_PROFILE = "constant:400"


def generator_stream(spark, out_dir, keys: int):
    """The adabatch data source on the generator (static 0.5 s batches, 2 blocks); its
    controller state lives in ``out_dir`` next to the query's checkpoint."""
    from pathlib import Path

    from adabatch.api import read_stream

    return read_stream(
        spark,
        controller="static",
        params={"interval": 0.5, "blocks": 2},
        profile=GEN_PROFILE,
        state_path=Path(out_dir) / "source-state.json",
        metrics_path=Path(out_dir) / "metrics.jsonl",
        keys=keys,
        seed=GEN_SEED,
    )


def generator_records(start: int, end: int, keys: int) -> pd.DataFrame:
    """The generator's records ``start .. end - 1`` (a pure function of seed and offset)."""
    from adabatch.sources.generator import GeneratorSource

    source = GeneratorSource.from_options({"keys": keys, "seed": GEN_SEED}, GEN_PROFILE)
    return source.records(start, end).to_pandas()


def unique_prefix() -> str:
    """A table prefix no other test uses."""
    return f"t{uuid.uuid4().hex[:12]}_"


def drop_tables(url: str, prefix: str) -> None:
    """Drop every table whose name starts with ``prefix`` (PostgreSQL)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE tablename LIKE %s", (prefix + "%",)
            ).fetchall()
        ]
        for name in names:
            conn.execute(f'DROP TABLE IF EXISTS "{name}"')


def plain_reduce(df: pd.DataFrame) -> dict[int, tuple[int, float]]:
    """key -> (records, sum of value): the plain computation reduce must match."""
    g = df.groupby("key")["value"].agg(["count", "sum"])
    return {int(k): (int(r["count"]), float(r["sum"])) for k, r in g.iterrows()}


def plain_filter(df: pd.DataFrame, words: tuple[str, ...]) -> dict[str, int]:
    """word -> occurrences among the split lines."""
    exploded = df["line"].str.split(" ").explode()
    return {w: int((exploded == w).sum()) for w in words}


def plain_join(df: pd.DataFrame) -> int:
    """Rows of left ⋈ right on key (pandas merge)."""
    left = df[df["stream"] == "left"][["key"]]
    right = df[df["stream"] == "right"][["key"]]
    return len(left.merge(right, on="key", how="inner"))
