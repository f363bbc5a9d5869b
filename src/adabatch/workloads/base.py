"""The workload contract: a validated config and a query that commits each batch once.

A workload turns the streaming DataFrame of a source (the generator's schema: ``offset
BIGINT, event_time TIMESTAMP, key INT, value DOUBLE, line STRING, stream STRING``) into a
``DataStreamWriter`` with its sink attached; the caller (``adabatch run``) adds the
checkpoint location, trigger and query name and starts it.

Every workload here runs its per-batch query inside ``foreachBatch`` and commits the result
to the results database (:mod:`adabatch.workloads.sinks`) in one transaction that also
claims the batch id, so a batch replayed after a restart is not counted twice.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from adabatch.errors import AdabatchError
from adabatch.workloads.sinks import Database, check_table_prefix, parse_db_url

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import DataStreamWriter

WORKLOAD_NAMES = ("filter", "reduce", "join", "window")  # the simulator's names too
SOURCE_COLUMNS = ("offset", "event_time", "key", "value", "line", "stream")
DEFAULT_KEYS = 1000
DEFAULT_WINDOW_S = 20.0  # fixed-point paper §5.1, Window: "a moving 20 second window"
DEFAULT_FILTER_WORDS = ("spark", "stream", "batch")
DEFAULT_DB_FILE = "results.sqlite"


@dataclass(frozen=True, kw_only=True)
class WorkloadConfig:
    """What a workload needs besides its input DataFrame; validated when created.

    Parameters
    ----------
    name
        One of :data:`WORKLOAD_NAMES`.
    out_dir
        The run's output directory; the default SQLite file lives here.
    run_id
        Identifies the run in the results tables; keep it when restarting from the same
        checkpoint, or the restarted query counts as a new run.
    keys
        Number of distinct keys the source produces (``key`` in ``0..keys-1``).
    db_url
        Results database (``sqlite:///PATH`` or ``postgresql://...``); ``None`` means the
        SQLite file ``out_dir/results.sqlite``.
    window_s
        Window length of the ``window`` workload, seconds of event time.
    per_key_commit
        ``reduce`` commits every key in its own transaction (the paper's per-key cost).
    filter_words
        Words the ``filter`` workload matches.
    table_prefix
        Prefix of every results table name.
    """

    name: str
    out_dir: Path
    run_id: str
    keys: int = DEFAULT_KEYS
    db_url: str | None = None
    window_s: float = DEFAULT_WINDOW_S
    per_key_commit: bool = False
    filter_words: tuple[str, ...] = DEFAULT_FILTER_WORDS
    table_prefix: str = "adabatch_"

    def __post_init__(self) -> None:
        if self.name not in WORKLOAD_NAMES:
            raise AdabatchError(_unknown(self.name))
        if not isinstance(self.out_dir, (str, Path)) or str(self.out_dir) == "":
            msg = f"workload out_dir {self.out_dir!r} must be a directory path"
            raise AdabatchError(msg)
        object.__setattr__(self, "out_dir", Path(self.out_dir))
        if not isinstance(self.run_id, str) or not self.run_id.strip() or len(self.run_id) > 200:
            msg = f"workload run_id {self.run_id!r} must be a non-empty string of <= 200 chars"
            raise AdabatchError(msg)
        if isinstance(self.keys, bool) or not isinstance(self.keys, int) or self.keys < 1:
            msg = f"workload option keys={self.keys!r} is not allowed: integer >= 1"
            raise AdabatchError(msg)
        if (
            isinstance(self.window_s, bool)
            or not isinstance(self.window_s, (int, float))
            or not math.isfinite(self.window_s)
            or self.window_s <= 0
        ):
            msg = f"workload option window_s={self.window_s!r} is not allowed: seconds > 0"
            raise AdabatchError(msg)
        object.__setattr__(self, "window_s", float(self.window_s))
        if not isinstance(self.per_key_commit, bool):
            msg = f"workload option per_key_commit={self.per_key_commit!r}: true or false"
            raise AdabatchError(msg)
        words = self.filter_words
        if isinstance(words, str) or not isinstance(words, Sequence) or len(words) == 0:
            msg = f"workload option filter_words={words!r}: a non-empty list of words"
            raise AdabatchError(msg)
        for word in words:
            if not isinstance(word, str) or word == "" or any(c.isspace() for c in word):
                msg = f"workload filter word {word!r} is not allowed: one word, no spaces"
                raise AdabatchError(msg)
        object.__setattr__(self, "filter_words", tuple(words))
        if self.db_url is not None:
            parse_db_url(self.db_url)
        check_table_prefix(self.table_prefix)

    @property
    def database_url(self) -> str:
        """The results database URL, with the default SQLite file filled in."""
        if self.db_url is not None:
            return self.db_url
        return f"sqlite:///{(self.out_dir / DEFAULT_DB_FILE).resolve()}"

    def database(self) -> Database:
        """A new (not yet connected) handle on the results database."""
        if self.db_url is None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        return Database(self.database_url, self.table_prefix)


class Workload(Protocol):
    """What ``adabatch run`` calls."""

    name: str

    def check(self, cfg: WorkloadConfig) -> None:
        """Fail early (AdabatchError) if the workload cannot run, e.g. database unreachable."""

    def start(self, df: DataFrame, cfg: WorkloadConfig) -> DataStreamWriter:
        """The writer of ``df`` with the sink attached (caller sets checkpoint, trigger)."""


class BatchCommitter(ABC):
    """The ``foreachBatch`` function of a workload: compute, then commit once per batch id.

    Holds the database connection (opened lazily on the driver, never pickled) and any
    state the workload reuses between batches.
    """

    def __init__(self, cfg: WorkloadConfig, ddl: Sequence[str]) -> None:
        self.cfg = cfg
        self._ddl = tuple(ddl)
        self._db: Database | None = None

    @property
    def db(self) -> Database:
        """The results database, connected and with this workload's tables created."""
        if self._db is None:
            db = self.cfg.database()
            db.connect()
            db.ensure_tables(self._ddl)
            self._db = db
        return self._db

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        # Cheap pre-check so a replayed batch costs no Spark job; the claim inside the
        # commit's transaction is what guarantees exactly once.
        if self.db.is_committed(self.cfg.run_id, self.cfg.name, batch_id):
            return
        self.process(batch_df, int(batch_id))

    @abstractmethod
    def process(self, batch_df: DataFrame, batch_id: int) -> None:
        """Run the batch's query and commit its result (claiming ``batch_id``)."""

    def close(self) -> None:
        """Close the database connection."""
        if self._db is not None:
            self._db.close()
            self._db = None


class BatchWorkload(ABC):
    """A workload whose sink is a :class:`BatchCommitter` attached by ``foreachBatch``."""

    name: ClassVar[str]
    summary: ClassVar[str]
    columns: ClassVar[tuple[str, ...]]  # source columns the query reads
    ddl: ClassVar[tuple[str, ...]]  # its results tables

    def check(self, cfg: WorkloadConfig) -> None:
        """Open the results database and create the tables; AdabatchError if impossible."""
        self._check_name(cfg)
        with cfg.database() as db:
            db.ensure_tables(self.ddl)

    def start(self, df: DataFrame, cfg: WorkloadConfig) -> DataStreamWriter:
        """``df.writeStream`` with this workload's batch function attached."""
        self._check_name(cfg)
        missing = [c for c in self.columns if c not in df.columns]
        if missing:
            msg = (
                f"workload {self.name!r} needs columns {', '.join(missing)} that the source "
                f"does not have (it has {', '.join(df.columns)})"
            )
            raise AdabatchError(msg)
        return df.writeStream.foreachBatch(self.foreach_batch(cfg))

    @abstractmethod
    def foreach_batch(self, cfg: WorkloadConfig) -> BatchCommitter:
        """A fresh batch function for one query (call it with ``(batch_df, batch_id)``)."""

    def _check_name(self, cfg: WorkloadConfig) -> None:
        if cfg.name != self.name:
            msg = f"workload {self.name!r} was given the config of workload {cfg.name!r}"
            raise AdabatchError(msg)


def _unknown(name: Any) -> str:
    return f"unknown workload {name!r}: allowed {', '.join(WORKLOAD_NAMES)}"
