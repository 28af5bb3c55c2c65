"""`ledger push` and the central record store (issue 11): append-only, idempotent, laid out by
home id, and a store indexed centrally answers exactly what the home's own index answers."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import claudehistory
from indexhelpers import append_event, make_run
from ledger.cli.app import app
from ledger.home import read_home_uid
from ledger.records.writer import write_provider_session

runner = CliRunner()


def run(*args: str, code: int = 0, env: dict[str, str] | None = None) -> Any:
    res = runner.invoke(app, list(args), env=env)
    out = (res.stdout or "") + (res.stderr or "")
    assert "Traceback" not in out, out
    assert res.exit_code == code, out
    return res


def push(home: Path, store: Path, code: int = 0) -> dict[str, Any]:
    return json.loads(run("push", "--home", str(home), "--to", str(store), "--json", code=code).stdout)


def files(root: Path) -> dict[str, bytes]:
    """Every file below root (symlinks included as their target text), by relative path; not
    the push's own bookkeeping (what it verified)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            if name == ".push-state.json":
                continue
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = os.readlink(p).encode() if p.is_symlink() else p.read_bytes()
    return out


def records(home: Path) -> dict[str, bytes]:
    """What a push copies: run records and archived logs (not the index, locks or .state)."""
    return {k: v for k, v in files(home).items()
            if k.startswith("runs/") or (k.startswith("sources/") and "/.state/" not in k and k.endswith(
                (".jsonl", ".zst"))) or k == "home-id.json"}


def store_home(store: Path, home: Path) -> Path:
    return store / "homes" / read_home_uid(home)


@pytest.fixture
def claude_cfg(tmp_path: Path) -> Path:
    return tmp_path / "claude"


@pytest.fixture
def filled(home: Path, claude_cfg: Path) -> Path:
    """A home with settled, failed and running runs and an imported Claude Code history."""
    make_run(home, subjects=("task:A", "task:B"), skill="review")
    make_run(home, outcome="failed", model="gpt-5", harness="codex", cost=None)
    make_run(home, outcome=None)
    claudehistory.generate(claude_cfg, sessions=4, seed=3)
    run("import", "claude", "--from", str(claude_cfg))
    return home


def test_push_copies_the_records_and_a_second_push_copies_nothing(filled, tmp_path):
    store = tmp_path / "store"
    run("index", "--home", str(filled))  # (the home's index is not a record: never pushed)
    first = push(filled, store)
    uid = read_home_uid(filled)
    assert first["home_id"] == uid and first["dest"] == str(store)
    assert first["copied"] > 0 and first["conflicts"] == [] and first["skipped"] == []
    assert json.loads((store / "ledger-store.json").read_text()) == {"schema_version": 1, "kind": "ledger-store"}
    dest = store / "homes" / uid
    assert records(dest) == records(filled)
    assert (dest / "home-id.json").read_bytes() == (filled / "home-id.json").read_bytes()
    pushed = files(dest)
    assert not any("index.sqlite" in k or k.endswith(".lock") and k != ".push.lock" for k in pushed), sorted(pushed)
    # the archive's bookkeeping (this machine's config dirs) stays home; the store has its own marker
    assert [k for k in pushed if "/.state/" in k] == ["sources/claude/.state/changed"]
    assert not any("roots" in k for k in pushed)
    for dirpath, dirnames, filenames in os.walk(dest):
        for d in dirnames:
            assert stat.S_IMODE(os.lstat(os.path.join(dirpath, d)).st_mode) == 0o700
        for f in filenames:
            assert stat.S_IMODE(os.lstat(os.path.join(dirpath, f)).st_mode) == 0o600, f

    second = push(filled, store)
    assert (second["copied"], second["extended"], second["replaced"]) == (0, 0, 0)
    assert second["unchanged"] == first["copied"] + first["extended"] + first["unchanged"]
    assert files(dest) == pushed

    res = run("push", "--home", str(filled), "--to", str(store))
    assert "0 copied, 0 extended" in res.stderr and "0 conflicts" in res.stderr


def test_appended_events_a_new_run_and_a_grown_archive_are_pushed_incrementally(filled, claude_cfg, tmp_path):
    store = tmp_path / "store"
    push(filled, store)
    dest = store_home(store, filled)
    marker = (dest / "sources/claude/.state/changed").stat()
    store_db = f"sqlite:///{tmp_path / 'store.sqlite'}"
    run("index", "--home", str(store), "--db", store_db)

    running = next(p for p in (filled / "runs").glob("*/*") if not (p / "terminal.json").exists())
    before = (dest / running.relative_to(filled) / "events.jsonl").read_bytes()
    append_event(running, type="tool_use", name="Edit", summary="x")
    with open(running / "events.jsonl", "ab") as f:
        f.write(b'{"schema_version": 1, "seq": 99, "ty')  # a torn last line: still being written
    new_run = make_run(filled, model="claude-opus-4-1")
    log = next(p for p in sorted(claude_cfg.rglob("*.jsonl")) if "subagents" not in str(p))
    with open(log, "ab") as f:
        f.write(json.dumps({"type": "user", "sessionId": log.stem, "timestamp": "2026-02-01T00:00:00Z",
                            "message": {"role": "user", "content": "more"}}).encode() + b"\n")
    run("import", "claude", "--from", str(claude_cfg))

    doc = push(filled, store)
    assert doc["copied"] == 3  # the new run's manifest, events and receipt
    assert doc["extended"] == 2  # the running run's events, the archived log
    assert doc["conflicts"] == []
    assert doc["bytes"] < 64 * 1024  # new bytes only, not the history again
    events = (dest / running.relative_to(filled) / "events.jsonl").read_bytes()
    home_events = (running / "events.jsonl").read_bytes()
    assert events.startswith(before) and len(events) > len(before)
    assert events == home_events[:home_events.rindex(b"\n") + 1]  # the torn line waits
    assert (dest / new_run.relative_to(filled) / "terminal.json").exists()
    assert (dest / "sources/claude/.state/changed").stat().st_mtime_ns != marker.st_mtime_ns
    home_records = records(filled)
    torn = str((running / "events.jsonl").relative_to(filled))
    assert {k: v for k, v in records(dest).items() if k != torn} == {k: v for k, v in home_records.items() if k != torn}

    with open(running / "events.jsonl", "ab") as f:
        f.write(b'pe": "text", "observed_at": "2026-01-01T00:00:00.000000Z", "text": "hi"}\n')
    doc = push(filled, store)
    assert (doc["copied"], doc["extended"]) == (0, 1)
    assert records(dest) == records(filled)
    # the store's index, brought up to date incrementally, answers what the home's answers
    home_db = f"sqlite:///{tmp_path / 'home.sqlite'}"
    assert _answers(store, store_db, dest) == _answers(filled, home_db, filled)


def test_a_changed_manifest_or_a_shrunk_log_is_a_conflict_and_never_overwritten(filled, tmp_path):
    store = tmp_path / "store"
    push(filled, store)
    dest = store_home(store, filled)
    settled = sorted(p for p in (filled / "runs").glob("*/*") if (p / "terminal.json").exists())
    manifest = settled[0] / "manifest.json"
    doc = json.loads(manifest.read_bytes())
    doc["model"] = "something-else"
    os.chmod(manifest, 0o600)
    manifest.write_text(json.dumps(doc))
    events = settled[1] / "events.jsonl"
    data = events.read_bytes()
    events.write_bytes(data[:data.rindex(b"\n", 0, len(data) - 1) + 1])  # its last line removed
    archive = next((filled / "sources" / "claude").rglob("*.zst"))
    old = archive.read_bytes()
    os.chmod(archive, 0o600)
    archive.write_bytes(zframe(b'{"type":"user"}\n') + old)  # rewritten (and longer): not an append
    kept = files(dest)

    res = run("push", "--home", str(filled), "--to", str(store), "--json", code=1)
    summary = json.loads(res.stdout)
    paths = sorted(c["path"] for c in summary["conflicts"])
    assert paths == sorted([str(p.relative_to(filled)) for p in (manifest, events, archive)])
    assert "Error: 3 files of the home differ from the store's copies; nothing was overwritten" in res.stderr
    assert "Hint: " in res.stderr and "conflict: " in res.stderr
    assert files(dest) == kept  # nothing overwritten, nothing merged

    # a provider session is replaced with its run until the store's copy is settled, then frozen
    running = next(p for p in (filled / "runs").glob("*/*") if not (p / "terminal.json").exists())
    write_provider_session(running, "session-1")
    assert push(filled, store, code=1)["copied"] == 1
    write_provider_session(running, "session-2")
    assert push(filled, store, code=1)["replaced"] == 1
    assert b"session-2" in (dest / running.relative_to(filled) / "provider-session.json").read_bytes()
    from ledger.records.writer import settle

    settle(running, "completed")
    push(filled, store, code=1)
    write_provider_session(running, "session-3")
    conflicts = push(filled, store, code=1)["conflicts"]
    assert str((running / "provider-session.json").relative_to(filled)) in [c["path"] for c in conflicts]
    assert b"session-2" in (dest / running.relative_to(filled) / "provider-session.json").read_bytes()


def test_a_receipt_being_written_and_an_unsettled_runs_blobs_wait(home, tmp_path):
    running = make_run(home, outcome=None)
    (running / "streams").mkdir()
    (running / "streams" / "stdout.jsonl").write_bytes(b"{}\n")  # written just before the receipt
    (running / "terminal.json").write_bytes(b'{"schema_version": 1, "outc')  # being written in place
    store = tmp_path / "store"
    doc = push(home, store)
    dest = store_home(store, home) / running.relative_to(home)
    assert doc["waiting"] == 2 and doc["conflicts"] == []
    assert not (dest / "terminal.json").exists() and not (dest / "streams").exists()
    (running / "terminal.json").write_bytes(b'{"schema_version": 1, "outcome": "completed", '
                                            b'"ended_at": "2026-03-08T06:45:10.123456789Z", "result_ref": null}')
    doc = push(home, store)
    assert (doc["copied"], doc["waiting"]) == (2, 0)
    assert records(store_home(store, home)) == records(home)


def zframe(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(data)


def test_symlinks_in_the_home_are_not_followed(home, tmp_path):
    run_dir = make_run(home)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not a record")
    shard = run_dir.parent
    os.symlink(outside, shard / "run_0123456789abcdef0123456789abcdef")  # a run directory that is a link
    os.symlink(outside / "secret.txt", run_dir / "notes.txt")  # a file in a run that is a link
    (home / "sources" / "claude" / "projects").mkdir(parents=True)
    os.symlink(outside / "secret.txt", home / "sources" / "claude" / "projects" / "x.jsonl")
    os.symlink(outside, home / "sources" / "codex")  # a client directory that is a link

    store = tmp_path / "store"
    doc = push(home, store)
    skipped = {s["path"]: s["reason"] for s in doc["skipped"]}
    rel = str(run_dir.relative_to(home))
    assert set(skipped) == {f"{shard.relative_to(home)}/run_0123456789abcdef0123456789abcdef", f"{rel}/notes.txt",
                            "sources/claude/projects/x.jsonl", "sources/codex"}
    assert all("symlink" in r for r in skipped.values())
    pushed = files(store)
    assert not any(v == b"not a record" for v in pushed.values())
    assert not any(os.path.islink(os.path.join(d, n)) for d, ds, fs in os.walk(store) for n in ds + fs)
    res = run("push", "--home", str(home), "--to", str(store))
    assert "skipped" in res.stderr and "not followed" in res.stderr


def _normalized(text: str, *homes: Path) -> Any:
    for h in homes:
        text = text.replace(str(h), "<home>")
    return json.loads(text)


def _answers(home: Path, db: str, *paths: Path) -> list[Any]:
    """What readers answer from the index at `db` (every run, and reports)."""
    out = [_normalized(run("runs", "--home", str(home), "--db", db, "--all", "--json").stdout, *paths)]
    for args in (("daily", "--breakdown"), ("model",), ("session",)):
        out.append(_normalized(run("report", *args, "--home", str(home), "--db", db, "--tz", "UTC",
                                   "--json").stdout, *paths))
    return out


def _same_index_from_store(home: Path, tmp_path: Path, store_db: str) -> None:
    store = tmp_path / "store"
    push(home, store)
    dest = store_home(store, home)
    home_db = f"sqlite:///{tmp_path / 'home.sqlite'}"
    run("index", "--home", str(home), "--db", home_db)
    truth = _answers(home, home_db, home)
    assert truth[0] and truth[1]["totals"]["runs"] >= 4

    res = run("index", "--home", str(store), "--db", store_db, "--json")
    assert [os.path.abspath(h) for h in json.loads(res.stdout)["homes"]] == [str(dest)]
    assert _answers(store, store_db, dest) == truth  # `--home STORE`: its one home
    assert _answers(dest, store_db, dest) == truth

    # the laptop's home is gone: the store still holds every record, the index stays whole,
    # and a rebuild from the store alone answers the same
    shutil.rmtree(home)
    run("index", "--home", str(store), "--db", store_db)
    assert _answers(store, store_db, dest) == truth
    run("index", "--home", str(store), "--db", store_db, "--rebuild")
    assert _answers(store, store_db, dest) == truth


def test_the_store_indexed_centrally_answers_what_the_home_answers(filled, tmp_path):
    _same_index_from_store(filled, tmp_path, f"sqlite:///{tmp_path / 'store.sqlite'}")


def test_the_store_indexed_into_postgresql_answers_what_the_home_answers(filled, tmp_path, pg_url):
    _same_index_from_store(filled, tmp_path, pg_url)


def test_a_store_of_several_homes(tmp_path, monkeypatch):
    store = tmp_path / "store"
    homes = [tmp_path / "a", tmp_path / "b"]
    for i, h in enumerate(homes):
        for _ in range(i + 1):
            make_run(h)
        push(h, store)
    monkeypatch.delenv("LEDGER_DB", raising=False)
    res = run("index", "--home", str(store), "--json")
    assert json.loads(res.stdout)["new"] == 3
    assert (store / "index" / "index.sqlite").exists()  # the store's own default index
    doc = json.loads(run("report", "--home", str(store), "--json", "--tz", "UTC").stdout)
    assert doc["totals"]["runs"] == 3
    res = run("runs", "--home", str(store), code=1)
    assert "holds 2 homes" in res.stderr and "Hint: name one with --home" in res.stderr
    one = store_home(store, homes[1])
    assert len(json.loads(run("runs", "--home", str(one), "--all", "--json").stdout)) == 2
    rows = json.loads(run("sql", "--home", str(store), "--json", "SELECT count(*) AS n FROM runs_v").stdout)
    assert rows == [{"n": 3}]


def test_refused_destinations(home, tmp_path, monkeypatch):
    make_run(home)
    monkeypatch.delenv("LEDGER_STORE", raising=False)
    res = run("push", code=1)
    assert "Error: no record store to push to" in res.stderr and "Hint: pass --to DIR" in res.stderr

    for dest, says in ((home / "backup", "inside the home"), (home, "inside the home")):
        res = run("push", "--to", str(dest), code=1)
        assert says in res.stderr and "Hint: " in res.stderr, res.stderr
    other = tmp_path / "other-home"
    make_run(other)
    res = run("push", "--to", str(other), code=1)
    assert "is a ledger home, not a record store" in res.stderr and "Hint: choose an empty directory" in res.stderr
    busy = tmp_path / "project"
    busy.mkdir()
    (busy / "README").write_text("mine")
    res = run("push", "--to", str(busy), code=1)
    assert "not empty and is not a ledger record store" in res.stderr and "Hint: choose an empty directory" in res.stderr
    assert sorted(os.listdir(busy)) == ["README"]
    assert not (home / "backup").exists()
    res = run("push", "--to", str(tmp_path / "not-mounted" / "store"), code=1)
    assert "does not exist" in res.stderr and "Hint: check that the share is mounted" in res.stderr
    assert not (tmp_path / "not-mounted").exists()

    # $LEDGER_STORE is the default destination; an empty directory becomes a store
    empty = tmp_path / "empty"
    empty.mkdir()
    doc = json.loads(run("push", "--json", env={"LEDGER_STORE": str(empty)}).stdout)
    assert doc["dest"] == str(empty) and doc["copied"] == 4
    assert (empty / "ledger-store.json").exists()


def test_a_push_reads_only_what_changed_since_the_last_one_and_full_reads_all(filled, claude_cfg, tmp_path,
                                                                               monkeypatch):
    from ledger.store import pusher, walk

    store = tmp_path / "store"
    push(filled, store)
    opened: list[str] = []
    compared: list[str] = []
    real_open, real_same = pusher._open_regular, pusher._same_prefix

    def counting_open(path: str) -> int:
        if not os.path.relpath(path, filled).startswith(".."):  # (the home's files, not the store's)
            opened.append(os.path.relpath(path, filled))
        return real_open(path)

    def counting_same(a: int, b: int, n: int) -> bool:
        compared.append(os.path.relpath(os.readlink(f"/proc/self/fd/{a}"), filled))
        return real_same(a, b, n)

    for module in (pusher, walk):  # (the modules that open the home's files)
        monkeypatch.setattr(module, "_open_regular", counting_open)
    monkeypatch.setattr(pusher, "_same_prefix", counting_same)
    doc = push(filled, store)
    running = next(p for p in (filled / "runs").glob("*/*") if not (p / "terminal.json").exists())
    # settled runs and untouched logs are not read; the running run and the home's id are
    assert sorted(opened) == sorted(["home-id.json"] + [str(p.relative_to(filled)) for p in running.iterdir()])
    assert doc["unchanged"] == len(records(filled))

    # a log that grew is extended after the hashes the last push kept, without reading the
    # store's copy back
    log = next(p for p in sorted(claude_cfg.rglob("*.jsonl")) if "subagents" not in str(p))
    with open(log, "ab") as f:
        f.write(json.dumps({"type": "user", "sessionId": log.stem, "timestamp": "2026-02-01T00:00:00Z",
                            "message": {"role": "user", "content": "more"}}).encode() + b"\n")
    run("import", "claude", "--from", str(claude_cfg))
    compared.clear()
    doc = push(filled, store)
    assert doc["extended"] == 1 and doc["conflicts"] == []
    assert compared and not any(c.startswith(("sources", "../store/homes/" + read_home_uid(filled) + "/sources"))
                                for c in compared), compared  # (the running run's files only)
    assert records(store_home(store, filled)) == records(filled)

    # an in-place edit that keeps size and mtime goes unseen by a plain push: --full finds it
    settled = next(p for p in (filled / "runs").glob("*/*") if (p / "terminal.json").exists())
    m = settled / "manifest.json"
    st = m.stat()
    data = bytearray(m.read_bytes())
    data[data.index(b'"harness"') + 1] = ord("H")
    os.chmod(m, 0o600)
    m.write_bytes(bytes(data))
    os.utime(m, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert push(filled, store)["conflicts"] == []
    res = run("push", "--home", str(filled), "--to", str(store), "--full", "--json", code=1)
    assert [c["path"] for c in json.loads(res.stdout)["conflicts"]] == [str(m.relative_to(filled))]


def test_two_pushes_of_one_home_at_once_the_second_stops(home, tmp_path):
    import fcntl

    make_run(home)
    store = tmp_path / "store"
    push(home, store)
    fd = os.open(store_home(store, home) / ".push.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # (a push at work)
        res = run("push", "--home", str(home), "--to", str(store), code=1)
        assert "another `ledger push` of this home" in res.stderr and "Hint: wait for it" in res.stderr
    finally:
        os.close(fd)
    assert push(home, store)["conflicts"] == []
