"""The ``files`` source inside real Spark (local[2]): files landed while the query runs
reach a user's transformation exactly once, through foreachBatch, Spark's Parquet file sink
(across a restart) and the memory sink; bad rows reach the dead letter."""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import urlparse

import pyarrow.parquet as pq
import pytest

from adabatch.api import read_stream
from adabatch.streaming.state import load_state

pytestmark = pytest.mark.spark

DEADLINE_S = 40.0
SCHEMA = "k INT, v DOUBLE, f STRING, i BIGINT"


@pytest.fixture(scope="module")
def spark():
    from adabatch.spark import get_spark

    return get_spark("local[2]")


class Landing:
    """A landing directory that writes files as writers should and remembers the rows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir()
        self.rows: list[dict] = []
        self.count = 0

    def land(self, n: int, fmt: str = "json", bad: str | None = None) -> None:
        """Land ``n`` rows (``k = i % 5``, integer ``v``) as a new file, plus a ``bad`` line."""
        name = f"part-{self.count:03d}.{fmt}"
        self.count += 1
        rows = [{"k": i % 5, "v": float(i % 13), "f": name, "i": i} for i in range(n)]
        self.rows += rows
        if fmt == "json":
            text = "".join(json.dumps(r) + "\n" for r in rows) + (bad or "")
        else:
            text = "k,v,f,i\n" + "".join(f"{r['k']},{r['v']},{r['f']},{r['i']}\n" for r in rows)
        tmp = self.path / f".{name}.tmp"
        tmp.write_text(text)
        os.rename(tmp, self.path / name)

    def keys(self) -> list[tuple[str, int]]:
        return sorted((r["f"], r["i"]) for r in self.rows)

    def sums(self) -> dict[int, float]:
        out: dict[int, float] = defaultdict(float)
        for r in self.rows:
            out[r["k"]] += r["v"]
        return dict(out)


def wait_for(query, done, what: str) -> None:
    t0 = time.time()
    while not done():
        if query.exception() is not None:
            raise AssertionError(str(query.exception())[:2000])
        if time.time() - t0 > DEADLINE_S:
            query.stop()
            raise AssertionError(f"the query did not get there in time: {what}")
        time.sleep(0.1)


def stream(spark, landing: Landing, tmp_path: Path, blocks: int = 1, **kw):
    """The landing directory as a stream cut every 0.5 s; batches that fall due while Spark
    is busy are merged (``coalesce``), so a loaded machine does not queue empty ones."""
    kw.setdefault("schema", SCHEMA)
    return read_stream(
        spark,
        source="files",
        path=str(landing.path),
        controller="static",
        params={"interval": 0.5, "blocks": blocks},
        queue="coalesce",
        state_path=tmp_path / "ck" / "adabatch-state.json",
        metrics_path=tmp_path / "metrics.jsonl",
        **kw,
    )


def test_foreach_batch_sees_every_landed_row_once_and_bad_rows_dead_letter(spark, tmp_path):
    from pyspark.sql import functions as F

    landing = Landing(tmp_path / "in")
    landing.land(40)
    landing.land(3, bad='{"k": "not a number"}\n')
    df = stream(spark, landing, tmp_path, blocks=2)
    df = df.withColumn("w", F.col("v") * 2).filter(F.col("k") >= 0)  # the user's own
    seen: list[tuple] = []
    lock = threading.Lock()

    def collect(batch, batch_id: int) -> None:
        got = [(r["f"], r["i"], r["w"] == 2 * r["v"]) for r in batch.collect()]
        with lock:
            seen.extend(got)

    query = (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    wait_for(query, lambda: len(seen) >= 43, "the first two files")
    for n in (25, 1, 60):  # land while the query runs
        landing.land(n)
        time.sleep(0.2)
    wait_for(query, lambda: len(seen) >= len(landing.rows), "the files landed later")
    query.stop()
    assert sorted((f, i) for f, i, _ in seen) == landing.keys()  # each row exactly once
    assert all(ok for _, _, ok in seen)
    dead = os.listdir(landing.path / "_dead_letter")
    assert dead == ["part-001.json.rows-0-4.jsonl"]
    record = json.loads((landing.path / "_dead_letter" / dead[0]).read_text())
    assert (record["line"], record["offset"]) == (4, 43)
    state = load_state(tmp_path / "ck" / "adabatch-state.json")
    assert state["source"]["next"] == len(landing.rows) + 1


def test_parquet_sink_holds_exactly_the_landed_rows_across_a_restart(spark, tmp_path):
    from pyspark.sql import functions as F

    landing = Landing(tmp_path / "in")
    out = tmp_path / "out"

    def start():
        df = stream(spark, landing, tmp_path).select("k", (F.col("v") + 0.0).alias("v"))
        return (
            df.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(tmp_path / "ck"))
            .start()
        )

    def output():
        return spark.read.schema("k INT, v DOUBLE").parquet(str(out))

    def written() -> int:  # rows in the files the sink's log committed (no Spark job)
        meta = out / "_spark_metadata"
        logs = [p for p in meta.iterdir() if not p.name.startswith(".")] if meta.is_dir() else []
        lines = [line for log in logs for line in log.read_text().splitlines()[1:]]
        paths = {urlparse(json.loads(line)["path"]).path for line in lines if line.strip()}
        return sum(pq.ParquetFile(p).metadata.num_rows for p in paths)

    landing.land(30)
    query = start()
    wait_for(query, lambda: written() >= 30, "the first file in the sink")
    landing.land(20)
    wait_for(query, lambda: written() >= 50, "a file landed while running")
    query.stop()
    landing.land(15)  # lands while the query is down
    query = start()
    landing.land(7)
    wait_for(query, lambda: written() >= len(landing.rows), "files landed around the restart")
    query.stop()
    sums = output().groupBy("k").agg(F.sum("v").alias("s")).collect()
    assert {r["k"]: r["s"] for r in sums} == landing.sums()
    assert written() == len(landing.rows) == output().count()


def test_memory_sink_with_an_inferred_csv_schema(spark, tmp_path):
    landing = Landing(tmp_path / "in")
    landing.land(12, fmt="csv")
    df = stream(spark, landing, tmp_path, format="csv", schema=None)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("k", "int"),
        ("v", "double"),
        ("f", "string"),
        ("i", "int"),
    ]
    query = df.writeStream.format("memory").queryName("files_memory").start()
    try:
        count = lambda: spark.sql("select count(*) from files_memory").first()[0]  # noqa: E731
        wait_for(query, lambda: count() >= 12, "the first file")
        landing.land(9, fmt="csv")
        wait_for(query, lambda: count() >= 21, "the second file")
        rows = spark.sql("select f, i, k from files_memory").collect()
    finally:
        query.stop()
    assert sorted((r["f"], r["i"]) for r in rows) == landing.keys()
    assert Counter(r["k"] for r in rows) == Counter(r["k"] for r in landing.rows)
