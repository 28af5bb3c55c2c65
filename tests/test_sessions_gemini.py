"""Imported Gemini CLI sessions written by the real client (0.61.0 from node_modules) against
tests/mockprovider.py's Gemini API on 127.0.0.1 (issue 16): each session's totals, per model,
equal the client's own `result.stats` (summed over the processes that wrote the session), and a
session launched with `ledger run` and then imported is counted once.

Skipped when the binary is missing, except under CI (CI=true), where that fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentenv import GEMINI_MODEL, agent_cwd, gemini_argv, gemini_available, gemini_env, parse_jsonl, run_agent
from launchkit import REPO
from mockprovider import MockProvider, answer, tool_call

pytestmark = pytest.mark.agents


@pytest.fixture(autouse=True)
def need_gemini():
    if gemini_available():
        return
    if os.environ.get("CI"):
        pytest.fail("gemini is required under CI: run `npm install` (node_modules/.bin/gemini)")
    pytest.skip("node_modules/.bin/gemini is not installed")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    h = tmp_path / "ledger-home"
    monkeypatch.setenv("LEDGER_HOME", str(h))
    monkeypatch.delenv("LEDGER_DB", raising=False)
    return h


def ledger(home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Any:
    full = {**os.environ, "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home), **(env or {})}
    p = subprocess.run([sys.executable, "-m", "ledger", *args], env=full, capture_output=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, (args, p.stdout[-2000:], p.stderr[-2000:])
    return json.loads(p.stdout) if "--json" in args else p


def result_of(stdout: str) -> tuple[str, dict[str, Any]]:
    events = parse_jsonl(stdout)
    (init,) = [e for e in events if e.get("type") == "init"]
    (res,) = [e for e in events if e.get("type") == "result"]
    return init["session_id"], res


def stats_by_model(res: dict[str, Any]) -> dict[str, tuple[int, int, int, int]]:
    """model -> (uncached input, cached, output incl. thoughts, thoughts) from `result.stats`:
    its input_tokens counts cached input, its output_tokens leaves thoughts out."""
    out = {}
    for m, s in res["stats"]["models"].items():
        thoughts = s["total_tokens"] - s["input_tokens"] - s["output_tokens"]
        out[m] = (s["input"], s["cached"], s["output_tokens"] + thoughts, thoughts)
    return out


def add(*parts: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for p in parts:
        for m, t in p.items():
            out[m] = tuple(a + b for a, b in zip(out.get(m, (0,) * len(t)), t))
    return out


def imported_by_model(home: Path) -> dict[str, dict[str, tuple[int, ...]]]:
    """session row id -> model -> the four figures, from the index's per-model usage."""
    rows = ledger(home, "sql", "--json",
                  "SELECT run_id, model, sum(input_tokens) AS i, sum(cache_read_tokens) AS c, "
                  "sum(output_tokens) AS o, sum(reasoning_tokens) AS r FROM usage_streams_v "
                  "WHERE run_id LIKE 'gemini-%' GROUP BY run_id, model")
    out: dict[str, dict[str, tuple[int, ...]]] = {}
    for r in rows:
        out.setdefault(r["run_id"], {})[r["model"]] = (r["i"], r["c"], r["o"], r["r"])
    return out


FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def at(env: dict[str, str], when: str) -> dict[str, str]:
    """`env` with the client's clock started at `when` (UTC, libfaketime): the client names a
    session's file after the minute it starts in, so the tests pin that minute."""
    if not FAKETIME_LIB.exists():
        if os.environ.get("CI"):
            pytest.fail("libfaketime is required under CI: apt-get install faketime")
        pytest.skip("libfaketime is not installed (apt-get install faketime)")
    return {**env, "LD_PRELOAD": str(FAKETIME_LIB), "FAKETIME": f"@{when}", "FAKETIME_NO_CACHE": "1", "TZ": "UTC"}


def session_files(env: dict[str, str]) -> list[str]:
    return sorted(p.name for p in (Path(env["HOME"]) / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"))


def three_processes(tmp_path: Path, resume_at: str, third_at: str):
    """A session (one tool call), its resume at `resume_at`, another session at `third_at`;
    the first process starts at 10:00:05. Returns (env, cwd, [(sid, result)] x3, files after
    the resume)."""
    cwd = agent_cwd(tmp_path)
    with MockProvider([tool_call("run_shell_command", {"command": "echo hi"}), answer("All done.")]) as mp:
        env = gemini_env(tmp_path, mp)
        p1 = run_agent(gemini_argv("run echo hi"), at(env, "2026-12-02 10:00:05"), cwd, timeout=120)
    assert p1.returncode == 0, p1.stderr[-2000:]
    sid1, r1 = result_of(p1.stdout)
    usage = {"promptTokenCount": 500, "cachedContentTokenCount": 200, "candidatesTokenCount": 9,
             "thoughtsTokenCount": 4}
    with MockProvider([answer("Second done.", usage=usage)]) as mp:
        p2 = run_agent(gemini_argv("again", resume=sid1), at(gemini_env(tmp_path, mp), resume_at), cwd, timeout=120)
    assert p2.returncode == 0, p2.stderr[-2000:]
    sid2, r2 = result_of(p2.stdout)
    assert sid2 == sid1, (p2.stdout[-2000:], p2.stderr[-2000:])  # the resume continues the session
    after_resume = session_files(env)
    with MockProvider([answer("Other.")]) as mp:
        p3 = run_agent(gemini_argv("another session", model="gemini-2.5-pro"), at(gemini_env(tmp_path, mp), third_at),
                       cwd, timeout=120)
    assert p3.returncode == 0, p3.stderr[-2000:]
    sid3, r3 = result_of(p3.stdout)
    assert sid3 != sid1
    return env, cwd, [(sid1, r1), (sid2, r2), (sid3, r3)], after_resume


def test_gemini_sessions_and_a_resume_equal_the_clients_stats(home, tmp_path):
    # all three in one minute: the client writes one file per session (see the next test)
    env, cwd, ((sid1, r1), (_, r2), (sid3, r3)), after_resume = three_processes(
        tmp_path, "2026-12-02 10:00:20", "2026-12-02 10:00:40")
    assert len(after_resume) == 1

    ledger(home, "import", "gemini", "--from", str(Path(env["HOME"]) / ".gemini"), "--json")
    got = imported_by_model(home)
    assert got == {f"gemini-{sid1}": add(stats_by_model(r1), stats_by_model(r2)),
                   f"gemini-{sid3}": stats_by_model(r3)}
    # by hand: calls 1-2 of the first process (301/10/41/2, 302/20/42/4), the resume's one call
    assert got[f"gemini-{sid1}"] == {GEMINI_MODEL: (291 + 282 + 300, 30 + 200, 43 + 46 + 13, 6 + 4)}
    rows = {r["id"]: r for r in ledger(home, "runs", "--all", "--json", "--source", "gemini-log")}
    assert set(rows) == {f"gemini-{sid1}", f"gemini-{sid3}"}
    row = rows[f"gemini-{sid1}"]
    assert row["harness"] == "gemini" and row["model"] == GEMINI_MODEL and row["source"] == "gemini-log"
    u = row["usage"]
    assert (u["input_tokens"], u["cache_read_tokens"], u["output_tokens"], u["reasoning_tokens"]) == (873, 230, 102, 10)
    assert u["cost_usd"] is None  # the log carries no cost: reports estimate it (genai-prices)
    rep = ledger(home, "report", "daily", "--tz", "UTC", "--json")
    assert rep["totals"]["runs"] == 2 and rep["totals"]["cost_basis"] == "estimated"
    assert rep["totals"]["cost_usd"] > 0
    tools = ledger(home, "sql", "--json", "SELECT run_id, tool_name, uses FROM tool_uses_v WHERE run_id LIKE 'gemini-%'")
    assert tools == [{"run_id": f"gemini-{sid1}", "tool_name": "run_shell_command", "uses": 1}]



def test_gemini_resume_in_a_later_minute_the_client_deletes_the_session_the_archive_keeps_it(home, tmp_path):
    """Gemini CLI 0.61, seen here (it made CI fail when a resume crossed a minute): a resume
    appends to the session's file but also starts a second file named after the new minute,
    holding only a header and the context message. The next process's session cleanup finds
    that file not resumable and deletes it together with every file of the same short id: the
    whole session is gone from ~/.gemini. The stray file counts nothing; what `ledger import`
    archived before the deletion stays counted, whole, after it."""
    cwd = agent_cwd(tmp_path)
    with MockProvider([tool_call("run_shell_command", {"command": "echo hi"}), answer("All done.")]) as mp:
        env = gemini_env(tmp_path, mp)
        p1 = run_agent(gemini_argv("run echo hi"), at(env, "2026-12-02 10:00:05"), cwd, timeout=120)
    assert p1.returncode == 0, p1.stderr[-2000:]
    sid1, r1 = result_of(p1.stdout)
    with MockProvider([answer("Second done.")]) as mp:
        p2 = run_agent(gemini_argv("again", resume=sid1), at(gemini_env(tmp_path, mp), "2026-12-02 10:02:05"), cwd,
                       timeout=120)
    assert p2.returncode == 0, p2.stderr[-2000:]
    _, r2 = result_of(p2.stdout)
    short = sid1[:8]
    assert session_files(env) == [f"session-2026-12-02T10-00-{short}.jsonl", f"session-2026-12-02T10-02-{short}.jsonl"]
    gemini_dir = str(Path(env["HOME"]) / ".gemini")
    ledger(home, "import", "gemini", "--from", gemini_dir, "--json")
    want1 = add(stats_by_model(r1), stats_by_model(r2))
    assert imported_by_model(home) == {f"gemini-{sid1}": want1}

    with MockProvider([answer("Other.")]) as mp:
        p3 = run_agent(gemini_argv("another session", model="gemini-2.5-pro"),
                       at(gemini_env(tmp_path, mp), "2026-12-02 10:03:05"), cwd, timeout=120)
    assert p3.returncode == 0, p3.stderr[-2000:]
    sid3, r3 = result_of(p3.stdout)
    assert session_files(env) == [f"session-2026-12-02T10-03-{sid3[:8]}.jsonl"]  # the client deleted sid1's files

    ledger(home, "import", "gemini", "--from", gemini_dir, "--json")
    assert imported_by_model(home) == {f"gemini-{sid1}": want1, f"gemini-{sid3}": stats_by_model(r3)}
    rep = ledger(home, "report", "daily", "--tz", "UTC", "--json")
    assert rep["totals"]["runs"] == 2

def test_gemini_run_recorded_and_imported_is_counted_once(home, tmp_path):
    cwd = agent_cwd(tmp_path)
    with MockProvider([tool_call("run_shell_command", {"command": "echo hi"}), answer("All done.")]) as mp:
        env = gemini_env(tmp_path, mp)
        doc = ledger(home, "run", "--json", "--", *gemini_argv("first"), env=env)
    rid, sid = doc["run_id"], doc["provider_session_id"]
    chats = list((Path(env["HOME"]) / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"))
    assert len(chats) == 1 and json.loads(chats[0].read_bytes().splitlines()[0])["sessionId"] == sid
    before = ledger(home, "report", "daily", "--tz", "UTC", "--json")
    ledger(home, "import", "gemini", "--from", str(Path(env["HOME"]) / ".gemini"), "--json")
    after = ledger(home, "report", "daily", "--tz", "UTC", "--json")
    assert after["totals"] == before["totals"] and after["totals"]["runs"] == 1
    assert ledger(home, "runs", "--all", "--json", "--source", "gemini-log") == []
    linked = ledger(home, "sql", "--json", "SELECT row_id, linked_run_id, counted_as FROM sessions_v")
    assert linked == [{"row_id": f"gemini-{sid}", "linked_run_id": rid, "counted_as": rid}]
    # and the recorded run equals what the import would have counted (the same tokens)
    snap = ledger(home, "runs", "--all", "--json")
    (run,) = [r for r in snap if r["id"] == rid]
    assert (run["usage"]["input_tokens"], run["usage"]["cache_read_tokens"], run["usage"]["output_tokens"]) == (
        291 + 282, 30, 43 + 46)
