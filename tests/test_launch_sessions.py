"""The provider-session side store ($home/sessions/): last cumulative figures per session."""

from __future__ import annotations

import os
import stat

from ledger.launch.sessions import SessionStore


def test_put_get_replace(tmp_path):
    store = SessionStore(tmp_path)
    assert store.get("codex", "thread-1") is None
    assert store.put("codex", "thread-1", {"input_tokens": 403}, "run_a")
    assert store.put("codex", "thread-1", {"input_tokens": 453}, "run_b")
    entry = store.get("codex", "thread-1")
    assert entry["cumulative"] == {"input_tokens": 453} and entry["run_id"] == "run_b"
    assert store.get("claude", "thread-1") is None  # per harness
    path = store.path("codex", "thread-1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp files left


def test_odd_session_ids_are_hashed_into_safe_names(tmp_path):
    store = SessionStore(tmp_path)
    for sid in ("../../etc/passwd", ".hidden", "a/b", "x" * 300):
        assert store.put("claude", sid, {"n": 1}, None)
        p = store.path("claude", sid)
        assert p.parent == tmp_path / "sessions" / "claude" and not p.name.startswith(".")
        assert store.get("claude", sid)["session_id"] == sid


def test_damaged_entry_reads_as_unknown(tmp_path):
    store = SessionStore(tmp_path)
    store.put("codex", "t", {"input_tokens": 1}, None)
    store.path("codex", "t").write_bytes(b"{not json")
    assert store.get("codex", "t") is None


def test_unwritable_store_reports_false(tmp_path):
    (tmp_path / "sessions").write_text("a file, not a directory")
    assert SessionStore(tmp_path).put("codex", "t", {}, None) is False
    assert not any(n.endswith(".tmp") for n in os.listdir(tmp_path))
