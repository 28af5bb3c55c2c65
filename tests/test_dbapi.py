"""ledger.index.dbapi: the one connection type, on a real SQLite file and a real PostgreSQL
server, through the bare driver and through an SQLAlchemy connection's driver (issue 27)."""

from __future__ import annotations

import sqlite3
from datetime import datetime

import pytest

from ledger.index.dbapi import Conn, server_sql, sqlite_datetime, wrap


@pytest.mark.parametrize("sql, want", [
    ("SELECT ? + ?", "SELECT %s + %s"),
    ("SELECT '?' || ?", "SELECT '?' || %s"),
    ("SELECT 'it''s ?' , ?", "SELECT 'it''s ?' , %s"),
    ('SELECT "odd?name" FROM t WHERE a = ?', 'SELECT "odd?name" FROM t WHERE a = %s'),
    ("SELECT a FROM t WHERE b LIKE '%x%' AND c = ?", "SELECT a FROM t WHERE b LIKE '%%x%%' AND c = %s"),
    ("SELECT 7 % ?", "SELECT 7 %% %s"),
    ("SELECT 1 -- why? 100%\n, ?", "SELECT 1 -- why? 100%%\n, %s"),
    ("SELECT /* ? % */ ?", "SELECT /* ? %% */ %s"),
    ("SELECT a - ? / 2", "SELECT a - %s / 2"),
    ("SELECT 'unclosed ?", "SELECT 'unclosed ?"),
])
def test_server_sql_rewrites_placeholders_only_outside_literals(sql, want):
    assert server_sql(sql) == want


def test_sqlite_datetime_is_sqlalchemys_storage_text():
    import sqlalchemy as sa

    v = datetime(2026, 1, 2, 3, 4, 5, 60)
    stored = sa.DateTime().dialect_impl(sa.create_engine("sqlite://").dialect).bind_processor(
        sa.create_engine("sqlite://").dialect)(v)
    assert sqlite_datetime(v) == stored == "2026-01-02 03:04:05.000060"
    assert sqlite_datetime(None) is None


def _conns(db_url):
    """(Conn on the bare driver, Conn through an SQLAlchemy connection), in one transaction each."""
    import sqlalchemy as sa

    from ledger.index import db as dbmod

    if dbmod.is_sqlite(db_url):
        raw = sqlite3.connect(dbmod.sqlite_path(db_url), isolation_level=None)
    else:
        import psycopg

        raw = psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://"))
    eng = sa.create_engine(db_url)
    return raw, eng


@pytest.mark.parametrize("through", ["driver", "sqlalchemy"])
def test_reads_writes_and_savepoints_on_both_databases(db_url, through):
    raw, eng = _conns(db_url)
    sa_conn = eng.connect()
    try:
        conn = wrap(raw) if through == "driver" else wrap(sa_conn)
        assert isinstance(conn, Conn)
        if conn.sqlite:
            conn.execute("BEGIN")
        conn.execute('CREATE TABLE "t" (a INTEGER, b TEXT, c TIMESTAMP)')
        when = datetime(2026, 12, 4, 1, 2, 3, 4000)
        assert conn.execute("INSERT INTO t (a, b, c) VALUES (?, ?, ?)", (1, "100% '?'", conn.dt(when))) == 1
        conn.executemany("INSERT INTO t (a, b) VALUES (?, ?)", [(2, "x"), (3, "y%")])
        conn.insert_rows("t", ("a", "b"), [(4, "copy?"), (5, None)])
        with pytest.raises(RuntimeError):
            with conn.savepoint():
                conn.execute("INSERT INTO t (a) VALUES (?)", (99,))
                raise RuntimeError("undo")
        with conn.savepoint():
            conn.execute("UPDATE t SET b = ? WHERE a = ?", ("z", 2))
        assert conn.rows("SELECT a, b FROM t WHERE b LIKE '%?%' OR b LIKE '100%' ORDER BY a") == [
            (1, "100% '?'"), (4, "copy?")]
        assert conn.scalar("SELECT count(*) FROM t") == 5
        assert conn.scalar("SELECT b FROM t WHERE a = ?", (2,)) == "z"
        assert conn.one("SELECT a FROM t WHERE a = ?", (42,)) is None
        got = conn.scalar("SELECT c FROM t WHERE a = 1")
        if conn.sqlite:
            assert got == "2026-12-04 01:02:03.004000"
        else:
            assert got.replace(tzinfo=None) == when
        assert conn.execute("DELETE FROM t WHERE a > ?", (3,)) == 2
    finally:
        sa_conn.close()
        raw.close()
        eng.dispose()


def test_wrap_keeps_a_conn_and_names_the_dialect(tmp_path):
    raw = sqlite3.connect(tmp_path / "x.sqlite")
    c = wrap(raw)
    assert wrap(c) is c and c.dialect == "sqlite" and c.marks(3) == "?, ?, ?"
    raw.close()


def test_a_savepoint_whose_rollback_fails_raises_the_first_error():
    """The connection gone inside a savepoint: the caller reads why (the block's error), not
    the driver's refusal of the rollback (bulk.analyze_if_unknown relies on it)."""

    class Gone:
        dialect = "sqlite"

        def __init__(self):
            self.calls = []

        def execute(self, sql, params=()):
            self.calls.append(sql)
            if sql.startswith("ROLLBACK"):
                raise sqlite3.OperationalError("cannot rollback - no transaction is active")

    raw = Gone()
    conn = Conn(raw, "sqlite")
    with pytest.raises(ConnectionError, match="server closed the connection"):
        with conn.savepoint("sp"):
            raise ConnectionError("server closed the connection")
    assert raw.calls == ["SAVEPOINT sp", "ROLLBACK TO SAVEPOINT sp"]
