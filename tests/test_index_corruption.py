"""A damaged, lost or foreign index file is set aside and rebuilt; the answers do not change."""

from __future__ import annotations

import os
import sqlite3

import orjson
import pytest

from indexhelpers import cli, damaged_home, records_runs_json
from ledger.index import db as dbmod


def _damage(path, how):
    if how == "delete":
        path.unlink()
    elif how == "truncate0":
        os.truncate(path, 0)
    elif how == "truncate_half":
        os.truncate(path, os.path.getsize(path) // 2)
    elif how == "garbage_head":
        with open(path, "r+b") as f:
            f.write(os.urandom(100))
    elif how == "text_file":
        path.write_text("this is not a database\n" * 50)
    elif how == "foreign_sqlite":
        path.unlink()
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, other TEXT)")
        con.execute("INSERT INTO runs (other) VALUES ('someone else')")
        con.commit()
        con.close()
    elif how == "unknown_revision":
        con = sqlite3.connect(path)
        con.execute("UPDATE alembic_version SET version_num = 'ffffffffffff'")
        con.commit()
        con.close()
    else:  # pragma: no cover
        raise AssertionError(how)


EXPECT = {
    "delete": "no index at",
    "truncate0": "empty (0 bytes)",
    "truncate_half": "truncated",
    "garbage_head": "not an SQLite database",
    "text_file": "not an SQLite database",
    "foreign_sqlite": "another application's SQLite database",
    "unknown_revision": "unknown schema revision 'ffffffffffff'",
}


@pytest.mark.parametrize("how", list(EXPECT))
def test_corruption_matrix(home, how):
    damaged_home(home)
    before = cli("runs", "--json", "--all")
    assert before.exit_code == 0 and before.stdout == records_runs_json(home)
    path = home / "index.sqlite"
    assert path.exists() and not os.path.exists(f"{path}-wal") or os.path.getsize(f"{path}-wal") == 0
    _damage(path, how)
    after = cli("runs", "--json", "--all")
    assert after.exit_code == 0, after.output
    assert after.stdout == before.stdout
    assert EXPECT[how] in after.stderr
    lines = [line for line in after.stderr.splitlines() if line.startswith("ledger:")]
    if how == "delete":
        assert lines == [f"ledger: no index at {path} yet; building it from the records"]
    else:
        assert "setting it aside and rebuilding it from the records" in lines[0]
        kept = [p for p in os.listdir(home) if p.startswith("index.sqlite.corrupt-")]
        assert len(kept) == 1 and kept[0] in lines[1]
    # the new file is a healthy index at head, and the next run is quiet
    assert dbmod.inspect_sqlite(path).kind == "ok"
    again = cli("runs", "--json", "--all")
    assert again.stdout == before.stdout and "ledger:" not in again.stderr
    assert not [p for p in os.listdir(home) if ".rebuild-" in p]


def test_known_older_revision_is_upgraded_not_rebuilt(home, monkeypatch):
    damaged_home(home)
    cli("index")
    path = home / "index.sqlite"
    # pretend this ledger has a newer head: the file's revision is known and older
    monkeypatch.setattr(dbmod, "_KNOWN", (*dbmod.known_revisions(), "9999_newer"))
    monkeypatch.setattr(dbmod, "HEAD", "9999_newer")
    assert dbmod.inspect_sqlite(path).kind == "upgrade"


def test_rebuild_on_demand_keeps_other_homes(home, tmp_path):
    from indexhelpers import make_run

    other = tmp_path / "other"
    make_run(other)
    make_run(home)
    assert cli("index", "--home", str(home), "--home", str(other)).exit_code == 0
    res = cli("index", "--rebuild", "--json")
    assert res.exit_code == 0
    assert orjson.loads(res.stdout)["homes"] == [str(home), str(other)]
    assert cli("runs", "--json", "--all", "--home", str(other), "--db",
               f"sqlite:///{home / 'index.sqlite'}").stdout == records_runs_json(other)


def test_corruption_found_mid_pass_is_rebuilt(home, monkeypatch):
    """Damage the cheap checks miss (a page in the middle) shows up as a database error."""
    damaged_home(home)
    before = cli("runs", "--json", "--all").stdout
    path = home / "index.sqlite"
    size = os.path.getsize(path)
    page = 4096
    with open(path, "r+b") as f:  # wipe every page but the first: the header stays valid
        for off in range(page, size, page):
            f.seek(off)
            f.write(b"\xff" * page)
    after = cli("runs", "--json", "--all")
    assert after.exit_code == 0, after.output
    assert after.stdout == before
    assert "setting it aside" in after.stderr


def test_postgres_foreign_database_is_refused(pg_url):
    import sqlalchemy as sa

    eng = sa.create_engine(pg_url)
    with eng.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE runs (id integer)")
    eng.dispose()
    res = cli("runs", "--json", "--db", pg_url)
    assert res.exit_code == 1
    assert "is not a ledger index" in res.stderr and "Hint:" in res.stderr


def test_postgres_newer_revision_refused_then_rebuilt(home, pg_url):
    import sqlalchemy as sa

    damaged_home(home)
    before = cli("runs", "--json", "--all", "--db", pg_url).stdout
    eng = sa.create_engine(pg_url)
    with eng.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    eng.dispose()
    res = cli("runs", "--json", "--all", "--db", pg_url)
    assert res.exit_code == 1 and "unknown to this ledger" in res.stderr and "--rebuild" in res.stderr
    assert cli("index", "--rebuild", "--db", pg_url).exit_code == 0
    assert cli("runs", "--json", "--all", "--db", pg_url).stdout == before


def test_index_files_are_private(home):
    import stat

    from indexhelpers import make_run

    make_run(home)
    assert cli("runs", "--json").exit_code == 0
    for name in os.listdir(home):
        if name.startswith("index.sqlite"):
            assert stat.S_IMODE(os.stat(home / name).st_mode) & 0o077 == 0, name


def test_indexer_killed_mid_build_leaves_nothing_behind(home):
    """SIGKILL a real `ledger index` while it builds: the next pass removes the dead build's
    files (the temporary index, the workers' scratch directory) and indexes correctly."""
    import subprocess
    import sys
    import time

    import recordkit as rk

    for _ in range(1500):  # a build long enough to be caught in the middle
        rk.write_record(home, events=rk.golden_events(), term=rk.terminal())

    def leftovers():
        return sorted(n for n in os.listdir(home) if ".rebuild-" in n or n.startswith(".ledger-index-parts-"))

    proc = subprocess.Popen([sys.executable, "-m", "ledger", "index"], env=dict(os.environ),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not any(n.startswith(".ledger-index-parts-") for n in leftovers()) and proc.poll() is None:
        assert time.monotonic() < deadline, "the build never started"
        time.sleep(0.002)
    proc.kill()
    proc.wait()
    assert proc.returncode == -9, "the build finished before it could be killed"
    assert leftovers() and not (home / "index.sqlite").exists()
    res = cli("index")
    assert res.exit_code == 0, res.output
    assert leftovers() == []
    assert cli("runs", "--json", "--all").stdout == records_runs_json(home)
