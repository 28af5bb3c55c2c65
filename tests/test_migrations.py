"""The Alembic history builds exactly the models' schema, from empty, on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlalchemy as sa

from indexhelpers import cli, make_run

try:  # every model on the shared metadata must be covered by a migration
    import ledger.report.models  # noqa: F401
except ImportError:  # pragma: no cover - the report package is optional here
    pass
from ledger.index import db as dbmod
from ledger.index.models import VIEWS, Base
from ledger.index.dbadmin import schema_diff


def _engine(url):
    return dbmod.engine(url, mode="write")


def test_head_constant_matches_scripts():
    heads, revisions = dbmod.script_revisions()
    assert heads == [dbmod.HEAD] == [dbmod._scan_revisions()[0]]  # (the last script's is the head)
    assert sorted(revisions) == sorted(dbmod.known_revisions())


def test_upgrade_from_empty_and_no_autogenerate_diff(db_url):
    eng = _engine(db_url)
    try:
        with eng.connect() as conn:
            with conn.begin():
                assert dbmod.current_revision(conn) is None
                dbmod.upgrade(conn)
            with conn.begin():
                assert dbmod.current_revision(conn) == dbmod.HEAD
                assert schema_diff(conn) == []
                insp = sa.inspect(conn)
                assert set(Base.metadata.tables) <= set(insp.get_table_names())
                assert set(VIEWS) <= set(insp.get_view_names())
                app = conn.exec_driver_sql("SELECT value FROM ledger_meta WHERE key = 'application'").scalar()
                assert app == dbmod.APPLICATION
                # every view answers (and is empty)
                for view in VIEWS:
                    assert conn.exec_driver_sql(f"SELECT * FROM {view}").fetchall() == []
    finally:
        eng.dispose()
    if dbmod.is_sqlite(db_url):
        assert dbmod.inspect_sqlite(dbmod.sqlite_path(db_url)).kind == "ok"  # application_id stamped


def test_downgrade_to_base_and_up_again(db_url):
    from alembic import command

    eng = _engine(db_url)
    try:
        with eng.connect() as conn:
            with conn.begin():
                dbmod.upgrade(conn)
            with conn.begin():
                command.downgrade(dbmod.alembic_config(connection=conn), "base")
            with conn.begin():
                assert [t for t in sa.inspect(conn).get_table_names() if t != "alembic_version"] == []
            with conn.begin():
                dbmod.upgrade(conn)
            with conn.begin():
                assert schema_diff(conn) == []
    finally:
        eng.dispose()


def test_db_commands(home, db_url):
    make_run(home)
    res = cli("db", "current", "--db", db_url, "--json")
    assert res.exit_code == 0 and '"revision": null' in res.stdout
    res = cli("db", "upgrade", "--db", db_url)
    assert res.exit_code == 0 and f"upgraded from empty to {dbmod.HEAD}" in res.stderr
    assert "is at head" in cli("db", "upgrade", "--db", db_url).stderr
    assert cli("index", "--db", db_url).exit_code == 0
    res = cli("db", "check", "--db", db_url)
    assert res.exit_code == 0, res.output
    assert "index ok" in res.stderr
    assert f'"revision": "{dbmod.HEAD}"' in cli("db", "current", "--db", db_url, "--json").stdout


def test_db_check_reports_drift(home, tmp_path):
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    make_run(home)
    cli("index", "--db", url)
    import sqlite3

    con = sqlite3.connect(tmp_path / "x.sqlite")
    con.execute("CREATE INDEX ix_extra ON runs (cwd)")
    con.commit()
    con.close()
    res = cli("db", "check", "--db", url)
    assert res.exit_code == 1 and "schema differs from the models" in res.stderr


def test_models_match_migrations_in_a_fresh_interpreter(db_url):
    """Every model on the shared metadata (index + report tables) agrees with the migrations,
    checked in a fresh interpreter that imports only what `ledger db check` imports."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from ledger.index import db as dbmod\n"
        "from ledger.index.dbadmin import schema_diff\n"
        "e = dbmod.engine(sys.argv[1], mode='write')\n"
        "with e.connect() as c:\n"
        "    with c.begin(): dbmod.upgrade(c)\n"
        "    with c.begin(): print(repr(schema_diff(c)))\n"
        "e.dispose()\n"
    )
    out = subprocess.run([sys.executable, "-c", code, db_url], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
