"""The mock provider, and the real claude / codex CLIs run against it.

Tests marked ``agents`` launch the real binaries from node_modules/.bin
(skipped when they are missing).  With LEDGER_RECORD_STREAMS=1 they also
save the clients' stdout (temp paths scrubbed) to tests/data/streams/;
``python3 scripts/record_streams.py`` does that.

The unmarked tests check the mock server itself over HTTP, and check the
saved streams against the totals documented in tests/data/streams/README.md.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from agentenv import (  # noqa: E402
    CLAUDE_MODEL,
    CODEX_MODEL,
    agent_cwd,
    claude_argv,
    claude_available,
    claude_cost,
    claude_env,
    codex_argv,
    codex_available,
    codex_env,
    kill_agent,
    parse_jsonl,
    run_agent,
    scrub,
    start_agent,
)
from mockprovider import (  # noqa: E402
    MockProvider,
    all_errors,
    answer,
    error,
    slow,
    tool_call,
)

STREAMS = Path(__file__).resolve().parent / "data" / "streams"
RECORD = os.environ.get("LEDGER_RECORD_STREAMS") == "1"
ANTHROPIC_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens",
                  "cache_creation_input_tokens")

needs_claude = pytest.mark.skipif(not claude_available(),
                                  reason="node_modules/.bin/claude missing")
needs_codex = pytest.mark.skipif(not codex_available(),
                                 reason="node_modules/.bin/codex missing")


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def save(name: str, stdout: str, tmp_path: Path) -> None:
    if RECORD:
        STREAMS.mkdir(parents=True, exist_ok=True)
        (STREAMS / f"{name}.jsonl").write_text(scrub(stdout, tmp_path))


def anthropic_sum(usages: list[dict]) -> dict:
    return {k: sum(u[k] for u in usages) for k in ANTHROPIC_KEYS}


def codex_expected(usages: list[dict]) -> dict:
    """turn.completed.usage that Codex 0.169 reports for these responses."""
    return {
        "input_tokens": sum(u["input_tokens"] for u in usages),
        "cached_input_tokens": sum(
            u["input_tokens_details"]["cached_tokens"] for u in usages),
        "cache_write_input_tokens": sum(
            u["input_tokens_details"].get("cache_write_tokens", 0)
            for u in usages),
        "output_tokens": sum(u["output_tokens"] for u in usages),
        "reasoning_output_tokens": sum(
            u["output_tokens_details"]["reasoning_tokens"] for u in usages),
    }


def only(events: list[dict], type_: str, subtype: str | None = None
         ) -> list[dict]:
    return [e for e in events if e.get("type") == type_
            and (subtype is None or e.get("subtype") == subtype)]


def claude_result(events: list[dict]) -> dict:
    results = only(events, "result")
    assert len(results) == 1, events[-3:]
    return results[0]


def assert_claude_usage(result: dict, expected: dict) -> None:
    assert {k: result["usage"][k] for k in ANTHROPIC_KEYS} == expected
    assert result["total_cost_usd"] == pytest.approx(claude_cost(expected),
                                                     rel=1e-9)


def group_alive(pgid: int) -> bool:
    """Whether any process of process group ``pgid`` is still running."""
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        # a zombie still counts for killpg; give the reaper a moment
        if not _group_has_live_members(pgid):
            return False
        time.sleep(0.05)
    return True


def _group_has_live_members(pgid: int) -> bool:
    proc = Path("/proc")
    if not proc.exists():
        return True
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # fields[0] = state, fields[2] = pgrp
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _post(url: str, body: dict, timeout: float = 10):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=timeout)


def _sse(resp) -> list[tuple[str, dict]]:
    events, name = [], None
    for raw in resp:
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[6:])))
    return events


# --------------------------------------------------------------------------
# the mock alone
# --------------------------------------------------------------------------


def test_anthropic_stream_tool_then_answer():
    usage = {"input_tokens": 5, "output_tokens": 7,
             "cache_read_input_tokens": 11, "cache_creation_input_tokens": 13}
    with MockProvider([tool_call("Bash", {"command": "echo hi"}, usage=usage),
                       answer("done")]) as mp:
        body = {"model": "m", "stream": True, "messages": [],
                "tools": [{"name": "Bash"}]}
        ev = _sse(_post(mp.base_url + "/v1/messages?beta=true", body))
        names = [n for n, _ in ev]
        assert names[0] == "message_start" and names[-1] == "message_stop"
        assert ev[0][1]["message"]["usage"]["input_tokens"] == 5
        assert ev[0][1]["message"]["usage"]["output_tokens"] == 1
        start = [d for n, d in ev if n == "content_block_start"][0]
        assert start["content_block"]["type"] == "tool_use"
        js = "".join(d["delta"]["partial_json"] for n, d in ev
                     if n == "content_block_delta")
        assert json.loads(js) == {"command": "echo hi"}
        delta = [d for n, d in ev if n == "message_delta"][0]
        assert delta["delta"]["stop_reason"] == "tool_use"
        assert delta["usage"] == {"output_tokens": 7}

        ev = _sse(_post(mp.base_url + "/v1/messages", body))
        text = "".join(d["delta"]["text"] for n, d in ev
                       if n == "content_block_delta")
        assert text == "done"
        assert ev[0][1]["message"]["usage"]["input_tokens"] == 102  # call 2
        # side call (no tools, not streamed) does not consume the script
        r = json.load(_post(mp.base_url + "/v1/messages",
                            {"model": "haiku", "messages": []}))
        assert r["content"][0]["type"] == "text"
        assert r["usage"]["input_tokens"] == 7
        r = json.load(_post(mp.base_url + "/v1/messages/count_tokens",
                            {"model": "m", "messages": []}))
        assert r["input_tokens"] > 0
    assert [r["kind"] for r in mp.requests] == ["main", "main", "side",
                                                "count_tokens"]
    assert mp.total_usage("anthropic")["input_tokens"] == 5 + 102


def test_openai_stream_function_call_then_answer():
    with MockProvider([tool_call("exec_command", {"cmd": "echo hi"}),
                       answer("done", usage={"input_tokens": 9,
                                             "cached_tokens": 4,
                                             "cache_write_tokens": 2,
                                             "output_tokens": 3,
                                             "reasoning_tokens": 1})]) as mp:
        ev = _sse(_post(mp.base_url + "/v1/responses",
                        {"model": "m", "stream": True, "input": []}))
        assert ev[0][0] == "response.created"
        assert ev[-1][0] == "response.completed"
        done = [d for n, d in ev if n == "response.output_item.done"]
        assert done[0]["item"]["type"] == "function_call"
        assert json.loads(done[0]["item"]["arguments"]) == {"cmd": "echo hi"}
        assert ev[-1][1]["response"]["usage"] == {
            "input_tokens": 201,
            "input_tokens_details": {"cached_tokens": 101},
            "output_tokens": 31,
            "output_tokens_details": {"reasoning_tokens": 1},
            "total_tokens": 232}
        seqs = [d["sequence_number"] for _, d in ev]
        assert seqs == list(range(len(ev)))
        ev = _sse(_post(mp.base_url + "/v1/responses",
                        {"model": "m", "stream": True, "input": []}))
        u = ev[-1][1]["response"]["usage"]
        assert u["input_tokens_details"] == {"cached_tokens": 4,
                                             "cache_write_tokens": 2}
        assert u["total_tokens"] == 12
        text = "".join(d["delta"] for n, d in ev
                       if n == "response.output_text.delta")
        assert text == "done"


def test_errors_probes_and_exhausted_script():
    with MockProvider({"anthropic": [error(503)], "openai": [error(429)]}
                      ) as mp:
        body = {"model": "m", "stream": True, "tools": [{"name": "x"}]}
        with pytest.raises(urllib.error.HTTPError) as ei:
            _post(mp.base_url + "/v1/messages", body)
        assert ei.value.code == 503
        assert json.load(ei.value)["error"]["type"] == "api_error"
        with pytest.raises(urllib.error.HTTPError) as ei:
            _post(mp.base_url + "/v1/responses", {"stream": True})
        assert ei.value.code == 429
        # script exhausted: the default "after" step answers
        ev = _sse(_post(mp.base_url + "/v1/messages", body))
        assert ev[-1][0] == "message_stop"
        # probes
        r = urllib.request.urlopen(urllib.request.Request(
            mp.base_url + "/api/hello", method="HEAD"), timeout=5)
        assert r.status == 200
        models = json.load(urllib.request.urlopen(mp.base_url + "/v1/models",
                                                  timeout=5))
        assert models["data"]
    assert mp.served_usage("anthropic") == [mp.served["anthropic"][1][1]]


def test_all_errors_errors_side_calls_too():
    with MockProvider(all_errors(500)) as mp:
        for body in ({"tools": [{"name": "x"}], "stream": True}, {}):
            with pytest.raises(urllib.error.HTTPError) as ei:
                _post(mp.base_url + "/v1/messages", body)
            assert ei.value.code == 500


def test_slow_stream_stalls_and_stops_with_server():
    mp = MockProvider([slow(60)]).start()
    got: list = []

    def client():
        try:
            resp = _post(mp.base_url + "/v1/messages",
                         {"stream": True, "tools": [{"name": "x"}]},
                         timeout=30)
            for raw in resp:
                got.append(raw)
        except Exception as exc:  # connection closed by stop()
            got.append(exc)

    t = threading.Thread(target=client, daemon=True)
    t.start()
    deadline = time.monotonic() + 5
    while not any(b"text_delta" in g for g in got if isinstance(g, bytes)):
        assert time.monotonic() < deadline, got
        time.sleep(0.05)
    assert not any(b"message_stop" in g for g in got
                   if isinstance(g, bytes))
    t0 = time.monotonic()
    mp.stop()
    t.join(timeout=5)
    assert not t.is_alive()
    assert time.monotonic() - t0 < 5
    assert not any(b"message_stop" in g for g in got
                   if isinstance(g, bytes))


# --------------------------------------------------------------------------
# real Claude Code
# --------------------------------------------------------------------------


@pytest.mark.agents
@needs_claude
def test_claude_with_a_dated_served_model(tmp_path):
    """The API answers with a dated model id (`claude-sonnet-4-5-20250929`) for the alias the
    client asked for: the client's messages name the dated id, its result's `modelUsage` the
    alias (issue 26: one model, two spellings)."""
    with MockProvider([tool_call("Bash", {"command": "echo hi"}), answer("All done.")],
                      serve_model={"claude-sonnet-4-5": "claude-sonnet-4-5-20250929"}) as mp:
        p = run_agent(claude_argv("Run echo hi, then say done."),
                      claude_env(tmp_path, mp), agent_cwd(tmp_path))
    save("claude-dated-model", p.stdout, tmp_path)
    assert p.returncode == 0, p.stderr
    ev = parse_jsonl(p.stdout)
    assert {e["message"]["model"] for e in only(ev, "assistant")} == {"claude-sonnet-4-5-20250929"}
    assert list(only(ev, "result")[0]["modelUsage"]) == ["claude-sonnet-4-5"]


@pytest.mark.agents
@needs_claude
def test_claude_tool_then_answer(tmp_path):
    with MockProvider([tool_call("Bash", {"command": "echo hi"}),
                       answer("All done.")]) as mp:
        p = run_agent(claude_argv("Run echo hi, then say done."),
                      claude_env(tmp_path, mp), agent_cwd(tmp_path))
    save("claude-tool-then-answer", p.stdout, tmp_path)
    assert p.returncode == 0, p.stderr
    ev = parse_jsonl(p.stdout)
    assert ev[0]["type"] == "system" and ev[0]["subtype"] == "init"
    tool_results = [c for e in only(ev, "user")
                    for c in e["message"]["content"]
                    if c.get("type") == "tool_result"]
    assert tool_results and tool_results[0]["content"] == "hi"
    res = claude_result(ev)
    assert res["subtype"] == "success" and res["is_error"] is False
    assert res["result"] == "All done." and res["num_turns"] == 2
    served = mp.served_usage("anthropic")
    assert len(served) == 2 and not mp.side_requests()
    expected = anthropic_sum(served)
    assert expected == {"input_tokens": 203, "output_tokens": 43,
                        "cache_read_input_tokens": 3000,
                        "cache_creation_input_tokens": 150}
    assert_claude_usage(res, expected)
    assert res["total_cost_usd"] == pytest.approx(0.0027165)
    mu = res["modelUsage"][CLAUDE_MODEL]
    assert (mu["inputTokens"], mu["outputTokens"], mu["cacheReadInputTokens"],
            mu["cacheCreationInputTokens"]) == (203, 43, 3000, 150)
    assert res["model_usage_since_last_result"] == res["modelUsage"]
    # assistant lines repeat message_start usage (output_tokens 1)
    assert [e["message"]["usage"]["output_tokens"]
            for e in only(ev, "assistant")] == [1, 1]


@pytest.mark.agents
@needs_claude
def test_claude_three_tool_rounds(tmp_path):
    script = [tool_call("Bash", {"command": "echo one"}, text="Step one."),
              tool_call("Bash", {"command": "echo two"}),
              tool_call("Bash", {"command": "echo three"}),
              answer("Three done.")]
    with MockProvider(script) as mp:
        p = run_agent(claude_argv("Run three commands."),
                      claude_env(tmp_path, mp), agent_cwd(tmp_path))
    save("claude-three-tools", p.stdout, tmp_path)
    assert p.returncode == 0, p.stderr
    ev = parse_jsonl(p.stdout)
    outs = [c["content"] for e in only(ev, "user")
            for c in e["message"]["content"] if c.get("type") == "tool_result"]
    assert outs == ["one", "two", "three"]
    assistants = only(ev, "assistant")
    # one line per content block: the first response (text + tool_use) gives
    # two lines with the same message id and the same usage
    assert len(assistants) == 5
    assert assistants[0]["message"]["id"] == assistants[1]["message"]["id"]
    assert assistants[0]["message"]["usage"] == assistants[1]["message"]["usage"]
    res = claude_result(ev)
    assert res["num_turns"] == 4
    assert len(mp.main_requests("anthropic")) == 4
    assert_claude_usage(res, anthropic_sum(mp.served_usage("anthropic")))


@pytest.mark.agents
@needs_claude
def test_claude_max_turns(tmp_path):
    with MockProvider([tool_call("Bash", {"command": "echo hi"}),
                       answer("never sent")]) as mp:
        p = run_agent(claude_argv("Run echo hi.", max_turns=1),
                      claude_env(tmp_path, mp), agent_cwd(tmp_path))
    save("claude-max-turns", p.stdout, tmp_path)
    assert p.returncode == 1
    res = claude_result(parse_jsonl(p.stdout))
    assert res["subtype"] == "error_max_turns" and res["is_error"] is True
    assert res["terminal_reason"] == "max_turns"
    # the tool ran, but no second request was made
    assert len(mp.main_requests("anthropic")) == 1
    assert_claude_usage(res, anthropic_sum(mp.served_usage("anthropic")))


@pytest.mark.agents
@needs_claude
def test_claude_all_500(tmp_path):
    t0 = time.monotonic()
    with MockProvider(all_errors(500)) as mp:
        p = run_agent(claude_argv("Run echo hi."),
                      claude_env(tmp_path, mp, max_retries=2),
                      agent_cwd(tmp_path), timeout=30)
    elapsed = time.monotonic() - t0
    save("claude-all-500", p.stdout, tmp_path)
    assert elapsed < 30
    assert p.returncode != 0
    ev = parse_jsonl(p.stdout)
    retries = only(ev, "system", "api_retry")
    assert [r["attempt"] for r in retries] == [1, 2]
    assert all(r["error_status"] == 500 for r in retries)
    assert len(mp.main_requests("anthropic")) == 3   # 1 + 2 retries
    res = claude_result(ev)
    assert res["is_error"] is True and res["api_error_status"] == 500
    assert res["total_cost_usd"] == 0 and res["modelUsage"] == {}
    assert {k: res["usage"][k] for k in ANTHROPIC_KEYS} == dict.fromkeys(
        ANTHROPIC_KEYS, 0)


@pytest.mark.agents
@needs_claude
def test_claude_slow_stream_can_be_killed(tmp_path):
    with MockProvider([slow(120)]) as mp:
        proc = start_agent(claude_argv("Say something."),
                           claude_env(tmp_path, mp), agent_cwd(tmp_path))
        try:
            deadline = time.monotonic() + 15
            while not mp.main_requests("anthropic"):
                assert proc.poll() is None, proc.stderr.read()
                assert time.monotonic() < deadline
                time.sleep(0.05)
            time.sleep(0.5)
            assert proc.poll() is None      # still waiting on the stream
        finally:
            t0 = time.monotonic()
            rc = kill_agent(proc, grace=5)
            killed_in = time.monotonic() - t0
            out = proc.stdout.read()
            proc.stdout.close()
            proc.stderr.close()
    assert rc != 0 and killed_in < 10
    assert not group_alive(proc.pid)
    assert not [e for e in parse_jsonl(out) if e.get("type") == "result"]


@pytest.mark.agents
@needs_claude
def test_claude_resume(tmp_path):
    with MockProvider([tool_call("Bash", {"command": "echo hi"}),
                       answer("First done.")]) as mp1:
        p1 = run_agent(claude_argv("Run echo hi."),
                       claude_env(tmp_path, mp1), agent_cwd(tmp_path))
    save("claude-resume-first", p1.stdout, tmp_path)
    assert p1.returncode == 0, p1.stderr
    r1 = claude_result(parse_jsonl(p1.stdout))
    first = anthropic_sum(mp1.served_usage("anthropic"))
    assert_claude_usage(r1, first)
    sid = r1["session_id"]

    second_usage = {"input_tokens": 7, "output_tokens": 11,
                    "cache_read_input_tokens": 13,
                    "cache_creation_input_tokens": 17}
    with MockProvider([answer("Second done.", usage=second_usage)]) as mp2:
        p2 = run_agent(claude_argv("Say more.", resume=sid),
                       claude_env(tmp_path, mp2), agent_cwd(tmp_path))
    save("claude-resume-second", p2.stdout, tmp_path)
    assert p2.returncode == 0, p2.stderr
    ev2 = parse_jsonl(p2.stdout)
    r2 = claude_result(ev2)
    assert r2["session_id"] == sid and ev2[0]["session_id"] == sid
    # the resumed request carries the earlier conversation
    msgs = mp2.main_requests("anthropic")[0]["body"]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user",
                                         "assistant", "user"]
    # result.usage: this invocation only
    assert {k: r2["usage"][k] for k in ANTHROPIC_KEYS} == second_usage
    since = r2["model_usage_since_last_result"][CLAUDE_MODEL]
    assert (since["inputTokens"], since["outputTokens"]) == (7, 11)
    assert since["costUSD"] == pytest.approx(claude_cost(second_usage))
    # total_cost_usd and modelUsage: cumulative over the whole session
    both = {k: first[k] + second_usage[k] for k in ANTHROPIC_KEYS}
    assert r2["total_cost_usd"] == pytest.approx(claude_cost(both))
    mu = r2["modelUsage"][CLAUDE_MODEL]
    assert (mu["inputTokens"], mu["outputTokens"], mu["cacheReadInputTokens"],
            mu["cacheCreationInputTokens"]) == (
        both["input_tokens"], both["output_tokens"],
        both["cache_read_input_tokens"], both["cache_creation_input_tokens"])


@pytest.mark.agents
@needs_claude
def test_claude_subagent_usage(tmp_path):
    sub_usage = {"input_tokens": 400, "output_tokens": 40,
                 "cache_read_input_tokens": 0,
                 "cache_creation_input_tokens": 0}
    script = [tool_call("Agent", {"description": "Say hi", "prompt": "Say hi",
                                  "subagent_type": "general-purpose",
                                  "model": "haiku",
                                  "run_in_background": False}),
              answer("Sub done.", usage=sub_usage),      # the subagent
              answer("All done.")]
    with MockProvider(script) as mp:
        p = run_agent(claude_argv("Delegate.", allowed_tools=("Agent",)),
                      claude_env(tmp_path, mp), agent_cwd(tmp_path))
    save("claude-subagent", p.stdout, tmp_path)
    assert p.returncode == 0, p.stderr
    reqs = mp.main_requests("anthropic")
    sub_model = reqs[1]["body"]["model"]
    assert [r["body"]["model"] for r in reqs] == [CLAUDE_MODEL, sub_model,
                                                  CLAUDE_MODEL]
    assert sub_model != CLAUDE_MODEL
    served = mp.served_usage("anthropic")
    main = anthropic_sum([served[0], served[2]])
    res = claude_result(parse_jsonl(p.stdout))
    # result.usage: main thread only; modelUsage and total_cost_usd: all
    assert {k: res["usage"][k] for k in ANTHROPIC_KEYS} == main
    assert set(res["modelUsage"]) == {CLAUDE_MODEL, sub_model}
    assert res["modelUsage"][sub_model]["inputTokens"] == 400
    assert res["total_cost_usd"] == pytest.approx(
        sum(m["costUSD"] for m in res["modelUsage"].values()))
    assert res["modelUsage"][CLAUDE_MODEL]["costUSD"] == pytest.approx(
        claude_cost(main))


# --------------------------------------------------------------------------
# real Codex
# --------------------------------------------------------------------------


@pytest.mark.agents
@needs_codex
def test_codex_tool_then_answer(tmp_path):
    with MockProvider([tool_call("exec_command", {"cmd": "echo hi"}),
                       answer("All done.")]) as mp:
        p = run_agent(codex_argv("Run echo hi, then say done."),
                      codex_env(tmp_path, mp), agent_cwd(tmp_path))
    save("codex-tool-then-answer", p.stdout, tmp_path)
    assert p.returncode == 0, p.stderr
    ev = parse_jsonl(p.stdout)
    assert [e["type"] for e in ev] == [
        "thread.started", "turn.started", "item.started", "item.completed",
        "item.completed", "turn.completed"]
    cmd = ev[3]["item"]
    assert cmd["type"] == "command_execution" and cmd["exit_code"] == 0
    assert cmd["aggregated_output"] == "hi\n"
    assert ev[4]["item"]["type"] == "agent_message"
    assert ev[4]["item"]["text"] == "All done."
    reqs = mp.main_requests("openai")
    assert [r["path"] for r in reqs] == ["/v1/responses"] * 2
    assert all(r["body"]["model"] == CODEX_MODEL for r in reqs)
    assert [r["path"] for r in mp.requests] == ["/v1/responses"] * 2
    usage = ev[-1]["usage"]
    assert usage == codex_expected(mp.served_usage("openai"))
    assert usage == {"input_tokens": 403, "cached_input_tokens": 203,
                     "cache_write_input_tokens": 0, "output_tokens": 63,
                     "reasoning_output_tokens": 3}


@pytest.mark.agents
@needs_codex
def test_codex_resume(tmp_path):
    with MockProvider([tool_call("exec_command", {"cmd": "echo hi"}),
                       answer("First done.")]) as mp1:
        p1 = run_agent(codex_argv("Run echo hi."), codex_env(tmp_path, mp1),
                       agent_cwd(tmp_path))
    save("codex-resume-first", p1.stdout, tmp_path)
    assert p1.returncode == 0, p1.stderr
    ev1 = parse_jsonl(p1.stdout)
    tid = ev1[0]["thread_id"]
    first = mp1.served_usage("openai")
    assert ev1[-1]["usage"] == codex_expected(first)

    second = {"input_tokens": 50, "cached_tokens": 20,
              "cache_write_tokens": 5, "output_tokens": 9,
              "reasoning_tokens": 4}
    with MockProvider([answer("Second done.", usage=second)]) as mp2:
        p2 = run_agent(codex_argv("Say more.", resume=tid),
                       codex_env(tmp_path, mp2), agent_cwd(tmp_path))
    save("codex-resume-second", p2.stdout, tmp_path)
    assert p2.returncode == 0, p2.stderr
    ev2 = parse_jsonl(p2.stdout)
    assert ev2[0] == {"type": "thread.started", "thread_id": tid}
    body = mp2.main_requests("openai")[0]["body"]
    assert any(i.get("type") == "function_call_output" for i in body["input"])
    # turn.completed.usage after a resume is cumulative over the thread
    assert ev2[-1]["type"] == "turn.completed"
    assert ev2[-1]["usage"] == codex_expected(
        first + mp2.served_usage("openai"))
    assert ev2[-1]["usage"]["cache_write_input_tokens"] == 5


@pytest.mark.agents
@needs_codex
def test_codex_slow_stream_can_be_killed(tmp_path):
    with MockProvider([slow(120)]) as mp:
        proc = start_agent(codex_argv("Say something."),
                           codex_env(tmp_path, mp), agent_cwd(tmp_path))
        try:
            deadline = time.monotonic() + 15
            while not mp.main_requests("openai"):
                assert proc.poll() is None, proc.stderr.read()
                assert time.monotonic() < deadline
                time.sleep(0.05)
            time.sleep(0.5)
            assert proc.poll() is None
        finally:
            t0 = time.monotonic()
            rc = kill_agent(proc, grace=5)
            killed_in = time.monotonic() - t0
            out = proc.stdout.read()
            proc.stdout.close()
            proc.stderr.close()
    assert rc != 0 and killed_in < 10
    # the node wrapper and its native codex child are both gone
    assert not group_alive(proc.pid)
    assert not only(parse_jsonl(out), "turn.completed")


@pytest.mark.agents
@needs_codex
def test_codex_all_500(tmp_path):
    t0 = time.monotonic()
    with MockProvider(all_errors(500)) as mp:
        p = run_agent(codex_argv("Run echo hi."), codex_env(tmp_path, mp),
                      agent_cwd(tmp_path), timeout=30)
    save("codex-all-500", p.stdout, tmp_path)
    assert time.monotonic() - t0 < 30
    assert p.returncode == 1
    ev = parse_jsonl(p.stdout)
    assert [e["type"] for e in ev] == ["thread.started", "turn.started",
                                       "error", "turn.failed"]
    assert len(mp.main_requests("openai")) == 1     # request_max_retries = 0


# --------------------------------------------------------------------------
# the saved streams agree with tests/data/streams/README.md
# --------------------------------------------------------------------------

CLAUDE_EXPECTED = {
    # file: (result.usage 4 figures, total_cost_usd)
    "claude-tool-then-answer": ((203, 43, 3000, 150), 0.0027165),
    "claude-dated-model": ((203, 43, 3000, 150), 0.0027165),
    "claude-three-tools": ((410, 90, 10000, 500), 0.007455),
    "claude-max-turns": ((101, 21, 1000, 50), 0.0011055),
    "claude-all-500": ((0, 0, 0, 0), 0),
    "claude-resume-first": ((203, 43, 3000, 150), 0.0027165),
    "claude-resume-second": ((7, 11, 13, 17), 0.00297015),
}

CODEX_EXPECTED = {
    "codex-tool-then-answer": (403, 203, 0, 63, 3),
    "codex-resume-first": (403, 203, 0, 63, 3),
    "codex-resume-second": (453, 223, 5, 72, 7),
}


def _load(name: str) -> list[dict]:
    path = STREAMS / f"{name}.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not recorded")
    text = path.read_text()
    assert "/tmp/pytest-of-" not in text
    return parse_jsonl(text)


@pytest.mark.parametrize("name", sorted(CLAUDE_EXPECTED))
def test_recorded_claude_stream(name):
    res = claude_result(_load(name))
    figures, cost = CLAUDE_EXPECTED[name]
    assert tuple(res["usage"][k] for k in (
        "input_tokens", "output_tokens", "cache_read_input_tokens",
        "cache_creation_input_tokens")) == figures
    assert res["total_cost_usd"] == pytest.approx(cost, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("name", sorted(CODEX_EXPECTED))
def test_recorded_codex_stream(name):
    ev = _load(name)
    done = only(ev, "turn.completed")
    assert len(done) == 1
    u = done[0]["usage"]
    assert (u["input_tokens"], u["cached_input_tokens"],
            u["cache_write_input_tokens"], u["output_tokens"],
            u["reasoning_output_tokens"]) == CODEX_EXPECTED[name]
