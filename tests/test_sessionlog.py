"""ledger.launch.sessionlog (issue 33): an interactive run's provider session, pinned or
found among the logs that appeared or grew while it ran; ambiguous never guessed."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ledger.launch import sessionlog as sl

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc)


def test_pin_session_claude():
    argv, sid, resumed = sl.pin_session("claude", ["claude", "--model", "m"])
    assert argv[:2] == ["claude", "--session-id"] and argv[2] == sid and argv[3:] == ["--model", "m"]
    assert not resumed and len(sid) == 36
    assert sl.pin_session("claude", ["claude", "--session-id", "abc"]) == (["claude", "--session-id", "abc"], "abc", False)
    assert sl.pin_session("claude", ["claude", "--resume", "s1"]) == (["claude", "--resume", "s1"], "s1", True)
    argv, sid, resumed = sl.pin_session("claude", ["claude", "--resume", "s1", "--fork-session"])
    assert sid != "s1" and argv[1:3] == ["--session-id", sid] and resumed
    assert sl.pin_session("claude", ["claude", "--continue"]) == (["claude", "--continue"], None, True)
    assert sl.pin_session("codex", ["codex", "-m", "x"]) == (["codex", "-m", "x"], None, False)
    assert sl.pin_session("codex", ["codex", "resume", "t"])[2] is True


def _rollout(root: Path, name: str, sid: str, cwd: str, start: datetime, originator: str = "codex-tui") -> Path:
    d = root / "sessions" / "2026" / "12" / "01"
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"rollout-{name}-{sid}.jsonl"
    meta = {"timestamp": start.isoformat(), "type": "session_meta",
            "payload": {"id": sid, "cwd": cwd, "originator": originator, "timestamp": start.isoformat()}}
    p.write_text(json.dumps(meta) + "\n")
    return p


def _snap(root: Path) -> sl.LogSnapshot:
    return sl.snapshot("codex", {"CODEX_HOME": str(root)})


def test_codex_found_by_cwd_start_and_originator(tmp_path):
    root, cwd = tmp_path / "codex", str(tmp_path / "work")
    old = _rollout(root, "a", "old-thread", cwd, T0 - timedelta(hours=2))
    snap = _snap(root)
    _rollout(root, "b", "mine", cwd, T0 + timedelta(seconds=1))
    _rollout(root, "c", "elsewhere", str(tmp_path / "other"), T0 + timedelta(seconds=2))
    _rollout(root, "d", "batch", cwd, T0 + timedelta(seconds=3), originator="codex_exec")
    with open(old, "a") as f:  # an older thread of this directory that grew meanwhile
        f.write("{}\n")
    res = sl.resolve("codex", snap, None, cwd, T0)
    assert res.status == sl.RESOLVED and res.session_id == "mine"
    assert [Path(p).name for p in res.files] == ["rollout-b-mine.jsonl"]


def test_codex_two_candidates_are_ambiguous(tmp_path):
    root, cwd = tmp_path / "codex", str(tmp_path / "work")
    snap = _snap(root)
    _rollout(root, "a", "one", cwd, T0 + timedelta(seconds=1))
    _rollout(root, "b", "two", cwd, T0 + timedelta(seconds=2))
    res = sl.resolve("codex", snap, None, cwd, T0)
    assert res.status == sl.AMBIGUOUS and res.session_id is None and res.candidates == ["one", "two"]
    assert "not guessed" in res.reason


def test_codex_nothing_new_is_unresolved(tmp_path):
    root, cwd = tmp_path / "codex", str(tmp_path / "work")
    _rollout(root, "a", "before", cwd, T0 - timedelta(minutes=1))
    res = sl.resolve("codex", _snap(root), None, cwd, T0)
    assert res.status == sl.UNRESOLVED and "appeared or grew" in res.reason


def test_claude_pinned_without_transcript_is_unresolved(tmp_path):
    root = tmp_path / "claude"
    (root / "projects" / "p").mkdir(parents=True)
    snap = sl.snapshot("claude", {"CLAUDE_CONFIG_DIR": str(root)})
    res = sl.resolve("claude", snap, "11111111-1111-1111-1111-111111111111", str(tmp_path), T0)
    assert res.status == sl.UNRESOLVED and "wrote no transcript" in res.reason
    (root / "projects" / "p" / "11111111-1111-1111-1111-111111111111.jsonl").write_text("{}\n")
    res = sl.resolve("claude", snap, "11111111-1111-1111-1111-111111111111", str(tmp_path), T0)
    assert res.status == sl.RESOLVED and res.session_id == "11111111-1111-1111-1111-111111111111"
