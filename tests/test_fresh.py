"""The freshness check (ledger.index.fresh, issue 10): a read on an up-to-date index answers
without a pass, and never answers stale.

Every test holds the check to the real pass: whenever it says "unchanged", a real pass over
the same home writes nothing (the database is the same row for row) and its summary is the
one the check gave. Every way a record or an archive changes that the indexer sees is made
once, and the check must then leave the work to the pass (and the read must show it).
"""

from __future__ import annotations

import json
import os
import re
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
from ledger.index import fresh, ops, quickpass

PAST = 60  # seconds: records aged this much are quiet (sealable) and never racy


def age(root: Path, seconds: int = PAST) -> None:
    """Every file and directory under `root` (and itself) last changed `seconds` ago."""
    t = time.time() - seconds
    if not root.exists():
        return
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + dirnames:
            os.utime(os.path.join(dirpath, name), (t, t), follow_symlinks=False)
    os.utime(root, (t, t))


def dump(path: Path) -> dict[str, list[tuple]]:
    con = sqlite3.connect(path)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: sorted(map(repr, con.execute(f'SELECT * FROM "{t}"'))) for t in tables}
    finally:
        con.close()


def real_pass(home: Path, monkeypatch) -> object:
    """A pass with the check (and the small pass) switched off (what the command did before them)."""
    with monkeypatch.context() as m:
        m.setattr(fresh, "unchanged", lambda homes, url: None)
        m.setattr(quickpass, "index_small", lambda homes, url, racy_ns=None: None)
        return ops.index_homes([home], dbmod.default_url(home), stale_ok=True)


def same_summary(a: object, b: object) -> bool:
    da, db_ = a.to_dict(), b.to_dict()
    da.pop("seconds")
    db_.pop("seconds")
    return da == db_


REASONS: list[str] = []  # why the last check() declined


def check(home: Path, monkeypatch, error_ok: bool = False) -> object | None:
    """fresh.unchanged(), held to the real pass. A decline must carry its reason, and be a
    decline, not an error (a crash returns None too), unless `error_ok`."""
    why: list[str] = []
    quick = fresh.unchanged([str(home)], dbmod.default_url(home), why)
    REASONS[:] = why
    assert (quick is None) == (len(why) == 1), why
    if why and not error_ok:
        assert not why[0].startswith("error:"), why
    before = dump(home / "index.sqlite")
    summary = real_pass(home, monkeypatch)
    if quick is not None:
        assert dump(home / "index.sqlite") == before, "the check said unchanged, the pass wrote"
        assert same_summary(quick, summary), (quick.to_dict(), summary.to_dict())
    return quick


def said(pattern: str) -> bool:
    """The last check declined for the reason `pattern` (a regex) names."""
    assert len(REASONS) == 1 and re.match(pattern, REASONS[0]), REASONS
    return True


def indexed(home: Path, monkeypatch) -> None:
    """Aged, indexed, and indexed again until a pass writes nothing (shards sealed)."""
    age(home / "runs")
    for _ in range(3):
        before = dump(home / "index.sqlite") if (home / "index.sqlite").exists() else None
        real_pass(home, monkeypatch)
        if before == dump(home / "index.sqlite"):
            return
    raise AssertionError("the index never settled")


@pytest.fixture
def varied(home, monkeypatch) -> dict[str, Path]:
    """Settled runs in several shards, one still running (this process is its launcher), a
    damaged record and a symlinked shard: what every pass lists or looks into."""
    runs = {f"r{i}": make_run(home) for i in range(6)}
    runs["running"] = make_run(home, outcome=None)
    runs["damaged"] = write_record(home, manifest_bytes=b"{not json")
    (home / "runs" / "zz").symlink_to(home / "runs" / runs["r0"].parent.name)
    indexed(home, monkeypatch)
    return runs


def test_nothing_changed_is_answered_by_the_check_exactly_as_the_pass_would(home, varied, monkeypatch):
    quick = check(home, monkeypatch)
    assert quick is not None
    assert quick.unchanged == 8 and len(quick.skipped) == 2  # (the damaged record, the symlinked shard)
    # ... and the command says so in the pass's words
    res = cli("index", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["unchanged"] == 8


def test_a_sealed_home_is_checked_by_its_shard_directories(home, monkeypatch):
    for _ in range(5):
        make_run(home)
    indexed(home, monkeypatch)
    con = sqlite3.connect(home / "index.sqlite")
    assert all(r[0] for r in con.execute("SELECT sealed FROM index_shards"))
    con.close()
    assert check(home, monkeypatch) is not None


def test_a_shard_the_pass_would_seal_is_left_to_the_pass(home, monkeypatch):
    from ledger.index import indexer

    for _ in range(4):
        make_run(home)
    age(home / "runs", 5)  # quiet, but not for the 10 s a record must be quiet to be sealed
    real_pass(home, monkeypatch)
    assert check(home, monkeypatch) is not None  # (nothing to seal yet)
    monkeypatch.setattr(sealing, "SEAL_GRACE_NS", 1_000_000_000)
    assert check(home, monkeypatch) is None and said('shard \\w+ to seal or re-sign')  # the pass seals them
    con = sqlite3.connect(home / "index.sqlite")
    assert all(r[0] for r in con.execute("SELECT sealed FROM index_shards"))
    con.close()
    assert check(home, monkeypatch) is not None


def test_a_new_run_is_seen(home, varied, monkeypatch):
    make_run(home)
    assert check(home, monkeypatch) is None and said('a new shard \\w+|a record to read: run_')
    assert cli("runs", "--all", "--json").stdout == records_runs_json(home)


def test_a_new_run_in_a_new_shard_is_seen(home, varied, monkeypatch):
    shards = {p.name for p in (home / "runs").iterdir()}
    while True:
        run = make_run(home)
        if run.parent.name not in shards:
            break
    assert check(home, monkeypatch) is None and said('a new shard \\w+')
    assert cli("runs", "--all", "--json").stdout == records_runs_json(home)


def test_events_appended_to_a_running_run_are_seen(home, varied, monkeypatch):
    append_usage(varied["running"], 1000, 2000)
    assert check(home, monkeypatch) is None and said('a record to read: run_')
    out = json.loads(cli("runs", "--all", "--json").stdout)
    assert cli("runs", "--all", "--json").stdout == records_runs_json(home)
    assert any(r["usage"]["output_tokens"] and r["usage"]["output_tokens"] >= 2000 for r in out)


def test_a_new_terminal_json_is_seen(home, varied, monkeypatch):
    settle_run(varied["running"], "failed")
    assert check(home, monkeypatch) is None and said('a record to read: run_')
    out = cli("runs", "--all", "--json").stdout
    assert out == records_runs_json(home)
    assert '"outcome": "failed"' in out


def test_a_deleted_run_is_seen(home, varied, monkeypatch):
    import shutil

    shutil.rmtree(varied["r3"])
    assert check(home, monkeypatch) is None and said('a run gone from shard \\w+')
    assert cli("runs", "--all", "--json").stdout == records_runs_json(home)


def test_a_deleted_shard_is_seen(home, varied, monkeypatch):
    import shutil

    shard = varied["r4"].parent
    shutil.rmtree(shard)
    assert check(home, monkeypatch) is None and said('a shard gone')
    assert cli("runs", "--all", "--json").stdout == records_runs_json(home)


def test_a_manifest_edited_in_place_in_an_open_shard_is_seen(home, varied, monkeypatch):
    # (the running run keeps its shard open; a settled neighbour there is re-checked each pass)
    m = varied["running"] / "manifest.json"
    m.write_bytes(m.read_bytes().replace(b'"task:A"', b'"task:Z"'))
    assert check(home, monkeypatch) is None and said('a record to read: run_')


def test_a_racy_record_is_left_to_the_pass(home, varied, monkeypatch):
    os.utime(varied["running"] / "events.jsonl")  # (touched now: within the racy window)
    assert check(home, monkeypatch) is None and said('a record to read: run_')


def test_a_launcher_that_died_turns_its_run_abandoned(home, monkeypatch):
    # the run's launcher is another process, alive while the run is indexed
    code = ("import sys; sys.path.insert(0, sys.argv[2]); from pathlib import Path; "
            "from indexhelpers import make_run; make_run(Path(sys.argv[1]), outcome=None); "
            "print('ready', flush=True); sys.stdin.read()")
    p = subprocess.Popen([sys.executable, "-c", code, str(home), str(Path(__file__).parent)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        make_run(home)
        indexed(home, monkeypatch)
        assert check(home, monkeypatch) is not None
        assert '"state": "running"' in cli("runs", "--all", "--json").stdout
    finally:
        p.stdin.close()
        p.wait()
    assert check(home, monkeypatch) is None and said("a run's launcher is gone: run_")
    assert '"state": "abandoned"' in cli("runs", "--all", "--json").stdout


def test_new_imported_session_bytes_are_seen(home, tmp_path, monkeypatch):
    src = tmp_path / "claude"
    claudehistory.generate(src, sessions=3, seed=1)
    assert cli("import", "claude", "--from", str(src)).exit_code == 0
    make_run(home)
    indexed(home, monkeypatch)
    assert check(home, monkeypatch) is not None
    before = cli("sql", "--json", "SELECT count(*) AS n FROM runs_v WHERE source = 'claude-log'").stdout

    # a new session written by the client: archived by the reader's refresh, then indexed
    claudehistory.generate(tmp_path / "more", sessions=2, seed=9)
    for f in (tmp_path / "more").rglob("*.jsonl"):
        dst = src / f.relative_to(tmp_path / "more")
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(f.read_bytes())
    after = cli("sql", "--json", "SELECT count(*) AS n FROM runs_v WHERE source = 'claude-log'").stdout
    assert json.loads(after)[0]["n"] > json.loads(before)[0]["n"]
    assert check(home, monkeypatch) is not None  # (and then nothing is left)


def test_an_archive_changed_behind_the_marker_is_left_to_the_pass(home, tmp_path, monkeypatch):
    src = tmp_path / "claude"
    claudehistory.generate(src, sessions=3, seed=1)
    assert cli("import", "claude", "--from", str(src)).exit_code == 0
    indexed(home, monkeypatch)
    marker = home / "sources" / "claude" / fresh.CHANGED_FILE
    marker.write_text("moved\n")  # an import that archived something
    assert check(home, monkeypatch) is None and said('claude sessions archive changed')


def test_a_state_folded_by_an_older_reducer_is_left_to_the_pass(home, tmp_path, monkeypatch):
    """After an upgrade whose reducer counts more (Codex tool results: state version 3), the
    archive is read again once: a read must not answer from the older state until then."""
    src = tmp_path / "claude"
    claudehistory.generate(src, sessions=2, seed=3)
    assert cli("import", "claude", "--from", str(src)).exit_code == 0
    indexed(home, monkeypatch)
    con = sqlite3.connect(home / "index.sqlite")
    (state,) = con.execute("SELECT state FROM log_state WHERE source = 'claude-log'").fetchone()
    con.execute("UPDATE log_state SET state = ? WHERE source = 'claude-log'",
                (json.dumps({**json.loads(state), "rv": 0}),))
    con.commit()
    con.close()
    assert check(home, monkeypatch) is None and said('claude sessions folded by an older reducer')
    assert check(home, monkeypatch) is not None  # (read again once)


def test_an_index_not_at_head_or_not_sqlite_is_left_to_the_pass(home, varied, monkeypatch, tmp_path):
    why: list[str] = []
    assert fresh.unchanged([str(home)], "postgresql+psycopg://nobody@127.0.0.1:1/none", why) is None
    assert why == ["not a SQLite index"]
    con = sqlite3.connect(home / "index.sqlite")
    con.execute("UPDATE alembic_version SET version_num = ?", (sorted(dbmod.known_revisions())[0],))
    con.commit()
    con.close()
    why.clear()
    assert fresh.unchanged([str(home)], dbmod.default_url(home), why) is None
    assert len(why) == 1 and why[0].startswith("the index is ") and why[0] != "the index is ok", why


def test_an_error_is_told_apart_from_a_decline(home, varied, monkeypatch):
    """An error inside the check declines too (the pass then says what is wrong), but its
    reason names the error: a test of a decline cannot pass on a crash."""
    def broken(*a, **k):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(fresh, "_home", broken)
    why: list[str] = []
    assert fresh.unchanged([str(home)], dbmod.default_url(home), why) is None
    assert why == ["error: OperationalError: disk I/O error"]


def test_the_check_agrees_with_the_indexer_it_mirrors():
    from ledger.index import indexer, logclients, logfeed, logsource, scan, sourcelist
    from ledger.records import ids, reader
    from ledger.sources import archiveformat

    # (the clocks: one home, ledger.index.sealing, read when used: no copy to agree with)
    assert not hasattr(fresh, "RACY_NS") and not hasattr(indexer, "SEAL_GRACE_NS")
    assert fresh.LINK_SIG == scan.LINK_SIG and fresh.RUN_PREFIX == ids.PREFIX
    assert fresh.SYMLINK_REASON == reader.SYMLINK_REASON
    assert fresh.LOG_CLIENTS == tuple(s.client for s in sourcelist.SOURCES if isinstance(s, logsource.LogSource))
    assert fresh.CHANGED_FILE == archiveformat.CHANGED_FILE and fresh.ARCHIVE_SKIP == logfeed.ARCHIVE_SKIP
    assert fresh.PROBLEMS == archiveformat.PROBLEMS == logsource.PROBLEMS
    assert fresh.LOG_STATE_V == {s.client: logclients.state_v(s.client) for s in sourcelist.SOURCES
                                 if isinstance(s, logsource.LogSource)}
    # the summary: one class for every pass
    from ledger.index import summary

    assert fresh.IndexSummary is indexer.IndexSummary is summary.IndexSummary


def probe(home: Path, *args: str) -> tuple[str, str]:
    """(stdout, LIGHT or SQLALCHEMY): whether the real command imported SQLAlchemy (-X importtime
    logs each import as it happens, whatever way the process exits)."""
    env = dict(os.environ, LEDGER_HOME=str(home))
    env.pop("LEDGER_DB", None)
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "ledger", *args], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout, "SQLALCHEMY" if re.search(r"\| +sqlalchemy$", p.stderr, re.M) else "LIGHT"


@pytest.mark.parametrize("args", [("index", "--json"), ("sql", "--json", "SELECT 1 AS one")])
def test_a_read_of_an_unchanged_index_does_not_load_sqlalchemy(home, varied, args):
    cli(*args)  # (`ledger index` gives the home its id: the pass adopts the home's row once)
    out, loaded = probe(home, *args)
    assert loaded == "LIGHT", out
    append_usage(varied["running"], 10, 20)  # a record to read: the small pass, still light (quickpass.py)
    out, loaded = probe(home, *args)
    assert loaded == "LIGHT", out
    import shutil

    shutil.rmtree(varied["r2"])  # a run removed: the full pass, on the driver too (issue 27)
    out, loaded = probe(home, *args)
    assert loaded == "LIGHT", out
    (home / "index.sqlite").unlink()  # an index to create: its schema is Alembic's
    out, loaded = probe(home, *args)
    assert loaded == "SQLALCHEMY"
