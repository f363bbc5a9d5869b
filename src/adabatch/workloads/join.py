"""Join: two streams from one source, joined per batch on key, output counted.

Fixed-point paper §2.2 and §5.1, Join: "joining two datasets can potentially generate
O(M × N) records", so the processing time grows superlinearly with the batch interval and
a stable interval has an upper bound too (Type-II intersection, Fig. 6b). The source's
``stream`` column splits each batch into a left and a right side; every left row is joined
with every right row of the same key in the batch (an inner equi-join Spark really
executes, not the algebraic shortcut Σ_k L_k·R_k), and the number of output rows is
committed to ``join_counts``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from adabatch.workloads.base import BatchCommitter, BatchWorkload, WorkloadConfig
from adabatch.workloads.sinks import claim_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

LEFT, RIGHT = "left", "right"
COUNTS_DDL = """CREATE TABLE IF NOT EXISTS {p}join_counts (
    run_id TEXT NOT NULL, batch_id BIGINT NOT NULL, joined_rows BIGINT NOT NULL,
    PRIMARY KEY (run_id, batch_id))"""


def joined_rows(batch_df: DataFrame) -> int:
    """Rows of the batch's left side inner-joined on ``key`` with its right side."""
    from pyspark.sql import functions as F

    left = batch_df.where(F.col("stream") == LEFT).select("key")
    right = batch_df.where(F.col("stream") == RIGHT).select("key")
    return int(left.join(right, "key", "inner").count())


class JoinCommitter(BatchCommitter):
    """Commits each batch's joined row count exactly once."""

    def process(self, batch_df: DataFrame, batch_id: int) -> None:
        rows = joined_rows(batch_df)
        run_id = self.cfg.run_id
        with self.db.transaction() as cur:
            if claim_batch(cur, run_id, self.cfg.name, batch_id):
                cur.execute(
                    "INSERT INTO {p}join_counts (run_id, batch_id, joined_rows) VALUES (?, ?, ?)",
                    (run_id, batch_id, rows),
                )


class JoinWorkload(BatchWorkload):
    """Per-batch inner join of the left and right streams on key (paper §5.1)."""

    name: ClassVar[str] = "join"
    summary: ClassVar[str] = "join the left and right streams per batch on key, count rows"
    columns: ClassVar[tuple[str, ...]] = ("key", "stream")
    ddl: ClassVar[tuple[str, ...]] = (COUNTS_DDL,)

    def foreach_batch(self, cfg: WorkloadConfig) -> JoinCommitter:
        return JoinCommitter(cfg, self.ddl)
