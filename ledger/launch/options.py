"""What one `ledger run` is given (RunOptions) and what it returns to the CLI (RunResult),
for the headless launcher (runner.py) and the interactive one (interactive.py) alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ledger.launch.capture import DEFAULT_CAPTURE_BYTES
from ledger.records.verdict import NO_VERDICT, Verdict

# --expect-skill: the agent exited 0 but the skill was never successfully invoked (the
# verdict skill-not-invoked); RunOptions.fail_on_skill=False (`--no-fail`) keeps the agent's 0
EXIT_SKILL_NOT_INVOKED = 123
# the token counters a RunResult reports
TOKEN_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
              "reasoning_tokens", "total_input_tokens")


@dataclass
class RunOptions:
    argv: Sequence[str]
    home: Path
    harness: str = "auto"
    subjects: Sequence[str] = ()
    skill: str | None = None
    model: str | None = None
    timeout: float | None = None
    redact: Sequence[str] = ()
    expect_skill: str | None = None
    fail_on_skill: bool = True            # exit EXIT_SKILL_NOT_INVOKED when the skill was not invoked
    max_cost: float | None = None
    progress: bool | None = None          # None: when stderr is a terminal
    json_output: bool = False
    cwd: str | None = None
    env: Mapping[str, str] | None = None  # the child's environment (default: ours)
    grace_secs: float = 5.0               # SIGTERM -> SIGKILL
    drain_secs: float = 2.0               # after the child exits, wait this long for EOF
    capture_bytes: int = DEFAULT_CAPTURE_BYTES
    stdout_fd: int = 1                    # where a command's stdout is passed through
    nice: int = 0                         # lower this process's CPU priority once the child runs
                                          # (the CLI uses 10: a dedicated process; a library
                                          # caller's priority is left alone)
    arm: str | None = None                # manifest `arm` (`--arm`)
    trial: Mapping[str, int] | None = None  # manifest `trial` {number, of} (a trial of `--repeat`)
    run_id: str | None = None             # the run's id (`--repeat` mints its trials' ids); default: minted


@dataclass
class RunResult:
    run_id: str
    path: str
    harness: str
    model: str | None
    outcome: str
    exit_code: int
    returncode: int | None
    stop_reason: str | None
    duration_secs: float
    evidence: str
    evidence_reasons: list[str]
    tokens: dict[str, int | None]
    cost_usd: float | None
    cost_basis: str | None
    cost_note: str | None
    final_answer: str | None
    provider_session_id: str | None
    api_retries: int
    skill_invoked: bool | None
    final_streams: int
    streams: int
    raw_stream: dict[str, Any] | None = None
    error: str | None = None
    hint: str | None = None        # with `error`: the command that fixes it (not in to_json)
    extra: dict[str, Any] = field(default_factory=dict)
    verdict: Verdict = NO_VERDICT  # ledger.records.verdict, judged from what the launch saw

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "path": self.path, "harness": self.harness, "model": self.model,
            "outcome": self.outcome, "exit_code": self.exit_code, "stop_reason": self.stop_reason,
            "duration_secs": round(self.duration_secs, 6), "evidence": self.evidence,
            "evidence_reasons": self.evidence_reasons, "tokens": self.tokens, "cost_usd": self.cost_usd,
            "cost_basis": self.cost_basis, "cost_note": self.cost_note,
            "provider_session_id": self.provider_session_id, "api_retries": self.api_retries,
            "skill_invoked": self.skill_invoked, "usage_streams": self.streams,
            "final_streams": self.final_streams, "raw_stream": self.raw_stream,
            "final_answer": self.final_answer, "error": self.error, **self.extra,
            "ok": self.verdict.ok, "error_kind": self.verdict.error_kind, "error_detail": self.verdict.error_detail,
        }
