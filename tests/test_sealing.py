"""Abandoned and damaged runs no longer keep their shard open (issue 10; ledger.index.sealing).

Real records, real launchers: an unsettled run whose launcher process is really killed
(SIGKILL), exits without settling, or ran before this machine's last boot; a record really
damaged (a malformed complete line appended to its events.jsonl). After a pass their shard is
sealed with what is known (outcome abandoned, the damage listed); a no-change pass neither
lists the shard nor stats its settled runs (only the damaged / abandoned records' own files:
a few stats each), and any later write to those records opens the shard again and is indexed.
The no-change check before the heavy imports (ledger.index.fresh) follows the same rule:
held to the real pass on such homes.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from ledger.index import sealing as sealing_mod
import sqlalchemy as sa

import recordkit as rk
from indexhelpers import append_usage, cli, records_runs_json, settle_run
from test_fresh import age, check, dump, indexed, real_pass

from ledger.index import db as dbmod
from ledger.index import fresh, indexer, ops, scan, sealing
from ledger.records.liveness import boot_id, hostname

TESTS = str(Path(__file__).parent)
BAD_LINE = b"this is not json\n"


def _id(shard: str) -> str:
    return f"run_{shard}{uuid.uuid4().hex[2:]}"


def settled_run(home: Path, shard: str) -> Path:
    """A settled record (golden events, final receipt $0.25) in `shard`."""
    return rk.write_record(home, _id(shard), events=rk.golden_events(), term=rk.terminal())


def damaged_run(home: Path, shard: str) -> tuple[Path, int]:
    """A settled record then really damaged: a malformed complete line appended. (path, the
    events.jsonl size before the damage: truncating back to it repairs the record)."""
    run = settled_run(home, shard)
    events = run / "events.jsonl"
    size = events.stat().st_size
    with open(events, "ab") as f:
        f.write(BAD_LINE)
    return run, size


_LAUNCHER = """
import sys
from pathlib import Path
from ledger.records import RunCapture
cap = RunCapture(Path(sys.argv[1]), harness="claude", model="claude-sonnet-4-5", subjects=["task:A"], run_id=sys.argv[2])
a = cap.start_attempt("anthropic", "claude-sonnet-4-5")
cap.usage_stream(provider="anthropic", model="claude-sonnet-4-5", attempt_key=a, turn_key="t1").observe(
    {"input_tokens": 100, "output_tokens": 20})
cap.emit("tool_use", name="Bash", summary="x")
cap.detach()
print("ready", flush=True)
if sys.argv[3] == "wait":
    sys.stdin.read()
"""


def orphan(home: Path, shard: str, how: str = "killed") -> Path:
    """An unsettled run whose launcher is gone: recorded by a real launcher process that is
    then killed with SIGKILL (`killed`), or that exits without settling (`exited`); or
    (`other-boot`) a record of this host from another boot of the machine."""
    rid = _id(shard)
    if how == "other-boot":
        return rk.write_record(home, rid, events=rk.golden_events(), host=hostname(), boot_id="not-" + (boot_id() or "x"),
                               launcher={"pid": os.getpid(), "start_ticks": None})
    p = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(home), rid, "wait" if how == "killed" else "exit"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        if how == "killed":
            os.kill(p.pid, signal.SIGKILL)
    finally:
        p.wait()
    if how == "killed":
        assert p.returncode == -signal.SIGKILL
    return home / "runs" / shard / rid


def running_run(home: Path, shard: str):
    """An unsettled run whose launcher (this process) is alive."""
    from ledger.records import RunCapture

    cap = RunCapture(home, harness="claude", run_id=_id(shard))
    cap.emit("tool_use", name="Bash", summary="x")
    cap.detach()
    return Path(cap.path)


class Calls:
    """os.stat / os.lstat / os.scandir calls on paths under `root` (what a pass or the check
    looked at), recorded while installed."""

    def __init__(self, monkeypatch, root: Path) -> None:
        self.root = str(root)
        self.stats: list[str] = []
        self.listed: list[str] = []
        self._mp = monkeypatch
        real_stat, real_lstat, real_scandir = os.stat, os.lstat, os.scandir

        def stat(p, *a, **k):
            self._note(self.stats, p)
            return real_stat(p, *a, **k)

        def lstat(p, *a, **k):
            self._note(self.stats, p)
            return real_lstat(p, *a, **k)

        def scandir(p=".", *a, **k):
            self._note(self.listed, p)
            return real_scandir(p, *a, **k)

        self._fns = {"stat": stat, "lstat": lstat, "scandir": scandir}

    def _note(self, into: list[str], p) -> None:
        if isinstance(p, (str, os.PathLike)):
            s = os.fspath(p)
            if s.startswith(self.root):
                into.append(s)

    def __enter__(self) -> "Calls":
        for name, fn in self._fns.items():
            self._mp.setattr(os, name, fn)
        return self

    def __exit__(self, *exc) -> None:
        for name, fn in zip(("stat", "lstat", "scandir"), _REAL):
            self._mp.setattr(os, name, fn)

    def inside(self, shard_dir: Path) -> tuple[list[str], list[str]]:
        """(paths stat()ed, paths listed) inside `shard_dir` (the directory itself not counted)."""
        prefix = str(shard_dir) + os.sep
        return [p for p in self.stats if p.startswith(prefix)], [p for p in self.listed if p.startswith(str(shard_dir))]


_REAL = (os.stat, os.lstat, os.scandir)


def shard_states(db_url: str) -> dict[str, bool]:
    eng = sa.create_engine(db_url)
    try:
        with eng.connect() as conn:
            return {k: bool(v) for k, v in conn.exec_driver_sql("SELECT shard, sealed FROM index_shards")}
    finally:
        eng.dispose()


def run_rows(db_url: str) -> dict[str, dict]:
    eng = sa.create_engine(db_url)
    try:
        with eng.connect() as conn:
            return {r.run_id: dict(r._mapping) for r in conn.exec_driver_sql(
                "SELECT run_id, state, outcome, settled, input_tokens FROM runs")}
    finally:
        eng.dispose()


def files_as_they_are(home: Path) -> dict[str, tuple]:
    """Every file and directory of the records: bytes, size, mtime, inode (nothing ours to touch)."""
    out = {}
    for p in sorted((home / "runs").rglob("*")):
        st = os.lstat(p)
        out[str(p)] = (st.st_size, st.st_mtime_ns, st.st_ino, p.read_bytes() if p.is_file() else None)
    return out


@pytest.fixture
def quick_seal(monkeypatch):
    """Records are sealable as soon as they are written, never racy: the passes below are
    exact without waiting (the grace periods themselves are tested in test_fresh.py)."""
    monkeypatch.setattr(sealing_mod, "RACY_NS", 0)
    monkeypatch.setattr(sealing_mod, "SEAL_GRACE_NS", 0)


def index(home: Path, db_url: str, monkeypatch, full: bool = False):
    """The indexer's own pass (the no-change check before it is tested on its own below, the
    small pass in tests/test_quickpass.py)."""
    from ledger.index import quickpass

    with monkeypatch.context() as m:
        m.setattr(fresh, "unchanged", lambda homes, url: None)
        m.setattr(quickpass, "index_small", lambda homes, url, racy_ns=None: None)
        return ops.index_homes([home], db_url, full=full)


@pytest.mark.parametrize("how", ["killed", "exited", "other-boot"])
def test_a_run_whose_launcher_is_gone_lets_its_shard_be_sealed(home, tmp_path, monkeypatch, quick_seal, how):
    db_url = f"sqlite:///{tmp_path / 'index.sqlite'}"
    settled = [settled_run(home, "ab") for _ in range(3)]
    gone = orphan(home, "ab", how)
    first = index(home, db_url, monkeypatch)
    assert first.new == 4 and first.skipped == []
    assert shard_states(db_url) == {"ab": True}  # sealed by the pass that read it
    assert run_rows(db_url)[gone.name]["state"] == "abandoned"
    with Calls(monkeypatch, home) as calls:
        again = index(home, db_url, monkeypatch)
    assert again.records_read == 0 and again.unchanged == 4
    stats, listed = calls.inside(home / "runs" / "ab")
    assert listed == []  # the shard is not listed
    assert not [p for p in stats if any(s.name in p for s in settled)]  # its settled runs not stat()ed
    # only the abandoned run's own files: directory, events.jsonl, manifest.json
    assert sorted(stats) == sorted([str(gone), str(gone / "events.jsonl"), str(gone / "manifest.json")])


def test_a_running_run_keeps_its_shard_open(home, tmp_path, monkeypatch, quick_seal):
    db_url = f"sqlite:///{tmp_path / 'index.sqlite'}"
    settled_run(home, "ab")
    running_run(home, "ab")
    index(home, db_url, monkeypatch)
    index(home, db_url, monkeypatch)
    assert shard_states(db_url) == {"ab": False}  # its liveness is re-checked every pass


def test_sealed_with_abandoned_and_damaged_runs_then_every_later_write_is_indexed(home, db_url, monkeypatch,
                                                                                   quick_seal):
    """Both databases: the shard-skipping queries and the watched records' cursors."""
    ab = [settled_run(home, "ab") for _ in range(3)]
    gone = orphan(home, "ab")
    cd = [settled_run(home, "cd") for _ in range(2)]
    bad, good_size = damaged_run(home, "cd")
    ef = [settled_run(home, "ef"), running_run(home, "ef")]
    before_files = files_as_they_are(home)
    first = index(home, db_url, monkeypatch)
    assert first.new == 8 and [p.path for p in first.skipped] == [str(bad / "events.jsonl")]
    assert shard_states(db_url) == {"ab": True, "cd": True, "ef": False}
    assert run_rows(db_url)[gone.name]["state"] == "abandoned"

    # nothing changed: the sealed shards are not listed, only their watched records stat()ed
    with Calls(monkeypatch, home) as calls:
        again = index(home, db_url, monkeypatch)
    assert again.records_read == 0 and again.unchanged == 9 and again.new == again.updated == 0
    assert [p.path for p in again.skipped] == [str(bad / "events.jsonl")]  # (the damage is still listed)
    for shard, watched in (("ab", [gone, gone / "events.jsonl", gone / "manifest.json"]),
                           ("cd", [bad, bad / "events.jsonl"])):
        stats, listed = calls.inside(home / "runs" / shard)
        assert listed == [] and sorted(stats) == sorted(map(str, watched)), (shard, stats, listed)
    assert calls.inside(home / "runs" / "ef")[1] == [str(home / "runs" / "ef")]  # (the open shard is listed)
    assert files_as_they_are(home) == before_files  # nothing of the user's touched

    # the "abandoned" run was written to after all: read, its shard opened
    append_usage(gone, 1000, 2000)
    s = index(home, db_url, monkeypatch)
    assert s.records_read == 1 and s.updated == 1
    assert run_rows(db_url)[gone.name]["input_tokens"] == 100 + 1000
    assert cli("runs", "--json", "--all", "--db", db_url).stdout == records_runs_json(home)
    assert shard_states(db_url)["ab"] is True  # (still abandoned: sealed again)
    # ... and then settled by someone: read
    settle_run(gone, "failed")
    s = index(home, db_url, monkeypatch)
    assert s.records_read == 1 and s.updated == 1
    row = run_rows(db_url)[gone.name]
    assert (row["state"], row["outcome"], bool(row["settled"])) == ("settled", "failed", True)

    # the damaged record repaired (the bad line cut off): read, no longer listed
    os.truncate(bad / "events.jsonl", good_size)
    s = index(home, db_url, monkeypatch)
    assert s.records_read == 1 and s.skipped == [] and s.new == 0
    assert run_rows(db_url)[bad.name]["state"] == "settled"
    assert shard_states(db_url) == {"ab": True, "cd": True, "ef": False}
    assert cli("runs", "--json", "--all", "--db", db_url).stdout == records_runs_json(home)
    assert index(home, db_url, monkeypatch).records_read == 0


def test_a_damaged_record_repaired_by_replacing_the_file_is_read(home, tmp_path, monkeypatch, quick_seal):
    db_url = f"sqlite:///{tmp_path / 'index.sqlite'}"
    settled_run(home, "cd")
    bad = rk.write_record(home, _id("cd"), events=rk.golden_events(), term=rk.terminal(), manifest_bytes=b"{not json")
    assert [p.path for p in index(home, db_url, monkeypatch).skipped] == [str(bad / "manifest.json")]
    assert shard_states(db_url) == {"cd": True}
    # a good manifest written beside and renamed over the bad one (the run directory changes)
    tmp = bad / ".manifest.tmp"
    tmp.write_bytes(json.dumps(rk.manifest(bad.name)).encode())
    os.rename(tmp, bad / "manifest.json")
    s = index(home, db_url, monkeypatch)
    assert s.records_read == 1 and s.skipped == []
    assert run_rows(db_url)[bad.name]["state"] == "settled"


def test_a_launcher_that_dies_later_seals_the_shard_on_the_next_pass(home, tmp_path, monkeypatch, quick_seal):
    db_url = f"sqlite:///{tmp_path / 'index.sqlite'}"
    settled_run(home, "ab")
    rid = _id("ab")
    p = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(home), rid, "wait"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        index(home, db_url, monkeypatch)
        assert shard_states(db_url) == {"ab": False} and run_rows(db_url)[rid]["state"] == "running"
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    s = index(home, db_url, monkeypatch)
    assert s.records_read == 0  # (only its liveness changed)
    assert run_rows(db_url)[rid]["state"] == "abandoned" and shard_states(db_url) == {"ab": True}


# -- the no-change check (ledger.index.fresh) follows the same rule ---------------------------

@pytest.fixture
def mixed(home, monkeypatch) -> dict[str, Path]:
    """Settled runs in several shards, an abandoned run (launcher killed), a damaged record, a
    running run (this process): aged and indexed until a pass writes nothing."""
    runs = {f"s{i}": settled_run(home, shard) for i, shard in enumerate(("ab", "ab", "cd", "cd", "ef", "01"))}
    runs["gone"] = orphan(home, "ab")
    runs["bad"], _ = damaged_run(home, "cd")
    runs["running"] = running_run(home, "ef")
    indexed(home, monkeypatch)
    con = sqlite3.connect(home / "index.sqlite")
    assert dict(con.execute("SELECT shard, sealed FROM index_shards")) == {"ab": 1, "cd": 1, "ef": 0, "01": 1}
    con.close()
    return runs


def test_the_check_answers_unchanged_without_statting_sealed_shards(home, mixed, monkeypatch):
    with Calls(monkeypatch, home) as calls:
        quick = fresh.unchanged([str(home)], dbmod.default_url(home))
    assert quick is not None and quick.unchanged == 9
    assert [p.path for p in quick.skipped] == [str(mixed["bad"] / "events.jsonl")]
    gone, bad = mixed["gone"], mixed["bad"]
    for shard, watched in (("ab", [gone, gone / "events.jsonl", gone / "manifest.json"]),
                           ("cd", [bad, bad / "events.jsonl"]), ("01", [])):
        stats, listed = calls.inside(home / "runs" / shard)
        assert listed == [] and sorted(stats) == sorted(map(str, watched)), (shard, stats, listed)
    assert check(home, monkeypatch) is not None  # (held to the real pass)


def _append(runs):
    append_usage(runs["gone"], 7, 8)


def _settle(runs):
    settle_run(runs["gone"], "interrupted")


def _new_file(runs):
    (runs["gone"] / "provider-session.json").write_bytes(b'{"schema_version":1,"provider_session_id":"s"}')


def _manifest_in_place(runs):
    m = runs["gone"] / "manifest.json"
    m.write_bytes(m.read_bytes().replace(b'"task:A"', b'"task:Z"'))


def _repair(runs):
    ev = runs["bad"] / "events.jsonl"
    os.truncate(ev, ev.stat().st_size - len(BAD_LINE))


def _damage_more(runs):
    with open(runs["bad"] / "events.jsonl", "ab") as f:
        f.write(BAD_LINE)


def _delete_gone(runs):
    import shutil

    shutil.rmtree(runs["gone"])


def _new_run_in_sealed_shard(runs):
    settled_run(runs["s0"].parent.parent.parent, "ab")


CHANGES = {"events appended to the abandoned run": _append, "the abandoned run settled": _settle,
           "a file created in the abandoned run": _new_file,
           "the abandoned run's manifest edited in place": _manifest_in_place,
           "the damaged record repaired": _repair, "the damaged record damaged more": _damage_more,
           "the abandoned run deleted": _delete_gone, "a new run in a sealed shard": _new_run_in_sealed_shard}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_change_to_a_watched_record_is_left_to_the_pass(home, mixed, monkeypatch, change):
    assert check(home, monkeypatch) is not None
    CHANGES[change](mixed)
    time.sleep(2 * sealing_mod.RACY_NS / 1e9)  # (not racy: the check must see the change itself, not a fresh mtime)
    before = dump(home / "index.sqlite")
    assert fresh.unchanged([str(home)], dbmod.default_url(home)) is None
    summary = real_pass(home, monkeypatch)
    assert dump(home / "index.sqlite") != before  # the pass did have something to write
    assert summary.records_read + summary.removed + summary.new >= 1
    listed = cli("runs", "--all", "--json").stdout
    if change == "the abandoned run's manifest edited in place":
        # (an immutable file changed: read, and flagged as a rewrite, which only the index can know)
        row = {r["id"]: r for r in json.loads(listed)}[mixed["gone"].name]
        assert row["evidence_gaps"] == 1 and "task:Z" in json.dumps(row)
    else:
        assert listed == records_runs_json(home)
    assert check(home, monkeypatch) is not None  # and once indexed, nothing is left


def test_the_check_and_the_pass_agree_when_a_launcher_dies(home, monkeypatch):
    settled_run(home, "ab")
    rid = _id("ab")
    p = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(home), rid, "wait"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        indexed(home, monkeypatch)
        assert check(home, monkeypatch) is not None
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    assert check(home, monkeypatch) is None  # running -> abandoned, and the shard to seal
    con = sqlite3.connect(home / "index.sqlite")
    assert dict(con.execute("SELECT shard, sealed FROM index_shards")) == {"ab": 1}
    con.close()
    assert check(home, monkeypatch) is not None


def test_the_shared_rule_names_what_the_indexer_writes():
    from ledger.records import ids, reader

    assert sealing.RUN_PREFIX == ids.PREFIX
    assert (sealing.MANIFEST, sealing.TERMINAL, sealing.CONTEXT, sealing.EVENTS) == tuple(
        os.sep + n for n in (reader.MANIFEST, reader.TERMINAL, reader.CONTEXT, reader.EVENTS))
    assert sealing._CONTEXT_REF == reader.CONTEXT + "="
    # the pass and the check use the very same functions
    assert scan.subdirs is fresh.subdirs is sealing.subdirs
    assert scan.watched_unchanged is fresh.watched_unchanged and scan.seals is fresh.seals
    assert scan.record_unchanged is fresh.record_unchanged and scan.shard_skipped is fresh.shard_skipped
    assert scan.run_dirs is fresh.run_dirs is sealing.run_dirs
    assert scan.shard_walk is fresh.shard_walk and scan.watched_changes is fresh.watched_changes
    assert scan.kept is fresh.kept and scan.live_now is fresh.live_now
    # and the same statements (ledger.index.runrows)
    assert scan.runrows is fresh.runrows and scan.delete_runs is fresh.runrows.delete_runs
