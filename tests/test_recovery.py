"""Recovery paths that only matter on a bad day: an index from the previous release is
upgraded in place (rows kept, nothing re-read), and damage met in the middle of a pass
(at the index's real page size, behind a sound header) sets the index aside and rebuilds it.

Each test fails when the code path it protects is removed (see docs/testing.md).
"""

from __future__ import annotations

import os
import sqlite3

import orjson
import pytest

from indexhelpers import cli, damaged_home, make_run, records_runs_json
from ledger.index import db as dbmod


def _previous_revision() -> str:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(dbmod.alembic_config())
    prev = script.get_revision(dbmod.HEAD).down_revision
    assert isinstance(prev, str)
    return prev


def _index_at(url: str, home, revision: str) -> None:
    """Index `home` into a database whose schema stops at `revision` (as the last release left it).

    Today's indexer writes today's columns: it indexes at the head, then the schema is taken
    down to `revision` with the migrations' own downgrades (the rows stay)."""
    from alembic import command

    from ledger.index.indexer import Indexer

    if dbmod.is_sqlite(url):
        path = dbmod.sqlite_path(url)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    eng = dbmod.engine(url, mode="write")
    try:
        with eng.connect() as conn:
            with conn.begin():
                dbmod.upgrade(conn)
            Indexer(eng, workers=0).index(conn, [os.path.abspath(home)])
            if conn.in_transaction():
                conn.commit()
            with conn.begin():
                command.downgrade(dbmod.alembic_config(connection=conn), revision)
            with conn.begin():
                assert dbmod.current_revision(conn) == revision
    finally:
        eng.dispose()


@pytest.mark.postgres
def test_previous_revision_with_data_is_upgraded_in_place(db_url, home, tmp_path):
    damaged_home(home)
    prev = _previous_revision()
    _index_at(db_url, home, prev)
    _set_marker(db_url)
    if dbmod.is_sqlite(db_url):
        assert dbmod.inspect_sqlite(dbmod.sqlite_path(db_url)).kind == "upgrade"
    res = cli("index", "--db", db_url, "--json")
    assert res.exit_code == 0, res.output
    assert f"upgraded the index" in res.stderr and f"from schema revision {prev} to {dbmod.HEAD}" in res.stderr
    doc = orjson.loads(res.stdout)
    # upgraded, not rebuilt: the rows already there are kept (no run is new), and so is a
    # marker row that a rebuild (a new file, or dropped tables) would lose
    assert doc["rebuilt"] is False and doc["new"] == 0
    assert "setting it aside" not in res.stderr
    assert _marker(db_url) == "kept"
    if dbmod.is_sqlite(db_url):
        path = dbmod.sqlite_path(db_url)
        assert dbmod.inspect_sqlite(path).kind == "ok"
        assert not [p for p in os.listdir(path.parent) if ".corrupt-" in p]
    runs = cli("runs", "--json", "--all", "--db", db_url)
    assert runs.exit_code == 0 and runs.stdout == records_runs_json(home)
    rep = cli("report", "--json", "--db", db_url)
    assert rep.exit_code == 0, rep.output
    fresh = cli("report", "--json", "--db", str(tmp_path / "fresh.sqlite"))
    assert orjson.loads(rep.stdout)["totals"] == orjson.loads(fresh.stdout)["totals"]
    assert orjson.loads(rep.stdout)["totals"]["runs"] > 0
    assert cli("db", "check", "--db", db_url).exit_code == 0


def _set_marker(url: str) -> None:
    eng = dbmod.engine(url, mode="write")
    try:
        with eng.begin() as conn:
            conn.exec_driver_sql("INSERT INTO ledger_meta (key, value) VALUES ('test-marker', 'kept')")
    finally:
        eng.dispose()


def _marker(url: str):
    eng = dbmod.engine(url, mode="write")
    try:
        with eng.begin() as conn:
            row = conn.exec_driver_sql("SELECT value FROM ledger_meta WHERE key = 'test-marker'").fetchone()
    finally:
        eng.dispose()
    return row[0] if row else None


def _wipe_pages_of(path, table: str) -> int:
    con = sqlite3.connect(path)
    pages = [r[0] for r in con.execute("SELECT pageno FROM dbstat WHERE name = ? ORDER BY pageno", (table,))]
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    assert page_size == dbmod.PAGE_SIZE
    with open(path, "r+b") as f:
        for pg in pages[1:]:  # the root page stays: the schema and the header look sound
            f.seek((pg - 1) * page_size)
            f.write(b"\x0d\xff\xff\xff" * (page_size // 4))
    return len(pages) - 1


def test_corruption_met_mid_pass_at_the_real_page_size_is_rebuilt(home):
    for i in range(400):
        make_run(home, subjects=(f"task:{i}",))
    assert cli("index").exit_code == 0
    expected = records_runs_json(home)
    path = home / "index.sqlite"
    assert _wipe_pages_of(path, "index_cursors") > 0
    assert dbmod.inspect_sqlite(path).kind == "ok"  # the cheap open-check cannot see it
    make_run(home)  # something new, so the pass reads the cursors
    res = cli("index", "--json")
    assert res.exit_code == 0, res.output
    assert "setting it aside and rebuilding it" in res.stderr
    assert orjson.loads(res.stdout)["rebuilt"] is True
    assert [p for p in os.listdir(home) if p.startswith("index.sqlite.corrupt-")]
    assert cli("runs", "--json", "--all").stdout == records_runs_json(home) != expected
    assert cli("db", "check").exit_code == 0
