"""The archive of imported logs is evidence like the run records (issue 26, issue 32 items 2-4).

Real files, the real CLI in subprocesses, real damage (bytes flipped, files cut and deleted)
and real SIGKILLs: `ledger verify` names the file and byte offset; the index lists a damaged
file as unreadable and counts it as an evidence gap of its session (never a silent shrink),
alike on a fresh index and after `ledger index --full`; `ledger import` copies it again from
the log while the log holds those bytes; an interrupted import's leftovers are adopted or
removed by the next; a symlinked archive directory is never written through; decompression
and line reading are bounded (a zstd bomb, a huge line without a newline)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import claudehistory
from conftest import REPO
from ledger.sources.archiveformat import read_archive


def ledger(*args: str, home: Path, env: dict[str, str] | None = None, timeout: float = 180,
           check: bool = True) -> subprocess.CompletedProcess:
    e = {**os.environ, "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home), **(env or {})}
    e.pop("LEDGER_DB", None)
    res = subprocess.run([sys.executable, "-m", "ledger", *args], capture_output=True, text=True, env=e,
                         timeout=timeout)
    assert "Traceback" not in res.stderr + res.stdout, res.stderr
    if check:
        assert res.returncode == 0, res.stderr
    return res


def runs(home: Path, db: Path | None = None) -> dict[str, dict]:
    args = ["runs", "--all", "--json"] + (["--db", f"sqlite:///{db}"] if db else [])
    return {r["id"]: r for r in json.loads(ledger(*args, home=home).stdout)}


def figures(rs: dict[str, dict]) -> dict[str, tuple]:
    return {k: (r["state"], r["evidence_gaps"], json.dumps(r["usage"], sort_keys=True)) for k, r in rs.items()}


def archive_dir(home: Path) -> Path:
    return home / "sources" / "claude"


def main_archives(home: Path) -> list[Path]:
    """The archive files of sessions' main logs whose log ends with a whole line and whose
    session is a run (the ones tests damage and grow)."""
    listed = runs(home)
    out = []
    for p in sorted((archive_dir(home) / "projects").rglob("*.jsonl.zst")):
        log = home.parent / "cfg" / p.relative_to(archive_dir(home)).with_suffix("")
        if ("/subagents/" not in str(p) and log.exists() and log.read_bytes().endswith(b"\n")
                and "claude-" + p.name[:-len(".jsonl.zst")] in listed):
            out.append(p)
    return out


def archived(home: Path) -> dict[str, bytes]:
    base = archive_dir(home)
    return {str(p.relative_to(base)): read_archive(p) for p in sorted(base.rglob("*.jsonl.zst"))
            if ".state" not in p.parts}


def flip(path: Path, at: int) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        b = bytearray(f.read(3))
        f.seek(at)
        f.write(bytes(x ^ 0x5A for x in b))


@pytest.fixture
def hist(tmp_path) -> tuple[Path, Path]:
    cfg = tmp_path / "cfg"
    claudehistory.generate(cfg, sessions=5, seed=26)
    home = tmp_path / "home"
    ledger("import", "claude", "--from", str(cfg), home=home)
    return cfg, home


def grow(cfg: Path, home: Path, archive: Path) -> None:
    """One more response appended to the log of `archive`, imported: a second frame."""
    rel = archive.relative_to(archive_dir(home)).with_suffix("")  # (.jsonl)
    sid = rel.stem
    line = {"type": "assistant", "timestamp": "2026-02-01T12:00:00.000Z", "sessionId": sid, "isSidechain": False,
            "requestId": f"req_grow_{sid}", "cwd": "/home/dev/x",
            "message": {"id": f"msg_grow_{sid}", "model": "claude-sonnet-4-5-20250929", "role": "assistant",
                        "usage": {"input_tokens": 7, "output_tokens": 11, "cache_read_input_tokens": 13,
                                  "cache_creation_input_tokens": 17}}}
    with open(cfg / rel, "ab") as f:
        f.write(json.dumps(line).encode() + b"\n")
    ledger("import", "claude", "--from", str(cfg), home=home)


# ---------------------------------------------------------------- 1. verify

def test_verify_names_a_flipped_frame_a_truncated_and_a_deleted_archive_file_by_byte_offset(hist):
    cfg, home = hist
    ok = ledger("verify", "--json", home=home)
    doc = json.loads(ok.stdout)["archives"]
    assert doc["files"] == len(archived(home)) and doc["ok"] == doc["files"] and doc["problems"] == []
    a, b, c = main_archives(home)[:3]
    grow(cfg, home, a)  # a holds two frames: the second is damaged
    frames = a.read_bytes()
    second = frames.rfind(b"\x28\xb5\x2f\xfd")
    assert second > 0
    flip(a, second + (len(frames) - second) // 2)
    size_b = b.stat().st_size
    os.truncate(b, size_b - 10)
    c.unlink()
    res = ledger("verify", home=home, check=False)
    assert res.returncode == 1
    rel = lambda p: str(p.relative_to(home))  # noqa: E731
    lines = res.stdout.splitlines()
    assert any(ln.startswith(f"{rel(a)} at byte {second:,}: the frame of bytes {second:,}-") for ln in lines), lines
    assert any(ln.startswith(f"{rel(b)} at byte {size_b - 10:,}: truncated") for ln in lines), lines
    assert any(ln.startswith(f"{rel(c)}: missing") for ln in lines), lines
    assert "3 with problems" in res.stderr
    doc = json.loads(ledger("verify", "--json", home=home, check=False).stdout)["archives"]
    by = {(p["path"], p["offset"]) for p in doc["problems"]}
    assert (rel(a), second) in by and (rel(b), size_b - 10) in by and (rel(c), None) in by
    assert doc["ok"] == doc["files"] - 2  # (c is gone: not a file read)


# ---------------------------------------------------------------- 2. the index

def test_a_damaged_archive_is_an_unreadable_item_and_a_gap_never_a_silent_shrink(hist, tmp_path):
    cfg, home = hist
    a, b, c = main_archives(home)[:3]
    sid = lambda p: "claude-" + p.name[:-len(".jsonl.zst")]  # noqa: E731
    before = runs(home)
    assert all(r["evidence_gaps"] == 0 for r in before.values())
    grow(cfg, home, a)
    grow(cfg, home, b)
    grown = runs(home)
    assert grown[sid(a)]["usage"] != before[sid(a)]["usage"]
    # the second frame of a flipped, b cut in its second frame, c deleted
    data = a.read_bytes()
    second = data.rfind(b"\x28\xb5\x2f\xfd")
    flip(a, second + (len(data) - second) // 2)
    data = b.read_bytes()
    os.truncate(b, data.rfind(b"\x28\xb5\x2f\xfd") + 5)
    c.unlink()
    ledger("index", "--full", home=home)
    full = runs(home)
    fresh = runs(home, tmp_path / "fresh.sqlite")  # a new index of the same home
    assert figures(full) == figures(fresh)  # two indexes of one home agree
    # what could be read is still there, with the gap: the first frame of a and of b
    for p in (a, b):
        assert full[sid(p)]["state"] == "settled"
        assert full[sid(p)]["evidence_gaps"] == 1
        assert full[sid(p)]["usage"] == before[sid(p)]["usage"]  # (the second frame is the one lost)
    # each damaged file is listed, unreadable, by its path below the home
    unreadable = {k for k, r in full.items() if r["state"] == "unreadable"}
    assert unreadable == {str(p.relative_to(home)) for p in (a, b, c)}
    rep = json.loads(ledger("report", "--json", home=home).stdout)
    assert rep["unreadable_runs"] == 3
    assert {u["path"] for u in rep["unreadable"]} == {str(p) for p in (a, b, c)}
    # and a plain pass after it says the same (the problems are kept in the index)
    assert figures(runs(home)) == figures(full)
    out = ledger("index", home=home)
    assert out.stderr.count("damaged archive") == 3


# ---------------------------------------------------------------- 3. the repair

def test_import_repairs_damaged_truncated_and_deleted_archive_files_from_the_logs(hist):
    cfg, home = hist
    want_archive = archived(home)
    want = figures(runs(home))
    a, b, c = main_archives(home)[:3]
    flip(a, a.stat().st_size // 2)
    os.truncate(b, b.stat().st_size // 2)
    c.unlink()
    ledger("index", "--full", home=home)
    assert sum(r["state"] == "unreadable" for r in runs(home).values()) == 3
    res = ledger("import", "claude", "--from", str(cfg), "--json", home=home)
    (client,) = json.loads(res.stdout)["clients"]
    repaired = {r["archive"]: r for r in client["repaired"]}
    rel = lambda p: str(p.relative_to(archive_dir(home)))  # noqa: E731
    assert set(repaired) == {rel(a), rel(b), rel(c)}
    assert "does not decompress" in repaired[rel(a)]["reason"]
    assert "truncated" in repaired[rel(b)]["reason"] and "missing" in repaired[rel(c)]["reason"]
    assert repaired[rel(c)]["aside"] is None and repaired[rel(a)]["aside"].startswith(".state/damaged/")
    assert (archive_dir(home) / repaired[rel(a)]["aside"]).exists()  # the damaged bytes are kept aside
    assert res.stderr.count("  repaired ") == 3 and "copied again from" in res.stderr
    assert json.loads(res.stdout)["totals"]["repaired"] == 3
    assert archived(home) == want_archive  # whole again, byte for byte
    assert ledger("verify", home=home).returncode == 0
    assert figures(runs(home)) == want  # no gap, nothing unreadable: the evidence is whole again
    # the state remembers the repair
    states = [json.loads(p.read_bytes()) for p in (archive_dir(home) / ".state").glob("*.json") if len(p.stem) == 32]
    notes = [g["repairs"] for s in states for g in s["generations"] if "repairs" in g]
    assert len(notes) == 3 and all(n[0]["reason"] and n[0]["at"] for n in notes)
    # a second import finds nothing to repair
    again = json.loads(ledger("import", "claude", "--from", str(cfg), "--json", home=home).stdout)
    assert again["totals"]["repaired"] == 0


def test_a_damaged_archive_whose_log_is_gone_is_named_not_repaired(hist):
    cfg, home = hist
    a = main_archives(home)[0]
    log = cfg / a.relative_to(archive_dir(home)).with_suffix("")
    log.unlink()  # the client deleted it (after 30 days)
    flip(a, a.stat().st_size // 2)
    res = ledger("import", "claude", "--from", str(cfg), "--json", home=home)
    (client,) = json.loads(res.stdout)["clients"]
    assert client["repaired"] == []
    (p,) = [p for p in client["skipped"] if p["path"] == str(a)]
    assert "not repaired (an evidence gap)" in p["reason"]
    ledger("index", "--full", home=home)  # (damage in place keeps the file's stat: a full pass reads it)
    assert str(a.relative_to(home)) in {k for k, r in runs(home).items() if r["state"] == "unreadable"}


# ---------------------------------------------------------------- 4. an interrupted import

KILLER = r"""
import os, signal, sys
import ledger.sources.archivefiles as a
point, n = sys.argv[1], int(sys.argv[2])
calls = [0]
def hit():
    calls[0] += 1
    if calls[0] == n:
        os.kill(os.getpid(), signal.SIGKILL)
if point == "state":  # after a log's frame is written, before its state file
    real = a.write_atomic
    def w(path, data, durable=True):
        if str(path).endswith(".json") and "/.state/" in str(path) and len(os.path.basename(str(path))) == 37:
            hit()
        return real(path, data, durable)
    a.write_atomic = w
elif point == "replace":  # a state file's temporary file written, not yet renamed
    real_replace = os.replace
    def r(src, dst):
        if str(src).endswith(".tmp"):
            hit()
        return real_replace(src, dst)
    os.replace = r
elif point == "frame":  # in the middle of writing a frame
    real_write = a.write_all
    def wa(fd, data):
        if len(data) > 64:
            os.write(fd, bytes(memoryview(data)[:len(data) // 2]))
            hit()
        return real_write(fd, data)
    a.write_all = wa
elif point == "sync":  # everything written, before the import's one sync
    os.sync = lambda: hit()
sys.argv = ["ledger"] + sys.argv[3:]
from ledger.__main__ import main
main()
"""


def killed_import(cfg: Path, home: Path, point: str, n: int) -> int:
    e = {**os.environ, "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home)}
    res = subprocess.run([sys.executable, "-c", KILLER, point, str(n), "import", "claude", "--from", str(cfg)],
                         capture_output=True, text=True, env=e, timeout=120)
    return res.returncode


@pytest.mark.parametrize("point,n", [("state", 1), ("state", 4), ("replace", 3), ("frame", 2), ("sync", 1)])
def test_an_import_killed_at_a_point_leaves_no_gap_and_no_orphan_after_the_next(tmp_path, point, n):
    cfg = tmp_path / "cfg"
    claudehistory.generate(cfg, sessions=5, seed=32)
    ref = tmp_path / "ref"
    ledger("import", "claude", "--from", str(cfg), home=ref)
    home = tmp_path / "home"
    assert killed_import(cfg, home, point, n) == -signal.SIGKILL
    ledger("import", "claude", "--from", str(cfg), home=home)
    assert archived(home) == archived(ref)
    v = ledger("verify", home=home, check=False)
    assert v.returncode == 0, v.stdout  # no orphan, nothing torn, nothing unrecorded
    left = [p.name for p in archive_dir(home).rglob("*") if p.name.endswith(".tmp") or ".gen" in p.name]
    assert left == []
    assert figures(runs(home)) == figures(runs(ref))  # no evidence gap the uninterrupted import has not


def test_imports_killed_at_random_times_over_a_large_history_leave_no_gap(tmp_path):
    cfg = tmp_path / "cfg"
    claudehistory.generate(cfg, sessions=250, seed=7, pad=4000)  # (~50 MiB in ~700 logs: ~1.5 s to import)
    ref = tmp_path / "ref"
    ledger("import", "claude", "--from", str(cfg), home=tmp_path / "warm")  # (the modules compiled)
    t0 = time.monotonic()
    ledger("import", "claude", "--from", str(cfg), home=ref)
    took = time.monotonic() - t0
    home = tmp_path / "home"
    rnd = random.Random(26)
    e = {**os.environ, "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home)}
    killed = 0
    for _ in range(6):
        p = subprocess.Popen([sys.executable, "-m", "ledger", "import", "claude", "--from", str(cfg)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=e)
        time.sleep(rnd.uniform(0.05, 0.45) * took)  # (each killed import leaves less to do)
        p.send_signal(signal.SIGKILL)
        killed += p.wait() == -signal.SIGKILL
    assert killed >= 3  # (most were killed mid-way, not after they finished)
    ledger("import", "claude", "--from", str(cfg), home=home)
    assert archived(home) == archived(ref)
    assert ledger("verify", home=home, check=False).returncode == 0
    assert figures(runs(home)) == figures(runs(ref))


# ---------------------------------------------------------------- 5. a symlinked archive directory

def test_a_symlinked_archive_directory_is_never_written_through(hist, tmp_path):
    cfg, home = hist
    a = main_archives(home)[0]
    project = a.parent
    target = tmp_path / "elsewhere"
    project.rename(target)
    project.symlink_to(target)
    before = sorted(p.relative_to(target) for p in target.rglob("*"))
    logs = sorted((cfg / project.relative_to(archive_dir(home))).glob("*.jsonl"))
    for log in logs:
        with open(log, "ab") as f:
            f.write(b'{"type":"user","sessionId":"x"}\n')
    (cfg / project.relative_to(archive_dir(home)) / "new-session.jsonl").write_bytes(b'{"type":"user"}\n')
    res = ledger("import", "claude", "--from", str(cfg), "--json", home=home)
    assert sorted(p.relative_to(target) for p in target.rglob("*")) == before  # nothing created in the target
    (client,) = json.loads(res.stdout)["clients"]
    why = {p["path"]: p["reason"] for p in client["skipped"]}
    assert "is a symlink" in why[str(project)] and "Hint:" in why[str(project)]
    for log in logs:
        assert "is a symlink" in why[str(log)] and "No such file" not in why[str(log)]
    assert "Hint:" in res.stderr
    # a reader's refresh writes nothing there either
    ledger("runs", "--all", home=home)
    assert sorted(p.relative_to(target) for p in target.rglob("*")) == before
    # the archive directory is named by verify and counted unreadable by the index
    v = ledger("verify", home=home, check=False)
    assert v.returncode == 1 and f"{project.relative_to(home)}: a symlink" in v.stdout
    assert "missing" not in v.stdout  # (its files are not "deleted": the directory is a link)
    ledger("index", "--full", home=home)
    assert str(project.relative_to(home)) in {k for k, r in runs(home).items() if r["state"] == "unreadable"}


# ---------------------------------------------------------------- 6. 7. bounded work

RSS = r"""
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stdout.write(r.stdout)
sys.stderr.write(r.stderr)
sys.stderr.write("\nMAXRSS_KB=%d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(r.returncode)
"""


def measured(*args: str, home: Path, env: dict[str, str] | None = None, timeout: float = 120
             ) -> tuple[subprocess.CompletedProcess, int, float]:
    """A ledger command in its own process: (result, its peak RSS in MiB, seconds)."""
    e = {**os.environ, "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home), **(env or {})}
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-c", RSS, sys.executable, "-m", "ledger", *args], capture_output=True,
                         text=True, env=e, timeout=timeout)
    took = time.monotonic() - t0
    rss = int(res.stderr.rsplit("MAXRSS_KB=", 1)[1].split()[0]) // 1024
    assert "Traceback" not in res.stderr, res.stderr
    return res, rss, took


def bomb() -> bytes:
    """134 KB of zstd holding 4 GiB of newlines (one frame, no content size)."""
    import zstandard

    c = zstandard.ZstdCompressor(level=3).compressobj()
    chunk = b"\n" * (1 << 24)
    return b"".join([c.compress(chunk) for _ in range(256)] + [c.flush()])


@pytest.fixture(scope="module")
def zbomb() -> bytes:
    return bomb()


def test_a_zstd_bomb_as_an_archive_file_is_refused_and_named(hist, zbomb):
    cfg, home = hist
    assert len(zbomb) < 140_000
    target = archive_dir(home) / "projects" / "-bomb" / "bomb.jsonl.zst"
    target.parent.mkdir()
    target.write_bytes(zbomb)
    res, rss, took = measured("index", "--full", home=home)
    assert res.returncode == 0, res.stderr
    assert rss < 400 and took < 60, (rss, took)
    assert "bomb.jsonl.zst" in res.stderr and "LEDGER_MAX_RATIO" in res.stderr
    assert "sources/claude/projects/-bomb/bomb.jsonl.zst" in {k for k, r in runs(home).items()
                                                              if r["state"] == "unreadable"}
    res, rss, took = measured("verify", home=home)
    assert res.returncode == 1 and "zstd bomb" in res.stdout and rss < 400 and took < 60


def test_a_zstd_bomb_as_a_codex_rollout_is_skipped_and_named_once(tmp_path, zbomb):
    codex = tmp_path / "codex"
    day = codex / "sessions" / "2026" / "01" / "02"
    day.mkdir(parents=True)
    name = "rollout-2026-01-02T10-00-00-0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl.zst"
    (day / name).write_bytes(zbomb)
    home = tmp_path / "home"
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {"TMPDIR": str(tmpdir)}
    res, rss, took = measured("import", "codex", "--from", str(codex), "--json", home=home, env=env)
    assert res.returncode == 0, res.stderr
    assert rss < 400 and took < 60, (rss, took)
    (client,) = json.loads(res.stdout)["clients"]
    (p,) = client["skipped"]
    assert p["path"] == str(day / name) and "zstd bomb" in p["reason"]
    # every later command answers at once: the refusal is remembered at the file's signature
    res, rss, took = measured("runs", "--all", home=home, env=env)
    assert res.returncode == 0 and rss < 400 and took < 30
    res = ledger("import", "codex", "--from", str(codex), "--json", home=home)
    (client,) = json.loads(res.stdout)["clients"]
    assert [p["path"] for p in client["skipped"]] == [str(day / name)]
    assert client["read_bytes"] == 0


def _no_newline(path: Path, size: int) -> None:
    """A log of `size` bytes without a newline: its first line written, the rest a hole
    (zeros: sparse on disk, read like any bytes)."""
    with open(path, "wb") as f:
        f.write(b'{"type":"user","message":{"content":"')
        f.truncate(size)


def test_a_huge_line_without_a_newline_is_read_in_chunks_and_named(tmp_path):
    cfg = tmp_path / "cfg"
    proj = cfg / "projects" / "-p"
    proj.mkdir(parents=True)
    (proj / "ok.jsonl").write_bytes(b'{"type":"user","sessionId":"s1"}\n')
    _no_newline(proj / "huge.jsonl", 96 << 20)
    home = tmp_path / "home"
    env = {"LEDGER_MAX_LINE_BYTES": str(8 << 20)}  # (the documented setting, lowered for CI)
    res, rss, took = measured("import", "claude", "--from", str(cfg), "--json", home=home, env=env)
    assert res.returncode == 0, res.stderr
    (client,) = json.loads(res.stdout)["clients"]
    (p,) = client["skipped"]
    assert p["path"] == str(proj / "huge.jsonl") and "a line longer than 8,388,608 bytes at byte 0" in p["reason"]
    assert client["read_bytes"] < 40 << 20  # it stopped reading soon after the bound
    assert rss < 200, rss
    # the next import does not read it again (the refusal is kept at its signature)
    res = ledger("import", "claude", "--from", str(cfg), "--json", home=home, env=env)
    (client,) = json.loads(res.stdout)["clients"]
    assert client["read_bytes"] == 0 and [p["path"] for p in client["skipped"]] == [str(proj / "huge.jsonl")]


@pytest.mark.slow
def test_a_1_gb_line_without_a_newline_keeps_memory_bounded(tmp_path):
    """The full size, with the default bound (64 MiB)."""
    cfg = tmp_path / "cfg"
    proj = cfg / "projects" / "-p"
    proj.mkdir(parents=True)
    _no_newline(proj / "huge.jsonl", 1 << 30)
    home = tmp_path / "home"
    res, rss, took = measured("import", "claude", "--from", str(cfg), "--json", home=home, timeout=300)
    assert res.returncode == 0, res.stderr
    (client,) = json.loads(res.stdout)["clients"]
    (p,) = client["skipped"]
    assert "a line longer than 67,108,864 bytes" in p["reason"]
    assert rss < 400, rss


def test_the_index_reads_an_archive_file_with_a_huge_line_in_chunks_and_names_it(hist):
    """An archive file holding a line over the bound (a plain archive of an older ledger, a
    zstd file made by hand): the index reads it in bounded pieces and names it."""
    import zstandard

    cfg, home = hist
    d = archive_dir(home) / "projects" / "-huge"
    d.mkdir()
    _no_newline(d / "plain.jsonl", 48 << 20)
    c = zstandard.ZstdCompressor(level=1).compressobj()
    line = b'{"type":"user","message":{"content":"' + os.urandom(24 << 20).hex().encode()  # (48 MiB)
    (d / "packed.jsonl.zst").write_bytes(c.compress(line) + c.flush())
    env = {"LEDGER_MAX_LINE_BYTES": str(4 << 20)}
    res, rss, took = measured("index", "--full", home=home, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("a line longer than 4,194,304 bytes") == 2, res.stderr
    assert rss < 200, rss
    listed = runs(home)
    assert {k for k, r in listed.items() if r["state"] == "unreadable"} == {
        "sources/claude/projects/-huge/plain.jsonl", "sources/claude/projects/-huge/packed.jsonl.zst"}


def test_a_symlinked_client_archive_is_refused_with_an_error_and_a_hint(hist, tmp_path):
    cfg, home = hist
    client = archive_dir(home)
    target = tmp_path / "moved"
    client.rename(target)
    client.symlink_to(target)
    with open(sorted((cfg / "projects").rglob("*.jsonl"))[0], "ab") as f:
        f.write(b'{"type":"user"}\n')
    before = sorted((p.relative_to(target), p.stat().st_size) for p in target.rglob("*") if p.is_file())
    res = ledger("import", "claude", "--from", str(cfg), home=home, check=False)
    assert res.returncode == 1
    assert "Error: sources/claude is a symlink" in res.stderr and "Hint: " in res.stderr
    res = ledger("runs", "--all", home=home)  # a reader answers, and says why it did not refresh
    assert "sources/claude is a symlink" in res.stderr
    assert sorted((p.relative_to(target), p.stat().st_size) for p in target.rglob("*") if p.is_file()) == before
