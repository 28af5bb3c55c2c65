"""The SQLAlchemy-free pieces under `ledger sql` and the index passes (issue 27): server URLs
read as SQLAlchemy reads them (ledger.index.pgconnect), database errors classified alike
whether the driver raised them or SQLAlchemy wrapped them (ledger.index.dberrors), and the
server's open-check (ledger.index.serverdb.inspect_server) on a bare psycopg connection."""

from __future__ import annotations

import sqlite3

import pytest

from ledger.index.db import IndexError_

URLS = [
    "postgresql+psycopg://u:p%40ss@127.0.0.1:5432/db",
    "postgresql+psycopg://u:pa/ss:x@h/db%20x",  # (a password with / and : unencoded)
    "postgresql+psycopg:///db?host=/tmp",
    "postgresql+psycopg://",
    "postgresql+psycopg://u@/d?sslmode=require&connect_timeout=3",
    "postgresql+psycopg://u@/d?host=a:1&host=b:2",
    "postgresql+psycopg://u@/d?host=a&host=b",
    "postgresql+psycopg://u@/d?host=a:7",
    "postgresql+psycopg://u@/d?host=a,b&port=1,2",
    "postgresql+psycopg://[::1]:5433/d",
    "postgresql+psycopg://u:@h/d",
    "postgresql+psycopg://@h/d",
]


@pytest.mark.parametrize("url", URLS)
def test_connect_params_are_sqlalchemys(url):
    import sqlalchemy as sa

    from ledger.index.pgconnect import connect_params

    eng = sa.create_engine(url)
    want = eng.dialect.create_connect_args(eng.url)[1]
    want.pop("context", None)  # (SQLAlchemy's copy of psycopg's adapters)
    assert connect_params(url) == want


@pytest.mark.parametrize("url, why", [
    ("postgresql+psycopg://u@h:x/d", "invalid literal for int() with base 10: 'x'"),
    ("postgresql+psycopg://u@/d?host=a:1&port=3", None),  # (not a multihost: passed on as given)
    ("postgresql+psycopg://u@/d?host=a:1&host=b&port=3", "Can't mix 'multihost' formats together"),
])
def test_connect_params_refuse_what_the_engine_refuses(url, why):
    from ledger.index.pgconnect import connect_params

    if why is None:
        assert connect_params(url)["port"] == "3"
        return
    with pytest.raises(IndexError_) as got:
        connect_params(url)
    assert got.value.message.startswith("cannot open the index ") and why in got.value.message


def test_connect_refuses_another_driver():
    from ledger.index.pgconnect import connect

    with pytest.raises(IndexError_, match=r"its driver is not installed \(psycopg2\)"):
        connect("postgresql+psycopg2://u@h/d")


def test_driver_errors_and_wrapped_ones_classify_alike():
    import psycopg
    import sqlalchemy.exc as sa_exc

    from ledger.index.dberrors import connection_lost, driver_error, is_db_error

    lite = sqlite3.DatabaseError("database disk image is malformed")
    gone = psycopg.errors.AdminShutdown("terminating connection due to administrator command")
    refused = psycopg.errors.UniqueViolation("duplicate key value violates unique constraint")
    for raw in (lite, gone, refused):
        wrapped = sa_exc.DBAPIError.instance("SELECT 1", (), raw, sqlite3.Error if raw is lite else psycopg.Error)
        assert isinstance(wrapped, sa_exc.DBAPIError)
        assert is_db_error(raw) and is_db_error(wrapped)
        assert driver_error(raw) is raw and driver_error(wrapped) is raw
    assert connection_lost(gone) and connection_lost(sa_exc.DBAPIError.instance("x", (), gone, psycopg.Error))
    assert not connection_lost(refused)
    assert not connection_lost(sa_exc.DBAPIError.instance("x", (), refused, psycopg.Error))
    invalidated = sa_exc.DBAPIError.instance("x", (), refused, psycopg.Error, connection_invalidated=True)
    assert connection_lost(invalidated)
    for other in (ValueError("x"), OSError(28, "No space left on device"), sa_exc.ArgumentError("x")):
        assert not is_db_error(other) and driver_error(other) is None and not connection_lost(other)


@pytest.mark.postgres
def test_inspect_server_on_a_bare_psycopg_connection(pg_url):
    import sqlalchemy as sa

    from ledger.index import db as dbmod
    from ledger.index.pgconnect import connect
    from ledger.index.serverdb import inspect_server

    def both() -> tuple:
        eng = sa.create_engine(pg_url)
        try:
            with eng.connect() as conn, conn.begin():
                via_sa = inspect_server(conn)
        finally:
            eng.dispose()
        with connect(pg_url) as raw:
            bare = inspect_server(raw)
        return (via_sa.kind, via_sa.revision), (bare.kind, bare.revision)

    assert both() == (("fresh", None), ("fresh", None))
    with connect(pg_url, autocommit=True) as raw:
        raw.execute("CREATE TABLE runs (x int)")
    assert both() == (("foreign", None), ("foreign", None))
    with connect(pg_url, autocommit=True) as raw:
        raw.execute("DROP TABLE runs")
    eng = sa.create_engine(pg_url)
    try:
        with eng.connect() as conn, conn.begin():
            dbmod.upgrade(conn)
    finally:
        eng.dispose()
    assert both() == (("ok", dbmod.HEAD), ("ok", dbmod.HEAD))


def test_a_server_failure_reads_the_same_from_the_driver_and_from_sqlalchemy():
    import psycopg
    import sqlalchemy.exc as sa_exc

    from ledger.index.ops import _raise_server_failure

    url = "postgresql+psycopg://u:secret@h/d"
    for raw, what in ((psycopg.errors.AdminShutdown("terminating connection\nDETAIL: x"),
                       "lost the connection to the index postgresql+psycopg://u:***@h/d: terminating connection"),
                      (psycopg.errors.UniqueViolation("duplicate key value"),
                       "the index refused a write: postgresql+psycopg://u:***@h/d duplicate key value")):
        said = []
        for exc in (raw, sa_exc.DBAPIError.instance("INSERT ...", (), raw, psycopg.Error)):
            with pytest.raises(IndexError_) as got:
                _raise_server_failure(exc, url)
            said.append((got.value.message, got.value.hint))
        assert said[0] == said[1] and said[0][0] == what
    _raise_server_failure(ValueError("not the database's"), url)  # (left to the caller)
    _raise_server_failure(sqlite3.OperationalError("database is locked"), "sqlite:////tmp/x.sqlite")


@pytest.mark.postgres
def test_db_status_through_the_driver_says_what_the_engine_said(pg_url):
    """`ledger db status` on a server reads through psycopg: the same status, and a server
    that refuses the connection the same error as an engine's connection gives."""
    import sqlalchemy as sa

    from ledger.index import db as dbmod
    from ledger.index.dbadmin import db_status

    assert db_status(pg_url)["status"] == "fresh"
    bad = pg_url.rsplit("/", 1)[0] + "/ledger_no_such_db"
    with pytest.raises(IndexError_) as direct:
        db_status(bad)
    eng = sa.create_engine(bad)
    try:
        with pytest.raises(IndexError_) as engine, dbmod.server_connection(eng, bad):
            pass
    finally:
        eng.dispose()
    assert (direct.value.message, direct.value.hint) == (engine.value.message, engine.value.hint)
    assert "ledger_no_such_db" in direct.value.message
