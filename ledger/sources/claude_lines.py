"""What one Claude Code transcript line holds, read the way the reducer's rules say
(ledger.sources.claude_usage): its line type, its usage counters, its cost, the session a
copied or untyped line belongs to, and the session and agent a transcript's path names."""

from __future__ import annotations

import math
from typing import Any

from ledger.sources.jsonlines import _count

SYNTHETIC_MODEL = "<synthetic>"  # locally made messages: no API call, no usage

# Line types Claude Code writes (2.0.x-2.1.328): skipped silently. Anything else is counted.
KNOWN_TYPES = frozenset({
    "user", "assistant", "system", "attachment", "progress", "summary", "custom-title", "ai-title",
    "tag", "agent_metadata", "queue-operation", "api-request", "api-request-resumed",
    "api-request-shape", "api-request-blob", "frame-link", "observer-ref", "continued-in",
    "resume-head-vouch", "file-history-snapshot", "file-history-delta", "attribution-snapshot",
    "relocated", "agent-name", "agent-color", "agent-setting", "mode", "permission-mode",
    "session-owner", "isolation-latch", "dev-mods", "atis-latch", "worktree-state", "bridge-session",
    "tools-used", "data-flow-records", "data-flow-incomplete", "derived-from", "pr-link",
    "history-suppression", "ended-by-model", "cost-state", "last-prompt", "content-replacement",
    "memory-mode", "artifact-comment-monitor", "artifact-autoreact-ledger", "fork-context-ref",
    "repl-mode",
})


def _cost(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if math.isfinite(v) and v >= 0 else None


def _max(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a if a >= b else b


def _usage_counters(u: dict[str, Any]) -> list[int | None]:
    cc = u.get("cache_creation")
    cc = cc if isinstance(cc, dict) else {}
    details = u.get("output_tokens_details")
    thinking = details.get("thinking_tokens") if isinstance(details, dict) else None
    return [_count(u.get("input_tokens")), _count(u.get("cache_read_input_tokens")),
            _count(u.get("cache_creation_input_tokens")), _count(u.get("output_tokens")),
            _count(thinking), _count(cc.get("ephemeral_5m_input_tokens")),
            _count(cc.get("ephemeral_1h_input_tokens"))]


def session_of_path(file: str) -> tuple[str | None, str | None]:
    """(session id, agent id) implied by a transcript path: `<session>.jsonl` or
    `<session>/subagents/**/agent-<id>.jsonl`. Used when a line does not say."""
    parts = file.replace("\\", "/").split("/")
    name = parts[-1]
    stem = name[:-6] if name.endswith(".jsonl") else name
    if "subagents" in parts:
        i = len(parts) - 1 - parts[::-1].index("subagents")
        session = parts[i - 1] if i >= 1 else None
        agent = stem[6:] if stem.startswith("agent-") else stem
        return session, agent
    return stem or None, None


def _untyped_response(obj: dict[str, Any]) -> bool:
    """A line without `type` that holds a response (`message.id` and `message.usage`, the role
    assistant or unsaid): counted as an assistant line (the shape of ccusage's test data; a
    log of such lines would otherwise count nothing)."""
    m = obj.get("message")
    return (isinstance(m, dict) and type(m.get("id")) is str and isinstance(m.get("usage"), dict)
            and m.get("role", "assistant") == "assistant")


def _copied_from(obj: dict[str, Any], session: str | None) -> str | None:
    """The session a copied line belongs to (`requestSessionId` other than its `sessionId`)."""
    p = obj.get("requestSessionId")
    return p if type(p) is str and p and p != session else None
