"""`ledger sql` does nothing but read, and stays bounded (issue 17, items 3, 6 and 10).

PostgreSQL runs as the superuser URL a careless team would use: every statement below must
be refused and leave no trace on the server (no program run, no file written, no backend
terminated, no lock held, no notification sent). SQLite and PostgreSQL: a query stops at
`--timeout` and on Ctrl-C (exit 130); a query may start with an SQL comment; blobs print as
hex.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson
import pytest

from ledger.index import sealing

from indexhelpers import cli, make_run

PG_URL = os.environ.get("LEDGER_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REPO = Path(__file__).resolve().parent.parent
FOREVER = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def _admin(dbname: str | None = None):
    import psycopg

    base = PG_URL.replace("postgresql+psycopg://", "postgresql://")
    if dbname:
        base = base.rsplit("/", 1)[0] + "/" + dbname
    return psycopg.connect(base, autocommit=True, connect_timeout=5)


def _server_or_skip():
    try:
        _admin().close()
    except Exception as exc:  # noqa: BLE001 - any connection failure
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required under CI and did not answer: {exc}")
        pytest.skip(f"PostgreSQL not available: {exc}")


@pytest.fixture(autouse=True)
def no_racy_window(monkeypatch):
    from ledger.index import indexer

    monkeypatch.setattr(sealing, "RACY_NS", 0)


@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    """One indexed PostgreSQL database (one run) for the module: (url, dbname, home)."""
    _server_or_skip()
    from ledger.index import indexer

    name = f"ledger_t_{uuid.uuid4().hex[:12]}"
    with _admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = PG_URL.rsplit("/", 1)[0] + "/" + name
    home = tmp_path_factory.mktemp("pghome") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sealing, "RACY_NS", 0)
        make_run(home)
        assert cli("index", "--home", str(home), "--db", url).exit_code == 0
    try:
        yield url, name, home
    finally:
        with _admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def server_dir():
    """A directory the server's OS user can write into (pytest's tmp_path is private)."""
    d = tempfile.mkdtemp(prefix="ledger-sql-safety-")
    os.chmod(d, 0o777)
    try:
        yield Path(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def sql(pg, *args, **kw):
    url, _name, home = pg
    return cli("sql", "--home", str(home), "--db", url, *args, **kw)


def _refused(res):
    assert res.exit_code == 1, (res.exit_code, res.output)
    assert res.stderr.startswith("Error: ledger sql is read-only"), res.stderr
    assert "\nHint: " in res.stderr and "Traceback" not in res.output
    assert res.stdout == ""


def _runs_count(pg) -> int:
    with _admin(pg[1]) as c:
        return c.execute("SELECT count(*) FROM runs").fetchone()[0]


# --------------------------------------------------------------------------------------
# PostgreSQL: refused, and nothing happened on the server


@pytest.mark.postgres
def test_pg_select_runs_as_the_reader_role(pg):
    res = sql(pg, "SELECT count(*) AS n, current_user AS cu, session_user AS su FROM runs_v", "--json")
    assert res.exit_code == 0, res.output
    assert orjson.loads(res.stdout) == [{"n": 1, "cu": "ledger_reader", "su": "ledger_reader"}]
    # the reader is what ledger made of it: login only, nothing else, marked as ledger's
    with _admin(pg[1]) as c:
        row = c.execute("SELECT rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls, rolcanlogin, "
                        "shobj_description(oid, 'pg_authid'), "
                        "EXISTS (SELECT 1 FROM pg_auth_members WHERE member = r.oid) "
                        "FROM pg_roles r WHERE rolname = 'ledger_reader'").fetchone()
        assert row[:6] == (False, False, False, False, False, True) and not row[7]
        assert "ledger" in row[6]
        # it may read ledger's tables and views, and nothing it was not given
        assert c.execute("SELECT has_table_privilege('ledger_reader', 'runs', 'SELECT'), "
                         "has_table_privilege('ledger_reader', 'runs_v', 'SELECT'), "
                         "has_table_privilege('ledger_reader', 'runs', 'INSERT'), "
                         "has_table_privilege('ledger_reader', 'alembic_version', 'SELECT')").fetchone() == (
            True, True, False, False)


@pytest.mark.postgres
def test_pg_copy_to_program_and_file_run_nothing(pg, server_dir):
    # control: the server itself can write here, so an absent file proves a refusal
    with _admin(pg[1]) as c:
        c.execute(f"COPY (SELECT 1) TO '{server_dir / 'control.txt'}'")
    assert (server_dir / "control.txt").exists()
    marker, target = server_dir / "marker", server_dir / "copy.txt"
    for q in (f"COPY (SELECT 1) TO PROGRAM 'touch {marker}'",
              f"COPY (SELECT run_id FROM runs) TO '{target}'",
              f"/* hidden */ copy runs TO '{target}'"):
        res = sql(pg, q)
        _refused(res)
    assert not marker.exists() and not target.exists()


ESCAPES = [
    # the role cannot be switched back to the connecting superuser inside one statement
    "SELECT set_config('role', 'postgres', true), query_to_xml('SELECT pg_read_file(''/etc/passwd'')', true, false, '')",
    "SELECT set_config('role', 'none', true), query_to_xml('SELECT pg_read_file(''/etc/passwd'')', true, false, '')",
    "SELECT set_config('session_authorization', 'postgres', true), "
    "query_to_xml('SELECT pg_read_file(''/etc/passwd'')', true, false, '')",
    "SELECT query_to_xml('SELECT pg_read_file(''/etc/passwd'')', true, false, '')",
    "SELECT pg_read_file('/etc/passwd')",
    "SELECT pg_read_binary_file('/etc/passwd')",
    "SELECT pg_ls_dir('/')",
    "SET SESSION AUTHORIZATION postgres",
    "SET ROLE postgres",
    "RESET ROLE",
    "SET default_transaction_read_only = off",
    "WITH d AS (DELETE FROM runs RETURNING 1) SELECT count(*) FROM d",
    "SELECT * FROM runs FOR UPDATE",
    "ANALYZE",
]


@pytest.mark.postgres
@pytest.mark.parametrize("query", ESCAPES)
def test_pg_escapes_are_refused(pg, query):
    res = sql(pg, query)
    _refused(res)
    assert "root:" not in res.output
    assert _runs_count(pg) == 1
    res = sql(pg, "SELECT session_user AS su FROM runs_v", "--json")
    assert orjson.loads(res.stdout) == [{"su": "ledger_reader"}]


@pytest.mark.postgres
def test_pg_analyze_names_the_statement(pg):
    res = sql(pg, "ANALYZE")
    assert "ANALYZE is not allowed" in res.stderr and "CREATE" not in res.stderr


@pytest.mark.postgres
def test_pg_terminate_backend_leaves_other_backends(pg):
    with _admin(pg[1]) as victim:
        pid = victim.info.backend_pid
        for q in (f"SELECT pg_terminate_backend({pid})", f"SELECT pg_cancel_backend({pid})",
                  f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = {pid}"):
            _refused(sql(pg, q))
            assert victim.execute("SELECT 1").fetchone() == (1,)  # still alive


@pytest.mark.postgres
def test_pg_no_lock_is_taken_or_kept(pg):
    for q in ("LOCK TABLE runs", "LOCK TABLE runs IN ACCESS EXCLUSIVE MODE", "SELECT pg_advisory_lock(1)",
              "SELECT pg_advisory_lock(1), pg_try_advisory_lock(2), count(*) FROM runs",
              "SELECT pg_advisory_xact_lock(3)", f"SELECT pg_advisory_lock({0x4C444752})"):
        _refused(sql(pg, q))
    with _admin(pg[1]) as c:
        assert c.execute("SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
                         "WHERE d.datname = %s AND l.pid <> pg_backend_pid() AND "
                         "(l.locktype = 'advisory' OR l.mode <> 'AccessShareLock')", (pg[1],)).fetchone() == (0,)
        # the table can still be locked exclusively at once by its owner
        c.execute("SET lock_timeout = '2s'")
        with c.transaction():
            c.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
        assert c.execute("SELECT pg_try_advisory_lock(1)").fetchone() == (True,)
        c.execute("SELECT pg_advisory_unlock_all()")


@pytest.mark.postgres
def test_pg_notify_is_refused_and_nothing_is_delivered(pg):
    with _admin(pg[1]) as listener:
        listener.execute("LISTEN ledger_x")
        _refused(sql(pg, "NOTIFY ledger_x, 'hello'"))
        # pg_notify() inside a SELECT: the transaction is rolled back, nothing is sent
        sql(pg, "SELECT pg_notify('ledger_x', 'hello')")
        listener.execute("SELECT 1")
        assert list(listener.notifies(timeout=0.5)) == []


@pytest.mark.postgres
def test_pg_grants_are_kept_in_sync(pg):
    """A rebuild or migration recreates tables and views without grants: `ledger sql`
    grants again what is missing."""
    with _admin(pg[1]) as c:
        c.execute("REVOKE SELECT ON runs_v, runs FROM ledger_reader")
    res = sql(pg, "SELECT count(*) AS n FROM runs_v", "--json")
    assert res.exit_code == 0, res.output
    assert orjson.loads(res.stdout) == [{"n": 1}]
    url, _name, home = pg
    assert cli("index", "--rebuild", "--home", str(home), "--db", url).exit_code == 0
    res = sql(pg, "SELECT count(*) AS n, session_user AS su FROM runs", "--json")
    assert orjson.loads(res.stdout) == [{"n": 1, "su": "ledger_reader"}], res.output


@pytest.mark.postgres
def test_pg_timeout(pg):
    for q in ("SELECT pg_sleep(30)", FOREVER,
              # the statement cannot lift its own deadline
              "SELECT set_config('statement_timeout', '0', true), pg_sleep(30)"):
        t = time.monotonic()
        res = sql(pg, "--timeout", "1", q)
        assert time.monotonic() - t < 8
        assert res.exit_code == 1, res.output
        assert res.stderr.startswith("Error: the query ran longer than 1 s") and "--timeout" in res.stderr


@pytest.fixture
def pg_role():
    """A login role for this test (roles belong to the whole server), dropped afterwards.
    Request it before `pg_url`: the database holding its grants is dropped first."""
    _server_or_skip()
    name = f"ledger_t_role_{uuid.uuid4().hex[:8]}"
    with _admin() as admin:
        admin.execute(f"CREATE ROLE {name} LOGIN")
    try:
        yield name
    finally:
        with _admin() as admin:
            admin.execute(f"DROP ROLE IF EXISTS {name}")


@pytest.mark.postgres
def test_pg_named_role(pg_role, pg_url, home, monkeypatch):
    make_run(home)
    assert cli("index", "--db", pg_url).exit_code == 0
    q = "SELECT count(*) AS n, session_user AS su FROM runs_v"
    res = cli("sql", "--role", pg_role, "--db", pg_url, q, "--json")
    assert res.exit_code == 0, res.output
    assert orjson.loads(res.stdout) == [{"n": 1, "su": pg_role}]
    monkeypatch.setenv("LEDGER_SQL_ROLE", pg_role)
    res = cli("sql", "--db", pg_url, "SELECT pg_read_file('/etc/passwd')")
    assert res.exit_code == 1 and f"role {pg_role}" in res.stderr and "root:" not in res.output
    monkeypatch.delenv("LEDGER_SQL_ROLE")
    res = cli("sql", "--role", "ledger_t_no_such_role", "--db", pg_url, q)
    assert res.exit_code == 1 and "does not exist" in res.stderr and "Hint:" in res.stderr
    assert "Traceback" not in res.output


@pytest.fixture
def owner_db(pg_role, home):
    """A database owned by a role that may not create roles (the URL connects as it)."""
    name = f"ledger_t_{uuid.uuid4().hex[:12]}"
    with _admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}" OWNER {pg_role}')
    import sqlalchemy as sa

    url = sa.engine.make_url(PG_URL).set(username=pg_role, database=name).render_as_string(hide_password=False)
    try:
        yield url, pg_role
    finally:
        with _admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgres
def test_pg_user_without_createrole_keeps_read_only_and_timeout(owner_db, home):
    url, owner = owner_db
    make_run(home)
    assert cli("index", "--db", url).exit_code == 0, "index as the owner"
    res = cli("sql", "--db", url, "SELECT count(*) AS n, session_user AS su FROM runs_v", "--json")
    assert orjson.loads(res.stdout) == [{"n": 1, "su": owner}], res.output
    for q in ("DELETE FROM runs", "SELECT pg_advisory_lock(1)", "SET default_transaction_read_only = off",
              "WITH d AS (DELETE FROM runs RETURNING 1) SELECT count(*) FROM d"):
        _refused(cli("sql", "--db", url, q))
    res = cli("sql", "--db", url, "--timeout", "1", "SELECT pg_sleep(30)")
    assert res.exit_code == 1 and "ran longer than 1 s" in res.stderr


@pytest.mark.postgres
def test_pg_blob_and_leading_comment(pg):
    res = sql(pg, "--", "-- a comment\nSELECT '\\x00ff'::bytea AS b")
    assert res.exit_code == 0, res.output
    assert "x'00ff'" in res.stdout and "b'" not in res.stdout


# --------------------------------------------------------------------------------------
# SQLite: timeout, Ctrl-C, messages


@pytest.fixture
def sqlite_index(home, tmp_path):
    make_run(home)
    url = f"sqlite:///{tmp_path / 'index.sqlite'}"
    assert cli("index", "--db", url).exit_code == 0
    return url


def test_sqlite_timeout_stops_a_query_that_never_ends(sqlite_index):
    t = time.monotonic()
    res = cli("sql", "--timeout", "1", "--db", sqlite_index, FOREVER)
    elapsed = time.monotonic() - t
    assert res.exit_code == 1, res.output
    assert res.stderr.startswith("Error: the query ran longer than 1 s"), res.stderr
    assert "Hint:" in res.stderr and "--timeout" in res.stderr
    assert 0.9 < elapsed < 5
    # the deadline covers fetching too (rows are read in chunks)
    res = cli("sql", "--timeout", "1", "--db", sqlite_index, "--json",
              "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c")
    assert res.exit_code == 1 and "ran longer than 1 s" in res.stderr


def test_default_timeout_is_documented_and_shared():
    from ledger.cli import sql_cmd
    from ledger.index import sqlro

    assert sql_cmd.DEFAULT_TIMEOUT == sqlro.DEFAULT_TIMEOUT
    assert f"`--timeout SECONDS` (default {sqlro.DEFAULT_TIMEOUT:g};" in (REPO / "docs" / "sql.md").read_text()
    res = cli("sql", "--timeout", "-1", "SELECT 1")
    assert res.exit_code == 2 and res.stderr.startswith("Error:")


def _interrupt(args: list[str], env: dict[str, str]) -> tuple[int, str, float]:
    """Start `python -m ledger sql ARGS`, let the query run, send SIGINT (Ctrl-C)."""
    cmd = [sys.executable, "-m", "ledger", "sql", *args[:-1]]
    t = time.monotonic()  # how long start-up and the (empty) index pass take on this machine now
    subprocess.run([*cmd, "SELECT 1"], cwd=REPO, env=env, capture_output=True, check=True, timeout=60)
    startup = time.monotonic() - t
    proc = subprocess.Popen([*cmd, args[-1]], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(max(2.0, 3 * startup))  # the query runs by now
        assert proc.poll() is None, proc.communicate()
        t = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=15)
        return proc.returncode, err, time.monotonic() - t
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LEDGER_DB", "LEDGER_SQL_ROLE")}
    env.update(LEDGER_HOME=str(home), PYTHONPATH=str(REPO))
    return env


def test_sqlite_ctrl_c_stops_the_query(sqlite_index, home):
    code, err, elapsed = _interrupt(["--timeout", "0", "--db", sqlite_index, FOREVER], _env(home))
    assert code == 130, err
    assert err.startswith("Interrupted: the query was stopped") and "Traceback" not in err
    assert elapsed < 3


@pytest.mark.postgres
def test_pg_ctrl_c_cancels_the_query(pg):
    url, name, home = pg
    code, err, elapsed = _interrupt(["--db", url, "SELECT pg_sleep(60)"], _env(home))
    assert code == 130, err
    assert err.startswith("Interrupted: the query was stopped") and "Traceback" not in err
    assert elapsed < 5
    with _admin(name) as c:  # the server stopped it too
        assert c.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' "
                         "AND pid <> pg_backend_pid()").fetchone() == (0,)


def test_sqlite_analyze_names_the_statement(sqlite_index):
    for q in ("ANALYZE", "analyze runs", "/* c */ ANALYZE"):
        res = cli("sql", "--db", sqlite_index, q)
        assert res.exit_code == 1
        assert "ledger sql is read-only: ANALYZE is not allowed" in res.stderr, res.stderr
        assert "CREATE TABLE" not in res.stderr


def test_query_starting_with_a_comment(sqlite_index):
    q = "-- how many runs\nSELECT count(*) AS n FROM runs_v"
    for args, kw in ((("--json", "--", q), {}),  # after `--`
                     (("--json", q), {}),  # bare: it has blanks, no option looks like that
                     ((q, "--json"), {}),
                     (("--json", "-"), {"input": q})):  # stdin
        res = cli("sql", "--db", sqlite_index, *args, **kw)
        assert res.exit_code == 0, (args, res.output)
        assert orjson.loads(res.stdout) == [{"n": 1}]
    res = cli("sql", "--db", sqlite_index, "-- nothing but a comment")
    assert res.exit_code == 1 and "the query is empty" in res.stderr


@pytest.mark.parametrize("args,says", [
    (("--jsn", "SELECT 1"), "no such option: --jsn"),
    (("SELECT 1", "--jsn"), "no such option: --jsn"),
    (("--", "SELECT 1", "--json"), "--json came after `--`"),
    (("SELECT 1", "SELECT 2"), "unexpected extra argument"),
])
def test_misplaced_arguments_are_usage_errors(sqlite_index, args, says):
    res = cli("sql", "--db", sqlite_index, *args)
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith(f"Error: {says}"), res.stderr
    assert "\nHint: " in res.stderr and "Traceback" not in res.output and "╭" not in res.output
    if "option" in says or "--" in says:
        assert "`--`" in res.stderr and "stdin" in res.stderr


def test_blobs_print_as_hex(sqlite_index):
    q = "SELECT x'00ff' AS small, zeroblob(100) AS big"
    res = cli("sql", "--db", sqlite_index, q)
    assert res.exit_code == 0, res.output
    assert "x'00ff'" in res.stdout and "(100 bytes)" in res.stdout and "b'" not in res.stdout
    res = cli("sql", "--db", sqlite_index, q, "--json")
    assert orjson.loads(res.stdout) == [{"small": "00ff", "big": "00" * 100}]
    res = cli("sql", "--db", sqlite_index, q, "--csv")
    assert res.stdout.splitlines()[1] == "00ff," + "00" * 100


@pytest.mark.postgres
def test_pg_reader_gets_a_password_when_it_cannot_log_in_without_one(pg, monkeypatch):
    """This server trusts everyone, so the refusal of a password-less login is simulated;
    the password that ledger then sets is real (a SCRAM verifier, valid for minutes)."""
    import psycopg

    from ledger.index import sqlro

    real, seen = sqlro._connect_as, []

    def connect_as(eng, role, password):
        seen.append(password)
        if password is None:
            raise psycopg.OperationalError("fe_sendauth: no password supplied")
        return real(eng, role, password)

    monkeypatch.setattr(sqlro, "_connect_as", connect_as)
    res = sql(pg, "SELECT session_user AS su", "--json")
    assert res.exit_code == 0, res.output
    assert orjson.loads(res.stdout) == [{"su": "ledger_reader"}]
    assert seen[0] is None and len(seen) == 2 and len(seen[1]) >= 24
    with _admin() as c:
        verifier, minutes = c.execute(
            "SELECT rolpassword, extract(epoch FROM rolvaliduntil - now()) / 60 FROM pg_authid "
            "WHERE rolname = 'ledger_reader'").fetchone()
    assert verifier.startswith(("SCRAM-SHA-256$", "md5")) and seen[1] not in verifier
    assert 5 < minutes <= 10
