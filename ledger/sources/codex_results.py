"""What the Codex reducer (ledger.sources.codex_usage) answers: the usage each cumulative level
or call record charged, and each thread's session summary (the lines it could not read:
ledger.sources.jsonlines.Problem)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.sources.jsonlines import Timed


@dataclass(frozen=True)
class Delta(Timed):
    """One cumulative level of a chain, charged once: the usage it added."""

    chain: str
    model: str | None
    time: str | None            # first appearance, canonical UTC
    session_id: str | None      # the thread whose file holds the earliest copy
    counters: dict[str, int | None]
    restart: bool               # charged whole: the total went down before it
    file: str
    line: int
    service_tier: str | None = None   # `priority`, `flex`, ... (None: the default tier)
    response_id: str | None = None    # the call's own record (0.169), else a delta of totals


@dataclass(frozen=True)
class Session:
    """What a rollout's own `session_meta` says about its thread (for session rows)."""

    session_id: str
    forked_from_id: str | None
    cwd: str | None
    originator: str | None      # codex_exec for `codex exec`, codex_cli_rs for the TUI
    source: str | None          # "cli", "exec", ...
    cli_version: str | None
    git_branch: str | None
    git_repository_url: str | None
    started: str | None
    ended: str | None
    files: tuple[str, ...]
    tools: dict[str, int] = field(default_factory=dict)  # tool name -> calls attributed to the thread
    # tool name -> [ok, error, semantic-error] results of those calls (the rest: unknown)
    tool_results: dict[str, list[int]] = field(default_factory=dict)
