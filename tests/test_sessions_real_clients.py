"""Imported sessions written by the real clients (Claude Code 2.1.328, Codex 0.169.0 from
node_modules) against tests/mockprovider.py on 127.0.0.1 (issue 15): a session and its resume
are one row whose totals equal the clients' own result totals; a run launched with `ledger
run` and the import of the same client home are counted once.
Skipped when the binaries are missing, except under CI (CI=true), where that fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentenv import (
    agent_cwd, claude_argv, claude_available, claude_env, codex_argv, codex_available, codex_env, parse_jsonl,
    run_agent,
)
from launchkit import REPO
from mockprovider import MockProvider, answer, tool_call

pytestmark = pytest.mark.agents


def _require(available: bool, name: str) -> None:
    if available:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{name} is required under CI: run `npm install` (node_modules/.bin/{name})")
    pytest.skip(f"node_modules/.bin/{name} is not installed")


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


def claude_result(stdout: str) -> dict[str, Any]:
    (res,) = [e for e in parse_jsonl(stdout) if e.get("type") == "result"]
    return res


def claude_tokens(res: dict[str, Any]) -> tuple[int, int, int, int]:
    """This process's tokens as the client reported them (input, output, cache read, cache write)."""
    per_model = res.get("model_usage_since_last_result") or res.get("modelUsage") or {}
    t = [0, 0, 0, 0]
    for u in per_model.values():
        t[0] += u["inputTokens"]
        t[1] += u["outputTokens"]
        t[2] += u["cacheReadInputTokens"]
        t[3] += u["cacheCreationInputTokens"]
    return tuple(t)  # type: ignore[return-value]


def usage_of(row: dict[str, Any]) -> tuple[int, int, int, int]:
    u = row["usage"]
    return (u["input_tokens"], u["output_tokens"], u["cache_read_tokens"], u["cache_write_tokens"])


def test_claude_session_and_its_resume_equal_the_clients_totals(home, tmp_path):
    _require(claude_available(), "claude")
    cwd = agent_cwd(tmp_path)
    with MockProvider([tool_call("Bash", {"command": "echo hi"}), answer("All done.")]) as mp:
        env = claude_env(tmp_path, mp)
        p1 = run_agent(claude_argv("first"), env, cwd)
    r1 = claude_result(p1.stdout)
    sid = r1["session_id"]
    usage = {"input_tokens": 7, "output_tokens": 11, "cache_read_input_tokens": 13, "cache_creation_input_tokens": 17}
    with MockProvider([answer("Second done.", usage=usage)]) as mp:
        p2 = run_agent(claude_argv("again", resume=sid), claude_env(tmp_path, mp), cwd)
    r2 = claude_result(p2.stdout)
    assert r2["session_id"] == sid
    config = Path(env["CLAUDE_CONFIG_DIR"])

    ledger(home, "import", "claude", "--from", str(config), "--json")
    (row,) = ledger(home, "runs", "--all", "--json", "--source", "claude-log")
    assert row["id"] == f"claude-{sid}" and row["harness"] == "claude"
    assert row["surface"] == "headless"  # `claude -p` (its transcript says entrypoint sdk-cli)
    first, second = claude_tokens(r1), claude_tokens(r2)
    assert second == (7, 11, 13, 17)
    assert usage_of(row) == tuple(a + b for a, b in zip(first, second))
    # the client's total_cost_usd after --resume covers the whole session: so does the session's
    assert row["usage"]["cost_usd"] == pytest.approx(r2["total_cost_usd"], rel=1e-12)
    rep = ledger(home, "report", "daily", "--tz", "UTC", "--json")
    assert rep["totals"]["runs"] == 1 and rep["totals"]["cost_basis"] == "reported"
    assert rep["totals"]["cost_usd"] == pytest.approx(r2["total_cost_usd"], abs=1e-10)

    # one more exchange later: the next reader archives it without a new `ledger import`
    with MockProvider([answer("Third.", usage=usage)]) as mp:
        p3 = run_agent(claude_argv("third", resume=sid), claude_env(tmp_path, mp), cwd)
    r3 = claude_result(p3.stdout)
    (row,) = ledger(home, "runs", "--all", "--json", "--source", "claude-log")
    assert usage_of(row) == tuple(a + b + c for a, b, c in zip(first, second, claude_tokens(r3)))
    assert row["usage"]["cost_usd"] == pytest.approx(r3["total_cost_usd"], rel=1e-12)


def test_claude_run_recorded_and_imported_is_counted_once(home, tmp_path):
    _require(claude_available(), "claude")
    cwd = agent_cwd(tmp_path)
    with MockProvider([tool_call("Bash", {"command": "echo hi"}), answer("All done.")]) as mp:
        env = claude_env(tmp_path, mp)
        doc = ledger(home, "run", "--json", "--", *claude_argv("first"), env=env)
    rid, sid = doc["run_id"], doc["provider_session_id"]
    before = ledger(home, "report", "daily", "--tz", "UTC", "--json")
    ledger(home, "import", "claude", "--from", env["CLAUDE_CONFIG_DIR"], "--json")
    after = ledger(home, "report", "daily", "--tz", "UTC", "--json")
    assert after["totals"] == before["totals"] and after["totals"]["runs"] == 1
    assert ledger(home, "runs", "--all", "--json", "--source", "claude-log") == []
    linked = ledger(home, "sql", "--json", "SELECT row_id, linked_run_id, counted_as FROM sessions_v")
    assert linked == [{"row_id": f"claude-{sid}", "linked_run_id": rid, "counted_as": rid}]


def codex_turns(stdout: str) -> tuple[int, int, int]:
    """(uncached input, cached input, output) over the process's turn.completed events."""
    t = [0, 0, 0]
    for e in parse_jsonl(stdout):
        if e.get("type") == "turn.completed":
            u = e["usage"]
            t[0] += u["input_tokens"] - u.get("cached_input_tokens", 0)
            t[1] += u.get("cached_input_tokens", 0)
            t[2] += u["output_tokens"]
    return tuple(t)  # type: ignore[return-value]


def test_codex_thread_and_its_resume_equal_the_clients_totals_and_count_once(home, tmp_path):
    _require(codex_available(), "codex")
    cwd = agent_cwd(tmp_path)
    with MockProvider([tool_call("exec_command", {"cmd": "echo hi"}), answer("All done.")]) as mp:
        env = codex_env(tmp_path, mp)
        p1 = run_agent(codex_argv("run echo hi"), env, cwd, timeout=90)
        served1 = mp.total_usage("openai")
    assert p1.returncode == 0, p1.stderr[-2000:]
    (thread,) = [e["thread_id"] for e in parse_jsonl(p1.stdout) if e.get("type") == "thread.started"]
    with MockProvider([answer("Second done.", usage={"input_tokens": 50, "cached_tokens": 20, "output_tokens": 9,
                                                    "reasoning_tokens": 4})]) as mp:
        p2 = run_agent(codex_argv("again", resume=thread), codex_env(tmp_path, mp), cwd, timeout=90)
        served2 = mp.total_usage("openai")
    assert p2.returncode == 0, p2.stderr[-2000:]
    # after a resume the client's turn.completed reports the thread's cumulative usage
    thread_total = codex_turns(p2.stdout)

    ledger(home, "import", "codex", "--from", env["CODEX_HOME"], "--json")
    (row,) = ledger(home, "runs", "--all", "--json", "--source", "codex-log")
    assert row["id"] == f"codex-{thread}" and row["surface"] == "headless"  # `codex exec`
    u = row["usage"]
    got = (u["input_tokens"], u["cache_read_tokens"], u["output_tokens"])
    assert got == thread_total
    served = [served1[k] + served2[k] for k in ("input_tokens", "input_tokens_details.cached_tokens", "output_tokens")]
    assert got == (served[0] - served[1], served[1], served[2])  # what the mock really served, once
    assert u["cost_usd"] is None  # rollouts carry no cost: reports estimate it
    rep = ledger(home, "report", "daily", "--tz", "UTC", "--json")
    assert rep["totals"]["cost_basis"] == "estimated" and rep["totals"]["cost_usd"] > 0

    # the same client launched through `ledger run`, then the client home imported again
    with MockProvider([answer("Third.")]) as mp:
        doc = ledger(home, "run", "--json", "--", *codex_argv("third"), env=codex_env(tmp_path, mp), timeout=120)
    before = ledger(home, "report", "daily", "--tz", "UTC", "--json")["totals"]
    ledger(home, "import", "codex", "--from", env["CODEX_HOME"], "--json")
    after = ledger(home, "report", "daily", "--tz", "UTC", "--json")["totals"]
    assert after == before and after["runs"] == 2
    linked = ledger(home, "sql", "--json", "SELECT row_id, linked_run_id FROM sessions_v ORDER BY row_id")
    assert {"row_id": f"codex-{doc['provider_session_id']}", "linked_run_id": doc["run_id"]} in linked
