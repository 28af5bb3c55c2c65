"""Tool results of Codex threads (issue 15): read only where a rollout states them in a field
(ledger.sources.codex_usage), each call's once, the rest unknown; in the index, `runs.tool_calls`
and the result columns are the sums of the thread's `tool_uses` (they stayed 0 before).

The hand-made history below is numbered by hand; the shapes are those Codex writes (the
`item_completed` lines are as Codex 0.169 wrote them against tests/mockprovider.py, the
others from codex-rs: `patch_apply_end`, `mcp_tool_call_end`'s Rust `Result`, the old `shell`
tool's JSON output)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from ledger.cli.app import app
from ledger.sources.codex_usage import CodexUsage
from test_codex_usage import C, P, ctx, feed_all, jl, meta, path, tc

runner = CliRunner()


def call(ts: str, name: str, cid: str) -> dict[str, Any]:
    return {"timestamp": ts, "type": "response_item",
            "payload": {"type": "function_call", "name": name, "arguments": "{}", "call_id": cid}}


def output(ts: str, cid: str, out: Any) -> dict[str, Any]:
    return {"timestamp": ts, "type": "response_item", "payload": {"type": "function_call_output", "call_id": cid,
                                                                  "output": out}}


def event(ts: str, **payload: Any) -> dict[str, Any]:
    return {"timestamp": ts, "type": "event_msg", "payload": payload}


def command(ts: str, cid: str, status: str, exit_code: int | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "CommandExecution", "id": cid, "process_id": "1",
                            "command": ["/bin/bash", "-lc", "x"], "parsed_cmd": [], "source": "unified_exec_startup",
                            "status": status, "aggregated_output": ""}
    if exit_code is not None:
        item["exit_code"] = exit_code
    return event(ts, type="item_completed", thread_id=P, turn_id="t1", item=item)


def shell_json(code: int) -> str:
    return orjson.dumps({"output": "out\n", "metadata": {"exit_code": code, "duration_seconds": 0.1}}).decode()


T = "2026-03-10T10:00:{:02d}.000Z"

# 15 calls, by hand: exec_command c1 ok, c2 error (exit 1), c3 error (killed: failed, -1),
#   c4 unknown (still running: in progress), c5 unknown (output text only), c6 error (declined);
#   shell c7 error (old JSON output, exit 2), c8 ok (exit 0);
#   apply_patch c9 error (patch_apply_end success false), c10 unknown (no result);
#   mcp__git__status c11 error (Err), c12 semantic-error (an error envelope, no isError),
#   c13 error (isError), c14 ok; update_plan c15 unknown ("unsupported call: ..." is text)
LINES = [
    meta(P), ctx("gpt-5.5"),
    call(T.format(1), "exec_command", "c1"), command(T.format(1), "c1", "completed", 0),
    output(T.format(1), "c1", "Chunk ID: 1\nProcess exited with code 0\nOutput:\nhi\n"),
    call(T.format(2), "exec_command", "c2"), command(T.format(2), "c2", "failed", 1),
    output(T.format(2), "c2", "Chunk ID: 2\nProcess exited with code 1\nOutput:\n"),
    call(T.format(3), "exec_command", "c3"),
    output(T.format(3), "c3", "Chunk ID: 3\nProcess running with session ID 7\nOutput:\n"),
    call(T.format(4), "exec_command", "c4"), command(T.format(4), "c4", "in_progress"),
    call(T.format(5), "exec_command", "c5"), output(T.format(5), "c5", "Process exited with code 1"),
    call(T.format(6), "exec_command", "c6"), command(T.format(6), "c6", "declined"),
    call(T.format(7), "shell", "c7"), output(T.format(7), "c7", shell_json(2)),
    call(T.format(8), "shell", "c8"), output(T.format(8), "c8", shell_json(0)),
    {"timestamp": T.format(9), "type": "response_item",
     "payload": {"type": "custom_tool_call", "status": "completed", "call_id": "c9", "name": "apply_patch",
                 "input": "*** Begin Patch"}},
    event(T.format(9), type="patch_apply_end", call_id="c9", stdout="", stderr="no such file", success=False),
    {"timestamp": T.format(10), "type": "response_item",
     "payload": {"type": "custom_tool_call", "status": "completed", "call_id": "c10", "name": "apply_patch",
                 "input": "*** Begin Patch"}},
    call(T.format(11), "mcp__git__status", "c11"),
    event(T.format(11), type="mcp_tool_call_end", call_id="c11", invocation={"server": "git", "tool": "status"},
          result={"Err": "timed out"}),
    call(T.format(12), "mcp__git__status", "c12"),
    event(T.format(12), type="mcp_tool_call_end", call_id="c12", invocation={"server": "git", "tool": "status"},
          result={"Ok": {"content": [{"type": "text", "text": "error: not a git repository"}]}}),
    call(T.format(13), "mcp__git__status", "c13"),
    event(T.format(13), type="mcp_tool_call_end", call_id="c13", invocation={"server": "git", "tool": "status"},
          result={"Ok": {"content": [{"type": "text", "text": "denied"}], "isError": True}}),
    call(T.format(14), "mcp__git__status", "c14"),
    event(T.format(14), type="mcp_tool_call_end", call_id="c14", invocation={"server": "git", "tool": "status"},
          result={"Ok": {"content": [{"type": "text", "text": "clean"}]}}),
    call(T.format(15), "update_plan", "c15"), output(T.format(15), "c15", "unsupported call: update_plan"),
    tc(T.format(16), 1000, 0, 100),
    # the background command c3 ends after the turn (0.169 writes its item then: killed, -1)
    command(T.format(17), "c3", "failed", -1),
    # a result whose call is not in the history: not counted
    command(T.format(18), "c99", "failed", 1),
]
TOOLS = {"exec_command": 6, "shell": 2, "apply_patch": 2, "mcp__git__status": 4, "update_plan": 1}
RESULTS = {"exec_command": [1, 3, 0], "shell": [1, 1, 0], "apply_patch": [0, 1, 0],
           "mcp__git__status": [1, 2, 1]}  # [ok, error, semantic-error]; update_plan: none


def test_results_are_read_where_the_rollout_states_them_hand_checked():
    r = feed_all({path(P): jl(*LINES)})
    assert r.problems == []
    assert r.tools() == {P: TOOLS}
    assert r.tool_results() == {P: RESULTS}
    (s,) = r.sessions()
    assert (s.tools, s.tool_results) == (TOOLS, RESULTS)
    # unknown is what is left: 6 + 2 + 2 + 4 + 1 = 15 calls, 4 + 2 + 1 + 4 = 11 results (c4, c5,
    # c10 and c15 state none)
    assert sum(TOOLS.values()) - sum(map(sum, RESULTS.values())) == 4


def test_every_result_shape_alone():
    cases = [  # (the result line of call "c1" named `name`, the status it states)
        ("exec_command", command(T.format(2), "c1", "completed", 0), "ok"),
        ("exec_command", command(T.format(2), "c1", "failed", 3), "error"),
        ("exec_command", command(T.format(2), "c1", "declined"), "error"),
        ("exec_command", command(T.format(2), "c1", "inProgress"), None),
        ("exec_command", event(T.format(2), type="item_completed",    # no status: its exit code
                               item={"type": "command_execution", "id": "c1", "exit_code": 4}), "error"),
        ("exec_command", event(T.format(2), type="exec_command_end", call_id="c1", exit_code=0), "ok"),
        ("exec_command", event(T.format(2), type="exec_command_end", call_id="c1", exit_code=1), "error"),
        ("apply_patch", event(T.format(2), type="item_completed",
                              item={"type": "FileChange", "id": "c1", "changes": {}, "status": "failed"}), "error"),
        ("apply_patch", event(T.format(2), type="patch_apply_end", call_id="c1", success=True), "ok"),
        ("mcp__s__t", event(T.format(2), type="item_completed",
                            item={"type": "McpToolCall", "id": "c1", "server": "s", "tool": "t", "arguments": {},
                                  "status": "completed", "result": {"content": [], "isError": True}}), "error"),
        ("mcp__s__t", event(T.format(2), type="item_completed",
                            item={"type": "McpToolCall", "id": "c1", "server": "s", "tool": "t", "arguments": {},
                                  "status": "completed",
                                  "result": {"content": [{"type": "text", "text": '{"error": "x"}'}]}}),
         "semantic-error"),
        ("mcp__s__t", event(T.format(2), type="item_completed",
                            item={"type": "McpToolCall", "id": "c1", "server": "s", "tool": "t", "arguments": {},
                                  "status": "failed", "error": {"message": "x"}}), "error"),
        ("dyn", event(T.format(2), type="item_completed",
                      item={"type": "DynamicToolCall", "id": "c1", "tool": "dyn", "arguments": {},
                            "status": "completed", "success": True}), "ok"),
        ("exec_command", output(T.format(2), "c1", {"content": "x", "success": False}), "error"),
        ("exec_command", output(T.format(2), "c1", shell_json(0)), "ok"),
        ("exec_command", output(T.format(2), "c1", shell_json(127)), "error"),
        ("exec_command", output(T.format(2), "c1", "Exit code: 1\nWall time: 0.1 seconds\nOutput:\n"), None),
        ("exec_command", output(T.format(2), "c1", [{"type": "input_text", "text": "x"}]), None),
        ("exec_command", output(T.format(2), "c1", '{"output": "not json'), None),
        ("web_search", event(T.format(2), type="item_completed",
                             item={"type": "WebSearch", "id": "c1", "query": "q", "action": {}}), None),
    ]
    for name, line, status in cases:
        r = feed_all({path(P): jl(meta(P), call(T.format(1), name, "c1"), line)})
        want = {} if status is None else {
            P: {name: [int(status == "ok"), int(status == "error"), int(status == "semantic-error")]}}
        assert r.tool_results() == want, (name, line)
        assert r.problems == [] and r.tools() == {P: {name: 1}}


@pytest.mark.parametrize("rewrite", [False, True])
def test_fork_copies_of_results_count_once_and_disagreeing_results_keep_the_worse(rewrite):
    parent = jl(meta(P), ctx("m"), call(T.format(1), "exec_command", "c1"), command(T.format(2), "c1", "completed", 0),
                call(T.format(3), "exec_command", "c2"), command(T.format(4), "c2", "failed", 1),
                tc(T.format(5), 100, 0, 10))
    copies = [call(T.format(1), "exec_command", "c1"), command(T.format(2), "c1", "completed", 0),
              call(T.format(3), "exec_command", "c2"), command(T.format(4), "c2", "failed", 1),
              tc(T.format(5), 100, 0, 10)]
    if rewrite:  # the client writes the copies at fork time
        copies = [dict(x, timestamp=f"2026-03-11T09:00:00.00{i}Z") for i, x in enumerate(copies)]
    child = jl(meta(C, "2026-03-11T09:00:00.000Z", parent=P), meta(P), ctx("m"), *copies,
               call("2026-03-11T09:00:01.000Z", "exec_command", "c3"),
               command("2026-03-11T09:00:02.000Z", "c3", "completed", 0),
               # the same call's result stated twice, disagreeing: the worse stands
               output("2026-03-11T09:00:02.500Z", "c3", shell_json(1)),
               tc("2026-03-11T09:00:03.000Z", 150, 0, 15))
    files = {path(P): parent, "archived_sessions/" + path(C, stamp="2026-03-11T09-00-00").rsplit("/", 1)[1]: child}
    for order in (list(files), list(files)[::-1]):
        r = feed_all(files, order)
        assert r.tools() == {P: {"exec_command": 2}, C: {"exec_command": 1}}
        assert r.tool_results() == {P: {"exec_command": [1, 1, 0]}, C: {"exec_command": [0, 1, 0]}}


def test_results_survive_the_state_round_trip_at_every_line():
    data = jl(*LINES)
    state = None
    for end in [i + 1 for i, b in enumerate(data) if b == 0x0A]:
        r = CodexUsage(orjson.loads(orjson.dumps(state)) if state else None)
        off = r.offset(path(P))
        r.feed(path(P), data[off:end], off)
        state = r.state()
    assert CodexUsage(state).tool_results() == {P: RESULTS}


def test_a_version_2_state_is_refused_it_has_no_results():
    v2 = {k: v for k, v in feed_all({path(P): jl(*LINES)}).state().items() if k != "results"} | {"v": 2}
    with pytest.raises(ValueError):
        CodexUsage(v2)


# ---- in the index ------------------------------------------------------------------------------

def cli(*args: str) -> Any:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return res


def sql(q: str, *db: str) -> list[dict[str, Any]]:
    return json.loads(cli("sql", *db, q, "--json").stdout)


def test_runs_tool_columns_are_the_threads_calls_and_stated_results(home, tmp_path, db_url):
    src = tmp_path / "codex"
    (src / "sessions" / "2026" / "03" / "10").mkdir(parents=True)
    (src / path(P)).write_bytes(jl(*LINES))
    # a thread whose calls state no result: its uses are unknown, not 0 calls, not ok
    (src / path(C)).write_bytes(jl(meta(C), ctx("gpt-5.5"), call(T.format(1), "exec_command", "d1"),
                                   output(T.format(1), "d1", "Process exited with code 0"),
                                   call(T.format(2), "update_plan", "d2"), tc(T.format(3), 50, 0, 5)))
    cli("import", "codex", "--from", str(src))
    runs = sql("SELECT run_id, tool_calls, tool_ok, tool_errors, tool_semantic_errors, tool_unknown FROM runs_v "
               "ORDER BY run_id", "--db", db_url)
    assert runs == [
        {"run_id": f"codex-{P}", "tool_calls": 15, "tool_ok": 3, "tool_errors": 7, "tool_semantic_errors": 1,
         "tool_unknown": 4},
        {"run_id": f"codex-{C}", "tool_calls": 2, "tool_ok": 0, "tool_errors": 0, "tool_semantic_errors": 0,
         "tool_unknown": 2},
    ]
    tools = sql(f"SELECT tool_name, uses, ok, errors, semantic_errors, unknown FROM tool_uses_v "
                f"WHERE run_id = 'codex-{P}' ORDER BY tool_name", "--db", db_url)
    assert tools == [
        {"tool_name": "apply_patch", "uses": 2, "ok": 0, "errors": 1, "semantic_errors": 0, "unknown": 1},
        {"tool_name": "exec_command", "uses": 6, "ok": 1, "errors": 3, "semantic_errors": 0, "unknown": 2},
        {"tool_name": "mcp__git__status", "uses": 4, "ok": 1, "errors": 2, "semantic_errors": 1, "unknown": 0},
        {"tool_name": "shell", "uses": 2, "ok": 1, "errors": 1, "semantic_errors": 0, "unknown": 0},
        {"tool_name": "update_plan", "uses": 1, "ok": 0, "errors": 0, "semantic_errors": 0, "unknown": 1},
    ]
