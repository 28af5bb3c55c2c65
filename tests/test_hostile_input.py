"""Hostile input is normal input: bad homes, bad `--db` values, damaged index pages.

Every case asserts the exit code, `Error:` + `Hint:` on stderr, no traceback, and that no byte
outside what ledger owns changed (a checksum of the whole sandbox before and after).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from conftest import PG_URL
from indexhelpers import cli, make_run, records_runs_json
from ledger.index import db as dbmod
from ledger.index import setaside


def tree_state(root: Path) -> dict[str, tuple]:
    """Every entry under `root`: type, mode, and content hash (files) or target (links)."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("dir", st.st_mode)
            elif not os.path.isfile(p):  # a FIFO or device: never opened (it could block)
                out[rel] = ("special", st.st_mode)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", st.st_mode, hashlib.sha256(f.read()).hexdigest())
    return out


def run_cli(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 120,
            text: bool = True) -> subprocess.CompletedProcess:
    """Run a command in its own process group; on a timeout the whole group is killed (an
    indexer's worker processes included), so a stuck command fails the test, never hangs it."""
    import signal

    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=env, text=text, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"{args} did not finish in {timeout} s: {err[-2000:]!r}") from None
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def no_traceback(res) -> None:
    assert "Traceback" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A home with runs and its index, next to things that are not ledger's."""
    home = tmp_path / "home"
    monkeypatch.setenv("LEDGER_HOME", str(home))
    monkeypatch.delenv("LEDGER_DB", raising=False)
    run = make_run(home)
    assert cli("index").exit_code == 0
    proj = tmp_path / "project"
    (proj / "src").mkdir(parents=True)
    (proj / "src" / "main.py").write_text("print('mine')\n")
    (tmp_path / "notes.txt").write_text("my notes\n" * 100)
    con = sqlite3.connect(tmp_path / "app.db")
    con.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, other TEXT)")
    con.execute("INSERT INTO runs (other) VALUES ('someone else')")
    con.commit()
    con.close()
    return tmp_path, home, run


# (value, what stderr must say); {t} is the sandbox directory
BAD_DBS = [
    ("{t}/project", "a directory"),
    ("{t}/project/", "names a directory"),
    ("sqlite:///{t}/project", "a directory"),
    ("{t}/notes.txt", "not an SQLite database"),
    ("sqlite:///{t}/notes.txt", "not an SQLite database"),
    ("{t}/app.db", "another application's SQLite database"),
    ("{t}/no/such/dir/index.sqlite", "does not exist"),
    (":memory:", "in-memory"),
    ("sqlite:///:memory:", "in-memory"),
    ("sqlite://", "expected sqlite:///PATH"),
    ("foo://bar/baz", "unsupported database 'foo'"),
    ("mysql://root@127.0.0.1/test", "unsupported database 'mysql'"),
    ("postgresql+psycopg2://postgres@127.0.0.1:5432/test", "driver is not installed (psycopg2)"),
    ("postgresql+psycopg://postgres:sekrit@127.0.0.1:1/test", "Connection refused"),
    (PG_URL.rsplit("/", 1)[0] + "/ledger_no_such_database", 'database "ledger_no_such_database" does not exist'),
    ("postgresql+psycopg://ledger_no_such_role@127.0.0.1:5432/test", 'role "ledger_no_such_role" does not exist'),
]

# the commands that open the index; each must answer a bad --db with Error + Hint, exit 1
DB_COMMANDS = [("runs",), ("runs", "--json"), ("show", "RUN"), ("report",), ("report", "run", "--json"),
               ("sql", "SELECT 1"), ("index",), ("index", "--rebuild"), ("db", "upgrade"), ("db", "check")]


@pytest.mark.parametrize("value,says", BAD_DBS, ids=[v for v, _ in BAD_DBS])
def test_bad_db_values_are_errors_and_change_nothing(sandbox, value, says):
    t, home, run = sandbox
    db = value.format(t=t)
    before = tree_state(t)
    for cmd in DB_COMMANDS:
        args = [a.replace("RUN", run.name) for a in cmd]
        if "does not exist" in says and args[0] in ("index", "db") and args[-1] != "check":
            continue  # the commands asked to build an index create its directory (like mkdir -p)
        res = cli(*args, "--db", db)
        no_traceback(res)
        assert res.exit_code == 1, (args, res.output)
        assert res.stderr.startswith("Error: "), (args, res.stderr)
        assert says in res.stderr, (args, res.stderr)
        assert "\nHint: " in res.stderr, (args, res.stderr)
        assert "sekrit" not in res.output  # a password never reaches the terminal
        assert tree_state(t) == before, f"{args} changed files"
    assert not os.path.exists("/no") or value != "{t}/no/such/dir/index.sqlite"


def test_same_bad_db_from_the_environment(sandbox, monkeypatch):
    t, home, run = sandbox
    before = tree_state(t)
    monkeypatch.setenv("LEDGER_DB", str(t / "project"))
    res = cli("report")
    no_traceback(res)
    assert res.exit_code == 1 and "a directory" in res.stderr and "Hint:" in res.stderr
    assert tree_state(t) == before


def test_a_bare_path_is_an_sqlite_index(sandbox):
    t, home, run = sandbox
    res = cli("runs", "--json", "--all", "--db", str(t / "mine.sqlite"))
    assert res.exit_code == 0, res.output
    assert res.stdout == records_runs_json(home)
    assert dbmod.inspect_sqlite(t / "mine.sqlite").kind == "ok"


def test_the_build_commands_create_the_index_directory(sandbox):
    t, home, run = sandbox
    res = cli("index", "--db", str(t / "new" / "dir" / "index.sqlite"))
    assert res.exit_code == 0, res.output
    assert dbmod.inspect_sqlite(t / "new" / "dir" / "index.sqlite").kind == "ok"


def test_what_is_ledgers_own_is_still_set_aside(sandbox):
    """An empty file, or a damaged file carrying ledger's application_id, at a named place."""
    t, home, run = sandbox
    empty = t / "empty.sqlite"
    empty.touch()
    res = cli("runs", "--json", "--all", "--db", str(empty))
    assert res.exit_code == 0 and "setting it aside" in res.stderr
    ours = t / "ours.sqlite"
    shutil.copy(home / "index.sqlite", ours)
    with open(ours, "r+b") as f:  # keep the header's application_id, ruin the schema page
        f.seek(100)
        f.write(b"\xff" * 4000)
    res = cli("runs", "--json", "--all", "--db", str(ours))
    assert res.exit_code == 0, res.output
    assert "setting it aside" in res.stderr and res.stdout == records_runs_json(home)


def test_a_directory_at_the_homes_index_place_is_never_moved(sandbox):
    t, home, run = sandbox
    setaside.remove_sqlite_files(home / "index.sqlite")
    (home / "index.sqlite").mkdir()
    (home / "index.sqlite" / "keep").write_text("x")
    before = tree_state(t)
    res = cli("runs")
    no_traceback(res)
    assert res.exit_code == 1 and "a directory" in res.stderr and "Hint:" in res.stderr
    assert tree_state(t) == before


# --------------------------------------------------------------------------------------
# homes

HOME_COMMANDS = [("runs",), ("runs", "--json"), ("show", "run_0"), ("report",), ("sql", "SELECT 1"),
                 ("index",), ("verify",), ("verify", "--json")]


@pytest.mark.parametrize("kind", ["missing", "file", "project"])
def test_bad_homes_are_errors_and_create_nothing(tmp_path, monkeypatch, kind):
    monkeypatch.delenv("LEDGER_DB", raising=False)
    home = tmp_path / "home"
    if kind == "file":
        home.write_text("not a home\n")
    elif kind == "project":  # a mistyped --home naming somebody's project: no index is written into it
        (home / "src").mkdir(parents=True)
        (home / "src" / "main.py").write_text("print('mine')\n")
    monkeypatch.setenv("LEDGER_HOME", str(home))
    before = tree_state(tmp_path)
    for cmd in HOME_COMMANDS:
        res = cli(*cmd)
        no_traceback(res)
        assert res.exit_code == 1, (cmd, res.output)
        assert res.stderr.startswith("Error: ") and "\nHint: " in res.stderr, (cmd, res.stderr)
        assert str(home) in res.stderr
        assert tree_state(tmp_path) == before, f"{cmd} created something"


def test_a_team_index_is_read_without_a_local_home(tmp_path, monkeypatch):
    """A reader of a named database needs no home of its own (it answers from the database)."""
    monkeypatch.delenv("LEDGER_DB", raising=False)
    home = tmp_path / "home"
    make_run(home)
    db = tmp_path / "team.sqlite"
    assert cli("index", "--home", str(home), "--db", str(db)).exit_code == 0
    res = cli("runs", "--json", "--home", str(tmp_path / "nohome"), "--db", str(db))
    assert res.exit_code == 0, res.output
    assert "no ledger home at" in res.stderr
    assert not (tmp_path / "nohome").exists()


def _unshare_ro(home: Path, *args: str) -> subprocess.CompletedProcess:
    """Run ledger with `home` mounted read-only (a private mount namespace; needs root)."""
    script = (f'mount --bind "{home}" "{home}" && mount -o remount,bind,ro "{home}" && '
              f'exec "{sys.executable}" -m ledger "$@"')
    env = {k: v for k, v in os.environ.items() if k not in ("LEDGER_DB", "LEDGER_HOME")}
    return run_cli(["unshare", "-m", "sh", "-c", script, "sh", *args, "--home", str(home)], env=env)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root for a read-only mount")
def test_a_read_only_home_is_answered_from_its_index(tmp_path, monkeypatch):
    monkeypatch.delenv("LEDGER_DB", raising=False)
    home = tmp_path / "home"
    make_run(home)
    # the owner's last report brought the index and its report tables up to date
    assert cli("report", "--home", str(home)).exit_code == 0
    expected = records_runs_json(home)
    make_run(home)  # recorded after the last index pass: the read-only reader cannot see it yet
    res = _unshare_ro(home, "runs", "--json", "--all")
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    assert "it may be stale" in res.stderr
    assert res.stdout == expected
    res = _unshare_ro(home, "report", "--json")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert orjson.loads(res.stdout)["totals"]["runs"] == 1
    res = _unshare_ro(home, "index")  # asked to write: an Error, not a stale answer
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith("Error: cannot update the index") and "\nHint: " in res.stderr


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root for a read-only mount")
def test_a_read_only_home_without_an_index_is_a_clear_error(tmp_path):
    home = tmp_path / "home"
    make_run(home)
    res = _unshare_ro(home, "runs")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "\nError: " in res.stderr and "\nHint: " in res.stderr
    assert "no usable index" in res.stderr


# --------------------------------------------------------------------------------------
# damaged index pages under an intact header


def _wipe_table_pages(path: Path, table: str) -> int:
    """Overwrite every page of `table` but its root with garbage (the header stays valid)."""
    con = sqlite3.connect(path)
    pages = [r[0] for r in con.execute("SELECT pageno FROM dbstat WHERE name = ? ORDER BY pageno", (table,))]
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    assert page_size == dbmod.PAGE_SIZE  # the index's real page size
    with open(path, "r+b") as f:
        for pg in pages[1:]:
            f.seek((pg - 1) * page_size)
            f.write(b"\x0d\xff\xff\xff" * (page_size // 4))
    return len(pages) - 1


@pytest.fixture
def damaged_pages(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LEDGER_HOME", str(home))
    monkeypatch.delenv("LEDGER_DB", raising=False)
    for i in range(400):
        make_run(home, subjects=(f"task:{i}",))
    assert cli("index").exit_code == 0
    expected = records_runs_json(home)
    assert _wipe_table_pages(home / "index.sqlite", "runs") > 0
    assert dbmod.inspect_sqlite(home / "index.sqlite").kind == "ok"  # the cheap check cannot see it
    return home, expected


@pytest.mark.parametrize("cmd", [("runs", "--json", "--all"), ("report", "--json"), ("show", "SHOW"),
                                 ("sql", "SELECT count(*) AS n, sum(length(run_id)) FROM runs")])
def test_damaged_pages_found_by_a_reader_are_rebuilt(damaged_pages, cmd):
    home, expected = damaged_pages
    first = orjson.loads(expected)[0]["id"]
    res = cli(*[first if a == "SHOW" else a for a in cmd])
    no_traceback(res)
    assert res.exit_code == 0, res.output
    assert "setting it aside and rebuilding it" in res.stderr
    assert [p for p in os.listdir(home) if p.startswith("index.sqlite.corrupt-")]
    if cmd[0] == "runs":
        assert res.stdout == expected
    assert cli("db", "check").exit_code == 0


def test_db_check_reports_damaged_pages(damaged_pages):
    home, _ = damaged_pages
    res = cli("db", "check", "--json")
    no_traceback(res)
    assert res.exit_code == 1
    doc = orjson.loads(res.stdout)
    assert doc["ok"] is False and doc["problems"]
    assert any("quick_check" in p or "malformed" in p for p in doc["problems"])


def test_index_full_finds_damaged_pages(damaged_pages):
    home, expected = damaged_pages
    res = cli("index", "--full", "--json")
    no_traceback(res)
    assert res.exit_code == 0, res.output
    assert orjson.loads(res.stdout)["rebuilt"] is True
    assert "setting it aside and rebuilding it" in res.stderr
    assert cli("runs", "--json", "--all").stdout == expected


def test_only_the_newest_damaged_copies_are_kept(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LEDGER_HOME", str(home))
    monkeypatch.delenv("LEDGER_DB", raising=False)
    make_run(home)
    for _ in range(setaside.KEEP_SET_ASIDE + 2):
        assert cli("index").exit_code == 0
        (home / "index.sqlite").write_bytes(b"garbage" * 100)
    assert cli("runs").exit_code == 0
    kept = sorted(p for p in os.listdir(home) if p.startswith("index.sqlite.corrupt-"))
    assert len(kept) == setaside.KEEP_SET_ASIDE
    res = cli("db", "check", "--json")
    assert sorted(os.path.basename(p) for p in orjson.loads(res.stdout)["set_aside"]) == kept
    plain = cli("db", "check")
    assert all(k in plain.stderr for k in kept)


def test_a_waiting_writer_says_what_it_waits_for(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LEDGER_HOME", str(home))
    monkeypatch.delenv("LEDGER_DB", raising=False)
    make_run(home)
    assert cli("index").exit_code == 0
    lock = dbmod.writer_lock(home / "index.sqlite")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(lock)!r}, os.O_RDWR)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "time.sleep(1.5)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        res = run_cli([sys.executable, "-m", "ledger", "index", "--rebuild"],
                      env={**os.environ, "LEDGER_HOME": str(home)})
    finally:
        holder.wait(timeout=10)
    assert res.returncode == 0, res.stderr
    assert "waiting for another ledger process updating the index" in res.stderr


# --------------------------------------------------------------------------------------
# hostile record contents: every read command survives a home full of them


def hostile_home(home: Path, outside: Path) -> dict[str, Path]:
    """Records as a broken disk, an old tool or an attacker could leave them."""
    import recordkit as rk

    runs: dict[str, Path] = {}
    good = rk.golden_events()
    runs["fine"] = rk.write_record(home, events=good, term=rk.terminal())
    runs["garbage_manifest"] = rk.write_record(home, events=good, term=rk.terminal(), manifest_bytes=b"\x00\xff garbage")
    runs["array_manifest"] = rk.write_record(home, events=good, manifest_bytes=b"[1, 2, 3]")
    runs["deep_manifest"] = rk.write_record(home, events=good, manifest_bytes=b"[" * 100_000 + b"]" * 100_000)
    runs["wrong_id"] = rk.write_record(home, events=good, run_id=rk.new_id(), manifest_bytes=rk.pretty(rk.manifest(rk.new_id())))
    runs["bad_utf8"] = rk.write_record(home, events=rk.events_bytes(good[:3]) + b'{"x": "\xff\xfe"}\n')
    runs["nul_bytes"] = rk.write_record(home, events=b"\x00" * 4096 + b"\n")
    runs["huge_numbers"] = rk.write_record(home, events=[
        rk.usage(0, "a/t/m", 1, {"input_tokens": 2 ** 70, "output_tokens": -5, "cost_usd": 1e308}),
        rk.usage(1, "a/t/m", 2, {"input_tokens": 2 ** 70, "output_tokens": 10 ** 30, "cost_usd": 1e308}, final=True)],
        term=rk.terminal())
    runs["nan_cost"] = rk.write_record(home, events=rk.events_bytes(good[:1]) + (
        b'{"schema_version":1,"seq":1,"observed_at":"2026-03-08T06:30:01Z","type":"usage","usage_stream_id":"a",'
        b'"provider":"p","model":"m","attempt_key":"attempt-1","turn_key":"t","observation_seq":1,'
        b'"counter_kind":"cumulative","start_known":true,"final_receipt":true,"usage":{"cost_usd":NaN}}\n'))
    runs["control_text"] = rk.write_record(home, events=good, term=rk.terminal(),
                                       cwd="/tmp/\x1b]8;;https://evil.example\x07x\x1b]8;;\x07",
                                       subjects=[{"selector": "task:[/]:x:\x1b[31m", "source": "declared"}],
                                       model="[bold red]m[/]")
    runs["bad_outcome"] = rk.write_record(home, events=good, term=b'{"schema_version":1,"outcome":"\xf0\x9f\x99\x82"}')
    runs["term_is_dir"] = rk.write_record(home, events=good)
    (runs["term_is_dir"] / "terminal.json").mkdir()
    runs["events_is_dir"] = rk.write_record(home, events=None)
    (runs["events_is_dir"] / "events.jsonl").mkdir()
    runs["events_fifo"] = rk.write_record(home, events=None)
    os.mkfifo(runs["events_fifo"] / "events.jsonl")  # reading it would block forever
    runs["manifest_link"] = rk.write_record(home, events=good)
    (runs["manifest_link"] / "manifest.json").unlink()
    os.symlink("/etc/passwd", runs["manifest_link"] / "manifest.json")
    outside_run = outside / "run_0123456789abcdef0123456789abcdef"
    outside_run.mkdir(parents=True)
    (outside_run / "manifest.json").write_bytes(rk.pretty(rk.manifest(outside_run.name)))
    link_id = rk.new_id()
    (home / "runs" / link_id[4:6]).mkdir(parents=True, exist_ok=True)
    os.symlink(outside_run, home / "runs" / link_id[4:6] / link_id)
    (home / "runs" / "zz").mkdir(exist_ok=True)
    (home / "runs" / "zz" / "not-a-run.txt").write_text("x")
    return runs


READ_COMMANDS = [("runs", "--json", "--all"), ("runs", "--all"), ("report", "--json"), ("report", "run"),
                 ("report", "subject"), ("sql", "SELECT * FROM runs_v"), ("index", "--full", "--json"),
                 ("verify", "--json"), ("db", "check")]


def test_every_read_command_survives_hostile_records(tmp_path):
    home, outside = tmp_path / "home", tmp_path / "outside"
    runs = hostile_home(home, outside)
    env = {k: v for k, v in os.environ.items() if k not in ("LEDGER_DB",)}
    env.update(LEDGER_HOME=str(home), COLUMNS="100")

    def records_state() -> dict[str, tuple]:
        # (the index, and the home's id that `ledger index` writes once: ledger's own files)
        return {k: v for k, v in tree_state(tmp_path).items()
                if not k.startswith("home/index.sqlite") and k != "home/home-id.json"}

    before = records_state()
    for cmd in READ_COMMANDS + [("show", p.name) for p in runs.values()]:
        res = run_cli([sys.executable, "-m", "ledger", *cmd], env=env, text=False)
        out = res.stdout + res.stderr
        assert b"Traceback" not in out, (cmd, out.decode(errors="replace")[-3000:])
        assert res.returncode in (0, 1), (cmd, res.returncode, out[-2000:])
        if res.returncode == 1:
            assert b"Error: " in res.stderr or cmd[0] in ("verify", "db"), (cmd, res.stderr)
        assert b"\x1b" not in res.stdout and b"\x07" not in res.stdout, cmd  # escapes never reach a terminal
        assert records_state() == before, f"{cmd} changed a record or something outside the home"
    # nothing ledger read was followed out of the home
    assert not any(p.startswith("outside/") and "index" in p for p in tree_state(tmp_path))


@pytest.mark.postgres
def test_a_select_only_postgres_user_reads_without_a_traceback(pg_url, tmp_path, monkeypatch):
    """A team member given SELECT only: reads answer from the index as it is, `ledger index` is an Error."""
    import uuid

    import psycopg

    monkeypatch.delenv("LEDGER_DB", raising=False)
    home = tmp_path / "home"
    make_run(home)
    assert cli("report", "--home", str(home), "--db", pg_url).exit_code == 0  # the owner indexed it
    role = f"ledger_ro_{uuid.uuid4().hex[:8]}"
    admin_url = pg_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin_url, autocommit=True) as con:
        con.execute(f'CREATE ROLE "{role}" LOGIN')
        con.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
        con.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
    try:
        ro_url = pg_url.replace("postgres@", f"{role}@", 1)
        make_run(home)  # new since the owner's pass: this user cannot add it
        for cmd in (("runs", "--json", "--all"), ("report", "--json")):
            res = cli(*cmd, "--home", str(home), "--db", ro_url)
            no_traceback(res)
            assert res.exit_code == 0, (cmd, res.output)
            assert "it may be stale" in res.stderr
        assert len(orjson.loads(cli("runs", "--json", "--all", "--home", str(home), "--db", ro_url).stdout)) == 1
        res = cli("index", "--home", str(home), "--db", ro_url)
        no_traceback(res)
        assert res.exit_code == 1 and res.stderr.startswith("Error: cannot update the index") and "Hint:" in res.stderr
    finally:
        with psycopg.connect(admin_url, autocommit=True) as con:
            con.execute(f'DROP OWNED BY "{role}"')
            con.execute(f'DROP ROLE "{role}"')
