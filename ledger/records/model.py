"""Domain records of the run record (v1). Plain data: no I/O, no SQLAlchemy.

Written on ledger.plainclass.Plain, not @dataclass (`dataclasses` imports `inspect`, and each
class compiles its methods at import: ~58 M instructions of a warm `ledger show`); equality,
repr and the `dataclasses` functions behave as for the dataclasses they were."""

from __future__ import annotations

from typing import Any, Sequence

from ledger.plainclass import FrozenPlain, Plain

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


class Subject(FrozenPlain):
    __slots__ = ("selector", "source")

    def __init__(
            self,
            selector: str,
            source: str = "declared",  # "declared" | "inherited"
    ) -> None:
        object.__setattr__(self, "selector", selector)
        object.__setattr__(self, "source", source)

    def to_dict(self) -> dict[str, Any]:
        return {"selector": self.selector, "source": self.source}


class Manifest(Plain):
    __slots__ = (
        "run_id", "created_at", "harness", "surface", "cwd", "host", "subjects", "schema_version", "parent_run_id",
        "model", "repo", "worktree", "skill", "launch", "context", "runtime_path", "runtime_digest", "boot_id",
        "launcher", "arm", "trial", "repeat",
    )

    def __init__(
            self,
            run_id: str,
            created_at: str,
            harness: str,
            surface: str,
            cwd: str,
            host: str,
            subjects: list[Subject],
            schema_version: int = SCHEMA_VERSION,
            parent_run_id: str | None = None,
            model: str | None = None,
            repo: str | None = None,
            worktree: str | None = None,
            skill: str | None = None,
            launch: dict[str, Any] | None = None,
            context: dict[str, Any] | None = None,
            runtime_path: str | None = None,
            runtime_digest: str | None = None,
            boot_id: str | None = None,
            # ledger additions (optional for v1 readers): who launched the run, to tell live from abandoned.
            launcher: dict[str, Any] | None = None,
            # ledger additions for comparisons (issue 30; written only when set, read as None when
            # absent or malformed): the arm the run belongs to (`ledger run --arm`), a repeated
            # trial's place `{"number": i, "of": n}` (`--repeat`), and on the parent run of a
            # repeat `{"trials": n, "jobs": k}`
            arm: str | None = None,
            trial: dict[str, int] | None = None,
            repeat: dict[str, int] | None = None,
    ) -> None:
        self.run_id = run_id
        self.created_at = created_at
        self.harness = harness
        self.surface = surface
        self.cwd = cwd
        self.host = host
        self.subjects = subjects
        self.schema_version = schema_version
        self.parent_run_id = parent_run_id
        self.model = model
        self.repo = repo
        self.worktree = worktree
        self.skill = skill
        self.launch = launch
        self.context = context
        self.runtime_path = runtime_path
        self.runtime_digest = runtime_digest
        self.boot_id = boot_id
        self.launcher = launcher
        self.arm = arm
        self.trial = trial
        self.repeat = repeat

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


class UsageTotals(Plain):
    """The reduced usage of one run. None means nobody reported it (unknown is not zero)."""

    __slots__ = (
        "streams", "final_streams", "gaps", "input_tokens", "output_tokens", "total_input_tokens",
        "peak_input_tokens", "context_window_tokens", "reasoning_tokens", "cache_read_tokens", "cache_write_tokens",
        "cost_usd",
    )

    def __init__(
            self,
            streams: int = 0,
            final_streams: int = 0,
            gaps: int = 0,
            input_tokens: int | None = None,
            output_tokens: int | None = None,
            total_input_tokens: int | None = None,
            peak_input_tokens: int | None = None,
            context_window_tokens: int | None = None,
            reasoning_tokens: int | None = None,
            cache_read_tokens: int | None = None,
            cache_write_tokens: int | None = None,
            cost_usd: float | None = None,
    ) -> None:
        self.streams = streams
        self.final_streams = final_streams
        self.gaps = gaps
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.total_input_tokens = total_input_tokens
        self.peak_input_tokens = peak_input_tokens
        self.context_window_tokens = context_window_tokens
        self.reasoning_tokens = reasoning_tokens
        self.cache_read_tokens = cache_read_tokens
        self.cache_write_tokens = cache_write_tokens
        self.cost_usd = cost_usd

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


class UsageStreamTotals(Plain):
    """One usage stream (attempt, turn, model) after reduction."""

    __slots__ = (
        "stream_id", "provider", "model", "attempt_key", "turn_key", "observations", "final_receipt", "counters",
        "cost_usd",
    )

    def __init__(
            self,
            stream_id: str,
            provider: str | None,
            model: str | None,
            attempt_key: str | None,
            turn_key: str | None,
            observations: int,
            final_receipt: bool,
            counters: dict[str, int | None],
            cost_usd: float | None,
    ) -> None:
        self.stream_id = stream_id
        self.provider = provider
        self.model = model
        self.attempt_key = attempt_key
        self.turn_key = turn_key
        self.observations = observations
        self.final_receipt = final_receipt
        self.counters = counters
        self.cost_usd = cost_usd


class RunSnapshot(Plain):
    """What a reader knows about one run. `to_dict()` is the `--json` shape (stable)."""

    __slots__ = (
        "id", "parent_run_id", "repo", "worktree", "subjects", "skill", "outcome", "started", "ended", "usage",
        "evidence_gaps", "harness", "model", "surface", "state", "source", "host", "cwd", "path",
        "provider_session_id", "final_answer", "streams", "attempts", "tool_uses", "api_retries", "skill_invoked",
        "ok", "error_kind", "error_detail", "tool_status", "command", "exit_code", "cost", "children", "arm",
        "trial", "trials",
    )

    def __init__(
            self,
            id: str,
            parent_run_id: str | None,
            repo: str | None,
            worktree: str | None,
            subjects: list[Subject],
            skill: str | None,
            outcome: str | None,
            started: str | None,
            ended: str | None,
            usage: UsageTotals,
            evidence_gaps: int,
            harness: str | None,
            model: str | None,
            surface: str | None,
            state: str = "unknown",  # settled | running | abandoned | unknown
            source: str = "record",  # record | claude-log | codex-log (an imported session, issue 15)
            host: str | None = None,
            cwd: str | None = None,
            path: str | None = None,
            provider_session_id: str | None = None,
            final_answer: str | None = None,
            streams: list[UsageStreamTotals] | None = None,
            attempts: list[dict[str, Any]] | None = None,
            tool_uses: dict[str, int] | None = None,
            api_retries: int = 0,
            skill_invoked: bool | None = None,
            # the verdict (ledger.records.verdict) and tool results per tool: [ok, error, semantic-error]
            ok: bool | None = None,
            error_kind: str | None = None,
            error_detail: str | None = None,
            tool_status: dict[str, list[int]] | None = None,
            # what ran (the result event's redacted argv, shlex-joined: ledger.records.fold.command_text)
            # and its exit code; None: not known (no result event, an imported session)
            command: str | None = None,
            exit_code: int | None = None,
            # the run's cost as `ledger report run` has it (cost auto: ledger.report.aggregate.run_rows;
            # the records path: ledger.views.record_cost): {cost_usd, cost_basis, cost_usd_known}
            cost: dict[str, Any] | None = None,
            # the runs whose parent_run_id is this run ({id, outcome, state, started, harness,
            # surface}): filled by `ledger show` (the index knows them), not part of to_dict()
            children: list[dict[str, Any]] | None = None,
            # `ledger run --arm` / `--repeat` (issue 30): the arm, the trial's number, the repeat's trials
            arm: str | None = None,
            trial: int | None = None,
            trials: int | None = None,
    ) -> None:
        self.id = id
        self.parent_run_id = parent_run_id
        self.repo = repo
        self.worktree = worktree
        self.subjects = subjects
        self.skill = skill
        self.outcome = outcome
        self.started = started
        self.ended = ended
        self.usage = usage
        self.evidence_gaps = evidence_gaps
        self.harness = harness
        self.model = model
        self.surface = surface
        self.state = state
        self.source = source
        self.host = host
        self.cwd = cwd
        self.path = path
        self.provider_session_id = provider_session_id
        self.final_answer = final_answer
        self.streams = [] if streams is None else streams
        self.attempts = [] if attempts is None else attempts
        self.tool_uses = {} if tool_uses is None else tool_uses
        self.api_retries = api_retries
        self.skill_invoked = skill_invoked
        self.ok = ok
        self.error_kind = error_kind
        self.error_detail = error_detail
        self.tool_status = {} if tool_status is None else tool_status
        self.command = command
        self.exit_code = exit_code
        self.cost = cost
        self.children = [] if children is None else children
        self.arm = arm
        self.trial = trial
        self.trials = trials

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


class ScanProblem(Plain):
    """A record that could not be read: reported with its path and reason, then skipped."""

    __slots__ = ("path", "reason")

    def __init__(
            self,
            path: str,
            reason: str,
    ) -> None:
        self.path = path
        self.reason = reason

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
