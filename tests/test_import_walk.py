"""The walk of the config dirs that every reader does (issue 15, a warm `ledger report`): a
directory unchanged since an earlier walk is not listed again (ledger.sources.discovery.Tree),
and the walk still finds exactly what a full listing finds, whatever changed."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ledger.sources import archive, archiveformat, archivesummary, discovery, logdirs

PROJECT = "-home-u-work-proj"


def log(n: int) -> bytes:
    return json.dumps({"type": "user", "n": n}).encode() + b"\n"


def age(root: Path, seconds: int = 60) -> None:
    """Every directory's mtime in the past (as for a history written earlier)."""
    t = time.time() - seconds
    for d, _, _ in os.walk(root):
        os.utime(d, (t, t))


def found(root: Path, tree: discovery.Tree | None) -> list[tuple[str, int, int]]:
    s = archivesummary.ClientSummary("claude")
    out = [(f.rel, f.st.st_size, f.st.st_ino) for f in discovery.discover(logdirs.CLIENTS["claude"], root, s, tree)]
    return out + [("skipped", 0, 0) for _ in s.skipped]


@pytest.fixture
def cfg(tmp_path) -> Path:
    root = tmp_path / "cfg"
    for i in range(4):
        p = root / "projects" / PROJECT / f"s{i}.jsonl"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(log(i))
        sub = root / "projects" / PROJECT / f"s{i}" / "subagents" / "agent-a.jsonl"
        sub.parent.mkdir(parents=True)
        sub.write_bytes(log(10 + i))
    (root / "projects" / PROJECT / "notes.txt").write_text("not a log")
    age(root)
    return root


def scandirs(monkeypatch) -> list[str]:
    calls: list[str] = []
    real = os.scandir

    def counting(path):
        calls.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", counting)
    return calls


def test_an_unchanged_directory_is_not_listed_again(tmp_path, cfg, monkeypatch):
    tree = discovery.Tree(tmp_path / "tree.json")
    first = found(cfg, tree)
    assert len(first) == 8 and tree.dirty
    calls = scandirs(monkeypatch)
    assert found(cfg, tree) == first and calls == []
    # the logs are still stat'ed: a grown log is seen without a listing
    (cfg / "projects" / PROJECT / "s1.jsonl").write_bytes(log(1) + log(2))
    assert found(cfg, tree) == found(cfg, None) and calls.count(str(cfg / "projects" / PROJECT)) == 1


@pytest.mark.parametrize("change", ["new log", "removed log", "new subagent dir", "symlink", "dir named like a log",
                                    "renamed", "replaced dir"])
def test_every_change_of_entries_is_found(tmp_path, cfg, change):
    tree = discovery.Tree(tmp_path / "tree.json")
    found(cfg, tree)
    proj = cfg / "projects" / PROJECT
    if change == "new log":
        (proj / "s9.jsonl").write_bytes(log(9))
    elif change == "removed log":
        (proj / "s2.jsonl").unlink()
    elif change == "new subagent dir":
        (proj / "s0" / "subagents" / "deep").mkdir()
        (proj / "s0" / "subagents" / "deep" / "agent-b.jsonl").write_bytes(log(5))
    elif change == "symlink":
        (proj / "s3.jsonl").unlink()
        (proj / "s3.jsonl").symlink_to(proj / "s0.jsonl")
    elif change == "dir named like a log":
        (proj / "s3" / "subagents" / "agent-a.jsonl").unlink()
        (proj / "s3" / "subagents" / "agent-a.jsonl").mkdir()
    elif change == "renamed":
        (proj / "s1.jsonl").rename(proj / "s7.jsonl")
    else:
        (proj / "s2" / "subagents" / "agent-a.jsonl").unlink()
        (proj / "s2" / "subagents").rmdir()
        (proj / "s2" / "subagents").write_bytes(b"x")
    assert found(cfg, tree) == found(cfg, None)


def test_a_listing_as_recent_as_its_directory_is_not_kept(tmp_path, cfg, monkeypatch):
    """A directory changed within RACY_NS of its listing: the same clock tick could hide a later
    change, so it is listed again next time (and a log added since is found)."""
    proj = cfg / "projects" / PROJECT
    (proj / "s5.jsonl").write_bytes(log(5))  # (the project dir: modified now)
    tree = discovery.Tree(tmp_path / "tree.json")
    found(cfg, tree)
    assert str(proj) not in tree.dirs and str(proj / "s0") in tree.dirs
    (proj / "s6.jsonl").write_bytes(log(6))
    assert [r for r, _, _ in found(cfg, tree)].count(f"projects/{PROJECT}/s6.jsonl") == 1


def test_imports_keep_the_listings_and_readers_use_them(home, cfg, monkeypatch):
    s = archive.import_client(home, logdirs.CLIENTS["claude"], [cfg])
    assert s.new_files == 8
    kept = json.loads((home / "sources" / "claude" / archiveformat.TREE_FILE).read_bytes())
    assert str(cfg / "projects" / PROJECT) in kept["dirs"]
    calls = scandirs(monkeypatch)
    (cfg / "projects" / PROJECT / "s1.jsonl").write_bytes(log(1) + log(2))
    again = archive.refresh(home)[0]
    assert (again.new_bytes, again.unchanged) == (len(log(2)), 7)
    assert [c for c in calls if c.startswith(str(cfg))] == []
    # a damaged cache is no cache: without the quick file the walk uses the listings, without
    # both it lists again
    state = home / "sources" / "claude"
    (state / archiveformat.QUICK_FILE).write_bytes(b"{not json")
    third = archive.refresh(home)[0]
    assert third.new_bytes == 0 and third.files == 8 and [c for c in calls if c.startswith(str(cfg))] == []
    (state / archiveformat.QUICK_FILE).write_bytes(b"{not json")
    (state / archiveformat.TREE_FILE).write_bytes(b"{not json")
    fourth = archive.refresh(home)[0]
    assert fourth.new_bytes == 0 and fourth.files == 8 and [c for c in calls if c.startswith(str(cfg))]
