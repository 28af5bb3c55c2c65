"""Domain dataclasses of the run record (v1). Plain data: no I/O, no SQLAlchemy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

SCHEMA_VERSION = 1
OUTCOMES = ("completed", "failed", "interrupted")
EVENT_TYPES = frozenset({
    "provider_attempt_started", "provider_attempt_finished", "provider_session_observed",
    "handoff", "usage", "user_input", "conversation", "text", "tool_use", "result",
    "provider_output",
    # Written by current Loopflow builds though not in the v1 table: known, carried no
    # counters, so a real Loopflow home does not show them as evidence gaps.
    "activity", "provider_account_selected",
})
from ledger.records.counters import ALL_INT_COUNTERS, EXTRA_COUNTERS, INT_COUNTERS  # noqa: F401, E402
from ledger.records.project import project_of  # noqa: E402
# Across streams these take the max (they describe one context), the rest are summed.
MAX_ACROSS_STREAMS = frozenset({"peak_input_tokens", "context_window_tokens"})
I64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Subject:
    selector: str
    source: str = "declared"  # "declared" | "inherited"

    def to_dict(self) -> dict[str, Any]:
        return {"selector": self.selector, "source": self.source}


@dataclass
class Manifest:
    run_id: str
    created_at: str
    harness: str
    surface: str
    cwd: str
    host: str
    subjects: list[Subject]
    schema_version: int = SCHEMA_VERSION
    parent_run_id: str | None = None
    model: str | None = None
    repo: str | None = None
    worktree: str | None = None
    skill: str | None = None
    launch: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    runtime_path: str | None = None
    runtime_digest: str | None = None
    boot_id: str | None = None
    # ledger additions (optional for v1 readers): who launched the run, to tell live from abandoned.
    launcher: dict[str, Any] | None = None
    # ledger additions for comparisons (issue 30; written only when set, read as None when
    # absent or malformed): the arm the run belongs to (`ledger run --arm`), a repeated
    # trial's place `{"number": i, "of": n}` (`--repeat`), and on the parent run of a
    # repeat `{"trials": n, "jobs": k}`
    arm: str | None = None
    trial: dict[str, int] | None = None
    repeat: dict[str, int] | None = None

    @property
    def trial_number(self) -> int | None:
        """A repeated trial's number (from 1), else None."""
        return self.trial["number"] if self.trial else None

    @property
    def trials(self) -> int | None:
        """How many trials the run's repeat asked for: a trial's `of`, a repeat parent's `trials`."""
        return self.trial["of"] if self.trial else (self.repeat["trials"] if self.repeat else None)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "schema_version": self.schema_version,
            "run_id": self.run_id,
            "parent_run_id": self.parent_run_id,
            "created_at": self.created_at,
            "harness": self.harness,
            "model": self.model,
            "surface": self.surface,
            "cwd": self.cwd,
            "repo": self.repo,
            "worktree": self.worktree,
            "skill": self.skill,
            "subjects": [s.to_dict() for s in self.subjects],
            "launch": self.launch,
            "context": self.context,
            "runtime_path": self.runtime_path,
            "runtime_digest": self.runtime_digest,
            "host": self.host,
            "boot_id": self.boot_id,
        }
        if self.launcher is not None:
            d["launcher"] = self.launcher
        for key in ("arm", "trial", "repeat"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        return d


@dataclass
class UsageTotals:
    """The reduced usage of one run. None means nobody reported it (unknown is not zero)."""

    streams: int = 0
    final_streams: int = 0
    gaps: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_input_tokens: int | None = None
    peak_input_tokens: int | None = None
    context_window_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "streams": self.streams,
            "final_streams": self.final_streams,
            "gaps": self.gaps,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_input_tokens": self.total_input_tokens,
            "peak_input_tokens": self.peak_input_tokens,
            "context_window_tokens": self.context_window_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cost_usd": self.cost_usd,
        }


@dataclass
class UsageStreamTotals:
    """One usage stream (attempt, turn, model) after reduction."""

    stream_id: str
    provider: str | None
    model: str | None
    attempt_key: str | None
    turn_key: str | None
    observations: int
    final_receipt: bool
    counters: dict[str, int | None]
    cost_usd: float | None


@dataclass
class RunSnapshot:
    """What a reader knows about one run. `to_dict()` is the `--json` shape (stable)."""

    id: str
    parent_run_id: str | None
    repo: str | None
    worktree: str | None
    subjects: list[Subject]
    skill: str | None
    outcome: str | None
    started: str | None
    ended: str | None
    usage: UsageTotals
    evidence_gaps: int
    harness: str | None
    model: str | None
    surface: str | None
    state: str = "unknown"  # settled | running | abandoned | unknown
    source: str = "record"  # record | claude-log | codex-log (an imported session, issue 15)
    host: str | None = None
    cwd: str | None = None
    path: str | None = None
    provider_session_id: str | None = None
    final_answer: str | None = None
    streams: list[UsageStreamTotals] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    tool_uses: dict[str, int] = field(default_factory=dict)
    api_retries: int = 0
    skill_invoked: bool | None = None
    # the verdict (ledger.records.verdict) and tool results per tool: [ok, error, semantic-error]
    ok: bool | None = None
    error_kind: str | None = None
    error_detail: str | None = None
    tool_status: dict[str, list[int]] = field(default_factory=dict)
    # what ran (the result event's redacted argv, shlex-joined: ledger.records.fold.command_text)
    # and its exit code; None: not known (no result event, an imported session)
    command: str | None = None
    exit_code: int | None = None
    # the run's cost as `ledger report run` has it (cost auto: ledger.report.aggregate.run_rows;
    # the records path: ledger.views.record_cost): {cost_usd, cost_basis, cost_usd_known}
    cost: dict[str, Any] | None = None
    # the runs whose parent_run_id is this run ({id, outcome, state, started, harness,
    # surface}): filled by `ledger show` (the index knows them), not part of to_dict()
    children: list[dict[str, Any]] = field(default_factory=list)
    # `ledger run --arm` / `--repeat` (issue 30): the arm, the trial's number, the repeat's trials
    arm: str | None = None
    trial: int | None = None
    trials: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "parent_run_id": self.parent_run_id,
            "repo": self.repo,
            "worktree": self.worktree,
            "project": project_of(self.worktree, self.cwd),  # (issue 29: what --project matches)
            "subjects": [s.selector for s in self.subjects],
            "skill": self.skill,
            "outcome": self.outcome,
            "state": self.state,
            "started": self.started,
            "ended": self.ended,
            "usage": self.usage.to_dict(),
            **(self.cost or {"cost_usd": None, "cost_basis": None, "cost_usd_known": None}),
            "evidence_gaps": self.evidence_gaps,
            "harness": self.harness,
            "model": self.model,
            "surface": self.surface,
            "source": self.source,
            "host": self.host,
            "ok": self.ok,
            "error_kind": self.error_kind,
            "error_detail": self.error_detail,
            "skill_invoked": self.skill_invoked,
            "exit_code": self.exit_code,
            "command": self.command,
            "arm": self.arm,
            "trial": self.trial,
            "trials": self.trials,
        }


@dataclass
class ScanProblem:
    """A record that could not be read: reported with its path and reason, then skipped."""

    path: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


SKIPPED_SHOWN = 5  # damaged records a reading command names before it sums up the rest


def skipped_warnings(problems: Sequence[ScanProblem], shown: int = SKIPPED_SHOWN) -> list[str]:
    """The warnings a reading command (runs, show, report, sql) prints for damaged records:
    the first `shown` by path and reason, then one line for the rest. A home with 1,000
    damaged records would otherwise print 1,000 lines before every answer; `ledger index`
    (and its --json) lists every one."""
    out = [f"warning: skipped damaged record {p.path}: {p.reason}" for p in problems[:shown]]
    if len(problems) > shown:
        out.append(f"warning: ... and {len(problems) - shown:,} more damaged records skipped "
                   "(`ledger index` lists them all)")
    return out
