"""`ledger run` on the real Gemini CLI (0.61.0 from node_modules) against tests/mockprovider.py's
Gemini API on 127.0.0.1 (issue 16). The run's tokens, read back from the record and through
`ledger runs --json --all`, must equal the client's own `result.stats`, per model, and what the
mock served; the model comes from the stream.

Skipped when the binary is missing, except under CI (CI=true), where that fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentenv import (
    DUMMY_GEMINI_KEY, GEMINI_MODEL, agent_cwd, gemini_argv, gemini_available, gemini_env, scrub,
)
from launchkit import REPO, STREAMS, assert_stream_bound, home_bytes, result_event
from ledger.records import read_run
from mockprovider import MockProvider, all_errors, answer, slow, tool_call

pytestmark = pytest.mark.agents

#: Set to re-record tests/data/streams/gemini-*.jsonl from the real client.
RECORD = os.environ.get("LEDGER_RECORD_STREAMS") == "1"


@pytest.fixture(autouse=True)
def need_gemini():
    if gemini_available():
        return
    if os.environ.get("CI"):
        pytest.fail("gemini is required under CI: run `npm install` (node_modules/.bin/gemini)")
    pytest.skip("node_modules/.bin/gemini is not installed")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """The ledger home: apart from the agent's own HOME (agentenv uses tmp_path/home)."""
    h = tmp_path / "ledger-home"
    monkeypatch.setenv("LEDGER_HOME", str(h))
    return h


def ledger_run(home: Path, agent_env: dict, cwd: Path, argv: list[str], *opts: str, timeout: float = 90):
    """`ledger run --json OPTS -- ARGV` in a real process; returns (process, json doc)."""
    env = {**agent_env, "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home)}
    p = subprocess.run([sys.executable, "-m", "ledger", "run", "--json", *opts, "--", *argv], env=env,
                       cwd=str(cwd), stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        raise AssertionError(f"no JSON from ledger run (rc {p.returncode}): {p.stdout!r} {p.stderr[-2000:]!r}")
    return p, doc


def client_result(run_path: str) -> dict:
    """The client's own `result` line, from the raw stream kept in the record."""
    lines = (Path(run_path) / "streams" / "stdout.jsonl").read_bytes().splitlines()
    (res,) = [json.loads(line) for line in lines if b'"type":"result"' in line]
    return res


def per_model(snap) -> dict[str, tuple[int | None, ...]]:
    """model -> (uncached input, cache read, output incl. thoughts, thoughts) as recorded."""
    return {s.model: (s.counters.get("input_tokens"), s.counters.get("cache_read_tokens"),
                      s.counters.get("output_tokens"), s.counters.get("reasoning_tokens")) for s in snap.streams}


def stats_per_model(res: dict) -> dict[str, tuple[int, ...]]:
    """The same four figures from the client's `result.stats.models`: its `input_tokens` counts
    cached input and its `output_tokens` leaves thoughts out (total = input + output + thoughts)."""
    out = {}
    for m, s in res["stats"]["models"].items():
        thoughts = s["total_tokens"] - s["input_tokens"] - s["output_tokens"]
        out[m] = (s["input"], s["cached"], s["output_tokens"] + thoughts, thoughts)
    return out


def served(mp: MockProvider) -> tuple[int, int, int, int]:
    """What the mock served over the successful calls, in ledger's shape."""
    t = mp.total_usage("gemini")
    if not t:
        return (0, 0, 0, 0)
    return (t["promptTokenCount"] - t["cachedContentTokenCount"], t["cachedContentTokenCount"],
            t["candidatesTokenCount"] + t["thoughtsTokenCount"], t["thoughtsTokenCount"])


def check_against_client(home: Path, doc: dict) -> tuple:
    snap = read_run(doc["path"])
    res = client_result(doc["path"])
    assert per_model(snap) == stats_per_model(res)
    assert snap.provider_session_id == doc["provider_session_id"] == res_session(doc["path"])
    assert_stream_bound(doc["path"])
    p = subprocess.run([sys.executable, "-m", "ledger", "runs", "--json", "--all", "--home", str(home)],
                       capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert p.returncode == 0, p.stderr
    row = {r["id"]: r for r in json.loads(p.stdout)}[doc["run_id"]]
    u = row["usage"]
    assert (u["input_tokens"], u["cache_read_tokens"], u["output_tokens"], u["reasoning_tokens"]) == (
        snap.usage.input_tokens, snap.usage.cache_read_tokens, snap.usage.output_tokens, snap.usage.reasoning_tokens)
    assert row["outcome"] == snap.outcome and row["harness"] == "gemini"
    return snap, res


def res_init(run_path: str) -> str:
    lines = (Path(run_path) / "streams" / "stdout.jsonl").read_bytes().splitlines()
    (init,) = [line for line in lines if b'"type":"init"' in line]
    return init.decode()


def res_session(run_path: str) -> str:
    return json.loads(res_init(run_path))["session_id"]


def record_stream(name: str, run_path: str, tmp_path: Path) -> None:
    if RECORD:
        data = (Path(run_path) / "streams" / "stdout.jsonl").read_text()
        (STREAMS / name).write_text(scrub(data, tmp_path))


def test_gemini_text_answer(home, tmp_path):
    with MockProvider([answer("Hello there.")]) as mp:
        p, doc = ledger_run(home, gemini_env(tmp_path, mp), agent_cwd(tmp_path), gemini_argv("say hi"),
                            "--subject", "task:LOO-16")
        got = served(mp)
        assert len(mp.main_requests("gemini")) == 1
    assert p.returncode == 0, p.stderr[-2000:]
    snap, res = check_against_client(home, doc)
    # call 1 of the mock: prompt 301 (10 cached), candidates 41, thoughts 2
    assert per_model(snap) == {GEMINI_MODEL: (291, 10, 43, 2)} and got == (291, 10, 43, 2)
    assert res["stats"]["models"][GEMINI_MODEL]["total_tokens"] == 344
    assert doc["outcome"] == snap.outcome == "completed" and doc["evidence"] == "verified"
    assert snap.final_answer == "Hello there." == doc["final_answer"]
    assert snap.model == GEMINI_MODEL and snap.usage.final_streams == 1 and snap.evidence_gaps == 0
    assert [s.selector for s in snap.subjects] == ["task:LOO-16"]
    # no price in the stream: estimated from genai-prices, never stored as the provider's
    assert snap.usage.cost_usd is None
    assert doc["cost_basis"] == "estimated" and doc["cost_usd"] > 0
    record_stream("gemini-text.jsonl", doc["path"], tmp_path)


def test_gemini_model_comes_from_the_stream(home, tmp_path):
    """Without -m the client says model "auto" and routes: a side call to a small model picks
    the main one. The record has one stream per model the client reported, as it reported it."""
    route = json.dumps({"complexity_reasoning": "simple", "complexity_score": 10})
    scenario = {"gemini": [answer("Hi.")], "side": answer(route, usage={
        "promptTokenCount": 35, "cachedContentTokenCount": 5, "candidatesTokenCount": 15})}
    with MockProvider(scenario) as mp:
        p, doc = ledger_run(home, gemini_env(tmp_path, mp), agent_cwd(tmp_path), gemini_argv("hi", model=None))
        models = {r["path"].split("/models/")[1].split(":")[0]: r["kind"] for r in mp.requests}
    assert p.returncode == 0, p.stderr[-2000:]
    snap, res = check_against_client(home, doc)
    assert json.loads(res_init(doc["path"]))["model"] == "auto"
    assert sorted(models.values()) == ["main", "side"]
    main = [m for m, kind in models.items() if kind == "main"][0]
    side = [m for m, kind in models.items() if kind == "side"][0]
    assert per_model(snap) == {main: (291, 10, 43, 2), side: (30, 5, 15, 0)}
    assert snap.model == main  # no -m: the run's model is its streams' (the one with the most tokens)


def test_gemini_tool_calls_over_several_turns(home, tmp_path):
    script = [tool_call("run_shell_command", {"command": "echo one"}),
              tool_call("run_shell_command", {"command": "echo two"}, text="Step two."),
              tool_call("run_shell_command", {"command": "echo three"}), answer("Three done.")]
    with MockProvider(script) as mp:
        p, doc = ledger_run(home, gemini_env(tmp_path, mp), agent_cwd(tmp_path), gemini_argv("run three commands"))
        got = served(mp)
        reqs = mp.main_requests("gemini")
    assert p.returncode == 0, p.stderr[-2000:]
    assert len(reqs) == 4
    # the tool really ran: its output went back to the model in the next request
    assert "one" in json.dumps(reqs[1]["body"]["contents"][-1])
    snap, res = check_against_client(home, doc)
    # calls 1-4: prompt 301..304 (cached 10..40), candidates 41..44, thoughts 2..8
    assert per_model(snap)[GEMINI_MODEL] == got == (1210 - 100, 100, 170 + 20, 20)
    assert res["stats"]["tool_calls"] == 3 == result_event(doc["path"])["provider_tool_calls"]
    assert snap.tool_uses == {"run_shell_command": 3}
    assert snap.final_answer == "Three done." and snap.outcome == "completed"
    record_stream("gemini-three-tools.jsonl", doc["path"], tmp_path)


def test_gemini_api_error_on_every_call_fails(home, tmp_path):
    with MockProvider(all_errors(500)) as mp:
        p, doc = ledger_run(home, gemini_env(tmp_path, mp, max_attempts=2), agent_cwd(tmp_path), gemini_argv("go"))
        statuses = [r["status"] for r in mp.main_requests("gemini")]
    assert statuses == [500, 500]  # general.maxAttempts 2: one retry
    assert p.returncode == doc["exit_code"] != 0
    snap, res = check_against_client(home, doc)
    assert res["status"] == "error" and "500" in res["error"]["message"]
    assert snap.outcome == doc["outcome"] == "failed" and snap.final_answer is None
    assert per_model(snap) == {GEMINI_MODEL: (0, 0, 0, 0)}
    record_stream("gemini-all-500.jsonl", doc["path"], tmp_path)


def test_gemini_slow_stream_killed_by_timeout(home, tmp_path):
    with MockProvider([slow(60)]) as mp:
        p, doc = ledger_run(home, gemini_env(tmp_path, mp), agent_cwd(tmp_path), gemini_argv("go"),
                            "--timeout", "6")
    assert p.returncode == 124 == doc["exit_code"]
    snap = read_run(doc["path"])
    assert snap.outcome == doc["outcome"] == "interrupted" and snap.state == "settled"
    assert doc["stop_reason"] == "timeout" and doc["evidence"] == "unverifiable"
    assert snap.usage.final_streams == 0  # no result: nothing final
    assert snap.provider_session_id == res_session(doc["path"])  # from init, before the stall
    assert_stream_bound(doc["path"])


CANARY = "AIzaSy-canary-7e6d5c4b3a2f1e0d9c8b"
OTHER = "canary-token-2b3c4d5e6f7a8b9c0d1e"


def _canary_run(home: Path, tmp_path: Path, chunks: int) -> dict:
    script = [tool_call("run_shell_command", {"command": "echo $GEMINI_API_KEY $DEPLOY_TOKEN"}),
              answer(f"Your key is {CANARY} and the token {OTHER}.", chunks=chunks)]
    with MockProvider(script) as mp:
        env = gemini_env(tmp_path, mp, extra={"GEMINI_API_KEY": CANARY, "DEPLOY_TOKEN": OTHER})
        p, doc = ledger_run(home, env, agent_cwd(tmp_path), gemini_argv(f"use {CANARY} and {OTHER}"))
        reqs = mp.main_requests("gemini")
        # the client really used the canary key, and the agent really saw the secrets
        assert reqs[0]["headers"]["x-goog-api-key"] == CANARY != DUMMY_GEMINI_KEY
        assert CANARY in json.dumps(reqs[1]["body"]) and OTHER in json.dumps(reqs[1]["body"])
    assert p.returncode == 0, p.stderr[-2000:]
    return doc


def _assert_no_canary(home: Path, doc: dict) -> None:
    raw = (Path(doc["path"]) / "streams" / "stdout.jsonl").read_bytes()
    assert b"[REDACTED]" in raw
    files = home_bytes(home)
    assert any(path.name == "stdout.jsonl" for path, _ in files)
    for path, data in files:
        assert CANARY.encode() not in data, path
        assert OTHER.encode() not in data, path
        # not even a part of them (the test's tmp path itself contains the word "canary")
        assert b"7e6d5c4b3a2f1e0d9c8b" not in data and b"2b3c4d5e6f7a8b9c0d1e" not in data, path


def test_gemini_canary_secret_is_in_no_file_of_the_home(home, tmp_path):
    """Secrets in the env, the prompt, a tool's output and an answer sent in one chunk."""
    doc = _canary_run(home, tmp_path, chunks=1)
    _assert_no_canary(home, doc)
    assert read_run(doc["path"]).final_answer == "Your key is [REDACTED] and the token [REDACTED]."


def test_gemini_canary_split_across_deltas_is_in_no_file_of_the_home(home, tmp_path):
    doc = _canary_run(home, tmp_path, chunks=3)
    # the joined answer (events, final answer) is redacted, and so is each raw delta line's piece
    assert read_run(doc["path"]).final_answer == "Your key is [REDACTED] and the token [REDACTED]."
    _assert_no_canary(home, doc)


def test_gemini_talks_only_to_the_mock(tmp_path):
    """Every request the client made reached the mock, on the Gemini API route only."""
    with MockProvider([tool_call("run_shell_command", {"command": "echo hi"}), answer("ok")]) as mp:
        env = gemini_env(tmp_path, mp)
        from agentenv import run_agent

        p = run_agent(gemini_argv("hi"), env, agent_cwd(tmp_path))
        reqs = list(mp.requests)
    assert p.returncode == 0, p.stderr[-2000:]
    assert [(r["method"], r["path"], r["kind"]) for r in reqs] == [
        ("POST", f"/v1beta/models/{GEMINI_MODEL}:streamGenerateContent?alt=sse", "main")] * 2
