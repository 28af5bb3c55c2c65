"""A reader's refresh from the quick file (ledger.sources.quickfile.Quick; issue 15: a warm
`ledger report` 10x faster than ccusage): when no directory changed, the logs whose stat
differs are archived without listing a directory or reading the seen cache, and the outcome
is always the walk's, whatever changed."""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest

import claudehistory
from ledger.sources import archive, archiveformat, archivestate, archivesummary, discovery, logdirs

CLAUDE = logdirs.CLIENTS["claude"]


def age(root: Path, seconds: int) -> None:
    """Every directory's mtime `seconds` ago (a history written earlier: its listings are kept)."""
    t = time.time() - seconds
    for d, _, _ in os.walk(root):
        os.utime(d, (t, t))


def line(n: int) -> bytes:
    return json.dumps({"type": "user", "n": n, "pad": "x" * (n % 50)}).encode() + b"\n"


def contents(home: Path) -> dict[str, bytes]:
    """The archive as the index reads it (every generation's bytes), by path."""
    base = home / "sources" / "claude"
    out = {}
    for p in sorted(base.rglob("*")):
        if p.is_file() and archiveformat.STATE_DIR not in p.relative_to(base).parts:
            out[str(p.relative_to(base))] = archiveformat.read_archive(p)
    return out


def summary(s: archivesummary.ClientSummary) -> tuple:
    return (s.files, s.unchanged, s.new_files, s.new_bytes, s.read_bytes, s.waiting, s.generations,
            sorted((g.path, g.reason) for g in s.gaps), sorted((p.path, p.reason) for p in s.skipped))


class Calls:
    """What a refresh read: directory listings below the config dir, seen cache loads."""

    def __init__(self, monkeypatch, cfg: Path) -> None:
        self.listed: list[str] = []
        self.seen = 0
        real_scandir, real_seen = os.scandir, archivestate.load_seen

        def scandir(path):
            if os.fspath(path).startswith(str(cfg)):
                self.listed.append(os.fspath(path))
            return real_scandir(path)

        def load_seen(client_dir):
            self.seen += 1
            return real_seen(client_dir)

        monkeypatch.setattr(os, "scandir", scandir)
        monkeypatch.setattr(archivestate, "load_seen", load_seen)

    def reset(self) -> None:
        self.listed.clear()
        self.seen = 0


@pytest.fixture
def cfg(tmp_path) -> Path:
    root = tmp_path / "cfg"
    claudehistory.generate(root, sessions=6, seed=11)  # (its last session ends in a torn line)
    age(root, 600)
    return root


def test_a_warm_refresh_reads_no_listing_and_no_cache(tmp_path, cfg, monkeypatch):
    home = tmp_path / "home"
    first = archive.import_client(home, CLAUDE, [cfg])
    assert first.waiting == 1 and (home / "sources" / "claude" / archiveformat.QUICK_FILE).exists()
    calls = Calls(monkeypatch, cfg)
    states = []
    monkeypatch.setattr(archivestate, "load_state", lambda *a: states.append(a) or (_ for _ in ()).throw(AssertionError))
    monkeypatch.setattr(discovery.Tree, "__init__", lambda *a: (_ for _ in ()).throw(AssertionError("tree read")))
    warm = archive.refresh(home)[0]
    assert (warm.files, warm.unchanged, warm.waiting, warm.new_bytes) == (first.files, first.files, 1, 0)
    assert (calls.listed, calls.seen, states) == ([], 0, [])


def test_a_grown_log_is_archived_without_a_walk(tmp_path, cfg, monkeypatch):
    home = tmp_path / "home"
    archive.import_client(home, CLAUDE, [cfg])
    # (a log whose last line is whole: the torn one's tail would be archived with the new lines)
    log = [p for p in sorted(cfg.rglob("*.jsonl")) if p.read_bytes().endswith(b"\n")][2]
    calls = Calls(monkeypatch, cfg)
    with open(log, "ab") as f:
        f.write(line(1) + line(2))
    grown = archive.refresh(home)[0]
    assert (grown.new_bytes, calls.listed) == (len(line(1) + line(2)), [])
    calls.reset()
    again = archive.refresh(home)[0]  # (its new signature was noted: nothing to do, nothing read)
    assert (again.new_bytes, again.unchanged, calls.listed, calls.seen) == (0, again.files, [], 0)


MUTATIONS = ("append", "append, same mtime", "torn", "finish", "new log", "new subagent", "remove", "rename", "touch", "rewrite",
             "shrink", "symlink", "dir like a log", "nothing")


@pytest.mark.parametrize("seed", range(4))
def test_the_quick_refresh_answers_as_the_walk(tmp_path, cfg, seed, monkeypatch):
    """Two homes import the same config dir; before each refresh of the second its quick file
    is removed (it walks). After every change, both say the same and archive the same bytes."""
    quick, walked = tmp_path / "quick", tmp_path / "walked"
    assert summary(archive.import_client(quick, CLAUDE, [cfg])) == summary(archive.import_client(walked, CLAUDE, [cfg]))
    calls = Calls(monkeypatch, cfg)
    rnd = random.Random(seed)
    torn: list[Path] = []
    racy: list[Path] = []
    used_quick = 0
    for step in range(16):
        logs = sorted(p for p in cfg.rglob("*.jsonl") if p.is_file() and not p.is_symlink())
        log = rnd.choice(logs)
        # (a symlink or a directory named like a log is skipped, and its directory's listing is
        # never kept, so no quick file after it: the last steps only)
        what = rnd.choice(MUTATIONS if step >= 13 else MUTATIONS[:-3] + MUTATIONS[-1:])
        # (an entry added, removed or renamed: its directory's mtime moves)
        changed_dirs = [log.parent] if what in ("new log", "new subagent", "remove", "rename", "symlink",
                                                "dir like a log") else []
        if what == "append":
            with open(log, "ab") as f:
                f.write(line(step))
        elif what == "append, same mtime":
            st = log.stat()
            with open(log, "ab") as f:
                f.write(line(step))
            os.utime(log, ns=(st.st_atime_ns, st.st_mtime_ns))
        elif what == "torn":
            with open(log, "ab") as f:
                f.write(b'{"type": "user", "torn": ')
            torn.append(log)
        elif what == "finish" and torn:
            with open(torn.pop(), "ab") as f:
                f.write(b'1}\n')
        elif what == "new log":
            (log.parent / f"new-{step}.jsonl").write_bytes(line(step))
        elif what == "new subagent":
            d = log.parent / f"s{step}" / "subagents"
            d.mkdir(parents=True)
            (d / "agent-x.jsonl").write_bytes(line(step))
            changed_dirs += [d.parent, d]
        elif what == "remove":
            log.unlink()
        elif what == "rename":
            log.rename(log.with_name(f"moved-{step}.jsonl"))
        elif what == "touch":
            t = time.time() - rnd.randrange(10, 1000)
            os.utime(log, (t, t))
        elif what == "rewrite":
            data = log.read_bytes()
            log.write_bytes(b"{}" + data[2:])  # (same size, other bytes: a new generation)
        elif what == "shrink":
            data = log.read_bytes()
            log.write_bytes(data[: len(data) // 2])
        elif what == "symlink":
            log.unlink()
            log.symlink_to(logs[0])
        elif what == "dir like a log":
            (log.parent / f"dir-{step}.jsonl").mkdir()
        # settled (an earlier time): the listing of a changed directory is kept; else it is
        # listed again until it settles (the next step)
        unsettled = [] if rnd.random() < 0.7 else changed_dirs
        t = time.time() - 300 - step
        for d in {*changed_dirs, *racy} - set(unsettled):
            if d.is_dir():
                os.utime(d, (t, t))
        racy = unsettled
        (walked / "sources" / "claude" / archiveformat.QUICK_FILE).unlink(missing_ok=True)
        calls.reset()
        a = archive.refresh(quick)[0]
        used_quick += not calls.listed
        b = archive.refresh(walked)[0]
        assert summary(a) == summary(b), (step, what)
        assert contents(quick) == contents(walked), (step, what)
    assert used_quick  # (the quick file answered some of these refreshes)
