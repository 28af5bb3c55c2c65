"""The small pass (ledger.index.quickpass, issue 10): a few changed run records written into an
SQLite index through the driver, without SQLAlchemy, exactly as the full pass writes them.

Every test holds it to the full pass: the same index is brought up to date once by the small
pass and once (from a copy of the same index, over the same records) by the full pass, and both
databases must be equal row for row (times of the writes aside) with the same summary. Where
the small pass must decline, it writes nothing and the full pass does the work.
"""

from __future__ import annotations

import json
import re
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.index import sealing

import claudehistory
from indexhelpers import append_usage, cli, make_run, records_runs_json, settle_run
from recordkit import write_record

from ledger.index import db as dbmod
from ledger.index import fresh, indexer, ops, quickpass

PAST = 60
TIMES = {"indexed_at", "last_indexed_at"}  # when a row was written: differs between two passes


def age(root: Path, seconds: int = PAST) -> None:
    t = time.time() - seconds
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + dirnames:
            os.utime(os.path.join(dirpath, name), (t, t), follow_symlinks=False)
    os.utime(root, (t, t))


def dump(path: Path) -> dict[str, list[str]]:
    con = sqlite3.connect(path)
    try:
        out = {}
        for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            cur = con.execute(f'SELECT * FROM "{t}"')
            keep = [i for i, d in enumerate(cur.description) if d[0] not in TIMES]
            out[t] = sorted(repr(tuple((type(r[i]).__name__, r[i]) for i in keep)) for r in cur)
        return out
    finally:
        con.close()


def full_pass(home: Path, monkeypatch, racy_ns: int | None = 0) -> object:
    with monkeypatch.context() as m:
        m.setattr(fresh, "unchanged", lambda homes, url: None)
        m.setattr(quickpass, "index_small", lambda homes, url, racy_ns=None: None)
        return ops.index_homes([home], dbmod.default_url(home), stale_ok=True, racy_ns=racy_ns)


def snapshot(db: Path, to: Path) -> None:
    src, dst = sqlite3.connect(db), sqlite3.connect(to)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def summary_dict(s: object) -> dict:
    d = s.to_dict()
    d.pop("seconds")
    return d


def small(home: Path, monkeypatch, tmp_path: Path, racy_ns: int | None = 0) -> object:
    """The small pass, held to the full pass over the same records from the same index."""
    db = home / "index.sqlite"
    before = tmp_path / "before.sqlite"
    snapshot(db, before)
    got = quickpass.index_small([str(home)], dbmod.default_url(home), racy_ns=racy_ns)
    assert got is not None, "the small pass declined"
    mine = dump(db)
    snapshot(before, db)  # (the same index again, through the driver: WAL and all)
    want = full_pass(home, monkeypatch, racy_ns)
    assert mine == dump(db)
    assert summary_dict(got) == summary_dict(want)
    return got


def declines(home: Path, monkeypatch, reason: str) -> None:
    """The small pass writes nothing and leaves the work to the full pass, for the reason the
    regex `reason` names (not an error: a crash declines too)."""
    db = home / "index.sqlite"
    before = dump(db)
    why: list[str] = []
    assert quickpass.index_small([str(home)], dbmod.default_url(home), racy_ns=0, why=why) is None
    assert len(why) == 1 and re.match(reason, why[0]), why
    assert dump(db) == before
    full_pass(home, monkeypatch)
    after = dump(db)
    assert after != before
    full_pass(home, monkeypatch)
    assert dump(db) == after  # (the full pass did it all)


def settled_index(home: Path, monkeypatch) -> None:
    age(home / "runs")
    for _ in range(3):
        before = dump(home / "index.sqlite") if (home / "index.sqlite").exists() else None
        full_pass(home, monkeypatch)
        if before == dump(home / "index.sqlite"):
            return
    raise AssertionError("the index never settled")


@pytest.fixture
def varied(home, monkeypatch) -> dict[str, Path]:
    """Settled runs in several shards, one still running (this process is its launcher), a
    damaged record and a symlinked shard; indexed until nothing is left to do."""
    runs = {f"r{i}": make_run(home) for i in range(8)}
    runs["running"] = make_run(home, outcome=None)
    runs["damaged"] = write_record(home, manifest_bytes=b"{not json")
    (home / "runs" / "zz").symlink_to(home / "runs" / runs["r0"].parent.name)
    settled_index(home, monkeypatch)
    return runs


def in_old_shard(home: Path, maker=make_run, **kw) -> Path:
    shards = {p.name for p in (home / "runs").iterdir()}
    # (a run's shard is drawn by its id, one of 256: in a home of a few shards 200 draws can
    # miss them all, as a full run of the suite saw; with one shard 3,000 miss ~1 time in 10^5)
    for _ in range(3000):
        run = maker(home, **kw)
        if run.parent.name in shards:
            return run
        shutil.rmtree(run)
        if not any(run.parent.iterdir()):
            run.parent.rmdir()
    raise AssertionError("no run landed in an existing shard")


def test_a_new_run_is_written_as_the_full_pass_writes_it(home, varied, monkeypatch, tmp_path):
    in_old_shard(home)
    got = small(home, monkeypatch, tmp_path)
    assert got.new == 1 and got.records_read == 1
    assert cli("runs", "--all", "--json").stdout == records_runs_json(home)


def test_several_new_runs_and_a_running_one_that_grew(home, varied, monkeypatch, tmp_path):
    for _ in range(3):
        in_old_shard(home, model="gpt-5")
    append_usage(varied["running"], 1000, 2000)
    got = small(home, monkeypatch, tmp_path)
    assert got.new == 3 and got.updated == 1


def test_a_run_that_settles(home, varied, monkeypatch, tmp_path):
    settle_run(varied["running"], "failed")
    assert small(home, monkeypatch, tmp_path).updated == 1
    assert '"outcome": "failed"' in cli("runs", "--all", "--json").stdout


def test_a_manifest_rewritten_in_place_counts_a_rewrite(home, varied, monkeypatch, tmp_path):
    m = varied["running"] / "manifest.json"  # (the running run keeps its shard open)
    m.write_bytes(m.read_bytes().replace(b'"task:A"', b'"task:Z"'))
    small(home, monkeypatch, tmp_path)


def test_a_new_damaged_record_is_listed_with_its_problem(home, varied, monkeypatch, tmp_path):
    shards = {p.name for p in (home / "runs").iterdir()}
    # (a run's shard is drawn by its id, one of 256: in a home of a few shards 200 draws can
    # miss them all, as a full run of the suite saw; with one shard 3,000 miss ~1 time in 10^5)
    for _ in range(3000):
        bad = write_record(home, manifest_bytes=b"[]")
        if bad.parent.name in shards:
            break
        shutil.rmtree(bad.parent)
    got = small(home, monkeypatch, tmp_path)
    assert any(p.path.startswith(str(bad)) for p in got.skipped)


def test_a_racy_record_is_read_again(home, varied, monkeypatch, tmp_path):
    future = time.time() + 3600  # (racy for both passes, whenever they run)
    os.utime(varied["running"] / "events.jsonl", (future, future))
    small(home, monkeypatch, tmp_path, racy_ns=None)


def test_shards_to_seal_are_sealed(home, monkeypatch, tmp_path):
    for _ in range(6):
        make_run(home)
    age(home / "runs", 5)  # quiet, not yet for the 10 s a record must be quiet to be sealed
    full_pass(home, monkeypatch)
    monkeypatch.setattr(sealing, "SEAL_GRACE_NS", 1_000_000_000)
    small(home, monkeypatch, tmp_path)
    con = sqlite3.connect(home / "index.sqlite")
    assert all(r[0] for r in con.execute("SELECT sealed FROM index_shards"))
    con.close()


def test_a_new_run_next_to_imported_sessions(home, varied, monkeypatch, tmp_path):
    src = tmp_path / "claude"
    claudehistory.generate(src, sessions=3, seed=1)
    assert cli("import", "claude", "--from", str(src)).exit_code == 0
    settled_index(home, monkeypatch)
    in_old_shard(home)
    small(home, monkeypatch, tmp_path)


def test_a_run_of_an_imported_session_is_left_to_the_full_pass(home, varied, monkeypatch, tmp_path):
    src = tmp_path / "claude"
    claudehistory.generate(src, sessions=3, seed=1)
    assert cli("import", "claude", "--from", str(src)).exit_code == 0
    settled_index(home, monkeypatch)
    con = sqlite3.connect(home / "index.sqlite")
    (sid,) = con.execute("SELECT provider_session_id FROM log_sessions WHERE provider_session_id IS NOT NULL "
                         "LIMIT 1").fetchone()
    con.close()
    def with_session(home: Path) -> Path:
        from ledger.records import RunCapture

        cap = RunCapture(home, harness="claude", model="claude-sonnet-4-5", subjects=["task:A"])
        attempt = cap.start_attempt("anthropic", "claude-sonnet-4-5")
        cap.provider_session(attempt, sid)
        cap.usage_stream(provider="anthropic", model="claude-sonnet-4-5", attempt_key=attempt,
                         turn_key="t1").observe({"input_tokens": 10, "output_tokens": 2}, final_receipt=True)
        cap.settle("completed")
        return Path(cap.path)

    in_old_shard(home, with_session)  # the record wins: the session is counted once
    declines(home, monkeypatch, "claude sessions archive changed")
    out = json.loads(cli("sql", "--json", "SELECT count(*) AS n FROM log_sessions WHERE linked_run_id "
                                          "IS NOT NULL").stdout)
    assert out[0]["n"] == 1


@pytest.mark.parametrize("change", ["deleted run", "new shard", "too many", "launcher gone", "second home"])
def test_what_the_small_pass_leaves_to_the_full_pass(home, varied, monkeypatch, tmp_path, change):
    if change == "deleted run":
        shutil.rmtree(varied["r3"])
    elif change == "new shard":
        shards = {p.name for p in (home / "runs").iterdir()}
        while make_run(home).parent.name in shards:
            pass
    elif change == "too many":
        for _ in range(quickpass.QUICK_MAX + 1):
            in_old_shard(home)
    elif change == "launcher gone":
        con = sqlite3.connect(home / "index.sqlite")
        con.execute("UPDATE runs SET launcher_pid = 999999999 WHERE settled = 0")  # (no such process)
        con.commit()
        con.close()
        in_old_shard(home)
    else:
        con = sqlite3.connect(home / "index.sqlite")
        con.execute("INSERT INTO homes (home_id, path, added_at) VALUES (99, '/elsewhere', '2026-01-01 00:00:00.000000')")
        con.commit()
        con.close()
        in_old_shard(home)
    declines(home, monkeypatch, {"deleted run": r"a run gone from shard \w+$", "new shard": r"a new shard \w+$",
                                 "too many": rf"more than {quickpass.QUICK_MAX} records to read$",
                                 "launcher gone": "a run's launcher is gone: run_",
                                 "second home": "more than one home$"}[change])
    if change not in ("second home", "launcher gone"):  # (those two were changed in the index, not the records)
        assert cli("runs", "--all", "--json").stdout == records_runs_json(home)


def test_a_new_run_is_indexed_without_sqlalchemy(home, varied):
    cli("index")
    in_old_shard(home)
    env = dict(os.environ, LEDGER_HOME=str(home))
    env.pop("LEDGER_DB", None)
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "ledger", "runs", "--all", "--json"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert " sqlalchemy\n" not in p.stderr
    assert p.stdout == records_runs_json(home)


# -- what the mutation run of quickpass.py (mutmut) found no test for -----------------------------

def test_the_home_is_stamped_when_records_are_written(home, varied, monkeypatch):
    def stamp() -> str | None:
        con = sqlite3.connect(home / "index.sqlite")
        try:
            return con.execute("SELECT last_indexed_at FROM homes").fetchone()[0]
        finally:
            con.close()

    before = stamp()
    time.sleep(0.01)
    append_usage(varied["running"], 5, 5)  # (a record read, its shard's state unchanged)
    assert quickpass.index_small([str(home)], dbmod.default_url(home), racy_ns=0) is not None
    after = stamp()
    assert after is not None and before is not None and after > before


def test_a_record_within_the_racy_window_is_marked_racy(home, varied, monkeypatch, tmp_path):
    run = in_old_shard(home)
    t = time.time() - 1  # (written a second ago: inside a 10 s window, whenever the passes run)
    os.utime(run, (t, t))
    small(home, monkeypatch, tmp_path, racy_ns=10_000_000_000)
    con = sqlite3.connect(home / "index.sqlite")
    assert con.execute("SELECT racy FROM index_cursors WHERE run_id = ?", (run.name,)).fetchone() == (1,)
    con.close()


def test_quiet_records_are_not_racy_in_the_default_window(home, varied, monkeypatch, tmp_path):
    append_usage(varied["running"], 7, 7)
    in_old_shard(home)
    age(home / "runs")  # (changed a minute ago: past the 100 ms window)
    got = small(home, monkeypatch, tmp_path, racy_ns=None)
    assert got.records_read >= 2  # (aging moved every record's signature: all re-read)
    con = sqlite3.connect(home / "index.sqlite")
    assert con.execute("SELECT count(*) FROM index_cursors WHERE racy = 1").fetchone() == (0,)
    con.close()


def test_an_abandoned_run_read_again_lets_its_shard_seal(home, monkeypatch, tmp_path):
    from reporthelpers import make_abandoned

    gone = make_abandoned(home, "2026-03-08T10:00:00Z")  # (its launcher's boot is over)
    for _ in range(3):
        make_run(home)
    monkeypatch.setattr(sealing, "SEAL_GRACE_NS", 10**15)  # (nothing sealed yet: every shard stays open)
    settled_index(home, monkeypatch)
    with (gone / "events.jsonl").open("ab") as f:  # (a line the launcher wrote before it went)
        f.write(b'{"v":1,"type":"tool_use","name":"Bash","summary":"x"}\n')
    age(home / "runs")
    monkeypatch.setattr(sealing, "SEAL_GRACE_NS", 1_000_000_000)
    small(home, monkeypatch, tmp_path)
    con = sqlite3.connect(home / "index.sqlite")
    assert con.execute("SELECT sealed FROM index_shards WHERE shard = ?", (gone.parent.name,)).fetchone() == (1,)
    con.close()


def test_a_run_of_an_imported_codex_session_is_left_to_the_full_pass(home, monkeypatch, tmp_path):
    import codexhistory

    for _ in range(3):
        make_run(home)
    codexhistory.generate(tmp_path / "codex", threads=3, seed=2)
    assert cli("import", "codex", "--from", str(tmp_path / "codex")).exit_code == 0
    settled_index(home, monkeypatch)
    con = sqlite3.connect(home / "index.sqlite")
    (sid,) = con.execute("SELECT provider_session_id FROM log_sessions WHERE source = 'codex-log' "
                         "AND provider_session_id IS NOT NULL LIMIT 1").fetchone()
    con.close()

    def codex_run(home: Path) -> Path:
        from ledger.records import RunCapture

        cap = RunCapture(home, harness="codex", model="gpt-5", subjects=["task:A"])
        attempt = cap.start_attempt("openai", "gpt-5")
        cap.provider_session(attempt, sid)
        cap.usage_stream(provider="openai", model="gpt-5", attempt_key=attempt,
                         turn_key="t1").observe({"input_tokens": 10, "output_tokens": 2}, final_receipt=True)
        cap.settle("completed")
        return Path(cap.path)

    in_old_shard(home, codex_run)  # (no Claude archive here: the Codex one is still looked at)
    declines(home, monkeypatch, "codex sessions archive changed")


def test_a_record_damaged_after_a_rewrite_keeps_its_count(home, varied, monkeypatch, tmp_path):
    m = varied["running"] / "manifest.json"
    m.write_bytes(m.read_bytes().replace(b'"task:A"', b'"task:Z"'))  # (a rewrite: one more gap)
    small(home, monkeypatch, tmp_path)
    m.write_bytes(b"{garbage")  # then unreadable: its cursor keeps the rewrite it counted
    got = small(home, monkeypatch, tmp_path)
    assert any(p.path == str(m) for p in got.skipped)
    con = sqlite3.connect(home / "index.sqlite")
    assert con.execute("SELECT status, record_rewrites FROM index_cursors WHERE run_id = ?",
                       (varied["running"].name,)).fetchone() == ("damaged", 1)
    con.close()


def test_a_record_with_a_context_keeps_its_verdict_when_read_again(home, varied, monkeypatch, tmp_path):
    import recordkit as rk

    shards = {p.name for p in (home / "runs").iterdir()}
    # (a run's shard is drawn by its id, one of 256: in a home of a few shards 200 draws can
    # miss them all, as a full run of the suite saw; with one shard 3,000 miss ~1 time in 10^5)
    for _ in range(3000):  # (an unsettled record with a bound context.json, in an existing shard)
        run = rk.write_record(home, events=rk.golden_events()[:3], term=None, context={"task": "x"})
        if run.parent.name in shards:
            break
        shutil.rmtree(run)
    settled_index(home, monkeypatch)
    with (run / "events.jsonl").open("ab") as f:
        f.write(b'{"v":1,"type":"tool_use","name":"Bash","summary":"x"}\n')
    small(home, monkeypatch, tmp_path)  # (the context's verdict is reused from the cursor, as a bool)
    con = sqlite3.connect(home / "index.sqlite")
    assert con.execute("SELECT context_ok FROM index_cursors WHERE run_id = ?", (run.name,)).fetchone() == (1,)
    con.close()
