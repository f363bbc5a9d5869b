"""Window: per-key totals over a sliding window, from reused per-batch partial aggregates.

Fixed-point paper §4 and Fig. 12, §5.1 Window: "extends the Reduce workload by applying the
reduction over a moving 20 second window"; the window moves at every batch end (whatever
the adaptive interval), and "partial aggregations over variable-sized batches [are] reused
for the window-based aggregations". Each batch is reduced by key once (its *partial*); the
window's totals are the sum of the partials of the batches inside it, never recomputed
from records.

The window is batch-granular, as in Fig. 12: a batch's time is its latest event time
``end``; the window at the newest end ``E`` holds every batch with ``end > E - window_s``.
Partials live in driver memory and in ``window_partials`` (written in the batch's
transaction, expired ones deleted), so a restarted query resumes with the same window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from adabatch.workloads.base import BatchCommitter, BatchWorkload, WorkloadConfig
from adabatch.workloads.sinks import claim_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PARTIALS_DDL = """CREATE TABLE IF NOT EXISTS {p}window_partials (
    run_id TEXT NOT NULL, batch_id BIGINT NOT NULL, end_us BIGINT NOT NULL,
    key BIGINT NOT NULL, records BIGINT NOT NULL, value_sum DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, batch_id, key))"""
TOTALS_DDL = """CREATE TABLE IF NOT EXISTS {p}window_totals (
    run_id TEXT NOT NULL, key BIGINT NOT NULL,
    records BIGINT NOT NULL, value_sum DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, key))"""
BATCHES_DDL = """CREATE TABLE IF NOT EXISTS {p}window_batches (
    run_id TEXT NOT NULL, batch_id BIGINT NOT NULL,
    window_start_us BIGINT, window_end_us BIGINT, batches BIGINT NOT NULL,
    records BIGINT NOT NULL, value_sum DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, batch_id))"""


@dataclass(frozen=True)
class Partial:
    """One batch reduced by key: its partial aggregate (Fig. 12)."""

    batch_id: int
    end_us: int  # the batch's latest event time, microseconds since the epoch
    keys: np.ndarray  # int64
    records: np.ndarray  # int64
    value_sums: np.ndarray  # float64


@dataclass(frozen=True)
class WindowTotals:
    """The window's per-key totals (keys ascending, only keys with records)."""

    start_us: int | None  # exclusive: batches with end > start_us
    end_us: int | None
    batches: int
    keys: np.ndarray
    records: np.ndarray
    value_sums: np.ndarray


@dataclass(frozen=True)
class SlidingWindow:
    """The partials inside the window; immutable so a failed commit leaves it unchanged."""

    window_us: int
    partials: tuple[Partial, ...] = ()

    def add(self, partial: Partial | None) -> tuple[SlidingWindow, tuple[Partial, ...]]:
        """The window after ``partial`` (``None``: an empty batch) and the expired partials."""
        candidates = self.partials if partial is None else (*self.partials, partial)
        if not candidates:
            return self, ()
        end = max(p.end_us for p in candidates)
        kept = tuple(p for p in candidates if p.end_us > end - self.window_us)
        expired = tuple(p for p in candidates if p.end_us <= end - self.window_us)
        return SlidingWindow(self.window_us, kept), expired

    def totals(self) -> WindowTotals:
        """Per-key sums over the partials in the window (the reuse of Fig. 12)."""
        if not self.partials:
            empty_i = np.zeros(0, dtype=np.int64)
            return WindowTotals(None, None, 0, empty_i, empty_i, np.zeros(0))
        keys = np.concatenate([p.keys for p in self.partials])
        uniq, slot = np.unique(keys, return_inverse=True)
        records = np.zeros(len(uniq), dtype=np.int64)
        np.add.at(records, slot, np.concatenate([p.records for p in self.partials]))
        sums = np.zeros(len(uniq))
        np.add.at(sums, slot, np.concatenate([p.value_sums for p in self.partials]))
        end = max(p.end_us for p in self.partials)
        return WindowTotals(end - self.window_us, end, len(self.partials), uniq, records, sums)


def partial_aggregate(batch_df: DataFrame, batch_id: int) -> tuple[Partial | None, int, int]:
    """The batch's partial (``None`` if empty) and its first and last offset (-1 if empty)."""
    from pyspark.sql import functions as F

    table = (
        batch_df.groupBy("key")
        .agg(
            F.count(F.lit(1)).alias("records"),
            F.sum("value").alias("value_sum"),
            F.max(F.unix_micros(F.col("event_time").cast("timestamp"))).alias("end_us"),
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
        )
        .toArrow()
    )
    if table.num_rows == 0:
        return None, -1, -1
    sums = np.nan_to_num(table.column("value_sum").to_numpy(zero_copy_only=False), nan=0.0)
    partial = Partial(
        batch_id=batch_id,
        end_us=int(max(table.column("end_us").to_pylist())),
        keys=table.column("key").to_numpy(zero_copy_only=False).astype(np.int64),
        records=table.column("records").to_numpy(zero_copy_only=False).astype(np.int64),
        value_sums=sums.astype(np.float64),
    )
    first = int(min(table.column("first_offset").to_pylist()))
    last = int(max(table.column("last_offset").to_pylist()))
    return partial, first, last


class WindowCommitter(BatchCommitter):
    """Keeps the window's partials, commits each batch's window totals exactly once."""

    def __init__(self, cfg: WorkloadConfig, ddl: tuple[str, ...]) -> None:
        super().__init__(cfg, ddl)
        self._window: SlidingWindow | None = None

    @property
    def window(self) -> SlidingWindow:
        """The current window, loaded from ``window_partials`` on first use (restart)."""
        if self._window is None:
            self._window = SlidingWindow(round(self.cfg.window_s * 1e6), self._load())
        return self._window

    def _load(self) -> tuple[Partial, ...]:
        rows = self.db.query(
            "SELECT batch_id, end_us, key, records, value_sum FROM {p}window_partials "
            "WHERE run_id = ? ORDER BY batch_id, key",
            (self.cfg.run_id,),
        )
        by_batch: dict[int, list[tuple]] = {}
        for row in rows:
            by_batch.setdefault(int(row[0]), []).append(row)
        return tuple(
            Partial(
                batch_id=batch_id,
                end_us=int(group[0][1]),
                keys=np.array([r[2] for r in group], dtype=np.int64),
                records=np.array([r[3] for r in group], dtype=np.int64),
                value_sums=np.array([r[4] for r in group], dtype=np.float64),
            )
            for batch_id, group in by_batch.items()
        )

    def process(self, batch_df: DataFrame, batch_id: int) -> None:
        partial, first, last = partial_aggregate(batch_df, batch_id)
        window, expired = self.window.add(partial)
        totals = window.totals()
        run_id = self.cfg.run_id
        records = 0 if partial is None else int(partial.records.sum())
        with self.db.transaction() as cur:
            if not claim_batch(
                cur,
                run_id,
                self.cfg.name,
                batch_id,
                records=records,
                first_offset=None if partial is None else first,
                last_offset=None if partial is None else last,
            ):
                return
            if partial is not None:
                cur.executemany(
                    "INSERT INTO {p}window_partials "
                    "(run_id, batch_id, end_us, key, records, value_sum) VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        (run_id, batch_id, partial.end_us, int(k), int(n), float(s))
                        for k, n, s in zip(
                            partial.keys, partial.records, partial.value_sums, strict=True
                        )
                    ],
                )
            if len(expired) > 0:
                cur.executemany(
                    "DELETE FROM {p}window_partials WHERE run_id = ? AND batch_id = ?",
                    [(run_id, p.batch_id) for p in expired],
                )
            if partial is not None:
                cur.execute("DELETE FROM {p}window_totals WHERE run_id = ?", (run_id,))
                cur.executemany(
                    "INSERT INTO {p}window_totals (run_id, key, records, value_sum) "
                    "VALUES (?, ?, ?, ?)",
                    [
                        (run_id, int(k), int(n), float(s))
                        for k, n, s in zip(
                            totals.keys, totals.records, totals.value_sums, strict=True
                        )
                    ],
                )
            cur.execute(
                "INSERT INTO {p}window_batches (run_id, batch_id, window_start_us, "
                "window_end_us, batches, records, value_sum) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    batch_id,
                    totals.start_us,
                    totals.end_us,
                    totals.batches,
                    int(totals.records.sum()),
                    float(totals.value_sums.sum()),
                ),
            )
        self._window = window  # only after the commit succeeded


class WindowWorkload(BatchWorkload):
    """Sliding-window totals per key from reused per-batch partials (paper §5.1, Fig. 12)."""

    name: ClassVar[str] = "window"
    summary: ClassVar[str] = "per-key totals over a sliding window from reused batch partials"
    columns: ClassVar[tuple[str, ...]] = ("offset", "event_time", "key", "value")
    ddl: ClassVar[tuple[str, ...]] = (PARTIALS_DDL, TOTALS_DDL, BATCHES_DDL)

    def foreach_batch(self, cfg: WorkloadConfig) -> WindowCommitter:
        return WindowCommitter(cfg, self.ddl)
