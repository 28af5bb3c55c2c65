"""The index answers exactly like the records, and only reads what changed."""

from __future__ import annotations

import json
import os
import shutil

import orjson
import pytest

from ledger.index import sealing

from indexhelpers import (
    append_event, append_usage, cli, damaged_home, make_run, records_runs_json, records_show_json, settle_run,
)
from ledger.index import indexer as indexer_mod
from ledger.index.ops import index_homes
from ledger.records import reader


@pytest.fixture(autouse=True)
def no_racy_window(monkeypatch):
    """Runs written a moment ago are 'racy' (re-checked next pass); tests count reads exactly."""
    from ledger.index import fresh

    monkeypatch.setattr(sealing, "RACY_NS", 0)


@pytest.fixture
def reads(monkeypatch):
    """Count what the indexer opens: manifests read and events folded (with their offsets)."""
    counts = {"manifest": 0, "fold": [], }
    real_manifest, real_fold = reader.read_manifest, reader.fold_events

    def read_manifest(path):
        counts["manifest"] += 1
        return real_manifest(path)

    def fold_events(path, state=None, offset=0, **kwargs):
        counts["fold"].append((os.path.basename(path), offset))
        return real_fold(path, state, offset, **kwargs)

    monkeypatch.setattr(reader, "read_manifest", read_manifest)
    monkeypatch.setattr(reader, "fold_events", fold_events)
    return counts


def test_runs_and_show_match_records_path(home, db_url):
    runs = damaged_home(home)
    res = cli("runs", "--json", "--all", "--db", db_url)
    assert res.exit_code == 0, res.output
    assert res.stdout == records_runs_json(home)
    assert "skipped damaged record" in res.stderr and "malformed event" in res.stderr
    # default selection (recent + unsettled) too
    res = cli("runs", "--json", "--db", db_url)
    assert res.stdout == records_runs_json(home, all_=False)
    assert "2020-01-02" not in res.stdout
    for key in ("ok", "failed", "running", "torn", "badterm", "nousage"):
        res = cli("show", runs[key].name[:14], "--json", "--db", db_url)
        assert res.exit_code == 0, res.output
        assert res.stdout == records_show_json(runs[key]), key
    res = cli("show", runs["malformed"].name, "--json", "--db", db_url)
    assert res.exit_code == 1 and "malformed event" in res.stderr
    res = cli("show", "run_ffffffffffffffffffff", "--db", db_url)
    assert res.exit_code == 1 and "was not found" in res.stderr
    # csv and table render from the index too
    # (header, 7 runs, the 2 damaged records listed as `unreadable`)
    assert cli("runs", "--csv", "--all", "--db", db_url).stdout.count("\n") == 10


def test_rebuild_equals_incremental(home, db_url):
    runs = damaged_home(home)
    assert cli("index", "--db", db_url).exit_code == 0
    # grow the home in steps, indexing in between
    extra = make_run(home, outcome=None, skill="s2")
    assert cli("index", "--db", db_url).exit_code == 0
    append_usage(extra, 100, 7)
    append_event(runs["running"], type="tool_use", name="Edit", summary="y")
    assert cli("index", "--db", db_url).exit_code == 0
    settle_run(extra, "interrupted")
    make_run(home, model="gemini-2.5-pro", harness="gemini")
    assert cli("index", "--db", db_url).exit_code == 0
    incremental = cli("runs", "--json", "--all", "--db", db_url).stdout
    assert incremental == records_runs_json(home)
    res = cli("index", "--rebuild", "--db", db_url, "--json")
    assert res.exit_code == 0, res.output
    summary = orjson.loads(res.stdout)
    assert summary["rebuilt"] is True and len(summary["skipped"]) == 2
    assert cli("runs", "--json", "--all", "--db", db_url).stdout == incremental


def test_nothing_new_parses_nothing(home, db_url, reads):
    damaged_home(home)
    first = index_homes([home], db_url)
    assert first.new == 7 and len(first.skipped) == 2
    reads["manifest"], reads["fold"] = 0, []
    again = index_homes([home], db_url)
    assert reads == {"manifest": 0, "fold": []}
    assert again.records_read == 0 and again.new == again.updated == 0
    assert again.unchanged == 9 and len(again.skipped) == 2  # damaged ones still listed


def test_append_reads_only_that_run_from_its_offset(home, db_url, reads):
    a = make_run(home)
    b = make_run(home, outcome=None)
    index_homes([home], db_url)
    size = os.path.getsize(b / "events.jsonl")
    reads["fold"] = []
    append_usage(b, 40, 2)
    s = index_homes([home], db_url)
    assert (s.updated, s.unchanged, s.records_read) == (1, 1, 1)
    assert reads["fold"] == [(b.name, size)]
    out = cli("runs", "--json", "--all", "--db", db_url).stdout
    assert out == records_runs_json(home)
    assert orjson.loads(out)[[r["id"] for r in orjson.loads(out)].index(b.name)]["usage"]["input_tokens"] == 55
    # settling is seen (directory changed) without re-reading the events
    reads["fold"] = []
    settle_run(b)
    s = index_homes([home], db_url)
    assert s.updated == 1 and reads["fold"] == []
    assert cli("runs", "--json", "--all", "--db", db_url).stdout == records_runs_json(home)
    # a settled run that gets more events (allowed after terminal.json) is folded from its offset
    append_event(a, type="provider_attempt_finished", attempt_key="attempt-1", outcome="completed")
    reads["fold"] = []
    s = index_homes([home], db_url)
    assert s.updated == 1 and [n for n, off in reads["fold"]] == [a.name] and reads["fold"][0][1] > 0
    assert cli("show", a.name, "--json", "--db", db_url).stdout == records_show_json(a)


@pytest.mark.parametrize("how", ["truncate", "prefix", "replace"])
def test_rewritten_events_detected_and_flagged(home, db_url, how):
    a = make_run(home)
    make_run(home)
    index_homes([home], db_url)
    ev = a / "events.jsonl"
    data = ev.read_bytes()
    lines = data.splitlines(keepends=True)
    if how == "truncate":
        ev.write_bytes(b"".join(lines[:2]))
    elif how == "prefix":  # same size, first line changed
        first = lines[0].replace(b'"seq":0', b'"seq":7')
        ev.write_bytes(first + b"".join(lines[1:]))
        assert os.path.getsize(ev) == len(data)
    else:  # a new file (new inode) with more content
        tmp = a / "events.new"
        tmp.write_bytes(data + lines[-1].replace(b'"seq":', b'"seq":1'))
        os.replace(tmp, ev)
    s = index_homes([home], db_url)
    assert s.rewritten == 1 and s.updated == 1
    got = {r["id"]: r for r in orjson.loads(cli("runs", "--json", "--all", "--db", db_url).stdout)}
    want = {r["id"]: r for r in orjson.loads(records_runs_json(home))}
    # re-read whole: everything equals the records, plus one gap "record rewritten"
    assert got[a.name]["evidence_gaps"] == want[a.name]["evidence_gaps"] + 1
    got[a.name]["evidence_gaps"] -= 1
    assert got == want
    assert cli("sql", "SELECT record_rewrites FROM runs_v WHERE record_rewrites > 0", "--json",
               "--db", db_url).stdout.count('"record_rewrites": 1') == 1


def test_removed_and_new_runs_and_several_homes(home, tmp_path, db_url):
    a = make_run(home)
    make_run(home)
    other = tmp_path / "other"
    c = make_run(other, model="o1")
    s = index_homes([home, other], db_url)
    assert s.new == 3
    shutil.rmtree(a)
    s = index_homes([home, other], db_url)
    assert s.removed == 1 and s.unchanged == 2
    assert cli("runs", "--json", "--all", "--db", db_url).stdout == records_runs_json(home)
    res = cli("runs", "--json", "--all", "--db", db_url, "--home", str(other))
    assert res.stdout == records_runs_json(other) and c.name in res.stdout
    homes = orjson.loads(cli("sql", "SELECT home, count(*) AS n FROM runs_v GROUP BY home ORDER BY home",
                             "--json", "--db", db_url).stdout)
    assert homes == [{"home": str(home), "n": 1}, {"home": str(other), "n": 1}]


def test_abandoned_run_is_not_running_forever(home, db_url):
    import subprocess
    import sys

    code = ("import sys; from ledger.records import publish_run; m = publish_run(sys.argv[1], harness='command');"
            "print(m.run_id, flush=True); sys.stdin.read()")
    child = subprocess.Popen([sys.executable, "-c", code, str(home)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    run_id = child.stdout.readline().decode().strip()
    try:
        index_homes([home], db_url)
        rows = orjson.loads(cli("runs", "--json", "--db", db_url).stdout)
        assert [r["state"] for r in rows if r["id"] == run_id] == ["running"]
    finally:
        child.stdin.close()
        child.wait()
    rows = orjson.loads(cli("runs", "--json", "--db", db_url).stdout)
    assert [r["state"] for r in rows if r["id"] == run_id] == ["abandoned"]
    # the liveness re-check also updates the stored state on the next pass
    state = cli("sql", f"SELECT state FROM runs_v WHERE run_id = '{run_id}'", "--csv", "--db", db_url).stdout
    assert state.splitlines() == ["state", "abandoned"]


def test_index_cli_summary(home, db_url):
    damaged_home(home)
    res = cli("index", "--db", db_url, "--json")
    assert res.exit_code == 0
    summary = orjson.loads(res.stdout)
    assert summary["new"] == 7 and summary["unchanged"] == 0
    assert {os.path.basename(os.path.dirname(p["path"])) for p in summary["skipped"]} >= {"runs"} or summary["skipped"]
    assert all(p["path"] and p["reason"] for p in summary["skipped"])
    assert "indexed: 7 new, 0 updated, 0 unchanged, 2 skipped (damaged)" in res.stderr
    assert "skipped damaged record" in res.stderr
    res = cli("index", "--db", db_url)
    assert res.stdout == "" and "0 new, 0 updated, 9 unchanged" in res.stderr


def test_racy_runs_are_rechecked(home, db_url, monkeypatch):
    from ledger.index import fresh

    monkeypatch.setattr(sealing, "RACY_NS", 10**12)  # everything looks just-written
    a = make_run(home, outcome=None)
    index_homes([home], db_url)
    (a / "terminal.json").unlink(missing_ok=True)
    settle_run(a)
    s = index_homes([home], db_url)
    assert s.updated == 1
    assert cli("runs", "--json", "--all", "--db", db_url).stdout == records_runs_json(home)


def test_sealed_shards_are_skipped_until_they_change(home, db_url, monkeypatch):
    """Settled, quiet runs are sealed: their shard is not even listed while unchanged."""
    import uuid

    import sqlalchemy as sa

    from ledger.records import RunCapture

    from ledger.index import fresh

    monkeypatch.setattr(sealing, "SEAL_GRACE_NS", 0)
    # the indexer's own scan is under test: the no-change check before it (ledger.index.fresh,
    # held to this scan by tests/test_fresh.py) is not asked
    monkeypatch.setattr(fresh, "unchanged", lambda homes, url: None)
    from ledger.index import quickpass

    monkeypatch.setattr(quickpass, "index_small", lambda homes, url, racy_ns=None: None)  # (nor the small pass)
    a = make_run(home)
    live = make_run(home, outcome=None)
    index_homes([home], db_url)
    eng = sa.create_engine(db_url)
    with eng.connect() as conn:
        sealed = {k: bool(v) for k, v in conn.exec_driver_sql("SELECT shard, sealed FROM index_shards")}
    eng.dispose()
    same = a.parent.name == live.parent.name
    assert sealed[a.parent.name] is (not same) and sealed[live.parent.name] is False
    stats: list[str] = []
    real_stat = os.stat
    monkeypatch.setattr(indexer_mod.os, "stat", lambda p, *args, **kw: stats.append(str(p)) or real_stat(p, *args, **kw))
    s = index_homes([home], db_url)
    monkeypatch.setattr(indexer_mod.os, "stat", real_stat)
    assert s.unchanged == 2 and s.records_read == 0
    if not same:
        assert not [p for p in stats if a.name in p]  # the sealed shard's runs were not even stat'ed
    # a late append to a sealed run is seen by --full (or when its shard changes)
    append_event(a, type="tool_use", name="Late", summary="z")
    assert index_homes([home], db_url).updated == (1 if same else 0)
    assert index_homes([home], db_url, full=True).updated == (0 if same else 1)
    # a new run in the sealed shard changes the shard directory: it is found
    with RunCapture(home, harness="command", run_id="run_" + a.parent.name + uuid.uuid4().hex[2:]):
        pass
    assert index_homes([home], db_url).new == 1
    assert cli("runs", "--json", "--all", "--db", db_url).stdout == records_runs_json(home)
    res = cli("index", "--full", "--db", db_url, "--json")
    assert res.exit_code == 0 and orjson.loads(res.stdout)["records_read"] == 0


def test_events_file_created_after_the_stat_is_not_a_rewrite(home, db_url, monkeypatch):
    """The writer thread creates/extends events.jsonl while the indexer works. What appears
    after the indexer's stat is left for the next pass, never mistaken for a rewrite."""
    from ledger.index.ops import index_homes
    from ledger.records import RunCapture

    run = RunCapture(home, harness="command")
    run.events.close()  # no events.jsonl yet (nothing was emitted)
    events = run.path / "events.jsonl"
    if events.exists():
        events.unlink()
    real_fold = reader.fold_events

    def fold_after_append(path, state=None, offset=0, **kwargs):
        # the file appears between the indexer's stat and its read
        if not events.exists():
            events.write_bytes(b'{"schema_version":1,"seq":0,"observed_at":"2026-01-01T00:00:00Z","type":"text","text":"hi"}\n')
        return real_fold(path, state, offset, **kwargs)

    monkeypatch.setattr(reader, "fold_events", fold_after_append)
    index_homes([home], db_url)
    monkeypatch.setattr(reader, "fold_events", real_fold)
    run.settle("completed")
    index_homes([home], db_url)
    result = cli("runs", "--json", "--all", "--db", db_url)
    assert result.exit_code == 0, result.output
    assert result.stdout == records_runs_json(home)
    (only,) = json.loads(result.stdout)
    assert only["evidence_gaps"] == 0


def test_sqlite_fast_insert_stores_exactly_what_core_would(home, tmp_path, monkeypatch):
    """The SQLite bulk-insert fast path must store the same values, with the same SQLite
    types, as SQLAlchemy Core's executemany (timestamps, booleans, NULLs included)."""
    import sqlite3

    import sqlalchemy as sa

    damaged_home(home)
    # a start before year 1000 and off UTC: the timestamp text must still be SQLAlchemy's
    make_run(home, created_at="0999-06-01T01:02:03.5+02:00")
    # tool names travel through JSON in the parallel path: escapes, non-ASCII, empty, repeats
    make_run(home, tools=("Bash", 'we"ird\\na\u0000me', "ünïcødé 🚀", "", "Bash", "Edit"))
    fast_url = f"sqlite:///{tmp_path / 'fast.sqlite'}"
    core_url = f"sqlite:///{tmp_path / 'core.sqlite'}"
    par_url = f"sqlite:///{tmp_path / 'parallel.sqlite'}"
    index_homes([home], fast_url)
    with monkeypatch.context() as m:  # the rows encoded in worker processes, too
        m.setattr(indexer_mod, "PARALLEL_MIN", 1)
        m.setattr(os, "cpu_count", lambda: 2)
        index_homes([home], par_url)
    monkeypatch.setattr(indexer_mod, "FAST_SQLITE", False)
    index_homes([home], core_url)

    volatile = {"indexed_at", "added_at", "last_indexed_at"}

    def dump(path):
        db = sqlite3.connect(path)
        out = {}
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'alembic%' "
                                   "AND name NOT IN ('ledger_meta', 'index_shards')"):
            cols = [r[1] for r in db.execute(f'PRAGMA table_info("{table}")') if r[1] not in volatile]
            sel = ", ".join(f'"{c}", typeof("{c}")' for c in cols)
            out[table] = sorted(map(repr, db.execute(f'SELECT {sel} FROM "{table}"')))
        return out

    fast, core = dump(tmp_path / "fast.sqlite"), dump(tmp_path / "core.sqlite")
    assert fast["runs"] and fast == core
    assert dump(tmp_path / "parallel.sqlite") == core


def test_rebuild_keeps_reports_identical_including_a_newer_schema_on_the_server(home, db_url):
    """`ledger index --rebuild` clears/drops the report's derived tables with the index's, so
    the report afterwards answers exactly as before (also from an unknown, newer revision)."""
    import sqlalchemy as sa

    make_run(home)
    make_run(home, model="gpt-5.5", cost=None, harness="codex")
    first = cli("report", "run", "--json", "--tz", "UTC", "--db", db_url)
    assert first.exit_code == 0, first.output
    res = cli("index", "--rebuild", "--db", db_url)
    assert res.exit_code == 0, res.output
    again = cli("report", "run", "--json", "--tz", "UTC", "--db", db_url)
    assert again.exit_code == 0, again.output
    assert again.stdout == first.stdout
    if db_url.startswith("postgresql"):
        eng = sa.create_engine(db_url)
        with eng.begin() as c:
            c.exec_driver_sql("UPDATE alembic_version SET version_num = '9999_from_the_future'")
        eng.dispose()
        res = cli("index", "--rebuild", "--db", db_url)
        assert res.exit_code == 0, res.output
        third = cli("report", "run", "--json", "--tz", "UTC", "--db", db_url)
        assert third.exit_code == 0, third.output
        assert third.stdout == first.stdout


def test_fresh_build_creates_its_schema_for_no_home_and_empty_homes(home, tmp_path):
    """A fresh SQLite build creates the schema lazily (while the first records are read):
    it must still exist when there is nothing to read, and home ids follow the homes' order."""
    import sqlite3

    index_homes([], f"sqlite:///{tmp_path / 'none.sqlite'}")
    db = sqlite3.connect(tmp_path / "none.sqlite")
    assert db.execute("SELECT count(*) FROM runs_v").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM homes").fetchone() == (0,)

    (home / "runs").mkdir(parents=True, exist_ok=True)  # `home`: the (empty) default home
    full = tmp_path / "full"
    make_run(full)
    url = f"sqlite:///{tmp_path / 'two.sqlite'}"
    assert index_homes([home, full], url).new == 1
    db = sqlite3.connect(tmp_path / "two.sqlite")
    assert db.execute("SELECT home_id, path FROM homes ORDER BY home_id").fetchall() == [(1, str(home)), (2, str(full))]
    assert cli("runs", "--json", "--all", "--db", url, "--home", str(full)).stdout == records_runs_json(full)


def test_scratch_files_are_removed_and_stale_ones_cleaned(home, tmp_path, monkeypatch):
    """The parallel path's scratch directory (next to the index) is gone after a pass, and one
    left by an indexer that died (its pid no longer exists) is removed by the next pass."""
    import subprocess
    import sys

    for _ in range(3):
        make_run(home)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{indexer_mod.SCRATCH_PREFIX}{dead.pid}-x"
    stale.mkdir()
    (stale / "part-1.sqlite").write_bytes(b"old")
    alive = tmp_path / f"{indexer_mod.SCRATCH_PREFIX}1-y"  # pid 1 always exists: not touched
    alive.mkdir()
    monkeypatch.setattr(indexer_mod, "PARALLEL_MIN", 1)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # the parallel path even on a 1-core machine
    url = f"sqlite:///{tmp_path / 'index.sqlite'}"
    assert index_homes([home], url).new == 3
    assert cli("runs", "--json", "--all", "--db", url).stdout == records_runs_json(home)
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(indexer_mod.SCRATCH_PREFIX))
    assert left == [alive.name]
