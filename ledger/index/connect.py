"""The connections the runtime reads and writes the index on: DB-API ones, wrapped as
`ledger.index.dbapi.Conn` (issue 27's data layer). The one place SQLite connections are
opened, with the settings each use needs:

- read: a read-only URI (immutable where nobody can write the directory: db._ro_uri), one
  `BEGIN` transaction (a consistent snapshot), under the shared file lock so the file is
  never swapped underneath it;
- write: WAL, synchronous=NORMAL, `BEGIN IMMEDIATE`; ops.writing() and the small writers
  (ledger.index.rawwrite) also hold the writer lock (they queue behind index passes);
- build: a fresh file of 16 KiB pages, journal in memory, no fsync until it is swapped in.

All get the busy timeout, and `isolation_level=None`: transactions are begun here, never by
the sqlite3 module. A server's are psycopg's (ledger.index.pgconnect, the URL read as
SQLAlchemy reads it), in autocommit mode for the same reason: a transaction is a block
(`with conn.transaction()`), so a session's advisory locks (ledger.index.pglocks) are taken
between them. `transaction()` is a pass's per-batch transaction on any connection.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ledger.index import db as dbmod
from ledger.index.dbapi import Conn, wrap


def sqlite_connect(path: Path, mode: str = "write") -> sqlite3.Connection:
    """A sqlite3 connection to `path` for `mode` (read | write | build), outside any transaction."""
    timeout = dbmod.BUSY_TIMEOUT_MS / 1000
    if mode == "read":
        raw = sqlite3.connect(dbmod._ro_uri(path), uri=True, timeout=timeout, isolation_level=None,
                              check_same_thread=False)
    else:
        raw = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    try:
        raw.execute(f"PRAGMA busy_timeout = {dbmod.BUSY_TIMEOUT_MS}")
        if mode == "build":
            # (bulk inserts into the indexed tables ~25% cheaper than with 4 KiB pages; an
            # existing index keeps its page size until it is rebuilt)
            raw.execute(f"PRAGMA page_size = {dbmod.PAGE_SIZE}")
            raw.execute("PRAGMA journal_mode = MEMORY").fetchall()
            raw.execute("PRAGMA synchronous = OFF")
        elif mode == "write":
            raw.execute("PRAGMA journal_mode = WAL").fetchall()
            raw.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        raw.close()
        raise
    return raw


@contextmanager
def sqlite_transaction(raw: sqlite3.Connection, begin: str = "BEGIN IMMEDIATE") -> Iterator[sqlite3.Connection]:
    """`begin` ... COMMIT, rolled back when the block raises (unless SQLite already did, as
    it does after some errors)."""
    raw.execute(begin)
    try:
        yield raw
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise
    raw.execute("COMMIT")


def transaction(conn: Any) -> Any:
    """A write transaction on `conn` (an SQLAlchemy connection: its own `begin()`)."""
    if hasattr(conn, "begin"):
        return conn.begin()
    c = wrap(conn)
    if c.sqlite:
        return sqlite_transaction(c.raw)
    if hasattr(c.raw, "exec_driver_sql"):  # (a Conn over an SQLAlchemy connection)
        return c.raw.begin()
    return c.raw.transaction()


def in_transaction(conn: Any) -> bool:
    """Whether `conn` (a Conn, or an SQLAlchemy connection) is inside a transaction."""
    if hasattr(conn, "in_transaction") and callable(conn.in_transaction):
        return conn.in_transaction()
    raw = wrap(conn).raw
    if hasattr(raw, "exec_driver_sql"):
        return raw.in_transaction()
    if isinstance(raw, sqlite3.Connection):
        return raw.in_transaction
    return raw.info.transaction_status != 0  # (psycopg.pq.TransactionStatus.IDLE)


def server_connect(url: str, app_name: str | None = None) -> Any:
    """A psycopg connection to the server index at `url`, in autocommit mode (see above);
    `app_name` names it in pg_stat_activity (a lock's waiters are told who holds it). A
    refused connection is the IndexError_ naming the URL without its password."""
    import psycopg

    from ledger.index.pgconnect import connect

    extra: dict[str, Any] = {"autocommit": True}
    if app_name:
        import os
        import socket

        extra["application_name"] = f"{app_name} {socket.gethostname()} pid {os.getpid()}"[:63]
    try:
        return connect(url, **extra)
    except psycopg.Error as exc:
        raise dbmod.cannot_connect(url, exc) from None


@contextmanager
def sqlite_reading(path: Path) -> Iterator[Conn]:
    with dbmod.flock(dbmod.file_lock(path), exclusive=False):
        if not path.exists():
            raise dbmod.IndexError_(f"no index at {path}", hint="build it with `ledger index`")
        raw = sqlite_connect(path, "read")
        try:
            raw.execute("BEGIN")
            yield Conn(raw, "sqlite")
        finally:
            raw.close()


@contextmanager
def sqlite_writing(path: Path, usable: Any = None) -> Iterator[sqlite3.Connection]:
    """A write transaction under the writer lock and the shared file lock, committed when the
    block ends without an exception. `usable()`, when given, is called once the locks are
    held, before the file is opened (it raises to refuse)."""
    with dbmod.flock(dbmod.writer_lock(path), exclusive=True), \
            dbmod.flock(dbmod.file_lock(path), exclusive=False):
        if usable is not None:
            usable()
        raw = sqlite_connect(path, "write")
        try:
            with sqlite_transaction(raw):
                yield raw
        finally:
            raw.close()


@contextmanager
def reading(url: str) -> Iterator[Conn]:
    """A Conn inside one read transaction (one consistent snapshot of the index)."""
    if dbmod.is_sqlite(url):
        with sqlite_reading(dbmod.sqlite_path(url)) as c:
            yield c
        return
    raw = server_connect(url)
    try:
        with raw.transaction():
            raw.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield Conn(raw, "postgresql")
    finally:
        raw.close()


@contextmanager
def writing(url: str) -> Iterator[Conn]:
    """A Conn inside a write transaction on an existing index, for derived data (the
    report's tables). SQLite: under the writer lock, so it queues behind index passes
    instead of leaning on the busy timeout, and the shared file lock, so a swap never
    happens underneath it."""
    if dbmod.is_sqlite(url):
        with sqlite_writing(dbmod.sqlite_path(url)) as raw:
            yield Conn(raw, "sqlite")
        return
    raw = server_connect(url)
    try:
        with raw.transaction():
            yield Conn(raw, "postgresql")
    finally:
        raw.close()
