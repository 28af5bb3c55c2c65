"""A first import folds what it archives for the index (issue 28: a new user's first answer).

The first `ledger report` after a first `ledger import` starts from the reducer state the
import left in sources/<client>/.state/prefold.bin instead of reading the archive back. The
index it builds must be the one a read of the whole archive builds, table for table and the
reducer state included, on every duplication hazard of the generated histories, and after
the archive changed behind the fold (grown, a file added, a file gone)."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ledger.cli.app import app
from ledger.index import logsource
from ledger.sources import archive, archiveformat, logdirs, prefold

sys.path.insert(0, str(Path(__file__).parent))
from claudehistory import generate as claude_history  # noqa: E402
from codexhistory import generate as codex_history  # noqa: E402

runner = CliRunner()
TABLES = ("runs", "usage_streams", "tool_uses", "log_sessions")


def report(home: Path) -> dict[str, Any]:
    res = runner.invoke(app, ["report", "daily", "--home", str(home), "--tz", "UTC", "--json"])
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return json.loads(res.stdout.replace(str(home), "HOME"))


def tables(home: Path, fingerprints: bool = True) -> dict[str, Any]:
    c = sqlite3.connect(home / "index.sqlite")
    out: dict[str, Any] = {}
    skip = ("indexed_at", "id") if fingerprints else ("indexed_at", "id", "fingerprint")
    for t in TABLES:
        cols = [r[1] for r in c.execute(f"pragma table_info({t})") if r[1] not in skip]
        out[t] = sorted(map(repr, c.execute(f"select {','.join(cols)} from {t}")))
    states = {src: json.loads(st) for src, st in c.execute("select source, state from log_state")}
    for src, st in states.items():
        if not src.endswith("/reducer"):
            st.pop("marker", None)  # (the change marker's signature: its inode differs per home)
            st["files"] = {k: v[0] for k, v in st.get("files", {}).items()}  # (sizes; inodes differ)
        else:
            _sort_files(st)
    out["log_state"] = states
    c.close()
    return out


def _sort_files(x: Any) -> None:
    """A session's files in the reducer state are listed in the order they were fed (an
    incremental pass feeds an added file last as well): compared as sets."""
    if isinstance(x, dict):
        for k, v in x.items():
            if k == "files" and isinstance(v, list) and all(isinstance(f, str) for f in v):
                v.sort()
            else:
                _sort_files(v)
    elif isinstance(x, list):
        for v in x:
            _sort_files(v)


def imported(tmp_path: Path, name: str, client: str, cfg: Path, fold: bool) -> Path:
    home = tmp_path / name
    archive.import_client(home, logdirs.CLIENTS[client], [cfg], check=True, fold=fold)
    return home


def history(tmp_path: Path, client: str, seed: int) -> Path:
    cfg = tmp_path / "cfg"
    if client == "claude":
        claude_history(cfg, sessions=10, seed=seed, pad=40)
    else:
        codex_history(cfg, threads=10, seed=seed, real_shapes=seed % 2 == 0)
    return cfg


@pytest.mark.parametrize("client,seed", [("claude", 1), ("claude", 7), ("codex", 2), ("codex", 3), ("codex", 2525)])
def test_the_first_index_from_the_fold_is_the_index_of_the_archive(tmp_path, monkeypatch, client, seed):
    cfg = history(tmp_path, client, seed)
    folded = imported(tmp_path, "folded", client, cfg, fold=True)
    read = imported(tmp_path, "read", client, cfg, fold=False)
    assert (folded / "sources" / client / ".state" / prefold.FILE).exists()
    assert not (read / "sources" / client / ".state" / prefold.FILE).exists()
    got = []
    real = logsource.LogPass.settle

    def settle(self):
        out = real(self)
        got.append((self.source.client, self.bytes_read))
        return out

    monkeypatch.setattr(logsource.LogPass, "settle", settle)
    assert report(folded) == report(read)
    assert tables(folded) == tables(read)
    mine = [n for c, n in got if c == client]
    assert mine[0] == 0 and mine[1] > 0  # the folded home's first pass read no archive byte; the other all


def grow(cfg: Path, client: str) -> None:
    """Append a copy of the last complete line of the largest log (a new response)."""
    logs = sorted((p for p in cfg.rglob("*.jsonl")), key=lambda p: p.stat().st_size)
    p = logs[-1]
    data = p.read_bytes()
    end = data.rfind(b"\n", 0, len(data) - 1) + 1
    with open(p, "ab") as f:
        f.write(data[end:] if data.endswith(b"\n") else b"\n")


@pytest.mark.parametrize("change", ["grown", "added", "gone"])
@pytest.mark.parametrize("client", ["claude", "codex"])
def test_an_archive_changed_after_the_fold_is_read_from_where_the_fold_ended(tmp_path, client, change):
    cfg = history(tmp_path, client, 4)
    folded = imported(tmp_path, "folded", client, cfg, fold=True)
    read = imported(tmp_path, "read", client, cfg, fold=False)
    if change == "grown":
        grow(cfg, client)
    elif change == "added":
        src = sorted(cfg.rglob("*.jsonl"))[0]
        (src.parent / ("rollout-2026-03-09T22-40-00-00000000-0000-7000-8000-00000000abcd.jsonl"
                       if client == "codex" else "added-session.jsonl")).write_bytes(src.read_bytes())
    for home in (folded, read):
        if change == "gone":
            victim = sorted((home / "sources" / client).rglob("*.jsonl.zst"))[0]
            victim.unlink()
        else:
            archive.import_client(home, logdirs.CLIENTS[client], [cfg], check=True, fold=True)
    assert report(folded) == report(read)
    assert tables(folded) == tables(read)


def test_a_damaged_or_older_fold_is_ignored(tmp_path):
    cfg = history(tmp_path, "claude", 3)
    read = imported(tmp_path, "read", "claude", cfg, fold=False)
    want = report(read)
    for i, damage in enumerate([b"{not json", b'{"rv": 1, "max_line": 67108864, "files": {}, "state": {}}']):
        home = imported(tmp_path, f"h{i}", "claude", cfg, fold=True)
        (home / "sources" / "claude" / ".state" / prefold.FILE).write_bytes(damage)
        assert report(home) == want
    home = imported(tmp_path, "bound", "claude", cfg, fold=True)
    os.environ["LEDGER_MAX_LINE_BYTES"] = str(1 << 25)  # (another line bound than the fold's)
    try:
        assert prefold.load(str(home / "sources" / "claude" / ".state"), "claude", 3) is None
    finally:
        del os.environ["LEDGER_MAX_LINE_BYTES"]
    assert prefold.load(str(home / "sources" / "claude" / ".state"), "claude", 3) is not None


def test_a_log_over_the_fold_limit_is_left_to_the_index(tmp_path, monkeypatch):
    cfg = history(tmp_path, "claude", 5)
    monkeypatch.setattr(prefold, "limit", lambda: 4000)
    folded = imported(tmp_path, "folded", "claude", cfg, fold=True)
    read = imported(tmp_path, "read", "claude", cfg, fold=False)
    pre = prefold.load(str(folded / "sources" / "claude" / ".state"), "claude", 3)
    assert pre is not None
    sizes = {rel: archiveformat.read_archive(folded / "sources" / "claude" / rel) for rel in pre.files}
    assert sizes and all(len(v) <= 4000 for v in sizes.values())
    assert len(pre.files) < len(list((folded / "sources" / "claude").rglob("*.jsonl.zst")))
    assert report(folded) == report(read)
    # (the fingerprint hashes a stream's responses in the order they were fed, as after an
    # incremental pass: the larger logs come after the folded ones here)
    assert tables(folded, fingerprints=False) == tables(read, fingerprints=False)


def test_only_a_first_import_folds(tmp_path):
    cfg = history(tmp_path, "claude", 6)
    home = imported(tmp_path, "h", "claude", cfg, fold=True)
    pre = home / "sources" / "claude" / ".state" / prefold.FILE
    pre.unlink()
    grow(cfg, "claude")
    archive.import_client(home, logdirs.CLIENTS["claude"], [cfg], check=True, fold=True)
    assert not pre.exists()


def test_a_log_that_changed_after_its_read_ahead_is_compressed_again(tmp_path):
    """The threads ahead read a log before the import opens it: their compressed bytes are
    used only for exactly the bytes the import read (a log appended meanwhile is not)."""
    import zstandard

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(b'{"n":1}\n{"n":2}\n')
    b.write_bytes(b'{"n":3}\n{"torn')
    fold = prefold.Fold("claude")
    fold.prefetch([str(a), str(b)], lambda: zstandard.ZstdCompressor().compress)
    for job in list(fold._ahead.values()):
        job.result()
    with open(a, "ab") as f:
        f.write(b'{"n":4}\n')
    assert fold.compressed(str(a), a.read_bytes()) is None
    got = fold.compressed(str(b), b'{"n":3}\n')  # (its complete lines only)
    assert zstandard.ZstdDecompressor().decompress(got) == b'{"n":3}\n'
    assert fold.compressed(str(b), b'{"n":3}\n') is None  # (once)
    fold.close()


@pytest.mark.parametrize("client,seed", [("claude", 3), ("codex", 2525)])
def test_the_fold_holds_the_state_the_index_stores_in_parts(tmp_path, monkeypatch, client, seed):
    """prefold.bin is the reducer state's JSON exactly as the index stores it (`state_json()`),
    then its header, whose parts each parse alone: parsed part by part (Codex: one str per
    repeated value across parts), it is the reducer's state again, byte for byte."""
    import orjson

    monkeypatch.setattr(prefold, "PART", 2)  # (many parts on a small history)
    cfg = history(tmp_path, client, seed)
    home = imported(tmp_path, "h", client, cfg, fold=True)
    state_dir = str(home / "sources" / client / ".state")
    pre = prefold.load(state_dir, client, prefold._state_version(client))
    assert pre is not None and len(pre.parts) > 8
    data = pre.state_bytes()
    state = pre.state(prefold.sharer(client))
    assert orjson.dumps(state) == data
    assert prefold.reducer(client, state, adopt=True, shared=True).state_json() == data
    assert prefold.reducer(client, orjson.loads(data)).state_json() == data
    with open(os.path.join(state_dir, prefold.FILE), "rb") as f:
        assert f.read().startswith(data + b"\n")


@pytest.mark.parametrize("client", ["claude", "codex"])
def test_an_older_truncated_or_damaged_fold_is_ignored(tmp_path, client):
    """A fold of the old layout (one JSON document), one cut short, and one whose header is
    sound but whose state does not parse: each first index is the index of a read of the
    whole archive (the damaged state's bytes, stored before it is parsed, are replaced)."""
    import orjson

    cfg = history(tmp_path, client, 3)
    read = imported(tmp_path, "read", client, cfg, fold=False)
    want, want_tables = report(read), tables(read)

    def old(b: bytes) -> bytes:
        state, h, _ = b.split(b"\n")[:3]
        h = orjson.loads(h)
        return orjson.dumps({"rv": h["rv"], "max_line": h["max_line"], "files": h["files"], "state": orjson.loads(state)})

    def torn(b: bytes) -> bytes:
        return b[:len(b) // 2] + b[-prefold.TRAILER:]

    def damaged(b: bytes) -> bytes:
        key, start, end, whole = orjson.loads(b.split(b"\n")[1])["parts"][-2]
        return b[:start] + b"\x00" * (end - start) + b[end:]

    for damage in (old, torn, damaged):
        home = imported(tmp_path, damage.__name__, client, cfg, fold=True)
        path = home / "sources" / client / ".state" / prefold.FILE
        path.write_bytes(damage(path.read_bytes()))
        assert (prefold.load(str(path.parent), client, prefold._state_version(client)) is None) == (damage is not damaged)
        assert report(home) == want
        assert tables(home) == want_tables
