"""A large `ledger import` shares its logs with a forked worker, and copies each log's new bytes
in large blocks (issue 15, the cold-import budget). The archive is the evidence: whatever the
split, the worker's fate or the block size, it must hold exactly what a one-process import
of the same logs holds, and the next import must continue it without a gap."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ledger.sources import archive, archivefiles, archiveformat, archivefork, archiver, archivesummary, logdirs
from ledger.sources.archiveformat import read_archive

PROJECT = "-home-u-work-proj"
REAL_BUSY = archivefork.busy


def line(i: int, pad: int) -> bytes:
    return json.dumps({"type": "assistant", "sessionId": f"s{i}", "n": i, "text": "x" * pad},
                      separators=(",", ":")).encode() + b"\n"


def history(cfg: Path, logs: int = 24) -> list[Path]:
    """Logs of many sizes, subagent transcripts, one with a torn last line."""
    paths = []
    for i in range(logs):
        p = cfg / "projects" / PROJECT / f"sess-{i:03d}.jsonl"
        if i % 5 == 0:
            p = cfg / "projects" / PROJECT / f"sess-{i - 1:03d}" / "subagents" / f"agent-{i}.jsonl"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"".join(line(i * 100 + k, (i * 37 + k * 11) % 700) for k in range(1 + i % 9)))
        paths.append(p)
    with open(paths[3], "ab") as f:
        f.write(b'{"type":"assistant","torn')
    return paths


def tree(home: Path) -> dict[str, bytes]:
    root = home / "sources" / "claude"
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".state"]
        for f in filenames:
            if f != ".lock":
                p = Path(dirpath) / f
                out[str(p.relative_to(root))] = read_archive(p)
    return out


def complete_lines(p: Path) -> bytes:
    data = p.read_bytes()
    return data[:data.rfind(b"\n") + 1]


def summary(s: archivesummary.ClientSummary) -> dict:
    d = s.to_dict()
    for k in ("gaps", "skipped", "notes"):
        d[k] = sorted(json.dumps(x, sort_keys=True) for x in d[k])
    return d


@pytest.fixture
def forks(monkeypatch):
    """Two idle cores whatever the machine; counts the workers forked (in this process)."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(archivefork, "busy", lambda cores: False)
    count = []
    real = os.fork

    def fork():
        pid = real()
        if pid:
            count.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    return count


def imp(home: Path, cfg: Path, fold: bool = False) -> archivesummary.ClientSummary:
    # (fold=False: a first import that folds for the index compresses on threads instead of
    # forking, see test_a_first_import_folds_on_threads_not_a_worker; the worker serves the
    # large imports after it, which these tests stand for)
    return archive.import_client(home, logdirs.CLIENTS["claude"], [cfg], fold=fold)


def test_a_large_import_in_two_processes_archives_what_one_process_does(tmp_path, monkeypatch, forks):
    cfg = tmp_path / "cfg"
    paths = history(cfg)
    one, two = tmp_path / "one", tmp_path / "two"
    monkeypatch.setattr(archivefork, "PARALLEL_MIN", 1 << 62)
    s1 = imp(one, cfg)
    assert forks == []
    monkeypatch.setattr(archivefork, "PARALLEL_MIN", 0)
    s2 = imp(two, cfg)
    assert len(forks) == 1
    assert summary(s1) == summary(s2)
    assert tree(one) == tree(two)
    assert {k[:-4]: v for k, v in tree(two).items()} == {
        str(p.relative_to(cfg)): complete_lines(p) for p in paths}
    assert s2.new_files == len(paths) and s2.waiting == 1 and s2.gaps == []

    # the next import continues both alike: grown logs, a rewritten one (a gap), nothing else read
    for p in paths[::4]:
        with open(p, "ab") as f:
            f.write(line(9999, 50))
    paths[6].write_bytes(line(7, 10))  # rewritten: a new generation
    monkeypatch.setattr(archivefork, "PARALLEL_MIN", 1 << 62)
    t1 = imp(one, cfg)
    monkeypatch.setattr(archivefork, "PARALLEL_MIN", 0)
    t2 = imp(two, cfg)
    assert len(forks) == 2
    assert summary(t1) == summary(t2)
    assert tree(one) == tree(two)
    assert t2.generations == 1 and len(t2.gaps) == 1 and t2.unchanged == len(paths) - 7
    assert t2.new_bytes == 6 * len(line(9999, 50)) + len(line(7, 10))
    # and a third import has nothing to do in either home
    assert imp(one, cfg).new_bytes == imp(two, cfg).new_bytes == 0


def test_a_worker_that_dies_leaves_nothing_unarchived(tmp_path, monkeypatch, forks):
    cfg = tmp_path / "cfg"
    paths = history(cfg)
    monkeypatch.setattr(archivefork, "PARALLEL_MIN", 0)
    parent = os.getpid()
    real = archiver.Archiver._one_safe
    done = []

    def dying(self, f, key):
        if os.getpid() != parent and len(done) == 2:
            os._exit(9)  # (the worker, after two logs)
        done.append(f.path)
        real(self, f, key)

    monkeypatch.setattr(archiver.Archiver, "_one_safe", dying)
    home = tmp_path / "home"
    s = imp(home, cfg)
    assert len(forks) == 1
    assert {k[:-4]: v for k, v in tree(home).items()} == {str(p.relative_to(cfg)): complete_lines(p) for p in paths}
    assert s.gaps == [] and s.skipped == [] and s.files == len(paths)
    assert not (home / "sources" / "claude" / archiveformat.IMPORTING_FILE).exists()
    monkeypatch.setattr(archiver.Archiver, "_one_safe", real)
    again = imp(home, cfg)
    assert (again.new_bytes, again.gaps, again.unchanged) == (0, [], len(paths))


@pytest.mark.parametrize("block", [64, 4096 + 100])
def test_new_bytes_read_in_blocks_are_one_frame_of_whole_lines(tmp_path, monkeypatch, block):
    """Lines longer than a block, logs of several blocks, a torn line across a block's end:
    the archive holds the complete lines, and the check hashes (prefix, tail) let the next
    import continue the same generation."""
    monkeypatch.setattr(archivefiles, "BLOCK", block)
    cfg = tmp_path / "cfg"
    p = cfg / "projects" / PROJECT / "s.jsonl"
    p.parent.mkdir(parents=True)
    p.write_bytes(b"".join(line(k, k * 29 % 300) for k in range(40)) + b'{"torn":')
    home = tmp_path / "home"
    s = imp(home, cfg)
    (arch,) = (home / "sources" / "claude" / "projects" / PROJECT).glob("s.jsonl.zst")
    assert read_archive(arch) == complete_lines(p) and s.waiting == 1
    with open(p, "ab") as f:
        f.write(b'"x"}\n' + line(77, 900))
    s = imp(home, cfg)
    assert s.gaps == [] and s.generations == 0 and s.waiting == 0
    assert read_archive(arch) == p.read_bytes()
    assert len(list(arch.parent.iterdir())) == 1  # (no new generation)
    with open(p, "ab") as f:
        f.write(line(78, 3))  # a short append: the tail hash spans the previous import's bytes
    s = imp(home, cfg)
    t = imp(home, cfg)
    assert s.gaps == [] and read_archive(arch) == p.read_bytes() and t.new_bytes == 0


def test_no_worker_on_a_busy_machine(tmp_path, monkeypatch, forks):
    """Without an idle core a worker only shares this process's CPU: one process imports."""
    monkeypatch.setattr(archivefork, "PARALLEL_MIN", 0)
    monkeypatch.setattr(archivefork, "busy", REAL_BUSY)
    real = open

    def loadavg(path, *a, **k):
        return real(tmp_path / "loadavg", *a, **k) if path == "/proc/loadavg" else real(path, *a, **k)

    monkeypatch.setattr("builtins.open", loadavg)
    cfg = tmp_path / "cfg"
    history(cfg)
    (tmp_path / "loadavg").write_text("0.50 0.40 0.30 3/300 12345\n")  # (two running besides this one)
    s = imp(tmp_path / "one", cfg)
    assert forks == [] and s.new_files == 24
    (tmp_path / "loadavg").write_text("3.50 3.40 3.30 2/300 12345\n")  # (busy a minute ago, one now)
    s = imp(tmp_path / "two", cfg)
    assert len(forks) == 1 and s.new_files == 24


def test_a_first_import_folds_on_threads_not_a_worker(tmp_path, monkeypatch, forks):
    """A first import feeds the index's reducer as it archives (ledger.sources.prefold): every
    log in this process, compressed ahead on threads; the archive is the one the two
    processes write."""
    monkeypatch.setattr(archivefork, "PARALLEL_MIN", 1)
    cfg = tmp_path / "cfg"
    history(cfg)
    imp(tmp_path / "folded", cfg, fold=True)
    assert forks == []
    imp(tmp_path / "forked", cfg)
    assert len(forks) == 1
    assert tree(tmp_path / "folded") == tree(tmp_path / "forked")
    assert (tmp_path / "folded" / "sources" / "claude" / ".state" / "prefold.bin").exists()
