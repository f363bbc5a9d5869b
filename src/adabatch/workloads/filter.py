"""Filter: split text into words, match a filter list, count the matches per batch.

Fixed-point paper §5.1, Filter: "streaming text data is split into words, matched against
a list of filters and counted"; cheap per record, so its stable interval is small. The
per-batch count of each filter word (zero included) is committed to ``filter_counts``
together with the batch's claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from adabatch.workloads.base import BatchCommitter, BatchWorkload, WorkloadConfig
from adabatch.workloads.sinks import claim_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

COUNTS_DDL = """CREATE TABLE IF NOT EXISTS {p}filter_counts (
    run_id TEXT NOT NULL, batch_id BIGINT NOT NULL, word TEXT NOT NULL,
    matches BIGINT NOT NULL,
    PRIMARY KEY (run_id, batch_id, word))"""


@dataclass(frozen=True)
class FilterResult:
    """One batch's matches per filter word, and the batch's size and offset range."""

    matches: dict[str, int]
    records: int
    first_offset: int | None
    last_offset: int | None


def count_matches(batch_df: DataFrame, words: tuple[str, ...]) -> FilterResult:
    """Occurrences of each of ``words`` among the words of ``line`` (split on spaces).

    One pass, no shuffle: every line is split once; a word occurs in it
    ``size(words) - size(array_remove(words, word))`` times.
    """
    from pyspark.sql import functions as F

    split = F.split(F.col("line"), " ")
    counts = [
        F.sum(F.size(split) - F.size(F.array_remove(split, word))).alias(f"w{i}")
        for i, word in enumerate(words)
    ]
    row = (
        batch_df.agg(
            F.count(F.lit(1)).alias("records"),
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
            *counts,
        )
        .toArrow()
        .to_pylist()[0]
    )
    matches = {word: int(row[f"w{i}"] or 0) for i, word in enumerate(words)}
    return FilterResult(matches, int(row["records"]), row["first_offset"], row["last_offset"])


class FilterCommitter(BatchCommitter):
    """Commits each batch's per-word match counts exactly once."""

    def process(self, batch_df: DataFrame, batch_id: int) -> None:
        result = count_matches(batch_df, self.cfg.filter_words)
        run_id = self.cfg.run_id
        with self.db.transaction() as cur:
            claimed = claim_batch(
                cur,
                run_id,
                self.cfg.name,
                batch_id,
                records=result.records,
                first_offset=result.first_offset,
                last_offset=result.last_offset,
            )
            if claimed:
                cur.executemany(
                    "INSERT INTO {p}filter_counts (run_id, batch_id, word, matches) "
                    "VALUES (?, ?, ?, ?)",
                    [(run_id, batch_id, w, n) for w, n in result.matches.items()],
                )


class FilterWorkload(BatchWorkload):
    """Split lines into words, count the filter words per batch (paper §5.1)."""

    name: ClassVar[str] = "filter"
    summary: ClassVar[str] = "split lines into words, count filter-list matches per batch"
    columns: ClassVar[tuple[str, ...]] = ("offset", "line")
    ddl: ClassVar[tuple[str, ...]] = (COUNTS_DDL,)

    def foreach_batch(self, cfg: WorkloadConfig) -> FilterCommitter:
        return FilterCommitter(cfg, self.ddl)
