"""Read-only SQL over the index (`ledger sql`). Read-only for real, not by convention:

SQLite: the file is opened with `mode=ro`, `PRAGMA query_only=1` is set, and an authorizer
denies every writing action *before* it runs, including the ones `query_only` and `mode=ro`
let through because they write other files (ATTACH of a new database file, VACUUM INTO,
which attaches its target) and PRAGMAs that change settings. One statement per query
(sqlite3 refuses more).

PostgreSQL: the session defaults to read-only transactions, the query runs inside
`BEGIN; SET TRANSACTION READ ONLY` after a first snapshot (so it cannot switch itself back
to read-write), and it is sent as a prepared statement, which the server refuses to hold
more than one command (so `COMMIT; DROP ...` cannot escape the transaction). The
transaction is always rolled back.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Any, Iterator

from ledger.errors import LedgerError
from ledger.index import db as dbmod

HINT_VIEWS = "the documented views (runs_v, usage_streams_v, subjects_v, attempts_v, tool_uses_v) are described in docs/sql.md"


class ReadOnlyViolation(LedgerError):
    """A query tried to change something; nothing was changed."""


class SQLError(LedgerError):
    """The database refused the query (its own message)."""


_DENY = {
    sqlite3.SQLITE_INSERT: "INSERT", sqlite3.SQLITE_UPDATE: "UPDATE", sqlite3.SQLITE_DELETE: "DELETE",
    sqlite3.SQLITE_CREATE_INDEX: "CREATE INDEX", sqlite3.SQLITE_CREATE_TABLE: "CREATE TABLE",
    sqlite3.SQLITE_CREATE_TEMP_INDEX: "CREATE INDEX", sqlite3.SQLITE_CREATE_TEMP_TABLE: "CREATE TABLE",
    sqlite3.SQLITE_CREATE_TEMP_TRIGGER: "CREATE TRIGGER", sqlite3.SQLITE_CREATE_TEMP_VIEW: "CREATE VIEW",
    sqlite3.SQLITE_CREATE_TRIGGER: "CREATE TRIGGER", sqlite3.SQLITE_CREATE_VIEW: "CREATE VIEW",
    sqlite3.SQLITE_DROP_INDEX: "DROP INDEX", sqlite3.SQLITE_DROP_TABLE: "DROP TABLE",
    sqlite3.SQLITE_DROP_TEMP_INDEX: "DROP INDEX", sqlite3.SQLITE_DROP_TEMP_TABLE: "DROP TABLE",
    sqlite3.SQLITE_DROP_TEMP_TRIGGER: "DROP TRIGGER", sqlite3.SQLITE_DROP_TEMP_VIEW: "DROP VIEW",
    sqlite3.SQLITE_DROP_TRIGGER: "DROP TRIGGER", sqlite3.SQLITE_DROP_VIEW: "DROP VIEW",
    sqlite3.SQLITE_ALTER_TABLE: "ALTER TABLE", sqlite3.SQLITE_REINDEX: "REINDEX", sqlite3.SQLITE_ANALYZE: "ANALYZE",
    sqlite3.SQLITE_ATTACH: "ATTACH (or VACUUM)", sqlite3.SQLITE_DETACH: "DETACH",
    sqlite3.SQLITE_CREATE_VTABLE: "CREATE VIRTUAL TABLE", sqlite3.SQLITE_DROP_VTABLE: "DROP VIRTUAL TABLE",
}
# PRAGMAs that only read. Those taking a table/index name as their argument are allowed
# with it; the others only without a value (a value would set something).
_PRAGMA_WITH_ARG = frozenset({"table_info", "table_xinfo", "index_list", "index_info", "index_xinfo",
                              "foreign_key_list", "table_list", "integrity_check", "quick_check"})
_PRAGMA_READ = frozenset({"application_id", "user_version", "schema_version", "page_count", "page_size",
                          "freelist_count", "encoding", "journal_mode", "compile_options", "collation_list",
                          "database_list", "function_list", "module_list", "pragma_list", "data_version",
                          "foreign_keys", "query_only", "busy_timeout", "auto_vacuum", "synchronous"})


_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"})
_ROW_WRITES = frozenset({sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE})


class _Authorizer:
    """Deny writing actions; remember what was denied (for the message)."""

    def __init__(self) -> None:
        self.denied: list[str] = []
        self.schema_writes: list[str] = []

    @property
    def refused(self) -> str | None:
        return (self.denied or self.schema_writes or [None])[0]

    def __call__(self, action: int, arg1: Any, arg2: Any, _db: Any, _trigger: Any) -> int:
        what = _DENY.get(action)
        if action in _ROW_WRITES and str(arg1) in _SCHEMA_TABLES:
            # CREATE/DROP first announce their schema-table row change: let the authorizer
            # reach the specific action (denied below) so the message names it. SQLite itself
            # refuses direct writes to the schema table, and the connection is read-only.
            self.schema_writes.append(what or "writing")
            return sqlite3.SQLITE_OK
        if what is None and action == sqlite3.SQLITE_PRAGMA:
            name = str(arg1 or "").lower()
            if name in _PRAGMA_WITH_ARG or (name in _PRAGMA_READ and arg2 is None):
                return sqlite3.SQLITE_OK
            what = f"PRAGMA {name}" + ("" if arg2 is None else f" = {arg2}")
        if what is None:
            return sqlite3.SQLITE_OK
        self.denied.append(what)
        return sqlite3.SQLITE_DENY


def _refused(what: str) -> ReadOnlyViolation:
    return ReadOnlyViolation(f"ledger sql is read-only: {what} is not allowed; the database is unchanged",
                             hint="query the index with SELECT; change run records with ledger's own commands")


@contextmanager
def query(url: str, sql: str) -> Iterator[tuple[list[str], Iterator[tuple]]]:
    """Run one read-only statement; yields (column names, row iterator)."""
    if not sql.strip():
        raise SQLError("the query is empty", hint="pass a SELECT, or `-` to read it from stdin")
    if dbmod.is_sqlite(url):
        with _sqlite(url, sql) as result:
            yield result
    else:
        with _server(url, sql) as result:
            yield result


@contextmanager
def _sqlite(url: str, sql: str) -> Iterator[tuple[list[str], Iterator[tuple]]]:
    path = dbmod.sqlite_path(url)
    with dbmod.flock(dbmod.file_lock(path), exclusive=False):
        if not path.exists():
            raise SQLError(f"no index at {path}", hint="build it with `ledger index`")
        con = sqlite3.connect(dbmod._ro_uri(path), uri=True, isolation_level=None,
                              timeout=dbmod.BUSY_TIMEOUT_MS / 1000)
        try:
            con.execute("PRAGMA query_only = 1")
            auth = _Authorizer()
            con.set_authorizer(auth)
            try:
                cur = con.execute(sql)
            except sqlite3.Error as exc:
                if auth.refused:
                    raise _refused(auth.refused) from None
                if "readonly" in str(exc) or "read-only" in str(exc):
                    raise _refused("writing") from None
                raise SQLError(f"SQL error: {exc}", hint=HINT_VIEWS) from None
            columns = [d[0] for d in cur.description or ()]

            def rows() -> Iterator[tuple]:
                try:
                    while True:
                        chunk = cur.fetchmany(1000)
                        if not chunk:
                            return
                        yield from chunk
                except sqlite3.Error as exc:
                    raise SQLError(f"SQL error: {exc}", hint=HINT_VIEWS) from None

            yield columns, rows()
        finally:
            con.close()


@contextmanager
def _server(url: str, sql: str) -> Iterator[tuple[list[str], Iterator[tuple]]]:
    import sqlalchemy as sa

    eng = dbmod.engine(url)
    try:
        try:
            conn = eng.raw_connection()
        except sa.exc.DBAPIError as exc:
            raise SQLError(f"cannot connect to {dbmod.redact_url(url)}: {exc.orig}") from None
        try:
            raw = conn.driver_connection
            if eng.dialect.name != "postgresql":
                raise SQLError(f"ledger sql supports SQLite and PostgreSQL, not {eng.dialect.name}")
            import psycopg

            raw.rollback()
            raw.read_only = True  # every transaction of this session starts READ ONLY
            cur = raw.cursor()
            try:
                cur.execute("SET TRANSACTION READ ONLY")
                cur.execute("SELECT 1")  # take the snapshot: the mode can no longer be switched
                cur.execute(sql, prepare=True)
                columns = [d.name for d in cur.description or ()]
                data = cur.fetchall() if cur.description else []
            except psycopg.errors.ReadOnlySqlTransaction as exc:
                raise _refused(_first_word(sql) or "writing") from None
            except psycopg.Error as exc:
                msg = exc.diag.message_primary if getattr(exc, "diag", None) and exc.diag.message_primary else str(exc)
                raise SQLError(f"SQL error: {msg}", hint=HINT_VIEWS) from None
            finally:
                raw.rollback()
            yield columns, iter(data)
        finally:
            conn.close()
    finally:
        eng.dispose()


def _first_word(sql: str) -> str:
    words = sql.strip().split(None, 1)
    return words[0].upper() if words else ""


def jsonable(v: Any) -> Any:
    """orjson default: exact numbers stay numbers, bytes become hex."""
    from decimal import Decimal

    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    return str(v)
