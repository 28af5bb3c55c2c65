"""Verdicts on the real Claude Code 2.1.328 against tests/mockprovider.py (issue 14): a run
that invokes the expected skill is ok; one that does not is not ok (skill-not-invoked) and
exits 123 (the agent's own 0 with --no-fail); a failing Bash tool result is recorded as
`error`. The verdict is the same in `ledger run --json`, the record, `ledger runs --json`
and `ledger show --json` (index), and the SQL views.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from agentenv import agent_cwd, claude_argv, claude_available, claude_env
from launchkit import REPO, events
from ledger.launch.runner import EXIT_SKILL_NOT_INVOKED
from ledger.records import read_run
from mockprovider import MockProvider, answer, tool_call

pytestmark = pytest.mark.agents


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    h = tmp_path / "ledger-home"
    monkeypatch.setenv("LEDGER_HOME", str(h))
    return h


@pytest.fixture
def need_claude():
    if claude_available():
        return
    if os.environ.get("CI"):
        pytest.fail("claude is required under CI: run `npm install`")
    pytest.skip("node_modules/.bin/claude is not installed")


def _ledger(home: Path, *args: str, env: dict | None = None, cwd: Path | None = None):
    import subprocess

    full = dict(env if env is not None else os.environ)
    full["PYTHONPATH"] = str(REPO)
    full["LEDGER_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "ledger", *args], env=full, cwd=str(cwd) if cwd else None,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=120)


def _run(home: Path, env: dict, cwd: Path, argv: list[str], *opts: str):
    p = _ledger(home, "run", "--json", *opts, "--", *argv, env=env, cwd=cwd)
    return p, json.loads(p.stdout)


def _skill(tmp_path: Path, name: str) -> None:
    d = Path(claude_env(tmp_path, "http://127.0.0.1:9")["HOME"]) / ".claude" / "skills" / name
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text(f"---\nname: {name}\ndescription: Deploy the app.\n---\n\nDeploy it.\n")


def _indexed(home: Path, run_id: str) -> tuple[dict, dict]:
    """(`ledger runs --json --all` row, `ledger show --json`) of a run, through the index."""
    p = _ledger(home, "runs", "--json", "--all")
    assert p.returncode == 0, p.stderr
    row = {r["id"]: r for r in json.loads(p.stdout)}[run_id]
    s = _ledger(home, "show", run_id, "--json")
    assert s.returncode == 0, s.stderr
    return row, json.loads(s.stdout)


def test_expected_skill_invoked_is_ok(need_claude, home, tmp_path):
    _skill(tmp_path, "deploy")
    with MockProvider([tool_call("Skill", {"skill": "deploy"}), answer("Deployed.")]) as mp:
        p, doc = _run(home, claude_env(tmp_path, mp), agent_cwd(tmp_path),
                      claude_argv("deploy it", allowed_tools=("Bash", "Skill")), "--expect-skill", "deploy")
    assert p.returncode == 0 == doc["exit_code"], p.stderr
    assert (doc["ok"], doc["error_kind"], doc["error_detail"]) == (True, None, None)
    snap = read_run(doc["path"])
    assert (snap.ok, snap.error_kind, snap.skill_invoked) == (True, None, True)
    assert snap.tool_status == {"Skill": [1, 0, 0]}
    row, shown = _indexed(home, doc["run_id"])
    assert (row["ok"], row["error_kind"], row["skill_invoked"]) == (True, None, True)
    assert shown["tool_results"] == {"Skill": {"ok": 1, "error": 0, "semantic-error": 0, "unknown": 0}}


def test_expected_skill_not_invoked_is_not_ok_and_exits_123(need_claude, home, tmp_path):
    _skill(tmp_path, "deploy")
    with MockProvider([answer("Deployed without the skill.")]) as mp:
        p, doc = _run(home, claude_env(tmp_path, mp), agent_cwd(tmp_path), claude_argv("deploy it"),
                      "--expect-skill", "deploy")
    assert p.returncode == EXIT_SKILL_NOT_INVOKED == doc["exit_code"] == 123
    assert doc["outcome"] == "completed" and doc["skill_invoked"] is False
    assert (doc["ok"], doc["error_kind"]) == (False, "skill-not-invoked")
    assert doc["error_detail"] == "expected skill deploy was not invoked"
    snap = read_run(doc["path"])
    assert (snap.ok, snap.error_kind, snap.error_detail) == (False, "skill-not-invoked",
                                                              "expected skill deploy was not invoked")
    row, shown = _indexed(home, doc["run_id"])
    assert (row["ok"], row["error_kind"], row["error_detail"], row["skill_invoked"]) == (
        False, "skill-not-invoked", "expected skill deploy was not invoked", False)
    assert (shown["ok"], shown["error_kind"]) == (False, "skill-not-invoked")
    q = _ledger(home, "sql", "SELECT ok, error_kind FROM runs_v", "--json")
    assert q.returncode == 0, q.stderr
    assert json.loads(q.stdout) == [{"ok": False, "error_kind": "skill-not-invoked"}]
    # --no-fail: the agent's own exit code, the same verdict
    with MockProvider([answer("Deployed without the skill.")]) as mp:
        p2, doc2 = _run(home, claude_env(tmp_path, mp), agent_cwd(tmp_path), claude_argv("deploy it"),
                        "--expect-skill", "deploy", "--no-fail")
    assert p2.returncode == 0 == doc2["exit_code"]
    assert (doc2["ok"], doc2["error_kind"]) == (False, "skill-not-invoked")


def test_failing_bash_tool_result_is_error(need_claude, home, tmp_path):
    script = [tool_call("Bash", {"command": "echo fine"}), tool_call("Bash", {"command": "exit 3"}),
              answer("One of them failed.")]
    with MockProvider(script) as mp:
        p, doc = _run(home, claude_env(tmp_path, mp), agent_cwd(tmp_path), claude_argv("run two"))
    assert p.returncode == 0, p.stderr
    results = [e["event"] for e in events(doc["path"])
               if e["type"] == "conversation" and e["event"]["type"] == "tool_result"]
    assert [(r["name"], r["status"]) for r in results] == [("Bash", "ok"), ("Bash", "error")]
    # the status is the client's own: its tool_result for `exit 3` said is_error
    raw = [json.loads(line) for line in (Path(doc["path"]) / "streams" / "stdout.jsonl").read_bytes().splitlines()]
    blocks = [b for o in raw if o.get("type") == "user" for b in o["message"]["content"]
              if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert [b.get("is_error") is True for b in blocks] == [False, True]
    snap = read_run(doc["path"])
    assert snap.tool_uses == {"Bash": 2} and snap.tool_status == {"Bash": [1, 1, 0]}
    assert snap.ok is True  # a failing tool does not fail the run: the agent carried on
    row, shown = _indexed(home, doc["run_id"])
    assert shown["tool_results"] == {"Bash": {"ok": 1, "error": 1, "semantic-error": 0, "unknown": 0}}
    q = _ledger(home, "sql", "SELECT tool_name, uses, ok, errors, semantic_errors, unknown FROM tool_uses_v",
                "--json")
    assert json.loads(q.stdout) == [{"tool_name": "Bash", "uses": 2, "ok": 1, "errors": 1, "semantic_errors": 0,
                                     "unknown": 0}]
    q = _ledger(home, "sql", "SELECT tool_calls, tool_ok, tool_errors, tool_semantic_errors, tool_unknown "
                "FROM runs_v", "--json")
    assert json.loads(q.stdout) == [{"tool_calls": 2, "tool_ok": 1, "tool_errors": 1, "tool_semantic_errors": 0,
                                     "tool_unknown": 0}]


MCP_SERVER = REPO / "tests" / "mcp_error_server.py"
MCP_REPLIES = ['{"error": "no such repo"}', "error: index is stale", '{"result": 42}']


def mcp_argv(prompt: str) -> list[str]:
    """claude_argv with the stdio MCP server of tests/mcp_error_server.py as `errsrv`."""
    cfg = json.dumps({"mcpServers": {"errsrv": {"command": sys.executable, "args": [str(MCP_SERVER)]}}})
    return claude_argv(prompt, allowed_tools=("mcp__errsrv__lookup",),
                       extra_args=["--mcp-config", cfg, "--strict-mcp-config"])


def test_mcp_error_envelope_is_semantic_error(need_claude, home, tmp_path):
    """A real MCP server answering over a successful transport: an error envelope (a JSON
    object with a string `error`, or text starting `error:`) is semantic-error, the rest ok."""
    script = [tool_call("mcp__errsrv__lookup", {"reply": r}) for r in MCP_REPLIES] + [answer("Looked up.")]
    with MockProvider(script) as mp:
        p, doc = _run(home, claude_env(tmp_path, mp), agent_cwd(tmp_path), mcp_argv("look it up"))
    assert p.returncode == 0, p.stderr
    raw = [json.loads(line) for line in (Path(doc["path"]) / "streams" / "stdout.jsonl").read_bytes().splitlines()]
    blocks = [b for o in raw if o.get("type") == "user" for b in o["message"]["content"]
              if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert [b["content"][0]["text"] for b in blocks] == MCP_REPLIES  # through the real MCP transport
    assert not any(b.get("is_error") for b in blocks)
    results = [e["event"]["status"] for e in events(doc["path"])
               if e["type"] == "conversation" and e["event"]["type"] == "tool_result"]
    assert results == ["semantic-error", "semantic-error", "ok"]
    assert read_run(doc["path"]).tool_status == {"mcp__errsrv__lookup": [1, 0, 2]}
    _, shown = _indexed(home, doc["run_id"])
    assert shown["tool_results"] == {"mcp__errsrv__lookup": {"ok": 1, "error": 0, "semantic-error": 2, "unknown": 0}}
