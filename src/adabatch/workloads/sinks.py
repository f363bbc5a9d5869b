"""The results database of the workloads: SQLite by default, PostgreSQL by URL.

Every workload commits its per-batch results through :class:`Database` inside one
transaction per batch that also claims the batch id in the ``batches`` table (primary key
``run_id, query, batch_id``). A batch Spark replays after a restart finds its id claimed and
writes nothing, so results are exactly once even when the driver is killed between
the database commit and Spark's commit log.

URLs: ``sqlite:///abs/path.db`` or ``sqlite:rel/path.db`` (a file), ``postgresql://user@host:port/db``
(``postgres://`` too; anything libpq accepts after the scheme). One SQL text serves both:
statements use ``?`` placeholders (rewritten to ``%s`` for psycopg) and ``{p}`` for the table
prefix.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from adabatch.errors import AdabatchError, shown
from adabatch.urls import redact_url

DB_SCHEMES = ("sqlite", "postgresql", "postgres")
_PREFIX_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,40}$")
CONNECT_TIMEOUT_S = 5  # a database that does not answer within this is "unreachable"

# One idempotency ledger for every workload: a row per committed batch.
BATCHES_DDL = """CREATE TABLE IF NOT EXISTS {p}batches (
    run_id TEXT NOT NULL, query TEXT NOT NULL, batch_id BIGINT NOT NULL,
    records BIGINT, first_offset BIGINT, last_offset BIGINT,
    PRIMARY KEY (run_id, query, batch_id))"""


@dataclass(frozen=True)
class DbTarget:
    """A parsed database URL: ``kind`` and where to connect (a file path or a libpq URL)."""

    kind: Literal["sqlite", "postgresql"]
    location: str

    def redacted(self) -> str:
        """The location with any password replaced by ``***`` (for messages)."""
        if self.kind == "sqlite":
            return f"sqlite:///{self.location}" if self.location.startswith("/") else self.location
        parts = urlsplit(self.location)
        if parts.password is None:
            return self.location
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return urlunsplit(parts._replace(netloc=netloc))


def parse_db_url(url: str) -> DbTarget:
    """Parse a results database URL; an :class:`AdabatchError` names the allowed forms.

    Examples
    --------
    >>> parse_db_url("sqlite:///tmp/r.db")
    DbTarget(kind='sqlite', location='/tmp/r.db')
    >>> parse_db_url("postgresql://postgres@127.0.0.1:5432/test").kind
    'postgresql'
    """
    if not isinstance(url, str) or not url.strip():
        msg = (
            f"database URL {shown(redact_url(url))} is empty: allowed sqlite:///PATH or "
            "postgresql://..."
        )
        raise AdabatchError(msg)
    scheme, sep, rest = url.strip().partition(":")
    scheme = scheme.lower()
    if not sep or scheme not in DB_SCHEMES:
        msg = (
            f"database URL {shown(redact_url(url))} has an unsupported scheme: allowed "
            "sqlite:///ABS_PATH, sqlite:REL_PATH or postgresql://USER@HOST:PORT/DB"
        )
        raise AdabatchError(msg)
    if scheme == "sqlite":
        path = "/" + rest.lstrip("/") if rest.startswith("///") else rest.removeprefix("//")
        if path in ("", "/") or path.endswith("/"):
            msg = (
                f"database URL {shown(redact_url(url))} names no SQLite file: "
                "use sqlite:///ABS_PATH"
            )
            raise AdabatchError(msg)
        return DbTarget("sqlite", path)
    return DbTarget("postgresql", url.strip())


def check_table_prefix(prefix: str) -> str:
    """``prefix`` if it is a safe SQL identifier start, else an :class:`AdabatchError`."""
    if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix):
        msg = (
            f"table_prefix {prefix!r} is not allowed: letters, digits and '_', "
            "starting with a letter or '_', at most 41 characters"
        )
        raise AdabatchError(msg)
    return prefix


class Cursor:
    """A cursor inside one transaction; SQL uses ``?`` and ``{p}`` (see module doc)."""

    def __init__(self, raw: Any, db: Database) -> None:
        self._raw = raw
        self._db = db

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the number of rows it changed."""
        self._raw.execute(self._db.sql(sql), tuple(params))
        return self._raw.rowcount

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each row of ``rows``."""
        if len(rows) > 0:
            self._raw.executemany(self._db.sql(sql), [tuple(r) for r in rows])

    def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Run a query and return all its rows."""
        self._raw.execute(self._db.sql(sql), tuple(params))
        return [tuple(r) for r in self._raw.fetchall()]


class Database:
    """One connection to the results database, opened on first use on the driver.

    Parameters
    ----------
    url
        A URL accepted by :func:`parse_db_url`.
    prefix
        Prepended to every table name (``{p}`` in SQL), so runs and tests can keep apart.
    """

    def __init__(self, url: str, prefix: str = "adabatch_") -> None:
        self.target = parse_db_url(url)
        self.prefix = check_table_prefix(prefix)
        self._conn: Any = None

    def sql(self, text: str) -> str:
        """``text`` with the table prefix filled in and placeholders in the driver's style."""
        text = text.replace("{p}", self.prefix)
        return text.replace("?", "%s") if self.target.kind == "postgresql" else text

    def connect(self) -> None:
        """Open the connection (no-op if open); unreachable -> one-line AdabatchError."""
        if self._conn is not None:
            return
        where = self.target.redacted()
        if self.target.kind == "sqlite":
            parent = Path(self.target.location).parent
            if not parent.is_dir():
                msg = f"cannot open database {where}: directory {str(parent)!r} does not exist"
                raise AdabatchError(msg)
            try:
                conn = sqlite3.connect(
                    self.target.location, isolation_level=None, timeout=30, check_same_thread=False
                )
                # WAL: readers (progress, tests) never block the committing driver.
                conn.execute("PRAGMA journal_mode=WAL")
            except sqlite3.Error as exc:
                msg = f"cannot open database {where}: {_one_line(exc)}"
                raise AdabatchError(msg) from None
        else:
            import psycopg

            try:
                conn = psycopg.connect(
                    self.target.location, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
                )
            except psycopg.Error as exc:
                msg = f"cannot reach database {where}: {_one_line(exc)}"
                raise AdabatchError(msg) from None
        self._conn = conn

    def close(self) -> None:
        """Close the connection if open."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[Cursor]:
        """One transaction: commits when the block ends, rolls back if it raises."""
        self.connect()
        if self.target.kind == "sqlite":
            raw = self._conn.cursor()
            # IMMEDIATE takes the write lock up front: no upgrade deadlock with readers.
            raw.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield Cursor(raw, self)
            except BaseException:
                raw.execute("ROLLBACK")
                raise
            raw.execute("COMMIT")
            raw.close()
        else:
            with self._conn.transaction(), self._conn.cursor() as raw:
                yield Cursor(raw, self)

    def ensure_tables(self, ddl: Sequence[str]) -> None:
        """Create the ledger and the tables in ``ddl`` (``CREATE TABLE IF NOT EXISTS``)."""
        with self.transaction() as cur:
            for statement in (BATCHES_DDL, *ddl):
                cur.execute(statement)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Rows of one read-only statement (its own transaction)."""
        with self.transaction(write=False) as cur:
            return cur.fetchall(sql, params)

    def is_committed(self, run_id: str, query: str, batch_id: int) -> bool:
        """Whether ``batch_id`` of this run and query is already in the ledger."""
        rows = self.query(
            "SELECT 1 FROM {p}batches WHERE run_id = ? AND query = ? AND batch_id = ?",
            (run_id, query, int(batch_id)),
        )
        return len(rows) > 0

    def __enter__(self) -> Database:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def claim_batch(
    cur: Cursor,
    run_id: str,
    query: str,
    batch_id: int,
    *,
    records: int | None = None,
    first_offset: int | None = None,
    last_offset: int | None = None,
) -> bool:
    """Insert the batch into the ledger inside the caller's transaction.

    Returns ``False`` (and changes nothing) if the batch is already there: the caller must
    then write nothing, which makes a replayed batch a no-op.
    """
    changed = cur.execute(
        "INSERT INTO {p}batches (run_id, query, batch_id, records, first_offset, last_offset) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (run_id, query, int(batch_id), records, first_offset, last_offset),
    )
    return changed == 1


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
