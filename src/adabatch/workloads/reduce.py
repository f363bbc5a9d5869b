"""Reduce: aggregate by key per batch and commit the totals to a database.

Fixed-point paper §5.1, Reduce: "data is reduced based on a key and the reduced data is
committed to a database. Committing the data for each key takes about 1 ms", which makes
the processing time grow with the number of keys. Here the per-batch aggregate (records and
sum of ``value`` per key) is upserted into ``reduce_totals`` in one transaction that claims
the batch id (exactly once). With ``per_key_commit`` every key is its own transaction, the
paper's per-key cost, still exactly once through a per-key claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from adabatch.workloads.base import BatchCommitter, BatchWorkload, WorkloadConfig
from adabatch.workloads.sinks import Cursor, claim_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TOTALS_DDL = """CREATE TABLE IF NOT EXISTS {p}reduce_totals (
    run_id TEXT NOT NULL, key BIGINT NOT NULL,
    records BIGINT NOT NULL, value_sum DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, key))"""
KEY_CLAIMS_DDL = """CREATE TABLE IF NOT EXISTS {p}reduce_key_claims (
    run_id TEXT NOT NULL, batch_id BIGINT NOT NULL, key BIGINT NOT NULL,
    PRIMARY KEY (run_id, batch_id, key))"""
UPSERT = (
    "INSERT INTO {p}reduce_totals (run_id, key, records, value_sum) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (run_id, key) DO UPDATE SET "
    "records = {p}reduce_totals.records + excluded.records, "
    "value_sum = {p}reduce_totals.value_sum + excluded.value_sum"
)


@dataclass(frozen=True)
class KeyAggregate:
    """One batch reduced by key (columns as equal-length lists, in no particular order)."""

    keys: list[int]
    records: list[int]
    value_sums: list[float]
    first_offset: int | None
    last_offset: int | None

    @property
    def total_records(self) -> int:
        return sum(self.records)


def aggregate_by_key(batch_df: DataFrame) -> KeyAggregate:
    """Records and sum of ``value`` per key, and the batch's offset range, in one Spark job."""
    from pyspark.sql import functions as F

    table = (
        batch_df.groupBy("key")
        .agg(
            F.count(F.lit(1)).alias("records"),
            F.sum("value").alias("value_sum"),
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
        )
        .toArrow()
    )
    firsts = table.column("first_offset").to_pylist()
    lasts = table.column("last_offset").to_pylist()
    return KeyAggregate(
        keys=table.column("key").to_pylist(),
        records=table.column("records").to_pylist(),
        value_sums=[0.0 if v is None else v for v in table.column("value_sum").to_pylist()],
        first_offset=min(firsts) if firsts else None,
        last_offset=max(lasts) if lasts else None,
    )


class ReduceCommitter(BatchCommitter):
    """Upserts each batch's per-key aggregate into ``reduce_totals`` exactly once."""

    def process(self, batch_df: DataFrame, batch_id: int) -> None:
        agg = aggregate_by_key(batch_df)
        if self.cfg.per_key_commit:
            self._commit_per_key(agg, batch_id)
        else:
            with self.db.transaction() as cur:
                if self._claim(cur, agg, batch_id):
                    cur.executemany(UPSERT, self._rows(agg, range(len(agg.keys))))

    def _commit_per_key(self, agg: KeyAggregate, batch_id: int) -> None:
        run_id = self.cfg.run_id
        for i in range(len(agg.keys)):
            with self.db.transaction() as cur:
                claimed = cur.execute(
                    "INSERT INTO {p}reduce_key_claims (run_id, batch_id, key) VALUES (?, ?, ?) "
                    "ON CONFLICT DO NOTHING",
                    (run_id, batch_id, agg.keys[i]),
                )
                if claimed == 1:
                    cur.executemany(UPSERT, self._rows(agg, [i]))
        with self.db.transaction() as cur:
            if self._claim(cur, agg, batch_id):
                cur.execute(
                    "DELETE FROM {p}reduce_key_claims WHERE run_id = ? AND batch_id = ?",
                    (run_id, batch_id),
                )

    def _claim(self, cur: Cursor, agg: KeyAggregate, batch_id: int) -> bool:
        return claim_batch(
            cur,
            self.cfg.run_id,
            self.cfg.name,
            batch_id,
            records=agg.total_records,
            first_offset=agg.first_offset,
            last_offset=agg.last_offset,
        )

    def _rows(self, agg: KeyAggregate, indices: range | list[int]) -> list[tuple]:
        run_id = self.cfg.run_id
        return [(run_id, agg.keys[i], agg.records[i], agg.value_sums[i]) for i in indices]


class ReduceWorkload(BatchWorkload):
    """Aggregate by key per batch, commit per-key totals to a database (paper §5.1)."""

    name: ClassVar[str] = "reduce"
    summary: ClassVar[str] = "count and sum by key per batch, upserted into a database"
    columns: ClassVar[tuple[str, ...]] = ("offset", "key", "value")
    ddl: ClassVar[tuple[str, ...]] = (TOTALS_DDL, KEY_CLAIMS_DDL)

    def foreach_batch(self, cfg: WorkloadConfig) -> ReduceCommitter:
        return ReduceCommitter(cfg, self.ddl)
