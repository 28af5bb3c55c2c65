"""The connection the readers query through the database driver, SQLite and PostgreSQL alike:
`rows(sql, params)` with `?` placeholders (turned into the server driver's own).

Its own module, importing nothing of the index: the log source and the readers both use it
without reaching rawread's read transaction (which takes the server's from ledger.index.ops).
"""

from __future__ import annotations

import sqlite3
from typing import Any, Sequence


class Conn:
    """One read transaction: `rows(sql, params)` -> list of tuples."""

    def __init__(self, raw: Any, dialect: str) -> None:
        self.raw = raw
        self.dialect = dialect  # sqlite | postgresql | ...

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        if self.dialect == "sqlite":
            return self.raw.execute(sql, tuple(params)).fetchall()
        # the server driver's placeholder (psycopg: %s; no literal % in ledger's queries)
        sql = sql.replace("?", "%s")
        res = self.raw.exec_driver_sql(sql, tuple(params)) if params else self.raw.exec_driver_sql(sql)
        return [tuple(r) for r in res.fetchall()]

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple | None:
        got = self.rows(sql, params)
        return got[0] if got else None

    def marks(self, n: int) -> str:
        return ", ".join("?" * n)


def wrap(conn: Any) -> Conn:
    """A Conn for a Conn, a sqlite3 connection or an SQLAlchemy connection (tests, callers
    that hold one already)."""
    if isinstance(conn, Conn):
        return conn
    if isinstance(conn, sqlite3.Connection):
        return Conn(conn, "sqlite")
    name = conn.dialect.name
    return Conn(conn.connection.driver_connection if name == "sqlite" else conn, name)
