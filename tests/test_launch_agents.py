"""`ledger run` on the real clients (Claude Code 2.1.328, Codex 0.169.0 from node_modules)
against tests/mockprovider.py on 127.0.0.1: the proof that the launcher works on real
streams. The run's tokens and cost, read back from the record (and through `ledger runs
--json --all`), must equal the client's own figures for that run exactly.

Skipped when the binaries are missing, except under CI (CI=true), where that fails.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from agentenv import (
    CLAUDE_MODEL, CODEX_MODEL, agent_cwd, claude_argv, claude_available, claude_env, codex_argv,
    codex_available, codex_env,
)
from launchkit import REPO, assert_stream_bound, home_bytes, result_event
from ledger.records import read_run
from mockprovider import MockProvider, all_errors, answer, slow, tool_call

pytestmark = pytest.mark.agents


def _require(available: bool, name: str) -> None:
    if available:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{name} is required under CI: run `npm install` (node_modules/.bin/{name})")
    pytest.skip(f"node_modules/.bin/{name} is not installed")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """The ledger home: apart from the agent's own HOME (agentenv uses tmp_path/home)."""
    h = tmp_path / "ledger-home"
    monkeypatch.setenv("LEDGER_HOME", str(h))
    return h


@pytest.fixture
def need_claude():
    _require(claude_available(), "claude")


@pytest.fixture
def need_codex():
    _require(codex_available(), "codex")


def ledger_run(home: Path, agent_env: dict, cwd: Path, argv: list[str], *opts: str, timeout: float = 90):
    """`ledger run --json OPTS -- ARGV` in a real process; returns (process, json doc)."""
    import subprocess

    env = dict(agent_env)
    env["PYTHONPATH"] = str(REPO)
    env["LEDGER_HOME"] = str(home)
    p = subprocess.run([sys.executable, "-m", "ledger", "run", "--json", *opts, "--", *argv], env=env,
                       cwd=str(cwd), stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        raise AssertionError(f"no JSON from ledger run (rc {p.returncode}): {p.stdout!r} {p.stderr[-2000:]!r}")
    return p, doc


def client_result(run_path: str) -> dict:
    """The client's own `result` line, from the raw stream kept in the record."""
    data = (Path(run_path) / "streams" / "stdout.jsonl").read_bytes()
    results = [json.loads(line) for line in data.splitlines() if b'"type":"result"' in line]
    assert len(results) == 1
    return results[0]


def client_figures(res: dict) -> tuple[tuple[int, int, int, int], float]:
    """This run's tokens and cost as the client reported them (per-run per-model figures)."""
    per_model = res.get("model_usage_since_last_result") or {}
    if per_model:
        t = [0, 0, 0, 0]
        cost = 0.0
        for u in per_model.values():
            t[0] += u["inputTokens"]
            t[1] += u["outputTokens"]
            t[2] += u["cacheReadInputTokens"]
            t[3] += u["cacheCreationInputTokens"]
            cost += u["costUSD"]
        return tuple(t), cost  # type: ignore[return-value]
    u = res["usage"]
    return (u["input_tokens"], u["output_tokens"], u["cache_read_input_tokens"],
            u["cache_creation_input_tokens"]), res["total_cost_usd"]


def recorded(snap) -> tuple[int, int, int, int]:
    u = snap.usage
    return (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens)


def check_against_client(home: Path, doc: dict, *, listed: bool = True):
    snap = read_run(doc["path"])
    res = client_result(doc["path"])
    tokens, cost = client_figures(res)
    assert recorded(snap) == tokens
    assert snap.usage.cost_usd == cost
    assert (doc["tokens"]["input_tokens"], doc["tokens"]["output_tokens"], doc["tokens"]["cache_read_tokens"],
            doc["tokens"]["cache_write_tokens"]) == tokens
    assert doc["cost_usd"] == cost and doc["cost_basis"] == "reported"
    assert_stream_bound(doc["path"])
    if listed:
        import subprocess

        p = subprocess.run([sys.executable, "-m", "ledger", "runs", "--json", "--all", "--home", str(home)],
                           capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
        assert p.returncode == 0, p.stderr
        row = {r["id"]: r for r in json.loads(p.stdout)}[doc["run_id"]]
        u = row["usage"]
        assert (u["input_tokens"], u["output_tokens"], u["cache_read_tokens"], u["cache_write_tokens"]) == tokens
        assert u["cost_usd"] == cost
        assert row["outcome"] == snap.outcome
    return snap, res


def test_claude_tool_call_then_answer(need_claude, home, tmp_path):
    with MockProvider([tool_call("Bash", {"command": "echo hi"}), answer("All done.")]) as mp:
        p, doc = ledger_run(home, claude_env(tmp_path, mp), agent_cwd(tmp_path),
                            claude_argv("run echo hi"), "--subject", "task:LOO-265")
    assert p.returncode == 0, p.stderr
    snap, res = check_against_client(home, doc)
    assert recorded(snap) == (203, 43, 3000, 150)  # = the mock's two calls (README)
    assert snap.usage.cost_usd == res["total_cost_usd"] == pytest.approx(0.0027165, rel=1e-12)
    assert doc["outcome"] == snap.outcome == "completed" and doc["evidence"] == "verified"
    assert snap.final_answer == "All done." == doc["final_answer"]
    assert snap.tool_uses == {"Bash": 1} and snap.model == CLAUDE_MODEL
    assert [s.selector for s in snap.subjects] == ["task:LOO-265"]
    assert snap.provider_session_id == res["session_id"]
    assert snap.usage.final_streams == 1 and snap.evidence_gaps == 0


def test_claude_prints_the_final_answer(need_claude, home, tmp_path):
    import subprocess

    with MockProvider([answer("The answer is 42.")]) as mp:
        env = {**claude_env(tmp_path, mp), "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home)}
        p = subprocess.run([sys.executable, "-m", "ledger", "run", "--", *claude_argv("what is it?")], env=env,
                           cwd=str(agent_cwd(tmp_path)), stdin=subprocess.DEVNULL, capture_output=True, timeout=90)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"The answer is 42.\n"


def test_claude_three_tool_rounds(need_claude, home, tmp_path):
    script = [tool_call("Bash", {"command": "echo 1"}, text="Step one."), tool_call("Bash", {"command": "echo 2"}),
              tool_call("Bash", {"command": "echo 3"}), answer("Three done.")]
    with MockProvider(script) as mp:
        p, doc = ledger_run(home, claude_env(tmp_path, mp), agent_cwd(tmp_path), claude_argv("three"))
    assert p.returncode == 0
    snap, _ = check_against_client(home, doc)
    assert recorded(snap) == (410, 90, 10000, 500)
    assert snap.tool_uses == {"Bash": 3} and snap.final_answer == "Three done."


def test_claude_max_turns_is_failed(need_claude, home, tmp_path):
    with MockProvider([tool_call("Bash", {"command": "echo hi"}), answer("never")]) as mp:
        p, doc = ledger_run(home, claude_env(tmp_path, mp), agent_cwd(tmp_path),
                            claude_argv("go", max_turns=1))
    assert p.returncode == doc["exit_code"] == 1
    snap, res = check_against_client(home, doc)
    assert res["subtype"] == "error_max_turns"
    assert snap.outcome == doc["outcome"] == "failed"
    assert recorded(snap) == (101, 21, 1000, 50)
    manifest = json.loads((Path(doc["path"]) / "manifest.json").read_text())
    assert manifest["launch"]["max_turns"] == 1 and manifest["launch"]["task_prompt"] == "go"


def test_claude_http_500_on_every_call_fails_after_retries(need_claude, home, tmp_path):
    with MockProvider(all_errors(500)) as mp:
        p, doc = ledger_run(home, claude_env(tmp_path, mp, max_retries=2), agent_cwd(tmp_path),
                            claude_argv("go"))
        assert len(mp.main_requests("anthropic")) == 3
    assert p.returncode == 1
    snap, res = check_against_client(home, doc)
    assert snap.outcome == "failed" and snap.api_retries == 2 == doc["api_retries"]
    assert recorded(snap) == (0, 0, 0, 0) and snap.usage.cost_usd == 0.0


def test_claude_slow_stream_killed_by_timeout(need_claude, home, tmp_path):
    with MockProvider([slow(60)]) as mp:
        p, doc = ledger_run(home, claude_env(tmp_path, mp), agent_cwd(tmp_path), claude_argv("go"),
                            "--timeout", "4")
    assert p.returncode == 124 == doc["exit_code"]
    snap = read_run(doc["path"])
    assert snap.outcome == doc["outcome"] == "interrupted" and snap.state == "settled"
    assert doc["stop_reason"] == "timeout" and doc["evidence"] == "unverifiable"
    assert snap.usage.final_streams == 0  # no result: nothing final
    assert_stream_bound(doc["path"])


def test_claude_resume_is_charged_only_its_own_part(need_claude, home, tmp_path):
    cwd = agent_cwd(tmp_path)
    with MockProvider([tool_call("Bash", {"command": "echo hi"}), answer("All done.")]) as mp:
        p1, d1 = ledger_run(home, claude_env(tmp_path, mp), cwd, claude_argv("first"))
    assert p1.returncode == 0
    sid = d1["provider_session_id"]
    usage = {"input_tokens": 7, "output_tokens": 11, "cache_read_input_tokens": 13, "cache_creation_input_tokens": 17}
    with MockProvider([answer("Second done.", usage=usage)]) as mp:
        p2, d2 = ledger_run(home, claude_env(tmp_path, mp), cwd, claude_argv("again", resume=sid))
    assert p2.returncode == 0, p2.stderr
    s2, res2 = check_against_client(home, d2)
    assert res2["session_id"] == sid
    assert recorded(s2) == (7, 11, 13, 17)
    # the client's total_cost_usd after --resume covers the whole session; we charge this run
    assert res2["total_cost_usd"] == pytest.approx(d1["cost_usd"] + s2.usage.cost_usd, rel=1e-12)
    assert s2.usage.cost_usd == pytest.approx(0.00025365, rel=1e-12)
    assert s2.final_answer == "Second done." and s2.evidence_gaps == 0


def test_claude_expect_skill(need_claude, home, tmp_path):
    skill_dir = Path(claude_env(tmp_path, "http://127.0.0.1:9")["HOME"]) / ".claude" / "skills" / "greet"
    skill_dir.mkdir(parents=True)
    (skill_dir / "SKILL.md").write_text("---\nname: greet\ndescription: Say hello politely.\n---\n\nSay hello.\n")
    with MockProvider([tool_call("Skill", {"skill": "greet"}), answer("Hello!")]) as mp:
        p, doc = ledger_run(home, claude_env(tmp_path, mp), agent_cwd(tmp_path),
                            claude_argv("greet me", allowed_tools=("Bash", "Skill")), "--expect-skill", "greet")
    assert p.returncode == 0
    assert doc["skill_invoked"] is True and read_run(doc["path"]).skill_invoked is True
    with MockProvider([answer("Hello without the skill.")]) as mp:
        _, doc2 = ledger_run(home, claude_env(tmp_path, mp), agent_cwd(tmp_path),
                             claude_argv("greet me"), "--expect-skill", "greet")
    assert doc2["skill_invoked"] is False and read_run(doc2["path"]).skill_invoked is False


def test_claude_canary_secret_is_in_no_file_of_the_home(need_claude, home, tmp_path):
    canary = "sk-ant-canary-9d8c7b6a5f4e3d2c1b0a"
    other = "canary-token-1a2b3c4d5e6f7a8b9c0d"
    script = [tool_call("Bash", {"command": "echo $ANTHROPIC_API_KEY $DEPLOY_TOKEN"}),
              answer(f"Your key is {canary} and the token {other}.")]
    with MockProvider(script) as mp:
        env = claude_env(tmp_path, mp, extra={"ANTHROPIC_API_KEY": canary, "DEPLOY_TOKEN": other})
        p, doc = ledger_run(home, env, agent_cwd(tmp_path), claude_argv(f"use {canary} and {other}"))
        # the client really used the canary key, and the agent really saw the secrets
        assert mp.main_requests("anthropic")[0]["headers"]["x-api-key"] == canary
    assert p.returncode == 0
    raw = (Path(doc["path"]) / "streams" / "stdout.jsonl").read_bytes()
    assert b"[REDACTED]" in raw
    files = home_bytes(home)
    assert any(path.name == "stdout.jsonl" for path, _ in files)
    for path, data in files:
        assert canary.encode() not in data, path
        assert other.encode() not in data, path
        # not even a part of them (the test's tmp path itself contains the word "canary")
        assert b"9d8c7b6a5f4e3d2c1b0a" not in data and b"1a2b3c4d5e6f7a8b9c0d" not in data, path


def _served(mp: MockProvider) -> dict[str, int]:
    return mp.total_usage("openai")


def test_codex_tool_call_and_exec_resume(need_codex, home, tmp_path):
    cwd = agent_cwd(tmp_path)
    with MockProvider([tool_call("exec_command", {"cmd": "echo hi"}), answer("All done.")]) as mp:
        p1, d1 = ledger_run(home, codex_env(tmp_path, mp), cwd, codex_argv("run echo hi"))
        served1 = _served(mp)
    assert p1.returncode == 0, p1.stderr
    s1 = read_run(d1["path"])
    assert s1.outcome == "completed" and s1.model == CODEX_MODEL and s1.final_answer == "All done."
    assert s1.usage.total_input_tokens == served1["input_tokens"] == 403
    assert s1.usage.cache_read_tokens == served1["input_tokens_details.cached_tokens"]
    assert s1.usage.input_tokens == served1["input_tokens"] - served1["input_tokens_details.cached_tokens"]
    assert s1.usage.output_tokens == served1["output_tokens"]
    assert s1.usage.reasoning_tokens == served1["output_tokens_details.reasoning_tokens"]
    assert s1.tool_uses == {"command_execution": 1}
    assert d1["cost_basis"] == "estimated" and d1["cost_usd"] > 0  # gpt-5.5 is priced by genai-prices
    assert s1.usage.cost_usd is None  # the record holds no made-up provider cost
    thread = d1["provider_session_id"]
    with MockProvider([answer("Second done.", usage={"input_tokens": 50, "cached_tokens": 20, "output_tokens": 9,
                                                    "reasoning_tokens": 4})]) as mp:
        p2, d2 = ledger_run(home, codex_env(tmp_path, mp), cwd, codex_argv("again", resume=thread))
        served2 = _served(mp)
    assert p2.returncode == 0, p2.stderr
    s2 = read_run(d2["path"])
    # the client reported the thread's cumulative total; the run records only its own delta
    assert s2.usage.total_input_tokens == served2["input_tokens"] == 50
    assert s2.usage.cache_read_tokens == served2["input_tokens_details.cached_tokens"] == 20
    assert s2.usage.output_tokens == served2["output_tokens"] == 9
    assert s2.usage.reasoning_tokens == 4 and s2.evidence_gaps == 0
    assert result_event(d2["path"])["provider_cumulative"]["input_tokens"] == 453
    assert s2.provider_session_id == thread and s2.final_answer == "Second done."


def test_codex_http_500_fails(need_codex, home, tmp_path):
    with MockProvider(all_errors(500)) as mp:
        p, doc = ledger_run(home, codex_env(tmp_path, mp), agent_cwd(tmp_path), codex_argv("go"))
    assert p.returncode == 1 and doc["outcome"] == "failed"
    assert read_run(doc["path"]).usage.streams == 0
