"""Tool counts of Codex threads written by the real client (Codex 0.169.0 from node_modules,
against tests/mockprovider.py on 127.0.0.1, issue 15): an imported thread counts the tool calls
the client itself reported, with the results it reported (exit codes), and a thread run
through `ledger run` counts, in its rollout, what the run record counted. Skipped when the
binary is missing, except under CI (CI=true).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentenv import agent_cwd, codex_argv, codex_available, codex_env, parse_jsonl, run_agent
from launchkit import REPO
from ledger.sources.archiveformat import read_archive
from ledger.sources.codex_usage import CodexUsage
from mockprovider import MockProvider, answer, tool_call

pytestmark = pytest.mark.agents


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    if not codex_available():
        if os.environ.get("CI"):
            pytest.fail("codex is required under CI: run `npm install` (node_modules/.bin/codex)")
        pytest.skip("node_modules/.bin/codex is not installed")
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


def script() -> list[dict[str, Any]]:
    # two shell commands, the second one failing (a failed tool is still a call)
    return [tool_call("exec_command", {"cmd": "echo hi"}), tool_call("exec_command", {"cmd": "false"}),
            answer("All done.")]


def archived_thread(home: Path, thread: str) -> CodexUsage:
    """The reducer over the archived rollout of `thread` (what the index reads)."""
    (arch,) = [p for p in (home / "sources" / "codex").rglob(f"rollout-*{thread}.jsonl*")]
    r = CodexUsage()
    r.feed("rollout.jsonl", read_archive(arch), 0)
    return r


def test_real_codex_tool_calls_equal_the_clients_and_the_run_records(home, tmp_path):
    cwd = agent_cwd(tmp_path)
    # a thread the client ran on its own: imported, its tool calls are the client's own count
    with MockProvider(script()) as mp:
        env = codex_env(tmp_path, mp)
        p = run_agent(codex_argv("run echo hi, then false"), env, cwd, timeout=90)
    assert p.returncode == 0, p.stderr[-2000:]
    events = parse_jsonl(p.stdout)
    (thread,) = [e["thread_id"] for e in events if e.get("type") == "thread.started"]
    done = [e["item"] for e in events if e.get("type") == "item.completed"
            and e["item"].get("type") == "command_execution"]
    assert [i["exit_code"] for i in done] == [0, 1]
    ledger(home, "import", "codex", "--from", env["CODEX_HOME"], "--json")
    tools = ledger(home, "sql", "--json", "SELECT run_id, tool_name, uses, ok, errors, unknown FROM tool_uses_v "
                                          "WHERE run_id LIKE 'codex-%'")
    # the results the client wrote in the rollout (0.169: each command's item_completed) are the
    # exit codes it reported: one ok, one failed
    assert tools == [{"run_id": f"codex-{thread}", "tool_name": "exec_command", "uses": len(done),
                      "ok": 1, "errors": 1, "unknown": 0}]
    run = ledger(home, "sql", "--json", "SELECT tool_calls, tool_ok, tool_errors, tool_unknown FROM runs_v "
                                        "WHERE run_id LIKE 'codex-%'")
    assert run == [{"tool_calls": 2, "tool_ok": 1, "tool_errors": 1, "tool_unknown": 0}]
    assert archived_thread(home, thread).problems == []  # 0.169's own line types are known

    # the same script through `ledger run`, then the client home imported again: the thread is
    # the run's (counted once, no tool_uses of its own), and its rollout counts what the run did
    with MockProvider(script()) as mp:
        doc = ledger(home, "run", "--json", "--", *codex_argv("run echo hi, then false"),
                     env=codex_env(tmp_path, mp), timeout=120)
    ledger(home, "import", "codex", "--from", env["CODEX_HOME"], "--json")
    recorded = ledger(home, "sql", "--json",
                      f"SELECT tool_name, uses FROM tool_uses_v WHERE run_id = '{doc['run_id']}'")
    # `codex exec --json` names a shell command's item command_execution; the rollout names the
    # function the model called
    assert recorded == [{"tool_name": "command_execution", "uses": 2}]
    ran = doc["provider_session_id"]
    (session,) = [s for s in archived_thread(home, ran).sessions() if s.session_id == ran]
    assert session.tools == {"exec_command": 2}
    linked = ledger(home, "sql", "--json", f"SELECT row_id, linked_run_id FROM sessions_v WHERE row_id = 'codex-{ran}'")
    assert linked == [{"row_id": f"codex-{ran}", "linked_run_id": doc["run_id"]}]
    rows = ledger(home, "sql", "--json", "SELECT run_id, tool_name, uses FROM tool_uses_v ORDER BY run_id")
    assert sorted(r["run_id"] for r in rows) == sorted([f"codex-{thread}", doc["run_id"]])  # counted once
