"""Codex `exec --json` -> run record, over streams recorded from the real client (Codex
0.169.0 against tests/mockprovider.py; totals hand-checked in tests/data/streams/README.md)."""

from __future__ import annotations

import pytest

from launchkit import assert_stream_bound, jsonl, replay, result_event, stream_bytes, stream_lines

ARGS = ["exec", "--json", "--skip-git-repo-check", "-m", "gpt-5.5", "do it"]


def turn_usage(name: str) -> dict:
    return [e for e in stream_lines(name) if e.get("type") == "turn.completed"][-1]["usage"]


def counters(snap) -> dict:
    u = snap.usage
    return {"input": u.input_tokens, "cache_read": u.cache_read_tokens, "cache_write": u.cache_write_tokens,
            "output": u.output_tokens, "reasoning": u.reasoning_tokens, "total_input": u.total_input_tokens}


def test_tool_then_answer_tokens_equal_what_the_mock_served(home, tmp_path):
    u = turn_usage("codex-tool-then-answer.jsonl")
    assert (u["input_tokens"], u["cached_input_tokens"], u["output_tokens"], u["reasoning_output_tokens"]) == (403, 203, 63, 3)
    result, snap = replay(home, tmp_path, "codex", stream_bytes("codex-tool-then-answer.jsonl"), args=ARGS)
    # OpenAI counts cached input inside input: ledger's input is the uncached part
    assert counters(snap) == {"input": 200, "cache_read": 203, "cache_write": 0, "output": 63, "reasoning": 3,
                              "total_input": 403}
    assert snap.model == "gpt-5.5" and [s.model for s in snap.streams] == ["gpt-5.5"]
    assert (snap.usage.streams, snap.usage.final_streams, snap.evidence_gaps) == (1, 1, 0)
    assert snap.usage.cost_usd is None  # Codex reports no cost: reports estimate it
    assert result.cost_basis == "estimated" and result.cost_usd and result.cost_usd > 0
    assert result.outcome == snap.outcome == "completed"
    assert snap.final_answer == "All done." == result.final_answer
    assert snap.tool_uses == {"command_execution": 1}
    assert snap.provider_session_id == stream_lines("codex-tool-then-answer.jsonl")[0]["thread_id"]
    assert result.evidence == "verified", result.evidence_reasons
    assert_stream_bound(snap.path)


def test_resume_records_only_its_own_delta(home, tmp_path):
    first = turn_usage("codex-resume-first.jsonl")
    second = turn_usage("codex-resume-second.jsonl")
    thread = stream_lines("codex-resume-first.jsonl")[0]["thread_id"]
    _, s1 = replay(home, tmp_path, "codex", stream_bytes("codex-resume-first.jsonl"), args=ARGS)
    assert counters(s1)["total_input"] == first["input_tokens"] == 403
    resume_args = ["exec", "resume", "--json", "-m", "gpt-5.5", thread, "again"]
    _, s2 = replay(home, tmp_path, "codex", stream_bytes("codex-resume-second.jsonl"), args=resume_args)
    # the mock served input 50 (cached 20, cache write 5), output 9 (reasoning 4) on the resume
    assert second["input_tokens"] - first["input_tokens"] == 50
    assert counters(s2) == {"input": 50 - 20 - 5, "cache_read": 20, "cache_write": 5, "output": 9,
                            "reasoning": 4, "total_input": 50}
    assert s2.evidence_gaps == 0 and s2.usage.final_streams == 1
    ev = result_event(s2.path)
    assert ev["charged_since"]["input_tokens"] == 403
    assert ev["provider_cumulative"]["input_tokens"] == 453
    # both runs together: exactly the thread's cumulative total, nothing counted twice
    assert counters(s1)["total_input"] + counters(s2)["total_input"] == second["input_tokens"]
    assert s1.usage.output_tokens + s2.usage.output_tokens == second["output_tokens"]


def test_resume_of_an_unknown_thread_is_a_gap_not_a_silent_overcharge(home, tmp_path):
    thread = stream_lines("codex-resume-second.jsonl")[0]["thread_id"]
    _, snap = replay(home, tmp_path, "codex", stream_bytes("codex-resume-second.jsonl"),
                     args=["exec", "resume", "--json", "-m", "gpt-5.5", thread, "again"])
    assert snap.usage.total_input_tokens == 453  # all we know, flagged
    assert snap.evidence_gaps == 1  # start_known: false
    assert "no previous total" in result_event(snap.path)["charged_from"]


def test_all_500_fails_with_no_usage(home, tmp_path):
    result, snap = replay(home, tmp_path, "codex", stream_bytes("codex-all-500.jsonl"), args=ARGS, exit_code=1)
    assert result.outcome == snap.outcome == "failed" and result.exit_code == 1
    assert snap.usage.streams == 0 and snap.usage.input_tokens is None
    assert result.cost_usd is None and result.tokens["input_tokens"] is None
    assert "high demand" in result.error
    assert result.evidence == "verified"  # one terminal event (turn.failed): the stream is sound


def test_model_from_ledger_option_when_the_command_has_none(home, tmp_path):
    _, snap = replay(home, tmp_path, "codex", stream_bytes("codex-tool-then-answer.jsonl"),
                     args=["exec", "--json", "go"], model="gpt-5.5")
    assert snap.model == "gpt-5.5" and snap.streams[0].model == "gpt-5.5"


def test_unknown_model_estimate_is_unknown_not_zero(home, tmp_path):
    result, snap = replay(home, tmp_path, "codex", stream_bytes("codex-tool-then-answer.jsonl"),
                          args=["exec", "--json", "-m", "gpt-mock-unpriced", "go"])
    assert result.cost_usd is None and result.cost_basis is None
    assert "no price" in result.cost_note


def test_no_terminal_event_is_unverifiable_and_failed(home, tmp_path):
    lines = stream_bytes("codex-tool-then-answer.jsonl").splitlines(keepends=True)[:-1]
    result, snap = replay(home, tmp_path, "codex", b"".join(lines), args=ARGS)
    assert result.evidence == "unverifiable"
    assert result.outcome == "failed"  # exit 0 but the stream never said the turn completed
    assert snap.usage.streams == 0


def test_failed_exit_with_completed_turn_is_failed(home, tmp_path):
    result, _ = replay(home, tmp_path, "codex", stream_bytes("codex-tool-then-answer.jsonl"), args=ARGS,
                       exit_code=2)
    assert result.outcome == "failed" and result.exit_code == 2


def test_items_become_tool_uses(home, tmp_path):
    stream = jsonl([
        {"type": "thread.started", "thread_id": "t-1"}, {"type": "turn.started"},
        {"type": "item.started", "item": {"id": "item_0", "type": "file_change",
                                          "changes": [{"path": "a.py", "kind": "update"}], "status": "in_progress"}},
        {"type": "item.completed", "item": {"id": "item_0", "type": "file_change",
                                            "changes": [{"path": "a.py", "kind": "update"}], "status": "completed"}},
        {"type": "item.completed", "item": {"id": "item_1", "type": "mcp_tool_call", "server": "gh", "tool": "pr",
                                            "arguments": {"n": 1}, "status": "completed"}},
        {"type": "item.completed", "item": {"id": "item_2", "type": "web_search", "query": "ledger"}},
        {"type": "item.completed", "item": {"id": "item_3", "type": "error", "message": "config warning"}},
        {"type": "item.completed", "item": {"id": "item_4", "type": "agent_message", "text": "ok"}},
        {"type": "turn.completed", "usage": {"input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 2}},
    ])
    _, snap = replay(home, tmp_path, "codex", stream, args=ARGS)
    assert snap.tool_uses == {"file_change": 1, "mcp__gh__pr": 1, "web_search": 1}
    assert snap.final_answer == "ok"
    assert snap.usage.input_tokens == 10 and snap.usage.cache_write_tokens is None
