"""Issue 11: many homes (and machines) in one index: nothing deleted, double counted or blocked.

"Two machines" are two values of $LEDGER_MACHINE_ID (ledger.home.machine_id): what tells two
hosts apart when their homes have the same path. Every test runs on SQLite and on the real
PostgreSQL server (`db_url`), except the lock tests (PostgreSQL's advisory locks).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from ledger.index import sealing

from indexhelpers import cli, make_run
from recordkit import compact

pytestmark = pytest.mark.postgres


def count(db: str, where: str = "") -> int:
    res = cli("sql", f"SELECT count(*) AS n FROM runs_v {where}", "--json", "--db", db)
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout)[0]["n"]


def run_ids(db: str) -> list[str]:
    res = cli("sql", "SELECT run_id FROM runs_v ORDER BY run_id", "--json", "--db", db)
    assert res.exit_code == 0, res.output
    return [r["run_id"] for r in orjson.loads(res.stdout)]


def index(db: str, *homes: Path, extra: tuple[str, ...] = ()) -> dict:
    args = ["index", "--db", db, "--json", *extra]
    for h in homes:
        args += ["--home", str(h)]
    res = cli(*args)
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout)


def on_machine(monkeypatch, name: str) -> None:
    monkeypatch.setenv("LEDGER_MACHINE_ID", name)


def test_two_machines_with_the_same_home_path_keep_each_others_runs(tmp_path, db_url, monkeypatch):
    monkeypatch.delenv("LEDGER_DB", raising=False)
    path = tmp_path / "home"  # the same default path on both machines (same user name)
    on_machine(monkeypatch, "laptop-a")
    a = {make_run(path).name for _ in range(3)}
    index(db_url, path)
    shutil.move(path, tmp_path / "a-disk")  # machine A's disk is elsewhere now
    on_machine(monkeypatch, "laptop-b")
    b = {make_run(path).name for _ in range(2)}
    for _ in range(2):  # every pass of B: A's runs stay
        summary = index(db_url, path)
        assert summary["removed"] == 0
        assert set(run_ids(db_url)) == a | b
    # A indexes again (its disk back at the path): B's runs stay too
    shutil.move(path, tmp_path / "b-disk")
    shutil.move(tmp_path / "a-disk", path)
    on_machine(monkeypatch, "laptop-a")
    assert index(db_url, path)["removed"] == 0
    assert set(run_ids(db_url)) == a | b
    homes = orjson.loads(cli("sql", "SELECT home, home_machine, count(*) AS n FROM runs_v GROUP BY home, "
                             "home_machine ORDER BY home_machine", "--json", "--db", db_url).stdout)
    assert homes == [{"home": str(path), "home_machine": "laptop-a", "n": 3},
                     {"home": str(path), "home_machine": "laptop-b", "n": 2}]


def test_a_reader_or_an_index_naming_a_home_that_is_not_here_removes_nothing(tmp_path, db_url, monkeypatch):
    monkeypatch.delenv("LEDGER_DB", raising=False)
    home = tmp_path / "home"
    for _ in range(3):
        make_run(home)
    index(db_url, home)
    gone = tmp_path / "elsewhere"
    shutil.move(home, gone)  # the home is not on this disk any more (another machine's, a mount)
    for cmd in (("report", "--json"), ("runs", "--json", "--all"), ("sql", "SELECT 1")):
        res = cli(*cmd, "--home", str(home), "--db", db_url)
        assert res.exit_code == 0, (cmd, res.output)
        assert count(db_url) == 3, cmd
    # another home's pass leaves the missing home's runs alone
    other = tmp_path / "other"
    make_run(other)
    summary = index(db_url, other)
    assert summary["removed"] == 0 and count(db_url) == 4


def test_rebuild_from_one_machine_rebuilds_only_its_homes(tmp_path, db_url, monkeypatch):
    monkeypatch.delenv("LEDGER_DB", raising=False)
    on_machine(monkeypatch, "laptop-a")
    mine = tmp_path / "mine"
    for _ in range(2):
        make_run(mine)
    index(db_url, mine)
    on_machine(monkeypatch, "laptop-b")
    theirs = tmp_path / "theirs"
    for _ in range(3):
        make_run(theirs)
    index(db_url, theirs)
    shutil.move(theirs, tmp_path / "b-disk")  # B's home is not on A
    on_machine(monkeypatch, "laptop-a")
    make_run(mine)
    if db_url.startswith("sqlite"):
        # a rebuilt file is made from this machine's records: it refuses to lose B's home
        res = cli("index", "--home", str(mine), "--db", db_url, "--rebuild")
        assert res.exit_code == 1 and "a rebuild from here would lose their runs" in res.stderr
        assert "ledger homes forget" in res.stderr
        assert count(db_url) == 5 and count(db_url, "WHERE home_machine = 'laptop-b'") == 3
        return
    summary = index(db_url, mine, extra=("--rebuild",))
    assert summary["rebuilt"] and summary["new"] == 3
    assert count(db_url) == 6
    assert count(db_url, "WHERE home_machine = 'laptop-b'") == 3


def test_a_home_through_a_copy_and_a_symlink_is_counted_once(tmp_path, db_url, monkeypatch):
    monkeypatch.delenv("LEDGER_DB", raising=False)
    home = tmp_path / "home"
    for _ in range(4):
        make_run(home)
    index(db_url, home)  # (writes the home's id: the copy carries it)
    truth = orjson.loads(cli("report", "--json", "--home", str(home), "--db", db_url).stdout)
    copy = tmp_path / "synced-copy"
    shutil.copytree(home, copy, symlinks=True, ignore=shutil.ignore_patterns("index.sqlite*"))
    link = tmp_path / "link"
    link.symlink_to(home)
    summary = index(db_url, home, copy, link)
    assert summary["copies"] == 4
    assert count(db_url) == 4
    again = orjson.loads(cli("report", "--json", "--home", str(home), "--db", db_url).stdout)
    assert again["totals"] == truth["totals"]
    assert index(db_url, home, copy, link)["copies"] == 0  # nothing re-read


def test_a_copy_counts_once_its_first_writer_removed_the_run(tmp_path, db_url, monkeypatch):
    monkeypatch.delenv("LEDGER_DB", raising=False)
    home = tmp_path / "home"
    runs = [make_run(home) for _ in range(3)]
    copy = tmp_path / "copy"
    index(db_url, home)
    shutil.copytree(home, copy, ignore=shutil.ignore_patterns("index.sqlite*"))
    index(db_url, copy)
    shutil.rmtree(runs[0])  # gone from the first home: the copy holds it now
    index(db_url, home)
    assert count(db_url) == 2  # (until the copy's home is indexed)
    index(db_url, copy)
    assert sorted(run_ids(db_url)) == sorted(r.name for r in runs)
    assert count(db_url, f"WHERE run_id = '{runs[0].name}' AND home = '{copy}'") == 1


def test_a_copy_with_a_different_manifest_is_shown_not_merged(tmp_path, db_url, monkeypatch):
    monkeypatch.delenv("LEDGER_DB", raising=False)
    home = tmp_path / "home"
    run = make_run(home)
    index(db_url, home)
    copy = tmp_path / "copy"
    shutil.copytree(home, copy, ignore=shutil.ignore_patterns("index.sqlite*", "home-id.json"))
    forged = copy / run.relative_to(home)
    m = orjson.loads((forged / "manifest.json").read_bytes())
    m["cwd"] = "/somewhere/else"
    os.chmod(forged / "manifest.json", 0o600)
    (forged / "manifest.json").write_bytes(compact(m))
    summary = index(db_url, copy)
    assert [p["path"] for p in summary["skipped"]] == [str(forged)]
    assert "different manifest" in summary["skipped"][0]["reason"]
    assert count(db_url) == 1 and count(db_url, f"WHERE home = '{home}'") == 1
    assert f"({home} (home id " in summary["skipped"][0]["reason"]  # names the home that counts it
    # listed on every pass, like a damaged record
    assert "different manifest" in index(db_url, copy)["skipped"][0]["reason"]
    # the first home's run goes: the other run with that id is the only one, and is counted
    shutil.rmtree(run)
    index(db_url, home)
    summary = index(db_url, copy)
    assert summary["skipped"] == [] and count(db_url, f"WHERE home = '{copy}'") == 1 and count(db_url) == 1


# --------------------------------------------------------------------------------------
# locks (PostgreSQL)

HOLDER = r"""
import os, signal, sys
import sqlalchemy as sa
from ledger.index import pglocks
from ledger.index import db as dbmod
eng = dbmod.engine(sys.argv[1], app_name="ledger index")
with eng.connect() as conn:
    with pglocks.held(conn, (pglocks.HOME_NS, int(sys.argv[2])), "home", 5, print):
        print("held", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)  # a laptop asleep mid-pass
"""


def home_row(db: str, home: Path) -> int:
    import sqlalchemy as sa

    eng = sa.create_engine(db)
    with eng.connect() as c:
        hid = c.execute(sa.text("SELECT home_id FROM homes WHERE path = :p"), {"p": str(home)}).scalar_one()
    eng.dispose()
    return hid


def test_a_stalled_indexer_blocks_neither_another_home_nor_a_reader(tmp_path, pg_url, monkeypatch):
    monkeypatch.delenv("LEDGER_DB", raising=False)
    a, b = tmp_path / "a", tmp_path / "b"
    make_run(a)
    make_run(b)
    index(pg_url, a)
    index(pg_url, b)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, pg_url, str(home_row(pg_url, a))], env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        make_run(a)
        make_run(b)
        t0 = time.monotonic()
        assert index(pg_url, b)["new"] == 1  # another home: not blocked at all
        assert time.monotonic() - t0 < 5
        t0 = time.monotonic()
        res = cli("index", "--home", str(a), "--db", pg_url, "--lock-timeout", "1")
        took = time.monotonic() - t0
        assert res.exit_code == 1 and "\nError: the home " in res.stderr and "Hint:" in res.stderr
        # who holds it, and how long it was waited for
        assert "locked by 'ledger index " in res.stderr and "gave up after 1 s" in res.stderr
        assert took < 6, took
        t0 = time.monotonic()
        res = cli("report", "--json", "--home", str(a), "--db", pg_url)
        assert res.exit_code == 0, res.output
        assert "it may be stale" in res.stderr and "locked by" in res.stderr
        assert time.monotonic() - t0 < 12
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
    # the holder's connection ended: the lock is free again
    assert index(pg_url, a, extra=("--lock-timeout", "10"))["new"] == 1


# --------------------------------------------------------------------------------------
# ledger homes list|forget


def test_homes_are_listed_and_forgotten_only_when_asked(tmp_path, db_url, monkeypatch):
    monkeypatch.delenv("LEDGER_DB", raising=False)
    a, b = tmp_path / "a", tmp_path / "b"
    runs_a = [make_run(a) for _ in range(2)]
    make_run(b)
    index(db_url, a, b)
    copy = tmp_path / "a-copy"
    shutil.copytree(a, copy, ignore=shutil.ignore_patterns("index.sqlite*"))
    index(db_url, copy)
    listed = orjson.loads(cli("homes", "list", "--json", "--db", db_url).stdout)
    assert [(h["path"], h["runs"], h["copies"], h["here"]) for h in listed] == [
        (str(a), 2, 0, True), (str(b), 1, 0, True), (str(copy), 0, 2, True)]
    assert listed[0]["home_id"] == listed[2]["home_id"]  # the copy carries the home's id
    shutil.rmtree(a)  # gone from this disk: still in the index
    index(db_url, b)
    assert count(db_url) == 3
    res = cli("homes", "forget", listed[0]["home_id"], "--db", db_url)  # the id names two rows
    assert res.exit_code == 1 and "names 2 homes" in res.stderr and "Hint:" in res.stderr
    res = cli("homes", "forget", str(listed[0]["id"]), "--db", db_url, "--json")
    assert res.exit_code == 0, res.output
    assert orjson.loads(res.stdout)["runs"] == 2
    assert count(db_url) == 1
    index(db_url, copy)  # the copies are released: the copy's home counts them now
    assert sorted(run_ids(db_url)) == sorted([r.name for r in runs_a] + run_ids_of(b))
    res = cli("homes", "forget", "/no/such/home", "--db", db_url)
    assert res.exit_code == 1 and res.stderr.startswith("Error: no home") and "ledger homes list" in res.stderr
    for width in ("80", "250"):
        monkeypatch.setenv("COLUMNS", width)
        table = cli("homes", "list", "--db", db_url)
        assert table.exit_code == 0 and "Traceback" not in table.output
        assert max(len(line) for line in table.stdout.splitlines()) <= int(width)
        first = table.stdout.splitlines()[3].split()  # (header, rule; a blank line first)
        assert first[:4] == [str(listed[1]["id"]), "1", "0", "yes"]  # the id is whole, first
    assert str(b) in table.stdout


def run_ids_of(home: Path) -> list[str]:
    return [p.name for p in (home / "runs").glob("*/*")]


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_select_only_role_reads_everything(tmp_path, pg_url, monkeypatch, backend):
    """An analyst with SELECT only: report, sql, runs and show answer (from the index as it is)."""
    import uuid

    import psycopg

    monkeypatch.delenv("LEDGER_DB", raising=False)
    home = tmp_path / "home"
    run = make_run(home)
    index(pg_url, home)
    role = f"ledger_ro_{uuid.uuid4().hex[:8]}"
    admin_url = pg_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin_url, autocommit=True) as con:
        con.execute(f'CREATE ROLE "{role}" LOGIN')
        con.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
        con.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
    try:
        ro = pg_url.replace("postgres@", f"{role}@", 1)
        for cmd in (("report", "--json"), ("runs", "--json", "--all"), ("show", run.name, "--json"),
                    ("sql", "SELECT count(*) AS n FROM runs_v", "--json"), ("homes", "list", "--json")):
            res = cli(*cmd, "--home", str(home), "--db", ro)
            assert res.exit_code == 0, (cmd, res.output)
            assert "Traceback" not in res.output
        res = cli("homes", "forget", "1", "--home", str(home), "--db", ro)
        assert res.exit_code == 1 and res.stderr.startswith("Error: ")
    finally:
        with psycopg.connect(admin_url, autocommit=True) as con:
            con.execute(f'DROP OWNED BY "{role}"')
            con.execute(f'DROP ROLE "{role}"')


def test_a_backend_killed_mid_pass_is_an_error_and_the_next_pass_resumes(tmp_path, pg_url, monkeypatch):
    """The server ends the indexer's connection mid-pass (an admin, a failover): Error + Hint
    and a few lines, no traceback with rows; the next pass completes the index."""
    import sqlalchemy as sa

    from recordkit import write_record

    monkeypatch.delenv("LEDGER_DB", raising=False)
    home = tmp_path / "home"
    for _ in range(3000):
        write_record(home)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-m", "ledger", "index", "--home", str(home), "--db", pg_url],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    admin = sa.create_engine(pg_url)
    killed = False
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None and not killed:
            with admin.connect() as c:  # once a first batch is committed: mid-pass
                if c.execute(sa.text("SELECT to_regclass('public.runs')")).scalar() is not None and \
                        c.execute(sa.text("SELECT EXISTS (SELECT 1 FROM runs)")).scalar():
                    killed = bool(c.execute(sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE "
                        "'ledger index%' AND datname = current_database()")).fetchall())
            time.sleep(0.05)
        out, err = proc.communicate(timeout=120)
    finally:
        admin.dispose()
    if not killed:
        pytest.skip("the pass finished before its backend could be ended (a very fast machine)")
    text = err.decode()
    assert proc.returncode == 1, text
    assert "Traceback" not in text and len(text.splitlines()) <= 6, text
    assert "Error: lost the connection to the index" in text and "Hint:" in text
    summary = index(pg_url, home)
    assert summary["new"] + summary["unchanged"] == 3000 and count(pg_url) == 3000


def test_a_no_change_pass_records_that_the_home_synced(tmp_path, pg_url, monkeypatch):
    monkeypatch.delenv("LEDGER_DB", raising=False)
    home = tmp_path / "home"
    make_run(home)
    index(pg_url, home)
    first = orjson.loads(cli("homes", "list", "--json", "--db", pg_url).stdout)[0]["last_indexed_at"]
    time.sleep(0.05)
    assert index(pg_url, home)["unchanged"] == 1
    again = orjson.loads(cli("homes", "list", "--json", "--db", pg_url).stdout)[0]["last_indexed_at"]
    assert again > first


def test_report_home_and_the_home_id_filter(tmp_path, db_url, monkeypatch):
    """The home dimension of reports: one row per home (its path, id and machine), totals over
    all; --home-id keeps one home's runs (every location of it)."""
    monkeypatch.delenv("LEDGER_DB", raising=False)
    path = tmp_path / "home"
    on_machine(monkeypatch, "laptop-a")
    for _ in range(2):
        make_run(path, cost=0.5)
    index(db_url, path)
    uid_a = orjson.loads((path / "home-id.json").read_bytes())["home_id"]
    shutil.move(path, tmp_path / "a-disk")
    on_machine(monkeypatch, "laptop-b")
    make_run(path, cost=0.25)
    index(db_url, path)
    res = cli("report", "home", "--json", "--db", db_url, "--home", str(path))
    assert res.exit_code == 0, res.output
    doc = orjson.loads(res.stdout)
    rows = sorted((r["key"], r["machine"], r["home_id"] == uid_a, r["runs"], r["cost_usd"]) for r in doc["rows"])
    assert rows == [(str(path), "laptop-a", True, 2, 1.0), (str(path), "laptop-b", False, 1, 0.25)]
    assert doc["totals"]["runs"] == 3
    one = orjson.loads(cli("report", "--home-id", uid_a, "--json", "--db", db_url, "--home", str(path)).stdout)
    assert one["totals"]["runs"] == 2 and one["query"]["filters"] == {"home_id": [uid_a]}
    table = cli("report", "home", "--db", db_url, "--home", str(path))
    assert table.exit_code == 0 and "home" in table.stdout.splitlines()[2]


def test_a_copy_of_many_runs_is_counted_once(tmp_path, db_url, monkeypatch):
    """A batch with more runs than one copies query holds (copies.CHUNK; the first batch of a
    pass is FIRST_BATCH, the next ones larger): every one is a copy."""
    from ledger.index import copies
    from ledger.index.indexer import BATCH, FIRST_BATCH
    from recordkit import write_record

    monkeypatch.delenv("LEDGER_DB", raising=False)
    home = tmp_path / "home"
    n = FIRST_BATCH + copies.CHUNK + 37
    assert BATCH > copies.CHUNK + 37
    for _ in range(n):
        write_record(home)
    index(db_url, home)
    copy = tmp_path / "copy"
    shutil.copytree(home, copy, ignore=shutil.ignore_patterns("index.sqlite*"))
    assert index(db_url, copy)["copies"] == n
    assert count(db_url) == n and count(db_url, f"WHERE home = '{copy}'") == 0


def test_a_copy_in_a_sealed_shard_is_counted_once_the_first_writer_removed_the_run(tmp_path, db_url, monkeypatch):
    """The copy's shard was sealed (settled, quiet): releasing the copy opens it again."""
    import ledger.index.indexer as indexer

    monkeypatch.delenv("LEDGER_DB", raising=False)
    monkeypatch.setattr(sealing, "SEAL_GRACE_NS", 0)  # sealed as soon as not racy
    home = tmp_path / "home"
    runs = [make_run(home) for _ in range(3)]
    time.sleep(0.3)
    index(db_url, home)
    copy = tmp_path / "copy"
    shutil.copytree(home, copy, ignore=shutil.ignore_patterns("index.sqlite*"))
    time.sleep(0.3)
    assert index(db_url, copy)["copies"] == 3
    again = index(db_url, copy)
    assert again["records_read"] == 0 and again["unchanged"] == 3  # sealed: not looked into
    shutil.rmtree(runs[1])
    time.sleep(0.3)
    index(db_url, home)
    index(db_url, copy)
    assert sorted(run_ids(db_url)) == sorted(r.name for r in runs)
    assert count(db_url, f"WHERE home = '{copy}'") == 1


def _default_home_with_a_run(tmp_path, monkeypatch) -> tuple[Path, str]:
    """The user's default home (platformdirs' user data dir) holding one run, as the README's
    set-up command leaves it; no --home, no LEDGER_HOME, no LEDGER_DB."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("LEDGER_HOME", raising=False)
    monkeypatch.delenv("LEDGER_DB", raising=False)
    from ledger.home import resolve_home

    default = resolve_home(None)
    assert default == tmp_path / "xdg" / "ledger"
    return default, make_run(default).name


def test_a_reader_of_another_db_does_not_index_the_default_home_nobody_named(tmp_path, db_url, monkeypatch):
    """Issue 32 item 13: `ledger sql --db OTHER` / `report --db URL` / `runs --db` with no
    --home leave the default home out of OTHER (a team's PostgreSQL must not get every
    laptop's runs), and say so on stderr; naming the home (--home, LEDGER_HOME) indexes it."""
    default, run = _default_home_with_a_run(tmp_path, monkeypatch)
    for args in (("sql", "SELECT count(*) AS n FROM runs_v", "--json"), ("report", "--json"),
                 ("runs", "--json"), ("show", run[4:12])):
        res = cli(*args, "--db", db_url)
        assert f"the default home {default} was not indexed into" in res.stderr, (args, res.output)
        assert "--home" in res.stderr
    assert count(db_url) == 0
    res = cli("sql", "SELECT count(*) AS n FROM runs_v", "--json", "--db", db_url, "--home", str(default))
    assert res.exit_code == 0 and "was not indexed" not in res.stderr, res.output
    assert count(db_url) == 1
    # its own index (no --db) is still brought up to date without naming it
    res = cli("runs", "--json")
    assert res.exit_code == 0 and [r["id"] for r in orjson.loads(res.stdout)] == [run], res.output
    assert "was not indexed" not in res.stderr
    monkeypatch.setenv("LEDGER_HOME", str(default))  # named by the environment
    make_run(default)
    assert "was not indexed" not in cli("report", "--db", db_url).stderr
    assert count(db_url) == 2


def test_the_suite_does_not_see_the_users_default_home():
    """conftest points the platform's data dir at a scratch dir: with the README's order (the
    set-up command creates ~/.local/share/ledger first) no test reads or indexes it."""
    from ledger.home import resolve_home

    env = dict(os.environ)
    env.pop("LEDGER_HOME", None)
    assert not str(resolve_home(None, env)).startswith(os.path.expanduser("~/.local/share"))
    assert str(resolve_home(None, env)).startswith(os.environ["XDG_DATA_HOME"])
