"""A cold `ledger import` with fewer system calls and less waiting (issue 15: at most 2x
ccusage's time): the state files listed once instead of one failing open per new log, the
archive's compressed size counted instead of stat'ed, half of the bytes synced while the rest
is compressed. Each gives what the plain way gives."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import claudehistory
from ledger.sources import archive, archiveformat, archivefork, archiver, archivestate, archivesummary, logdirs

CLAUDE = logdirs.CLIENTS["claude"]


def state_files(home: Path) -> dict[str, dict]:
    d = home / "sources" / "claude" / archiveformat.STATE_DIR
    out = {}
    for p in sorted(d.glob("*.json")):
        if len(p.stem) == 32:
            doc = json.loads(p.read_bytes())
            for g in doc["generations"]:
                g.pop("created_at")
                g.pop("file_sig", None)  # (the archive file's stat: its inode and mtime differ between homes)
            out[p.name] = doc
    return out


def archive_files(home: Path) -> dict[str, bytes]:
    base = home / "sources" / "claude"
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*.zst"))}


def summary(s: archivesummary.ClientSummary) -> tuple:
    return (s.files, s.unchanged, s.new_files, s.new_bytes, s.read_bytes, s.waiting, s.generations,
            [(g.path, g.reason) for g in s.gaps], [(p.path, p.reason) for p in s.skipped])


@pytest.fixture
def roots(tmp_path) -> list[Path]:
    """Two config dirs holding the same logs (two keys in common) and others of their own."""
    a, b = tmp_path / "a", tmp_path / "b"
    claudehistory.generate(a, sessions=5, seed=21)
    claudehistory.generate(b, sessions=2, seed=22)
    for p in sorted((a / "projects").rglob("*.jsonl"))[:2]:  # (the same key in both: one state file)
        q = b / p.relative_to(a)
        q.parent.mkdir(parents=True, exist_ok=True)
        q.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2].rsplit(b"\n", 1)[0] + b"\n")
    return [a, b]


def test_listing_the_state_files_reads_as_opening_each(tmp_path, roots, monkeypatch):
    plain = archive.import_client(tmp_path / "plain", CLAUDE, roots)  # (fewer logs than STATED_MIN)
    assert plain.files < archiver.STATED_MIN
    monkeypatch.setattr(archiver, "STATED_MIN", 1)
    opened = []
    real = archivestate.load_state
    monkeypatch.setattr(archivestate, "load_state", lambda *a: opened.append(a[0]) or real(*a))
    listed = archive.import_client(tmp_path / "listed", CLAUDE, roots)
    assert summary(listed) == summary(plain)
    assert state_files(tmp_path / "listed") == state_files(tmp_path / "plain")
    assert archive_files(tmp_path / "listed") == archive_files(tmp_path / "plain")
    # only the keys met a second time (the other root's copy) had a state file to read
    assert len(opened) == 2


def test_the_counted_compressed_size_is_the_files(tmp_path, roots):
    home = tmp_path / "home"
    archive.import_client(home, CLAUDE, roots)
    log = sorted((roots[0] / "projects").rglob("*.jsonl"))[3]
    with open(log, "ab") as f:
        f.write(b'{"type": "user", "more": 1}\n')
    archive.refresh(home)  # (an existing generation: its size is stat'ed)
    base = home / "sources" / "claude"
    gens = [g for doc in state_files(home).values() for g in doc["generations"]]
    assert gens and all(g["csize"] == (base / g["archive"]).stat().st_size for g in gens)
    assert not list(base.rglob("*.tmp"))


def test_half_of_a_large_import_is_synced_early(tmp_path, roots, monkeypatch):
    monkeypatch.setattr(archiver, "EARLY_SYNC_MIN", 1)
    monkeypatch.setattr(archivefork, "busy", lambda cores: True)  # (one process)
    import threading

    home = tmp_path / "home"
    syncs, started = [], []

    def archived() -> int:
        return len(list((home / "sources" / "claude" / archiveformat.STATE_DIR).glob("*.json")))

    class Spy(threading.Thread):
        # (the files archived when the early sync is started, counted on the importing thread:
        # when the sync thread itself runs depends on the machine's load)
        def __init__(self, *a, **k):
            if k.get("name") == "ledger-early-sync":
                started.append(archived())
            super().__init__(*a, **k)

    monkeypatch.setattr(threading, "Thread", Spy)
    monkeypatch.setattr(os, "sync", lambda: syncs.append(archived()))
    s = archive.import_client(home, CLAUDE, roots)
    for t in threading.enumerate():
        if t.name == "ledger-early-sync":
            t.join()
    n = len(state_files(home))
    assert s.new_files and len(syncs) == 2  # (the early one, then the import's)
    assert len(started) == 1 and 0 < started[0] < n, (started, n)
