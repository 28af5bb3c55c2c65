"""Codex tool calls and their results, as the rollout's fields state them (the rules are the
reducer's, ledger.sources.codex_usage): which `response_item` payloads are calls and under
what name, and the status (ok, error, semantic-error) an event or a call's output gives."""

from __future__ import annotations

from typing import Any

import orjson

from ledger.records.verdict import MCP_PREFIX, tool_status

# response_item payload types that are tool calls: counted under their own `name`, or a fixed one
NAMED_CALLS = frozenset({"function_call", "custom_tool_call"})
CALL_NAMES = {"local_shell_call": "local_shell", "web_search_call": "web_search",
              "tool_search_call": "tool_search", "image_generation_call": "image_generation"}
# an item_completed item's type (lower case, no `_`) -> the name of its status field's values
RESULT_ITEMS = frozenset({"commandexecution", "filechange", "mcptoolcall", "dynamictoolcall", "imagegeneration"})
_STATUS = {"completed": "ok", "failed": "error", "declined": "error"}  # (in progress: no result yet)
_WORSE = {"ok": 0, "semantic-error": 1, "error": 2}  # results that disagree: the worse stands
_EVENT_RESULTS = frozenset({"item_completed", "patch_apply_end", "exec_command_end", "mcp_tool_call_end"})


def _word(v: Any) -> str | None:
    """A status value as one lower-case word (`inProgress`, `in_progress` -> `inprogress`)."""
    return v.lower().replace("_", "") if type(v) is str else None


def event_result(ptype: str, p: dict[str, Any]) -> tuple[Any, str | None] | None:
    """An `_EVENT_RESULTS` event's (call id, status or None); None: an item that is no call."""
    if ptype == "item_completed":
        item = p.get("item")
        if isinstance(item, dict) and type(item.get("type")) is str:
            itype = item["type"].lower().replace("_", "")
            if itype in RESULT_ITEMS:
                return item.get("id"), _item_status(itype, item)
        return None
    if ptype == "mcp_tool_call_end":
        return p.get("call_id"), _mcp_end_status(p)
    # patch_apply_end, exec_command_end
    status = _STATUS.get(_word(p.get("status")))
    if status is None and type(p.get("success")) is bool:
        status = "ok" if p["success"] else "error"
    if status is None and type(p.get("exit_code")) is int:
        status = "ok" if p["exit_code"] == 0 else "error"
    return p.get("call_id"), status


def _item_status(itype: str, item: dict[str, Any]) -> str | None:
    status = _STATUS.get(_word(item.get("status")))
    if itype == "mcptoolcall" and status == "ok":
        return _mcp_status(item.get("server"), item.get("tool"), item.get("result"))
    if status is None and itype == "commandexecution" and type(item.get("exit_code", item.get("exitCode"))) is int:
        return "ok" if item.get("exit_code", item.get("exitCode")) == 0 else "error"
    if status is None and itype == "dynamictoolcall" and type(item.get("success")) is bool:
        return "ok" if item["success"] else "error"
    return status


def _mcp_status(server: Any, tool: Any, result: Any) -> str:
    """A completed MCP call: error when its result says `isError`, semantic-error when its
    content is an error envelope (ledger.records.verdict), else ok."""
    if not isinstance(result, dict):
        return "ok"
    is_error = result.get("isError", result.get("is_error")) is True
    name = f"{MCP_PREFIX}{server}__{tool}" if type(server) is str and type(tool) is str else MCP_PREFIX
    return tool_status(name, is_error, result.get("content"))


def _mcp_end_status(p: dict[str, Any]) -> str | None:
    """`mcp_tool_call_end`: `result` is Rust's `Result` (`{"Ok": CallToolResult}` / `{"Err": text}`)."""
    result = p.get("result")
    if not isinstance(result, dict):
        return None
    if "Err" in result:
        return "error"
    inv = p.get("invocation") if isinstance(p.get("invocation"), dict) else {}
    if isinstance(result.get("Ok"), dict):
        return _mcp_status(inv.get("server"), inv.get("tool"), result["Ok"])
    return None


def _output_status(output: Any) -> str | None:
    """A `function_call_output`'s output, where its shape says whether the call failed: an
    object with a boolean `success`, or the old `shell` tool's JSON text with
    `metadata.exit_code`. Any other text (`Process exited with code 1`) says nothing clear."""
    if isinstance(output, dict):
        ok = output.get("success")
        return None if type(ok) is not bool else ("ok" if ok else "error")
    if type(output) is not str or not output.startswith('{"output"') or not output.endswith("}"):
        return None
    try:
        obj = orjson.loads(output)
    except orjson.JSONDecodeError:
        return None
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    code = meta.get("exit_code") if isinstance(meta, dict) else None
    return None if type(code) is not int else ("ok" if code == 0 else "error")
