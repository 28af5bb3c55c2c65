"""Damage done to records after they were indexed and sealed is seen, never hidden.

Real records on disk, really damaged: a manifest overwritten with garbage, events.jsonl
truncated, terminal.json deleted or edited, a run directory or a whole shard replaced by a
symlink to a copy outside the home. `ledger index --full` re-checks every file of every
record; the damaged runs stay visible (`ledger runs`: state `unreadable`; reports:
`unreadable_runs`; `ledger verify`: a problem, exit 1); symlinks are listed, not followed.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path

import orjson
import pytest
import sqlalchemy as sa

import recordkit as rk
from indexhelpers import cli, records_runs_json
from ledger.records.reader import SYMLINK_REASON

COST = 0.25  # the golden events' final receipt


@pytest.fixture(autouse=True)
def no_racy_window(monkeypatch):
    """Files damaged a moment ago would be 'racy' (re-read on the next pass too): counted exactly here."""
    from ledger.index import sealing

    monkeypatch.setattr(sealing, "RACY_NS", 0)  # (the indexer, the check and the small pass: one setting)


def _id(shard: str) -> str:
    return f"run_{shard}{uuid.uuid4().hex[2:]}"


def _run(home: Path, shard: str, **kw) -> Path:
    """A settled Loopflow-style record (golden events: one final receipt of $0.25) in `shard`."""
    kw.setdefault("term", rk.terminal())
    return rk.write_record(home, _id(shard), events=rk.golden_events(), **kw)


def _age(home: Path, seconds: float = 3600) -> None:
    """Make every record file and directory quiet for an hour (past SEAL_GRACE_NS)."""
    t = time.time() - seconds
    for dirpath, _, filenames in os.walk(home / "runs"):
        for n in filenames:
            os.utime(os.path.join(dirpath, n), (t, t), follow_symlinks=False)
        os.utime(dirpath, (t, t), follow_symlinks=False)


def _sealed(db_url: str) -> dict[str, bool]:
    eng = sa.create_engine(db_url)
    try:
        with eng.connect() as conn:
            return {k: bool(v) for k, v in conn.exec_driver_sql("SELECT shard, sealed FROM index_shards")}
    finally:
        eng.dispose()


def _index(db_url: str, *extra: str) -> dict:
    res = cli("index", "--db", db_url, "--json", *extra)
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    return orjson.loads(res.stdout)


def _runs(db_url: str) -> dict[str, dict]:
    res = cli("runs", "--json", "--all", "--db", db_url)
    assert res.exit_code == 0, res.output
    return {r["id"]: r for r in orjson.loads(res.stdout)}


def _report(db_url: str) -> tuple[dict, str]:
    res = cli("report", "run", "--json", "--db", db_url)
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout), res.stderr


def _verify(home: Path) -> tuple[int, dict]:
    res = cli("verify", "--home", str(home), "--json")
    assert "Traceback" not in res.output
    return res.exit_code, json.loads(res.stdout)


@pytest.fixture
def sealed_home(home, db_url):
    """Four settled runs in four shards, indexed and sealed (quiet for an hour)."""
    runs = {name: _run(home, shard) for name, shard in
            (("manifest", "a1"), ("events", "b2"), ("terminal", "c3"), ("intact", "d4"))}
    _age(home)
    first = _index(db_url)
    assert first["new"] == 4 and first["skipped"] == []
    assert _sealed(db_url) == {"a1": True, "b2": True, "c3": True, "d4": True}
    report, _ = _report(db_url)
    costs = {r["key"]: r["cost_usd"] for r in report["rows"]}
    assert set(costs) == {p.name for p in runs.values()} and report["totals"]["runs"] == 4
    assert report["totals"]["cost_usd"] == pytest.approx(sum(costs.values())) and min(costs.values()) > COST
    assert report["unreadable_runs"] == 0 and report["unreadable"] == []
    return runs


def test_damage_after_sealing_is_seen_by_full_and_stays_visible(home, db_url, sealed_home):
    runs = sealed_home
    # garbage written over the manifest in place (the run directory's mtime does not move)
    with open(runs["manifest"] / "manifest.json", "r+b") as f:
        f.write(b"garbage")
        f.truncate()
    # events.jsonl cut below the indexed offset
    ev = runs["events"] / "events.jsonl"
    lines = ev.read_bytes().splitlines(keepends=True)
    ev.write_bytes(b"".join(lines[:3]))
    # the receipt of a settled run deleted
    (runs["terminal"] / "terminal.json").unlink()

    summary = _index(db_url, "--full")
    (problem,) = summary["skipped"]
    assert problem["path"] == str(runs["manifest"] / "manifest.json")
    assert "manifest.json is not valid JSON" in problem["reason"]
    assert summary["rewritten"] == 2  # the truncated events and the deleted receipt

    listed = _runs(db_url)
    assert set(listed) == {p.name for p in runs.values()}  # nothing dropped out
    bad = listed[runs["manifest"].name]
    assert bad["state"] == "unreadable" and bad["outcome"] is None and bad["usage"]["cost_usd"] is None
    # the truncated run was re-read whole (attempt 1 only now) and carries one more gap
    cut = listed[runs["events"].name]
    assert cut["state"] == "settled" and cut["evidence_gaps"] == 1 and cut["usage"]["cost_usd"] is None
    # the run whose receipt vanished no longer looks settled, and says why
    unsettled = listed[runs["terminal"].name]
    assert unsettled["state"] != "settled" and unsettled["outcome"] is None and unsettled["evidence_gaps"] == 1
    assert listed[runs["intact"].name]["state"] == "settled" and listed[runs["intact"].name]["evidence_gaps"] == 0

    report, stderr = _report(db_url)
    assert report["unreadable_runs"] == 1
    assert report["unreadable"] == [problem]
    rows = {r["key"]: r for r in report["rows"]}
    assert runs["manifest"].name not in rows and report["totals"]["runs"] == 3
    assert report["totals"]["evidence_gaps"] == 2
    assert rows[runs["terminal"].name]["unverified"] == 1
    # the human table says it under the table
    res = cli("report", "--db", db_url)
    assert res.exit_code == 0 and "1 unreadable record (damaged, or a symlink) is not counted" in res.stderr

    # the flags survive the next passes (plain and --full) and match the records path
    for extra in ((), ("--full",)):
        again = _index(db_url, *extra)
        assert again["skipped"] == [problem] and again["rewritten"] == 0
        assert again["records_read"] == (1 if extra else 0)  # --full re-reads the damaged record
    after = _runs(db_url)
    assert after == listed
    want = {r["id"]: r for r in orjson.loads(records_runs_json(home))}
    assert want[runs["manifest"].name] == listed[runs["manifest"].name]
    # (the index alone knows of the two rewrites: the records path cannot see them)
    for key in ("events", "terminal"):
        want[runs[key].name]["evidence_gaps"] += 1
    assert want == listed

    code, doc = _verify(home)
    assert code == 1 and doc["runs"] == 4
    assert {p["path"] for p in doc["problems"]} >= {str(runs["manifest"])}


def test_full_sees_an_in_place_edit_that_kept_size_and_mtime(home, db_url, sealed_home):
    """events.jsonl edited in place, same size, mtime put back: every stat signature is the
    same; --full's prefix hash still sees it, re-reads the run whole and flags it."""
    run = sealed_home["events"]
    ev = run / "events.jsonl"
    st = ev.stat()
    data = ev.read_bytes()
    edited = data.replace(b'"input_tokens":15', b'"input_tokens":95', 1)
    assert edited != data and len(edited) == len(data)
    with open(ev, "r+b") as f:
        f.write(edited)
    os.utime(ev, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _index(db_url)["records_read"] == 0  # sealed: a plain pass does not look
    summary = _index(db_url, "--full")
    assert summary["rewritten"] == 1 and summary["updated"] == 1 and summary["records_read"] == 1
    row = _runs(db_url)[run.name]
    assert row["evidence_gaps"] == 1 and row["usage"]["input_tokens"] == 95 + 12


def test_a_repaired_record_comes_back_with_full(home, db_url, sealed_home):
    runs = sealed_home
    path = runs["manifest"] / "manifest.json"
    good = path.read_bytes()
    with open(path, "r+b") as f:
        f.write(b"garbage")
        f.truncate()
    assert len(_index(db_url, "--full")["skipped"]) == 1
    with open(path, "r+b") as f:  # put back in place: the directory still does not change
        f.write(good)
    summary = _index(db_url, "--full")
    assert summary["skipped"] == [] and summary["updated"] == 1
    row = _runs(db_url)[runs["manifest"].name]
    assert row["state"] == "settled" and row["usage"]["cost_usd"] == COST


def test_plain_index_sees_files_changed_in_place_in_an_open_shard(home, db_url):
    """A shard holding an unsettled run is not sealed: a plain pass stats every record file
    there, so a manifest or receipt changed in place (directory untouched) is caught."""
    settled = _run(home, "e5")
    edited = _run(home, "e5", term=rk.terminal("failed"))
    _run(home, "e5", term=None)  # unsettled: keeps the shard open
    _age(home)
    _index(db_url)
    assert _sealed(db_url) == {"e5": False}
    with open(settled / "manifest.json", "r+b") as f:
        f.write(b"[]")
        f.truncate()
    receipt = edited / "terminal.json"
    receipt.write_bytes(receipt.read_bytes().replace(b'"failed"', b'"completed"'))
    summary = _index(db_url)
    assert [p["path"] for p in summary["skipped"]] == [str(settled / "manifest.json")]
    assert summary["rewritten"] == 1
    listed = _runs(db_url)
    assert listed[settled.name]["state"] == "unreadable"
    # the flipped receipt is read (completed) but flagged: a receipt is written once
    assert listed[edited.name]["outcome"] == "completed" and listed[edited.name]["evidence_gaps"] == 1


def test_symlinked_run_and_shard_are_listed_not_followed(home, db_url, tmp_path):
    runs = {shard: _run(home, shard) for shard in ("f6", "a7", "b8")}
    _age(home)
    assert _index(db_url)["new"] == 3
    outside = tmp_path / "outside"
    outside.mkdir()
    # a run directory replaced by a symlink to a copy of itself outside the home
    run = runs["f6"]
    shutil.copytree(run, outside / run.name)
    shutil.rmtree(run)
    os.symlink(outside / run.name, run)
    # a whole shard replaced by a symlink to a copy outside the home
    shard = runs["a7"].parent
    shutil.copytree(shard, outside / "a7")
    shutil.rmtree(shard)
    os.symlink(outside / "a7", shard)
    before = {p: p.stat().st_atime_ns for p in rk.all_files(outside)}

    for extra in ((), ("--full",), ()):
        summary = _index(db_url, *extra)
        assert summary["skipped"] == [
            {"path": str(shard), "reason": SYMLINK_REASON},
            {"path": str(run), "reason": SYMLINK_REASON},
        ]
    listed = _runs(db_url)
    # the symlinked run is listed as unreadable; the symlinked shard's run is not in the home
    assert set(listed) == {run.name, runs["b8"].name}
    assert listed[run.name]["state"] == "unreadable"
    assert cli("runs", "--json", "--all", "--db", db_url).stdout == records_runs_json(home)
    res = cli("show", run.name, "--db", db_url)
    assert res.exit_code == 1 and SYMLINK_REASON in res.stderr

    report, stderr = _report(db_url)
    assert report["unreadable_runs"] == 2 and report["totals"]["runs"] == 1
    (row,) = report["rows"]
    assert row["key"] == runs["b8"].name and report["totals"]["cost_usd"] == row["cost_usd"] > COST
    assert "warning: skipped damaged record" in stderr and SYMLINK_REASON in stderr

    code, doc = _verify(home)
    # (issue 32: a symlinked shard is a problem, not a run: counted apart)
    assert code == 1 and doc["runs"] == 2 and doc["ok"] == 1 and doc["shard_links"] == 1
    assert {(p["run_id"], p["path"], tuple(p["problems"])) for p in doc["problems"]} == {
        ("runs/a7", str(shard), (SYMLINK_REASON,)), (run.name, str(run), (SYMLINK_REASON,))}
    one = cli("verify", run.name[:12], "--home", str(home))
    assert one.exit_code == 1 and SYMLINK_REASON in one.stdout
    # never followed out of the home: nothing there was even opened
    assert {p: p.stat().st_atime_ns for p in rk.all_files(outside)} == before


def test_verify_without_a_home_is_an_error(tmp_path):
    for home in (tmp_path / "missing", tmp_path / "a-file"):
        if home.name == "a-file":
            home.write_text("not a home")
        res = cli("verify", "--home", str(home))
        assert res.exit_code == 1
        first = res.stderr.splitlines()[0]  # one wording for every command (ledger.home.check_home)
        assert first.startswith("Error: ") and str(home) in first
        assert ("no ledger home at" if home.name == "missing" else "is not a directory") in first
        assert "Hint:" in res.stderr and "verified" not in res.output and "Traceback" not in res.output
    assert not (tmp_path / "missing").exists()
