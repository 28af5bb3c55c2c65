"""Compressed Codex rollouts (issue 15): with `[features] local_thread_store_compression = true`
Codex 0.169 replaces a rollout untouched for 7 days by `<name>.jsonl.zst`, one zstd stream of
the whole file, keeping its mtime, and removes the plain file (codex-rs/rollout/src/
compression.rs); appending to the thread again (a resume) writes the plain file back first.
`ledger import codex` reads such a file as the rollout it holds: the same log (its key is the
plain name), so a rollout archived before it was compressed continues in its generation, and
one first seen compressed is imported whole.

The real-client test makes Codex 0.169 (node_modules) compress a rollout itself."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import zstandard
from typer.testing import CliRunner

import codexhistory
from agentenv import agent_cwd, codex_argv, codex_available, codex_env, parse_jsonl, run_agent
from launchkit import REPO
from ledger.cli.app import app
from ledger.sources.archiveformat import read_archive
from ledger.sources.codex_usage import CodexUsage
from mockprovider import MockProvider, answer
from test_codex_usage import P, ctx, jl, meta, path, tc

runner = CliRunner()
TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")


def cli(*args: str) -> Any:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return res


def imported(src: Path) -> dict[str, Any]:
    (c,) = json.loads(cli("import", "codex", "--from", str(src), "--json").stdout)["clients"]
    return c


def compress(p: Path) -> Path:
    """What Codex's compression worker does: the whole file as one zstd stream, its mtime kept,
    the plain file removed."""
    z = p.with_name(p.name + ".zst")
    st = p.stat()
    z.write_bytes(zstandard.ZstdCompressor(level=3).compress(p.read_bytes()))
    os.utime(z, ns=(st.st_atime_ns, st.st_mtime_ns))
    p.unlink()
    return z


def archived_usage(home: Path) -> CodexUsage:
    r = CodexUsage()
    for f in sorted((home / "sources" / "codex").rglob("*.jsonl.zst")):
        rel = str(f.relative_to(home / "sources" / "codex"))[:-len(".zst")]
        r.feed(rel, read_archive(f), 0)
    return r


def per_day_model(doc: dict[str, Any]) -> dict[tuple[str, str | None], dict[str, Any]]:
    return {(row["key"], m["model"]): m for row in doc["rows"] for m in row["models"]}


def test_compressed_rollouts_are_imported_and_reported_like_plain_ones(home, tmp_path):
    src = tmp_path / "codex"
    h = codexhistory.generate(src, threads=10, seed=3)
    plain = sorted(p for p in src.rglob("rollout-*.jsonl"))
    # every archived rollout and every other one under sessions/ compressed by the client
    # (the torn live rollout too: Codex compresses a file, not a thread's lines)
    chosen = [p for i, p in enumerate(plain) if "archived_sessions" in p.parts or i % 2]
    for p in chosen:
        compress(p)
    assert len(chosen) >= 5 and list(src.rglob("*.jsonl.zst"))
    c = imported(src)
    # the one rollout under both sessions/ and archived_sessions/ is archived once (sessions/ wins)
    assert c["files"] == len(plain) - 1
    assert [s["reason"].startswith("the same log is at") for s in c["skipped"]] == [True]
    r = archived_usage(home)
    assert r.totals() == h.truth() and r.totals(("session",)) == h.truth(("session",))
    assert r.tools() == h.tools and r.tool_results() == h.results
    doc = json.loads(cli("report", "daily", "--breakdown", "--tz", "UTC", "--json").stdout)
    got = per_day_model(doc)
    assert set(got) == set(h.truth())
    for key, want in h.truth().items():
        assert all(got[key][t] == want[t] for t in TOKENS), key
    # the archive names a compressed log by its plain name (one `.zst`, the archive's own frames)
    names = {p.name for p in (home / "sources" / "codex").rglob("rollout-*")}
    assert names == {p.name + ".zst" for p in plain}


def _rollout(src: Path) -> tuple[Path, bytes]:
    p = src / "sessions" / "2026" / "03" / "10" / path(P).rsplit("/", 1)[1]
    p.parent.mkdir(parents=True, exist_ok=True)
    data = jl(meta(P), ctx("gpt-5.5"), tc("2026-03-10T10:00:01.000Z", 100, 0, 10),
              tc("2026-03-10T10:00:02.000Z", 250, 50, 25))
    p.write_bytes(data)
    return p, data


def _input_total() -> int:
    doc = json.loads(cli("report", "daily", "--tz", "UTC", "--json").stdout)
    return doc["totals"]["input_tokens"] + doc["totals"]["cache_read_tokens"]


def test_a_rollout_compressed_after_its_import_adds_nothing_and_continues_when_resumed(home, tmp_path):
    src = tmp_path / "codex"
    p, data = _rollout(src)
    c = imported(src)
    assert (c["new_files"], c["new_bytes"]) == (1, len(data))
    assert _input_total() == 250
    archive = {f: f.read_bytes() for f in (home / "sources" / "codex").rglob("rollout-*")}

    z = compress(p)  # a week later: the client compressed it (and moved nothing else)
    c = imported(src)
    assert (c["files"], c["new_files"], c["new_bytes"], c["generations"], c["skipped"]) == (1, 0, 0, 0, [])
    assert {f: f.read_bytes() for f in (home / "sources" / "codex").rglob("rollout-*")} == archive
    assert _input_total() == 250
    c = imported(src)  # unchanged since: skipped on its signature, nothing read
    assert (c["unchanged"], c["read_bytes"]) == (1, 0)

    # resumed: the client writes the plain file back, then appends to it
    more = jl(tc("2026-03-12T08:00:00.000Z", 400, 50, 40))
    p.write_bytes(zstandard.ZstdDecompressor().decompress(z.read_bytes()) + more)
    z.unlink()
    c = imported(src)
    assert (c["new_files"], c["new_bytes"], c["generations"]) == (0, len(more), 0)
    assert _input_total() == 400


def test_a_rollout_first_seen_compressed_continues_in_the_same_archive(home, tmp_path):
    src = tmp_path / "codex"
    p, data = _rollout(src)
    z = compress(p)
    c = imported(src)
    assert (c["new_files"], c["new_bytes"], c["skipped"]) == (1, len(data), [])
    more = jl(tc("2026-03-12T08:00:00.000Z", 300, 50, 30))
    p.write_bytes(data + more)  # materialised for a resume, appended to
    z.unlink()
    c = imported(src)
    assert (c["new_files"], c["new_bytes"], c["generations"]) == (0, len(more), 0)
    assert _input_total() == 300
    (arch,) = (home / "sources" / "codex").rglob("rollout-*")
    assert read_archive(arch) == data + more


def test_plain_and_compressed_siblings_are_one_log_and_a_damaged_one_is_skipped(home, tmp_path):
    src = tmp_path / "codex"
    p, data = _rollout(src)
    # mid-compression: both representations exist for a moment (Codex reads the plain one)
    p.with_name(p.name + ".zst").write_bytes(zstandard.ZstdCompressor().compress(data))
    other = src / "archived_sessions" / "rollout-2026-03-09T10-00-00-44444444-4444-4444-8444-444444444444.jsonl.zst"
    other.parent.mkdir(parents=True)
    whole = zstandard.ZstdCompressor().compress(jl(meta("44444444-4444-4444-8444-444444444444"), ctx("m"),
                                                   tc("2026-03-09T10:00:01.000Z", 7, 0, 1)))
    other.write_bytes(whole[:-4])  # torn: its frame never ends
    c = imported(src)
    assert (c["files"], c["new_files"], c["new_bytes"]) == (2, 1, len(data))  # (the sibling: not a file of its own)
    reasons = sorted((Path(s["path"]).name, s["reason"]) for s in c["skipped"])
    assert reasons == [
        (other.name, "unreadable (not a whole zstd file: its last frame is torn)"),
        (p.name + ".zst", f"the same log is at {p} (that one is archived)"),
    ]
    assert _input_total() == 250


# ---- the real client ------------------------------------------------------------------------

def _ledger(home: Path, *args: str) -> Any:
    env = {**os.environ, "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home)}
    p = subprocess.run([sys.executable, "-m", "ledger", *args], env=env, capture_output=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, (args, p.stdout[-2000:], p.stderr[-2000:])
    return json.loads(p.stdout)


@pytest.mark.agents
def test_real_codex_compresses_a_cold_rollout_and_its_import_equals_the_clients_totals(tmp_path, monkeypatch):
    if not codex_available():
        if os.environ.get("CI"):
            pytest.fail("codex is required under CI: run `npm install` (node_modules/.bin/codex)")
        pytest.skip("node_modules/.bin/codex is not installed")
    home = tmp_path / "ledger-home"
    monkeypatch.delenv("LEDGER_DB", raising=False)
    cwd = agent_cwd(tmp_path)
    with MockProvider([answer("One.", usage={"input_tokens": 120, "cached_tokens": 20, "output_tokens": 7,
                                             "reasoning_tokens": 3})]) as mp:
        env = codex_env(tmp_path, mp)
        p1 = run_agent(codex_argv("first"), env, cwd, timeout=90)
    assert p1.returncode == 0, p1.stderr[-2000:]
    (thread,) = [e["thread_id"] for e in parse_jsonl(p1.stdout) if e.get("type") == "thread.started"]
    (usage,) = [e["usage"] for e in parse_jsonl(p1.stdout) if e.get("type") == "turn.completed"]
    codex_home = Path(env["CODEX_HOME"])
    # the thread archived by the client long ago (its mtime 10 days old: cold)
    (rollout,) = (codex_home / "sessions").rglob(f"rollout-*{thread}.jsonl")
    moved = codex_home / "archived_sessions" / rollout.name
    moved.parent.mkdir()
    shutil.move(rollout, moved)
    old = time.time() - 10 * 86400
    os.utime(moved, (old, old))
    # the next start with compression on compresses it (a background worker: wait for it)
    with MockProvider([answer("Two.")]) as mp:
        env = codex_env(tmp_path, mp, extra_config="")
        cfg = codex_home / "config.toml"
        cfg.write_text(cfg.read_text().replace("[features]\n", "[features]\nlocal_thread_store_compression = true\n"))
        p2 = run_agent(codex_argv("second"), env, cwd, timeout=90)
    assert p2.returncode == 0, p2.stderr[-2000:]
    z = moved.with_name(moved.name + ".zst")
    for _ in range(50):
        if z.exists() and not moved.exists():
            break
        time.sleep(0.1)
    assert z.exists() and not moved.exists(), sorted(p.name for p in moved.parent.iterdir())

    doc = _ledger(home, "import", "codex", "--from", str(codex_home), "--json")
    (c,) = doc["clients"]
    assert c["skipped"] == [] and c["new_files"] == 2
    rows = {r["id"]: r for r in _ledger(home, "runs", "--all", "--json", "--source", "codex-log")}
    u = rows[f"codex-{thread}"]["usage"]
    cached = usage.get("cached_input_tokens", 0)
    assert (u["input_tokens"], u["cache_read_tokens"], u["output_tokens"]) == (
        usage["input_tokens"] - cached, cached, usage["output_tokens"])
    assert (usage["input_tokens"], cached, usage["output_tokens"]) == (120, 20, 7)  # what the mock served
