"""`ledger import`: the archive of Claude Code transcripts and Codex rollouts (DESIGN §4b).

Real files in a temporary config dir, the real CLI; the archive is compared byte for byte."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import REPO
from ledger.cli.app import app
from ledger.sources.archiveformat import read_archive

SESSION = "0b7d6c2e-1f1e-4a55-9d0c-7f1f0f3c2a10"
PROJECT = "-home-u-work-proj"


def line(**fields) -> bytes:
    return json.dumps(fields, separators=(",", ":")).encode() + b"\n"


def assistant(n: int, text: str = "ok") -> bytes:
    """An assistant entry shaped like Claude Code 2.1.x writes it (stream-formats §B.2, B.4)."""
    return line(parentUuid=f"u{n - 1}", isSidechain=False, userType="external", cwd="/home/u/work/proj",
                sessionId=SESSION, version="2.1.328", gitBranch="main", type="assistant", uuid=f"u{n}",
                timestamp=f"2025-06-01T10:00:{n:02d}.000Z", requestRef=f"req_{n}",
                message={"id": f"msg_{n}", "model": "claude-sonnet-4-5", "role": "assistant",
                         "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                         "usage": {"input_tokens": 10 + n, "output_tokens": 5, "cache_read_input_tokens": 100}})


def user(n: int) -> bytes:
    return line(parentUuid=None, isSidechain=False, type="user", uuid=f"u{n}", sessionId=SESSION,
                timestamp=f"2025-06-01T10:00:{n:02d}.000Z", message={"role": "user", "content": "hi"})


def invoke(*args: str, env: dict[str, str] | None = None):
    res = CliRunner().invoke(app, ["import", *args], env=env)
    out = (res.stdout or "") + (res.stderr or "")
    assert "Traceback" not in out, out
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def imp(cfg: Path, client: str = "claude") -> dict:
    res = invoke(client, "--from", str(cfg), "--json")
    assert res.exit_code == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    (c,) = doc["clients"]
    return c


@pytest.fixture
def cfg(tmp_path) -> Path:
    d = tmp_path / "claude-config"
    (d / "projects" / PROJECT).mkdir(parents=True)
    return d


def tree(root: Path) -> dict[str, bytes]:
    """Every archive file (not the state) under root: relative path of the log it holds (a
    zstd generation's name without `.zst`) -> its content (decompressed)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".state"]
        for f in filenames:
            if f != ".lock":
                p = Path(dirpath) / f
                rel = str(p.relative_to(root))
                out[rel[:-4] if rel.endswith(".zst") else rel] = read_archive(p)
    return out


def zframe(data: bytes) -> bytes:
    """One zstd frame (the archive appends one per import)."""
    import zstandard

    return zstandard.ZstdCompressor().compress(data)


def archived(home: Path, client: str = "claude") -> dict[str, bytes]:
    return tree(home / "sources" / client)


def test_archive_is_the_complete_lines_subagents_included(home, cfg):
    src = cfg / "projects" / PROJECT / f"{SESSION}.jsonl"
    body = user(1) + assistant(2) + assistant(3)
    src.write_bytes(body + b'{"type":"assistant","torn')
    sub = cfg / "projects" / PROJECT / SESSION / "subagents" / "agent-a1.jsonl"
    sub.parent.mkdir(parents=True)
    sub.write_bytes(assistant(4, "sub"))

    c = imp(cfg)
    assert archived(home) == {f"projects/{PROJECT}/{SESSION}.jsonl": body,
                              f"projects/{PROJECT}/{SESSION}/subagents/agent-a1.jsonl": assistant(4, "sub")}
    assert (c["files"], c["new_files"], c["new_bytes"], c["waiting"]) == (2, 2, len(body) + len(assistant(4, "sub")), 1)
    assert c["gaps"] == [] and c["skipped"] == []


def test_appended_bytes_only_are_archived_and_a_torn_line_waits(home, cfg):
    src = cfg / "projects" / PROJECT / f"{SESSION}.jsonl"
    src.write_bytes(user(1) + assistant(2))
    imp(cfg)
    more = assistant(3)
    with open(src, "ab") as f:
        f.write(more[:20])  # a live session mid-write
    c = imp(cfg)
    assert c["new_bytes"] == 0 and c["waiting"] == 1
    assert archived(home)[f"projects/{PROJECT}/{SESSION}.jsonl"] == user(1) + assistant(2)
    with open(src, "ab") as f:
        f.write(more[20:] + assistant(4))
    c = imp(cfg)
    assert c["new_bytes"] == len(more) + len(assistant(4))
    assert c["read_bytes"] < len(src.read_bytes()) + 4096 + 256  # new bytes plus the prefix/tail checks
    assert archived(home)[f"projects/{PROJECT}/{SESSION}.jsonl"] == src.read_bytes()


def test_reimport_with_nothing_new_reads_nothing(home, cfg):
    for i in range(3):
        (cfg / "projects" / PROJECT / f"s{i}.jsonl").write_bytes(user(1) + assistant(2))
    imp(cfg)
    before = archived(home)
    c = imp(cfg)
    assert (c["files"], c["unchanged"], c["new_bytes"], c["read_bytes"]) == (3, 3, 0, 0)
    assert archived(home) == before


def test_deleting_the_originals_changes_nothing(home, cfg):
    src = cfg / "projects" / PROJECT / f"{SESSION}.jsonl"
    src.write_bytes(user(1) + assistant(2))
    imp(cfg)
    before = archived(home)
    src.unlink()
    c = imp(cfg)
    assert c["files"] == 0
    assert archived(home) == before


@pytest.mark.parametrize("rewrite,reason", [
    (lambda old: old[: len(user(1))], "shrank"),  # truncated
    (lambda old: assistant(9) + old, "first bytes differ"),  # a different beginning, longer
    # same first 4 KiB, a changed line before the archived end (caught by the tail check)
    (lambda old: old[:-len(assistant(60))] + assistant(60, "CHANGED") + assistant(61), "before the archived end"),
])
def test_rewritten_log_becomes_a_new_generation_and_a_gap(home, cfg, rewrite, reason):
    src = cfg / "projects" / PROJECT / f"{SESSION}.jsonl"
    old = user(1) + b"".join(assistant(n) for n in range(2, 61))
    assert len(old) > 4096 + 256
    src.write_bytes(old)
    imp(cfg)
    new = rewrite(old)
    src.write_bytes(new)
    c = imp(cfg)
    assert c["generations"] == 1 and len(c["gaps"]) == 1
    gap = c["gaps"][0]
    assert reason in gap["reason"] and gap["generation"] == 2 and gap["path"] == str(src)
    assert archived(home) == {f"projects/{PROJECT}/{SESSION}.jsonl": old,  # kept byte-identical
                              f"projects/{PROJECT}/{SESSION}.gen2.jsonl": new}
    # the new generation then grows like any log
    with open(src, "ab") as f:
        f.write(assistant(70))
    c = imp(cfg)
    assert c["generations"] == 0 and c["new_bytes"] == len(assistant(70))
    assert archived(home)[f"projects/{PROJECT}/{SESSION}.gen2.jsonl"] == new + assistant(70)


def test_symlinks_are_not_followed_and_are_named(home, cfg, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.jsonl").write_bytes(b'{"secret":1}\n')
    proj = cfg / "projects" / PROJECT
    (proj / "evil.jsonl").symlink_to(outside / "secret.jsonl")
    (cfg / "projects" / "evil-dir").symlink_to(outside)
    (proj / "ok.jsonl").write_bytes(user(1))
    c = imp(cfg)
    assert archived(home) == {f"projects/{PROJECT}/ok.jsonl": user(1)}
    skipped = {p["path"]: p["reason"] for p in c["skipped"]}
    assert "out of the config dir" in skipped[str(proj / "evil.jsonl")]
    assert "out of the config dir" in skipped[str(cfg / "projects" / "evil-dir")]


def test_directory_named_like_a_log_fifo_are_skipped_and_a_damaged_archive_repaired(home, cfg):
    proj = cfg / "projects" / PROJECT
    (proj / "x.jsonl").mkdir()
    (proj / "x.jsonl" / "inner.jsonl").write_bytes(user(1))
    os.mkfifo(proj / "pipe.jsonl")  # opening it for reading would block: never opened
    (proj / "a.jsonl").write_bytes(user(1))
    (proj / "b.jsonl").write_bytes(user(2))
    imp(cfg)
    # damage one archive file behind ledger's back: the log still holds its bytes, so it is
    # copied again (issue 26; before, that log was skipped as "shorter than recorded")
    (home / "sources" / "claude" / "projects" / PROJECT / "a.jsonl.zst").write_bytes(b"")
    for name in ("a.jsonl", "b.jsonl"):
        with open(proj / name, "ab") as f:
            f.write(assistant(3))
    c = imp(cfg)
    skipped = {p["path"]: p["reason"] for p in c["skipped"]}
    assert skipped[str(proj / "x.jsonl")] == "a directory where a log file should be"
    assert skipped[str(proj / "pipe.jsonl")] == "not a regular file"
    assert str(proj / "a.jsonl") not in skipped
    assert [(r["archive"], r["log"]) for r in c["repaired"]] == [(f"projects/{PROJECT}/a.jsonl.zst", str(proj / "a.jsonl"))]
    assert "truncated" in c["repaired"][0]["reason"]
    assert archived(home)[f"projects/{PROJECT}/a.jsonl"] == user(1) + assistant(3)
    assert archived(home)[f"projects/{PROJECT}/b.jsonl"] == user(2) + assistant(3)
    assert f"projects/{PROJECT}/x.jsonl/inner.jsonl" not in archived(home)


def test_modes_are_0600_files_in_0700_dirs(home, cfg):
    old = os.umask(0o022)
    try:
        (cfg / "projects" / PROJECT / "s.jsonl").write_bytes(user(1))
        sub = cfg / "projects" / PROJECT / "s" / "subagents" / "agent-1.jsonl"
        sub.parent.mkdir(parents=True)
        sub.write_bytes(user(2))
        imp(cfg)
    finally:
        os.umask(old)
    seen = 0
    for dirpath, dirnames, filenames in os.walk(home / "sources"):
        assert stat.S_IMODE(os.stat(dirpath).st_mode) == 0o700, dirpath
        for f in filenames:
            assert stat.S_IMODE(os.stat(Path(dirpath) / f).st_mode) == 0o600, f
            seen += 1
    # two archive files, two state files, the roots, seen and changed files, the lock, and the
    # first import's fold for the index (ledger.sources.prefold)
    assert seen == 9


def test_hostile_names_are_archived_verbatim(home, cfg):
    proj_name = "my proj \u00fc\u4e2d \x1b[31mred\x01"
    names = ["sp ace.jsonl", "\u00e9t\u00e9 \U0001f600.jsonl", "nl\nand\ttab\x1b].jsonl", os.fsdecode(b"bad\xff.jsonl")]
    proj = cfg / "projects" / proj_name
    proj.mkdir()
    for i, n in enumerate(names):
        (proj / n).write_bytes(user(i) + b"\xff\xfe not utf-8 \x00\n")  # the archive is bytes
    (proj / "dir\x1b[2J.jsonl").mkdir()  # skipped: its name is printed on stderr
    res = invoke("claude", "--from", str(cfg), "--json")
    assert res.exit_code == 0, res.stderr
    assert archived(home) == {f"projects/{proj_name}/{n}": user(i) + b"\xff\xfe not utf-8 \x00\n"
                              for i, n in enumerate(names)}
    assert "\x1b" not in res.stderr and "dir\\x1b[2J.jsonl: a directory" in res.stderr  # escaped, never obeyed
    assert json.loads(res.stdout)["totals"]["new_files"] == 4
    c = imp(cfg)
    assert (c["unchanged"], c["read_bytes"]) == (4, 0)


def test_interrupted_import_is_adopted_without_duplicates(home, cfg):
    src = cfg / "projects" / PROJECT / "s.jsonl"
    src.write_bytes(user(1))
    imp(cfg)
    with open(src, "ab") as f:
        f.write(assistant(2) + assistant(3))
    # an import that died after appending (a whole frame, then a torn one) and before writing
    # its state: the whole frame is adopted, the torn one cut
    with open(home / "sources" / "claude" / "projects" / PROJECT / "s.jsonl.zst", "ab") as f:
        f.write(zframe(assistant(2)) + zframe(assistant(3))[:10])
    c = imp(cfg)
    assert archived(home)[f"projects/{PROJECT}/s.jsonl"] == src.read_bytes()
    assert c["gaps"] == [] and c["new_bytes"] == len(assistant(3))


def test_json_shape(home, cfg):
    (cfg / "projects" / PROJECT / "s.jsonl").write_bytes(user(1))
    res = invoke("claude", "--from", str(cfg), "--json")
    doc = json.loads(res.stdout)
    assert set(doc) == {"home", "clients", "totals"}
    assert doc["home"] == str(home)
    (c,) = doc["clients"]
    assert set(c) == {"client", "roots", "files", "unchanged", "new_files", "new_bytes", "read_bytes", "waiting",
                      "generations", "gaps", "skipped", "notes", "repaired"}
    assert c["client"] == "claude" and c["roots"] == [str(cfg)]
    assert doc["totals"] == {"files": 1, "unchanged": 0, "new_files": 1, "new_bytes": len(user(1)), "read_bytes": len(user(1)),
                             "waiting": 0, "generations": 0, "gaps": 0, "skipped": 0, "repaired": 0}
    assert "Imported sessions are counted by `ledger report`" in res.stderr


def test_default_locations_and_missing_dirs(home, tmp_path, monkeypatch):
    fake_home = tmp_path / "user"
    monkeypatch.setenv("HOME", str(fake_home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    res = invoke("all", "--json")  # nothing anywhere: a note, not an error
    assert res.exit_code == 0, res.stderr
    assert "no Claude Code history found" in res.stderr and "no Codex history found" in res.stderr
    res = invoke("claude")  # asked for explicitly: an error that says where to point
    assert res.exit_code == 1 and "Error: no Claude Code history found" in res.stderr and "Hint:" in res.stderr
    for d in (".claude", ".config/claude"):
        p = fake_home / d / "projects" / PROJECT
        p.mkdir(parents=True)
        (p / f"{d.replace('/', '_')}.jsonl").write_bytes(user(1))
        (p / "copied.jsonl").write_bytes(user(2))  # the same log in both dirs: archived once
    codex = tmp_path / "codexhome" / "sessions" / "2025" / "06" / "01"
    codex.mkdir(parents=True)
    (codex / "rollout-2025-06-01T10-00-00-abc.jsonl").write_bytes(b'{"type":"session_meta"}\n')
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codexhome"))
    res = invoke("--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["totals"]["new_files"] == 4 and json.loads(res.stdout)["totals"]["gaps"] == 0
    assert archived(home) == {f"projects/{PROJECT}/.claude.jsonl": user(1), f"projects/{PROJECT}/.config_claude.jsonl": user(1),
                              f"projects/{PROJECT}/copied.jsonl": user(2)}
    assert set(archived(home, "codex")) == {"sessions/2025/06/01/rollout-2025-06-01T10-00-00-abc.jsonl"}


def test_bad_arguments_and_homes(home, tmp_path):
    res = invoke("claude", "--from", str(tmp_path / "nope"))
    assert res.exit_code == 1
    assert "Error: --from" in res.stderr and "does not exist" in res.stderr and "Hint:" in res.stderr
    (tmp_path / "empty").mkdir()
    res = invoke("codex", "--from", str(tmp_path / "empty"))
    assert res.exit_code == 1 and "not a Codex config dir" in res.stderr and "Hint:" in res.stderr
    res = invoke("all", "--from", str(tmp_path))
    assert res.exit_code == 2 and "Error: --from needs a client" in res.stderr
    res = invoke("cursor")
    assert res.exit_code == 2 and "Error: unknown client" in res.stderr and "Hint:" in res.stderr
    project = tmp_path / "a-project"
    project.mkdir()
    (project / "main.py").write_text("x")
    cfg = tmp_path / "c"
    (cfg / "projects").mkdir(parents=True)
    res = invoke("claude", "--from", str(cfg), "--home", str(project))
    assert res.exit_code == 1 and "not a ledger home" in res.stderr
    assert sorted(os.listdir(project)) == ["main.py"]  # nothing written into somebody else's dir
    assert not home.exists()
    res = invoke("claude", "--from", str(cfg))  # a writer: creates the home
    assert res.exit_code == 0 and (home / "sources").is_dir()


def test_codex_layout_sessions_win_and_moved_rollouts_continue(home, tmp_path):
    cx = tmp_path / "codex"
    day = cx / "sessions" / "2025" / "06" / "01"
    day.mkdir(parents=True)
    (cx / "archived_sessions").mkdir()
    a, b = "rollout-2025-06-01T10-00-00-aaaa.jsonl", "rollout-2025-05-01T09-00-00-bbbb.jsonl"
    meta = b'{"timestamp":"2025-06-01T10:00:00Z","type":"session_meta","payload":{"id":"aaaa"}}\n'
    tc = b'{"timestamp":"2025-06-01T10:00:01Z","type":"event_msg","payload":{"type":"token_count","info":null}}\n'
    (day / a).write_bytes(meta + tc)
    (cx / "archived_sessions" / a).write_bytes(meta)  # an older copy of the same rollout
    (cx / "archived_sessions" / b).write_bytes(meta)
    (day / "notes.txt").write_bytes(b"not a rollout\n")
    c = imp(cx, "codex")
    assert archived(home, "codex") == {f"sessions/2025/06/01/{a}": meta + tc, f"archived_sessions/{b}": meta}
    assert c["new_files"] == 2 and c["gaps"] == []
    assert any(p["path"] == str(cx / "archived_sessions" / a) and "sessions" in p["reason"] for p in c["skipped"])
    # codex archives the session: the file moves (and here grows); it continues where it was
    (cx / "archived_sessions" / a).unlink()
    os.rename(day / a, cx / "archived_sessions" / a)
    with open(cx / "archived_sessions" / a, "ab") as f:
        f.write(tc)
    c = imp(cx, "codex")
    assert (c["new_files"], c["new_bytes"], c["generations"]) == (0, len(tc), 0)
    assert archived(home, "codex") == {f"sessions/2025/06/01/{a}": meta + tc + tc, f"archived_sessions/{b}": meta}


def test_no_traceback_from_the_real_command(home, cfg):
    """The installed entry point, in a subprocess: hostile input, then a bad --from."""
    proj = cfg / "projects" / PROJECT
    (proj / "x.jsonl").mkdir()
    os.mkfifo(proj / "p.jsonl")
    (proj / "s.jsonl").write_bytes(b"\xff\xfe\x00garbage\n{\"torn")
    env = {**os.environ, "LEDGER_HOME": str(home), "PYTHONPATH": str(REPO)}
    for args, code in ((["claude", "--from", str(cfg)], 0), (["claude", "--from", str(cfg / "nope")], 1)):
        res = subprocess.run([sys.executable, "-m", "ledger", "import", *args], capture_output=True, text=True,
                             env=env, timeout=60)
        assert res.returncode == code, res.stderr
        assert "Traceback" not in res.stderr + res.stdout
    assert archived(home) == {f"projects/{PROJECT}/s.jsonl": b"\xff\xfe\x00garbage\n"}


def test_an_import_killed_before_its_sync_is_recovered_not_called_damage(home, cfg):
    """One sync per import (not an fsync per log): when an import dies before it, the next one
    finds its flag and takes an archive file shorter than its state for that crash's doing."""
    src = cfg / "projects" / PROJECT / "a.jsonl"
    src.write_bytes(user(1) + assistant(2))
    imp(cfg)
    arch = home / "sources" / "claude" / "projects" / PROJECT / "a.jsonl.zst"
    flag = home / "sources" / "claude" / ".state" / "importing"
    assert not flag.exists()  # a finished import leaves no flag
    # the crash: the state says two lines, the disk kept one frame (and a torn one)
    arch.write_bytes(zframe(user(1)) + zframe(assistant(2))[:10])
    flag.write_bytes(b"")
    with open(src, "ab") as f:
        f.write(assistant(3))
    c = imp(cfg)
    assert c["skipped"] == []
    assert any("copied again" in n for n in c["notes"])
    assert read_archive(arch) == user(1) + assistant(2) + assistant(3)
    assert not flag.exists()


def test_archive_files_are_zstd_frames_one_per_import(home, cfg):
    src = cfg / "projects" / PROJECT / "z.jsonl"
    body = b"".join(assistant(n) for n in range(2, 400))
    src.write_bytes(user(1) + body)
    imp(cfg)
    arch = home / "sources" / "claude" / "projects" / PROJECT / "z.jsonl.zst"
    assert not arch.with_suffix("").exists()  # only the compressed file
    first = arch.stat().st_size
    assert first * 4 < len(src.read_bytes())  # JSON lines compress well: under 25 %
    with open(src, "ab") as f:
        f.write(assistant(400))
    c = imp(cfg)
    assert c["new_bytes"] == len(assistant(400))
    data = arch.read_bytes()
    assert data[first:first + 4] == b"\x28\xb5\x2f\xfd"  # a second zstd frame, appended after the first
    assert read_archive(arch) == src.read_bytes()
