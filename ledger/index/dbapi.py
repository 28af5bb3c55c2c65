"""The one connection type ledger's runtime reads and writes the index through, SQLite and
PostgreSQL alike (issue 27's data layer): plain SQL with `?` placeholders, on the driver.

`Conn` wraps a sqlite3 connection, a psycopg connection, or (while callers still hand one
over) an SQLAlchemy connection, whose driver connection it then uses in the same
transaction. SQL is written once in the dialect both databases take; `?` becomes the server
driver's `%s` by `server_sql()`, which skips string literals, quoted names and comments and
doubles every `%` (psycopg reads `%` everywhere in a statement that has parameters), so a
literal `'%'` or `'?'` means itself on both. Values: Python's on PostgreSQL; on SQLite a
datetime is written as SQLAlchemy's storage text and read back as text (`dt()`), a boolean as
0/1. SQLAlchemy stays for the schema, its migrations and `ledger db check`.

Its own module, importing nothing of the index: the log source and the readers both use it
without reaching rawread's read transaction (which takes the server's from ledger.index.ops).
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Sequence

_SERVER_SQL: dict[str, str] = {}
_SERVER_SQL_MAX = 4096  # statements kept rewritten (ledger's own: a few hundred shapes)


def server_sql(sql: str) -> str:
    """`sql` with `?` placeholders as psycopg's `%s` (outside literals, quoted names and
    comments) and every `%` doubled."""
    got = _SERVER_SQL.get(sql)
    if got is not None:
        return got
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c == "'" or c == '"':  # a literal or a quoted name: to its closing quote ('' and "" escape)
            j = i + 1
            while j < n:
                if sql[j] == c:
                    if j + 1 < n and sql[j + 1] == c:
                        j += 2
                        continue
                    break
                j += 1
            out.append(sql[i:j + 1].replace("%", "%%"))
            i = j + 1
        elif c == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out.append(sql[i:j].replace("%", "%%"))
            i = j
        elif c == "/" and sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(sql[i:j].replace("%", "%%"))
            i = j
        elif c == "?":
            out.append("%s")
            i += 1
        elif c == "%":
            out.append("%%")
            i += 1
        else:
            j = i + 1
            while j < n and sql[j] not in "'\"-/?%":
                j += 1
            out.append(sql[i:j])
            i = j
    got = "".join(out)
    if len(_SERVER_SQL) < _SERVER_SQL_MAX:
        _SERVER_SQL[sql] = got
    return got


def sqlite_datetime(v: Any) -> Any:
    """SQLAlchemy's SQLite DATETIME storage text (zero-padded fields, no offset: ledger's
    datetimes are UTC); None stays None, a string is taken as already stored."""
    if v is None or isinstance(v, str):
        return v
    return (f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}"
            f".{v.microsecond:06d}")


class Conn:
    """One transaction's connection: `rows`, `one`, `scalar` read; `execute`, `executemany`,
    `insert_rows` write; `savepoint()` nests. The caller owns the transaction."""

    __slots__ = ("raw", "dialect", "_sa")

    def __init__(self, raw: Any, dialect: str) -> None:
        self.raw = raw
        self.dialect = dialect  # sqlite | postgresql | ...
        # (an SQLAlchemy connection on a server: statements go through exec_driver_sql, so
        # its transaction and error types stay the caller's)
        self._sa = dialect != "sqlite" and hasattr(raw, "exec_driver_sql")

    @property
    def sqlite(self) -> bool:
        return self.dialect == "sqlite"

    def _run(self, sql: str, params: Sequence[Any]) -> Any:
        """A cursor (or SQLAlchemy result) that has run `sql`."""
        if self.dialect == "sqlite":
            return self.raw.execute(sql, tuple(params))
        sql = server_sql(sql)
        if self._sa:
            return self.raw.exec_driver_sql(sql, tuple(params))
        cur = self.raw.cursor()
        cur.execute(sql, tuple(params))
        return cur

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        res = self._run(sql, params)
        if self.dialect == "sqlite":
            return res.fetchall()
        return [tuple(r) for r in res.fetchall()]

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple | None:
        got = self.rows(sql, params)
        return got[0] if got else None

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self.one(sql, params)
        return None if row is None else row[0]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run a statement; its row count (-1 where the driver gives none)."""
        res = self._run(sql, params)
        return res.rowcount

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> None:
        if self.dialect == "sqlite":
            self.raw.executemany(sql, seq)
            return
        seq = [tuple(p) for p in seq]
        if not seq:
            return
        sql = server_sql(sql)
        if self._sa:
            self.raw.exec_driver_sql(sql, seq)
            return
        with self.raw.cursor() as cur:
            cur.executemany(sql, seq)

    def insert_rows(self, table: str, cols: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Rows (tuples in `cols` order, values as this dialect takes them) into `table`:
        one executemany on SQLite, COPY on PostgreSQL (one statement instead of a round trip
        per row)."""
        if not rows:
            return
        names = ", ".join(f'"{c}"' for c in cols)
        if self.dialect == "postgresql":
            drv = self.raw.connection.driver_connection if self._sa else self.raw
            with drv.cursor() as cur:
                with cur.copy(f'COPY "{table}" ({names}) FROM STDIN') as copy:
                    for row in rows:
                        copy.write_row(row)
            return
        self.executemany(f'INSERT INTO "{table}" ({names}) VALUES ({self.marks(len(cols))})', rows)

    @contextmanager
    def savepoint(self, name: str = "ledger_sp") -> Iterator["Conn"]:
        """A nested transaction: rolled back to its start (and the error raised on) when the
        block raises, kept otherwise. An error the rollback cannot undo (the connection gone:
        SQLAlchemy then refuses any statement) is raised as itself, not as the rollback's
        refusal, so the caller still reads a lost connection (ledger.errors)."""
        self._run(f"SAVEPOINT {name}", ())
        try:
            yield self
        except BaseException as exc:
            try:
                self._run(f"ROLLBACK TO SAVEPOINT {name}", ())
                self._run(f"RELEASE SAVEPOINT {name}", ())
            except Exception:
                raise exc from None
            raise
        self._run(f"RELEASE SAVEPOINT {name}", ())

    def dt(self, v: Any) -> Any:
        """A datetime as this dialect stores it (SQLite: SQLAlchemy's text)."""
        return sqlite_datetime(v) if self.dialect == "sqlite" else v

    def marks(self, n: int) -> str:
        return ", ".join("?" * n)


def wrap(conn: Any) -> Conn:
    """A Conn for a Conn, a sqlite3 connection, a psycopg connection or an SQLAlchemy
    connection (tests, callers that hold one already)."""
    if isinstance(conn, Conn):
        return conn
    if isinstance(conn, sqlite3.Connection):
        return Conn(conn, "sqlite")
    if not hasattr(conn, "exec_driver_sql"):  # (a psycopg connection)
        return Conn(conn, "postgresql")
    name = conn.dialect.name
    return Conn(conn.connection.driver_connection if name == "sqlite" else conn, name)
