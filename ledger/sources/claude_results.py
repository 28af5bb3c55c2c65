"""What the Claude Code reducer (ledger.sources.claude_usage) answers: responses counted once,
the cost a session's cumulative levels added, and sessions as their lines describe them
(the lines it could not read: ledger.sources.jsonlines.Problem)."""

from __future__ import annotations

from dataclasses import dataclass

from ledger.sources.jsonlines import Timed


@dataclass(frozen=True)
class Response(Timed):
    """One API response, counted once."""

    message_id: str
    request_key: str | None
    model: str | None
    time: str | None            # first appearance, canonical UTC (None: no copy had a timestamp)
    session_id: str | None
    agent_id: str | None
    sidechain: bool             # True only when every copy was a sidechain copy
    counters: dict[str, int | None]
    cost_usd: float | None      # 2.0.x per-line costUSD (reported), else None
    file: str                   # where the preferred copy is
    line: int


@dataclass(frozen=True)
class CostDelta(Timed):
    """Reported cost a session added (from its cumulative `cost-state` lines)."""

    session_id: str
    model: str | None           # None: only `totalCostUSD` was known
    time: str | None
    cost_usd: float | None      # None: the client said this model's cost is unknown


@dataclass(frozen=True)
class SessionInfo:
    """A session as its lines describe it (subagent files' lines carry the parent's id)."""

    session_id: str
    started: str | None
    ended: str | None
    cwd: str | None
    git_branch: str | None
    version: str | None
    entrypoint: str | None      # "cli": interactive; "sdk-cli": `claude -p` / the SDK
    tools: dict[str, int]
    files: tuple[str, ...] = ()  # every file holding a line of it (its counted responses may be in others)
