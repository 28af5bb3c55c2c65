"""Claude Code stream-json -> run record, over streams recorded from the real client
(tests/data/streams, Claude Code 2.1.328 against tests/mockprovider.py; totals hand-checked
in that directory's README) and small hand-made streams for the edge rules."""

from __future__ import annotations

import copy
import math

import orjson
import pytest

from launchkit import (
    assert_stream_bound, events, jsonl, replay, result_event, stream_bytes, stream_lines,
)

TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def client_result(name: str) -> dict:
    return [e for e in stream_lines(name) if e.get("type") == "result"][-1]


def usage_tuple(snap) -> tuple:
    return tuple(getattr(snap.usage, k) for k in TOKENS)


def api_tuple(u: dict) -> tuple:
    return (u["input_tokens"], u["output_tokens"], u["cache_read_input_tokens"], u["cache_creation_input_tokens"])


@pytest.mark.parametrize("name, expected, cost, outcome, exit_code, tools", [
    ("claude-tool-then-answer.jsonl", (203, 43, 3000, 150), 0.0027165, "completed", 0, {"Bash": 1}),
    ("claude-three-tools.jsonl", (410, 90, 10000, 500), 0.007455, "completed", 0, {"Bash": 3}),
    ("claude-max-turns.jsonl", (101, 21, 1000, 50), 0.0011055, "failed", 1, {"Bash": 1}),
    ("claude-resume-first.jsonl", (203, 43, 3000, 150), 0.0027165, "completed", 0, {"Bash": 1}),
])
def test_recorded_stream_totals_equal_the_clients(home, tmp_path, name, expected, cost, outcome, exit_code, tools):
    res = client_result(name)
    assert api_tuple(res["usage"]) == expected  # the README's hand-checked figures
    result, snap = replay(home, tmp_path, "claude", stream_bytes(name), exit_code=exit_code)
    assert usage_tuple(snap) == expected
    assert snap.usage.cost_usd == res["total_cost_usd"]  # exactly the client's float
    assert snap.usage.cost_usd == pytest.approx(cost, rel=1e-12)
    assert snap.usage.total_input_tokens == expected[0] + expected[2] + expected[3]
    assert (snap.usage.streams, snap.usage.final_streams, snap.evidence_gaps) == (1, 1, 0)
    assert snap.outcome == outcome and result.outcome == outcome
    assert result.exit_code == exit_code
    assert snap.tool_uses == tools
    assert snap.model == "claude-sonnet-4-5" or snap.model is None
    assert snap.streams[0].model == "claude-sonnet-4-5"
    assert snap.provider_session_id == res["session_id"] == result.provider_session_id
    assert result.evidence == "verified", result.evidence_reasons
    assert result.cost_basis == "reported" and result.cost_usd == res["total_cost_usd"]
    ev = assert_stream_bound(snap.path)
    assert ev["evidence"] == "verified" and ev["raw_stream"]["bytes"] == len(stream_bytes(name))
    if outcome == "completed":
        assert snap.final_answer == res["result"] == result.final_answer
    else:
        assert snap.final_answer is None
        assert ev["provider_subtype"] == "error_max_turns"


def test_all_500_is_failed_with_retries_counted_and_measured_zero(home, tmp_path):
    res = client_result("claude-all-500.jsonl")
    result, snap = replay(home, tmp_path, "claude", stream_bytes("claude-all-500.jsonl"), exit_code=1)
    assert result.outcome == snap.outcome == "failed" and result.exit_code == 1
    assert snap.api_retries == 2 == result.api_retries
    # the client reported usage 0 and cost 0: measured zeros, kept as zeros (not unknown)
    assert usage_tuple(snap) == api_tuple(res["usage"]) == (0, 0, 0, 0)
    assert snap.usage.cost_usd == 0.0 == res["total_cost_usd"]
    assert snap.usage.final_streams == 1
    # the "<synthetic>" error message is not a model: no stream for it
    assert [s.model for s in snap.streams] == ["claude-sonnet-4-5"]
    ev = result_event(snap.path)
    assert ev["api_retries"] == 2 and ev["api_error_status"] == 500 and ev["provider_is_error"] is True
    assert ev["evidence"] == "verified"
    assert "API Error" in (ev["error"] or "")


def test_subagent_model_gets_its_own_stream_closed_by_the_result(home, tmp_path):
    res = client_result("claude-subagent.jsonl")
    per_model = res["model_usage_since_last_result"]
    result, snap = replay(home, tmp_path, "claude", stream_bytes("claude-subagent.jsonl"))
    by_model = {s.model: s for s in snap.streams}
    assert set(by_model) == {"claude-sonnet-4-5", "claude-haiku-5-5"}
    for model, u in per_model.items():
        s = by_model[model]
        assert s.final_receipt
        assert (s.counters["input_tokens"], s.counters["output_tokens"], s.counters["cache_read_tokens"],
                s.counters["cache_write_tokens"]) == (u["inputTokens"], u["outputTokens"],
                                                      u["cacheReadInputTokens"], u["cacheCreationInputTokens"])
        assert s.cost_usd == u["costUSD"]
    # run totals: main thread 204/44/4000/200 + subagent (haiku) 400/40/0/0
    assert usage_tuple(snap) == (604, 84, 4000, 200)
    # the run's cost is the sum of the client's per-model costs: equal to its total_cost_usd
    # up to float rounding of that sum (the client's own total differs in the last bit)
    assert math.isclose(snap.usage.cost_usd, res["total_cost_usd"], rel_tol=1e-15)
    assert (snap.usage.streams, snap.usage.final_streams, snap.evidence_gaps) == (2, 2, 0)
    assert snap.tool_uses == {"Agent": 1}
    assert result.evidence == "verified"


def test_resume_is_charged_only_its_own_part(home, tmp_path):
    first = client_result("claude-resume-first.jsonl")
    second = client_result("claude-resume-second.jsonl")
    r1, s1 = replay(home, tmp_path, "claude", stream_bytes("claude-resume-first.jsonl"))
    sid = first["session_id"]
    r2, s2 = replay(home, tmp_path, "claude", stream_bytes("claude-resume-second.jsonl"),
                    args=["-p", "again", "--resume", sid])
    assert usage_tuple(s2) == api_tuple(second["usage"]) == (7, 11, 13, 17)
    own_cost = second["model_usage_since_last_result"]["claude-sonnet-4-5"]["costUSD"]
    assert s2.usage.cost_usd == own_cost == pytest.approx(0.00025365, rel=1e-12)
    assert second["total_cost_usd"] == pytest.approx(0.00297015)  # cumulative: not what we charge
    assert s2.evidence_gaps == 0 and s2.usage.final_streams == 1
    assert result_event(s2.path)["charged_from"] == "model_usage_since_last_result"
    # both runs together cost exactly the session's cumulative total
    assert s1.usage.cost_usd + s2.usage.cost_usd == pytest.approx(second["total_cost_usd"], rel=1e-12)


def _without_since(name: str) -> bytes:
    lines = stream_lines(name)
    for obj in lines:
        obj.pop("model_usage_since_last_result", None)
    return jsonl(lines)


def test_resume_without_per_run_figures_subtracts_the_stored_session_total(home, tmp_path):
    """Older clients (no model_usage_since_last_result): modelUsage is cumulative after a
    resume, so the session's previous figures (sessions store) are subtracted."""
    second = client_result("claude-resume-second.jsonl")
    replay(home, tmp_path, "claude", _without_since("claude-resume-first.jsonl"))
    sid = second["session_id"]
    assert (home / "sessions" / "claude" / f"{sid}.json").exists()
    _, snap = replay(home, tmp_path, "claude", _without_since("claude-resume-second.jsonl"),
                     args=["-p", "again", "--resume", sid])
    assert usage_tuple(snap) == (7, 11, 13, 17)
    assert snap.usage.cost_usd == pytest.approx(0.00025365, rel=1e-9)
    assert snap.evidence_gaps == 0
    ev = result_event(snap.path)
    assert ev["charged_from"].startswith("modelUsage minus")
    assert ev["charged_since"]["total_cost_usd"] == pytest.approx(0.0027165)


def test_resume_with_nothing_known_charges_result_usage_and_leaves_cost_unknown(home, tmp_path):
    """A resumed session this home never saw: result.usage is this run's (measured with
    2.1.328), but the cumulative total_cost_usd cannot be split: the cost is unknown, not
    the whole session's."""
    second = client_result("claude-resume-second.jsonl")
    result, snap = replay(home, tmp_path, "claude", _without_since("claude-resume-second.jsonl"),
                          args=["-p", "again", "--resume", second["session_id"]])
    assert usage_tuple(snap) == (7, 11, 13, 17)
    assert snap.usage.cost_usd is None
    assert snap.usage.final_streams == 1
    # ledger's --json output says so and gives an estimate from the price table instead
    assert result.cost_basis == "estimated" and result.cost_usd == pytest.approx(0.00025365, rel=1e-9)


def test_killed_before_result_keeps_provisional_totals(home, tmp_path):
    lines = stream_bytes("claude-tool-then-answer.jsonl").splitlines(keepends=True)
    partial = b"".join(lines[:-1])  # no result line
    result, snap = replay(home, tmp_path, "claude", partial, exit_code=143)
    # input/cache from each message's first line; output is a streaming snapshot (1 + 1)
    assert usage_tuple(snap) == (101 + 102, 2, 3000, 150)
    assert snap.usage.peak_input_tokens == 102 + 2000 + 100
    assert snap.usage.final_streams == 0 and snap.usage.streams == 1
    assert snap.usage.cost_usd is None
    assert result.evidence == "unverifiable" and "no result event" in result.evidence_reasons
    assert snap.outcome == "failed"
    assert_stream_bound(snap.path)


def _msg(mid: str, content: dict, usage: dict, model: str = "claude-sonnet-4-5", **extra) -> dict:
    return {"type": "assistant", "message": {"id": mid, "model": model, "role": "assistant",
                                             "content": [content], "usage": usage}, "session_id": "s1", **extra}


INIT = {"type": "system", "subtype": "init", "session_id": "s1", "model": "claude-sonnet-4-5"}


def _result(**over) -> dict:
    r = {"type": "result", "subtype": "success", "is_error": False, "session_id": "s1", "result": "ok",
         "num_turns": 1, "total_cost_usd": 0.5,
         "usage": {"input_tokens": 7, "output_tokens": 60, "cache_read_input_tokens": 100,
                   "cache_creation_input_tokens": 20}}
    r.update(over)
    return r


def test_lines_of_one_message_count_once_with_the_max_per_field(home, tmp_path):
    stream = jsonl([
        INIT,
        _msg("m1", {"type": "thinking", "thinking": ""}, {"input_tokens": 3, "output_tokens": 2}),
        _msg("m1", {"type": "text", "text": "Reading."},
             {"input_tokens": 3, "output_tokens": 9, "cache_read_input_tokens": 100,
              "cache_creation_input_tokens": 20,
              "cache_creation": {"ephemeral_5m_input_tokens": 20, "ephemeral_1h_input_tokens": 0}}),
        _msg("m1", {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/x"}},
             {"input_tokens": 3, "output_tokens": 14, "cache_read_input_tokens": 100,
              "cache_creation_input_tokens": 20}),
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "x", "is_error": False}]}},
        _msg("m2", {"type": "text", "text": "Done."},
             {"input_tokens": 4, "output_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}),
    ])
    # no result: the provisional totals are what the lines say, per message the max
    _, snap = replay(home, tmp_path, "claude", stream, exit_code=1)
    assert usage_tuple(snap) == (3 + 4, 14 + 1, 100, 20)
    c = snap.streams[0].counters
    assert (c["cache_write_5m_tokens"], c["cache_write_1h_tokens"]) == (20, 0)  # it accounts for all writes
    obs = [e for e in events(snap.path) if e["type"] == "usage"]
    # cumulative observations never go down (no gaps)
    assert snap.evidence_gaps == 0 and len(obs) >= 1
    # with a result, the result's figures are the final receipt
    _, snap2 = replay(home, tmp_path, "claude", stream + jsonl([_result()]))
    assert usage_tuple(snap2) == (7, 60, 100, 20)
    assert snap2.usage.cost_usd == 0.5 and snap2.usage.final_streams == 1 and snap2.evidence_gaps == 0


@pytest.mark.parametrize("extra, reason", [
    ([b"not json at all\n"], "not JSON objects"),
    ([b"[1, 2]\n"], "not JSON objects"),
    ([b'{"type": "x", "v": NaN}\n'], "not JSON objects"),
    ([jsonl([_result()])], "2 result events"),
    ([jsonl([_msg("m9", {"type": "text", "text": "late"}, {"input_tokens": 1, "output_tokens": 1})])],
     "'assistant' event after the result"),
])
def test_a_stream_that_does_not_verify_is_recorded_as_unverifiable(home, tmp_path, extra, reason):
    stream = jsonl([INIT, _msg("m1", {"type": "text", "text": "hi"}, {"input_tokens": 7, "output_tokens": 1}),
                    _result()]) + b"".join(extra)
    result, snap = replay(home, tmp_path, "claude", stream)
    assert result.evidence == "unverifiable"
    assert any(reason in r for r in result.evidence_reasons), result.evidence_reasons
    ev = result_event(snap.path)
    assert ev["evidence"] == "unverifiable" and ev["evidence_reasons"] == result.evidence_reasons
    # still recorded: damage is evidence, not a crash; whatever follows a result is
    # counted as the next turn (a second result 7 more, a late message 1 more)
    assert snap.usage.input_tokens == {"2 result events": 14, "'assistant' event after the result": 8}.get(reason, 7)
    assert_stream_bound(snap.path)


def test_system_lines_after_the_result_are_fine(home, tmp_path):
    stream = jsonl([INIT, _result(), {"type": "system", "subtype": "status", "status": "idle"}])
    result, _ = replay(home, tmp_path, "claude", stream)
    assert result.evidence == "verified"


@pytest.mark.parametrize("is_error, name, expected", [
    (False, "pdf", True),
    (True, "pdf", False),       # the Skill call failed
    (False, "other", False),    # a different skill ran
    (None, "pdf", False),       # requested, never answered
])
def test_expect_skill_needs_a_successful_skill_call(home, tmp_path, is_error, name, expected):
    objs = [INIT, _msg("m1", {"type": "tool_use", "id": "tu1", "name": "Skill", "input": {"skill": name}},
                       {"input_tokens": 5, "output_tokens": 1})]
    if is_error is not None:
        objs.append({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "tu1", "content": "loaded", "is_error": is_error}]}})
    objs.append(_result())
    result, snap = replay(home, tmp_path, "claude", jsonl(objs), expect_skill="pdf")
    assert result.skill_invoked is expected
    assert snap.skill_invoked is expected
    assert snap.skill == "pdf"


def test_no_skill_expected_records_nothing_about_it(home, tmp_path):
    _, snap = replay(home, tmp_path, "claude", jsonl([INIT, _result()]))
    assert snap.skill_invoked is None


def test_final_receipt_keeps_the_5m_1h_split_when_complete(home, tmp_path):
    res = _result(model_usage_since_last_result={"claude-sonnet-4-5": {
        "inputTokens": 7, "outputTokens": 60, "cacheReadInputTokens": 100, "cacheCreationInputTokens": 20,
        "cacheCreationEphemeral5mInputTokens": 15, "cacheCreationEphemeral1hInputTokens": 5, "costUSD": 0.5,
        "contextWindow": 200000}})
    _, snap = replay(home, tmp_path, "claude", jsonl([INIT, res]))
    c = snap.streams[0].counters
    assert (c["cache_write_5m_tokens"], c["cache_write_1h_tokens"]) == (15, 5)
    assert snap.usage.context_window_tokens == 200000


def test_text_and_tool_summaries_are_redacted(home, tmp_path):
    secret = "canary-" + "7" * 20
    stream = jsonl([INIT, _msg("m1", {"type": "text", "text": f"the key is {secret}"}, {"input_tokens": 1}),
                    _msg("m2", {"type": "tool_use", "id": "t", "name": "Bash",
                                "input": {"command": f"curl -H 'Authorization: Bearer {secret}' x"}},
                         {"input_tokens": 1}),
                    _result(result=f"done {secret}")])
    _, snap = replay(home, tmp_path, "claude", stream, env={"PATH": "/usr/bin:/bin", "MY_TOKEN": secret})
    blob = b"".join(p.read_bytes() for p in snap_files(snap.path))
    assert secret.encode() not in blob
    assert b"[REDACTED]" in blob
    assert snap.final_answer == "done [REDACTED]"


def snap_files(run_path):
    from pathlib import Path

    return [p for p in Path(run_path).rglob("*") if p.is_file()]


def test_numbers_that_are_not_counts_are_ignored(home, tmp_path):
    stream = jsonl([INIT, _msg("m1", {"type": "text", "text": "x"},
                               {"input_tokens": -5, "output_tokens": "12", "cache_read_input_tokens": True})])
    result, snap = replay(home, tmp_path, "claude", stream, exit_code=1)
    assert snap.usage.input_tokens is None and snap.usage.output_tokens is None
    assert snap.evidence_gaps == 0


def test_claude_without_stream_json_is_recorded_as_a_plain_command(home, tmp_path, capfd):
    result, snap = replay(home, tmp_path, "claude", b"Just a plain answer.\n", args=["-p", "hi"],
                          stream_flags=False)
    out, err = capfd.readouterr()
    assert "not asked for its JSON stream" in err
    assert out == "Just a plain answer.\n"  # passed through, as for any command
    assert snap.harness == "claude" and result.outcome == "completed" and result.evidence == "not_applicable"
    assert snap.usage.streams == 0
    assert result_event(snap.path)["stream_format"].startswith("not requested")


def test_a_failed_resume_does_not_reset_the_stored_session_figures(home, tmp_path):
    first = client_result("claude-resume-first.jsonl")
    sid = first["session_id"]
    replay(home, tmp_path, "claude", _without_since("claude-resume-first.jsonl"))
    failed = jsonl([{**INIT, "session_id": sid},
                    _result(session_id=sid, is_error=True, result="API Error: 500", total_cost_usd=0, modelUsage={},
                            usage={"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0,
                                   "cache_creation_input_tokens": 0})])
    replay(home, tmp_path, "claude", failed, args=["--resume", sid], exit_code=1)
    _, snap = replay(home, tmp_path, "claude", _without_since("claude-resume-second.jsonl"), args=["--resume", sid])
    assert usage_tuple(snap) == (7, 11, 13, 17)  # still this run's part only
    assert snap.usage.cost_usd == pytest.approx(0.00025365, rel=1e-9)


def test_a_real_stream_with_a_dated_model_is_counted_once(home, tmp_path):
    """Recorded from Claude Code 2.1.328 against a mock answering `claude-sonnet-4-5-20250929`
    for `claude-sonnet-4-5` (tests/data/streams/claude-dated-model.jsonl): the messages name the
    dated id, `result.modelUsage` the alias; one stream, closed by the receipt, 203 not 406."""
    lines = stream_lines("claude-dated-model.jsonl")
    models = {e["message"]["model"] for e in lines if e.get("type") == "assistant"}
    res = client_result("claude-dated-model.jsonl")
    assert models == {"claude-sonnet-4-5-20250929"} and list(res["modelUsage"]) == ["claude-sonnet-4-5"]
    _, snap = replay(home, tmp_path, "claude", stream_bytes("claude-dated-model.jsonl"))
    assert snap.usage.streams == 1 and snap.usage.final_streams == 1
    assert usage_tuple(snap) == (203, 43, 3000, 150)
    assert snap.usage.cost_usd == pytest.approx(res["total_cost_usd"], rel=1e-12)


def test_receipt_under_another_spelling_of_the_model_closes_the_same_stream(home, tmp_path):
    stream = jsonl([INIT, _msg("m1", {"type": "text", "text": "x"}, {"input_tokens": 7, "output_tokens": 1},
                               model="claude-sonnet-4-5-20250929"),
                    _result(model_usage_since_last_result={"claude-sonnet-4-5": {
                        "inputTokens": 7, "outputTokens": 60, "cacheReadInputTokens": 100,
                        "cacheCreationInputTokens": 20, "costUSD": 0.5}})])
    _, snap = replay(home, tmp_path, "claude", stream)
    assert snap.usage.streams == 1 and snap.usage.final_streams == 1  # not a provisional + a final stream
    assert usage_tuple(snap) == (7, 60, 100, 20) and snap.usage.cost_usd == 0.5
