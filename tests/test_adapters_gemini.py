"""Gemini CLI stream-json -> run record. No Gemini binary runs here: these streams are
written by hand in the documented shapes (v0.11 and v0.34 `result.stats`, reference
stream-formats.md §D), with hand-computed totals."""

from __future__ import annotations

from launchkit import jsonl, replay, result_event

INIT = {"type": "init", "timestamp": "2026-01-01T00:00:00.000Z", "session_id": "g-1", "model": "gemini-2.5-pro"}


def msg(text: str, delta: bool = True) -> dict:
    return {"type": "message", "timestamp": "2026-01-01T00:00:01.000Z", "role": "assistant", "content": text,
            "delta": delta}


def test_v034_per_model_stats(home, tmp_path):
    stream = jsonl([
        INIT,
        {"type": "message", "role": "user", "content": "list files"},
        {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "c1", "parameters": {"command": "ls"}},
        {"type": "tool_result", "tool_id": "c1", "status": "success", "output": "a.py"},
        msg("There is "), msg("one file."),
        {"type": "result", "status": "success", "stats": {
            "total_tokens": 1520, "input_tokens": 1200, "output_tokens": 200, "cached": 400, "input": 800,
            "duration_ms": 900, "tool_calls": 1,
            "models": {
                "gemini-2.5-pro": {"total_tokens": 1400, "input_tokens": 1100, "output_tokens": 180, "cached": 400,
                                   "input": 700},
                "gemini-2.5-flash": {"total_tokens": 120, "input_tokens": 100, "output_tokens": 20, "cached": 0,
                                     "input": 100}}}},
    ])
    result, snap = replay(home, tmp_path, "gemini", stream, args=["-p", "list files", "--output-format", "stream-json"])
    by = {s.model: s.counters for s in snap.streams}
    # pro: uncached 700, cached 400, output 180 + thoughts (1400 - 1100 - 180 = 120)
    assert by["gemini-2.5-pro"]["input_tokens"] == 700 and by["gemini-2.5-pro"]["cache_read_tokens"] == 400
    assert by["gemini-2.5-pro"]["reasoning_tokens"] == 120 and by["gemini-2.5-pro"]["output_tokens"] == 300
    assert by["gemini-2.5-flash"]["output_tokens"] == 20 and by["gemini-2.5-flash"]["reasoning_tokens"] == 0
    assert snap.usage.input_tokens == 800 and snap.usage.total_input_tokens == 1200
    assert (snap.usage.streams, snap.usage.final_streams, snap.evidence_gaps) == (2, 2, 0)
    assert snap.final_answer == "There is one file." and result.outcome == "completed"
    assert snap.provider_session_id == "g-1" and snap.tool_uses == {"run_shell_command": 1}
    assert result.evidence == "verified"


def test_v011_aggregate_stats_use_the_init_model(home, tmp_path):
    stream = jsonl([
        INIT, msg("Hello", delta=False),
        {"type": "result", "status": "success",
         "stats": {"total_tokens": 250, "input_tokens": 200, "output_tokens": 50, "duration_ms": 10, "tool_calls": 0}},
    ])
    _, snap = replay(home, tmp_path, "gemini", stream, args=["-p", "hi"])
    assert [s.model for s in snap.streams] == ["gemini-2.5-pro"]
    c = snap.streams[0].counters
    # no cache split in v0.11: the input is all the prompt, cache reads unknown (not 0)
    assert c["input_tokens"] == 200 and "cache_read_tokens" not in c and c["total_input_tokens"] == 200
    assert c["output_tokens"] == 50 and c["reasoning_tokens"] == 0
    assert snap.final_answer == "Hello"


def test_auto_model_is_unknown_unless_given(home, tmp_path):
    stream = jsonl([{**INIT, "model": "auto"},
                    {"type": "result", "status": "success", "stats": {"total_tokens": 3, "input_tokens": 2,
                                                                      "output_tokens": 1}}])
    _, snap = replay(home, tmp_path, "gemini", stream, args=["-p", "hi"])
    assert snap.streams[0].model is None
    _, snap2 = replay(home, tmp_path, "gemini", stream, args=["-p", "hi", "-m", "gemini-2.5-flash"])
    assert snap2.streams[0].model == "gemini-2.5-flash" and snap2.model == "gemini-2.5-flash"


def test_error_result_fails_and_warnings_are_kept(home, tmp_path):
    stream = jsonl([
        INIT, {"type": "error", "severity": "warning", "message": "Loop detected"},
        {"type": "result", "status": "error", "error": {"type": "FatalTurnLimitedError", "message": "turn limit"},
         "stats": {"total_tokens": 10, "input_tokens": 8, "output_tokens": 2, "duration_ms": 0}},
    ])
    result, snap = replay(home, tmp_path, "gemini", stream, args=["-p", "x"], exit_code=53)
    assert result.outcome == "failed" and result.exit_code == 53 and result.error == "turn limit"
    assert result_event(snap.path)["provider_warnings"] == ["Loop detected"]
    assert snap.final_answer is None


def test_no_result_is_unverifiable(home, tmp_path):
    result, snap = replay(home, tmp_path, "gemini", jsonl([INIT, msg("partial")]), args=["-p", "x"])
    assert result.evidence == "unverifiable" and "no result event" in result.evidence_reasons
    assert result.outcome == "failed" and snap.usage.streams == 0


# ---- real streams of Gemini CLI 0.61.0 (tests/data/streams/README.md: recorded by
# tests/test_launch_gemini.py against the mock; the default mock usage for call k is prompt
# 300+k with 10k cached, candidates 40+k, thoughts 2k)

REAL_ARGS = ["-p", "x", "--output-format", "stream-json", "-m", "gemini-2.5-flash"]


def test_recorded_three_tool_turns(home, tmp_path):
    from launchkit import stream_bytes

    result, snap = replay(home, tmp_path, "gemini", stream_bytes("gemini-three-tools.jsonl"), args=REAL_ARGS)
    (s,) = snap.streams
    # calls 1-4: uncached (301+302+303+304) - (10+20+30+40), cached 100, output 170 + thoughts 20
    assert s.model == "gemini-2.5-flash"
    assert (s.counters["input_tokens"], s.counters["cache_read_tokens"], s.counters["output_tokens"],
            s.counters["reasoning_tokens"]) == (1110, 100, 190, 20)
    # the text before the second tool call ("Step two.") is not the final answer
    assert snap.final_answer == "Three done." and snap.tool_uses == {"run_shell_command": 3}
    assert result.outcome == "completed" and result.evidence == "verified"


def test_recorded_text_answer_and_api_error(home, tmp_path):
    from launchkit import stream_bytes

    _, snap = replay(home, tmp_path, "gemini", stream_bytes("gemini-text.jsonl"), args=REAL_ARGS)
    c = snap.streams[0].counters
    assert (c["input_tokens"], c["cache_read_tokens"], c["output_tokens"], c["reasoning_tokens"]) == (291, 10, 43, 2)
    assert snap.final_answer == "Hello there."
    result, snap = replay(home, tmp_path, "gemini", stream_bytes("gemini-all-500.jsonl"), args=REAL_ARGS,
                          exit_code=1)
    assert result.outcome == "failed" and "mock error 500" in result.error and snap.final_answer is None
