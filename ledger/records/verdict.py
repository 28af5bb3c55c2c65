"""The verdict of a run: does it count (`ok`), and if not, why (`error_kind`, `error_detail`).

One rule, derived from the record alone (docs/evaluation.md); the indexer stores its answer,
`ledger runs/show` and the views show it, `ledger run --json` says it at once. The first
matching line decides:

1. not settled: `abandoned` when the launcher is gone, else no verdict yet (ok is None);
2. the receipt is unreadable (outcome unknown): `evidence-unverified`;
3. ledger stopped it: `timeout`, `max-cost`; stopped by a signal or otherwise
   interrupted: `cancelled`;
4. the outcome is failed: `session-error` (detail: the agent's error when it gave one);
5. the stream did not verify (`evidence: unverifiable` on the result event) or the record
   has evidence gaps: `evidence-unverified`;
6. a skill was expected (`--expect-skill`) and not successfully invoked: `skill-not-invoked`;
7. otherwise ok.

Tool results are judged apart (`tool_status`): `ok`, `error` (the tool result said
`is_error: true`), `semantic-error` (an MCP tool, `mcp__*`, whose successful result carries
an error envelope: a JSON object with a string `error`, or text starting `error:`); a tool
use without a result is unknown.
"""

from __future__ import annotations

from typing import Any, NamedTuple


KINDS = ("abandoned", "timeout", "max-cost", "cancelled", "session-error", "evidence-unverified",
         "skill-not-invoked")
TOOL_STATUSES = ("ok", "error", "semantic-error")  # (and unknown: a use without a result)
DETAIL_CHARS = 200
MCP_PREFIX = "mcp__"


class Verdict(NamedTuple):
    ok: bool | None
    error_kind: str | None
    error_detail: str | None


NO_VERDICT = Verdict(None, None, None)
OK = Verdict(True, None, None)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS - 1] + "…"


def judge(*, state: str, outcome: str | None, result: dict[str, Any] | None, evidence_gaps: int,
          skill_invoked: bool | None) -> Verdict:
    """The rule above. `state`: settled | running | abandoned | unknown | unreadable;
    `result`: the folded facts of ledger's result event (fold.py), None without one."""
    if state != "settled":
        if state == "abandoned":
            return Verdict(False, "abandoned", "the launcher is gone and the run never settled")
        return NO_VERDICT
    if outcome is None:
        return Verdict(False, "evidence-unverified", "terminal.json cannot be read: the outcome is unknown")
    r = result or {}
    stop = r.get("stop_reason")
    if stop == "timeout":
        return Verdict(False, "timeout", "stopped by ledger run --timeout")
    if stop == "max_cost":
        return Verdict(False, "max-cost", "stopped by ledger run --max-cost")
    if stop == "signal" or outcome == "interrupted":
        by = r.get("stopped_by")
        return Verdict(False, "cancelled", _short(f"stopped by {by}") if isinstance(by, str) and by else "interrupted")
    if outcome == "failed":
        err = r.get("error")
        if isinstance(err, str) and err.strip():
            return Verdict(False, "session-error", _short(err))
        code = r.get("exit_code")
        return Verdict(False, "session-error", f"the run failed (exit code {code})" if type(code) is int
                       else "the run failed")
    if r.get("evidence") == "unverifiable":
        why = r.get("evidence_reason")
        return Verdict(False, "evidence-unverified", _short(why) if isinstance(why, str) and why
                       else "the provider stream did not verify")
    if evidence_gaps > 0:
        return Verdict(False, "evidence-unverified", f"{evidence_gaps} evidence gap(s) in the record")
    if skill_invoked is False:
        want = r.get("expected_skill")
        return Verdict(False, "skill-not-invoked", _short(f"expected skill {want} was not invoked")
                       if isinstance(want, str) and want else "the expected skill was not invoked")
    return OK


def judge_session(evidence_gaps: int) -> Verdict:
    """The verdict of a session imported from an agent's own log (settled: the log is the
    evidence, it states no outcome and ledger did not launch it): ok, unless its archive has
    evidence gaps (a rewritten log's new generation), then `evidence-unverified` (rule 5)."""
    if evidence_gaps > 0:
        return Verdict(False, "evidence-unverified", f"{evidence_gaps} evidence gap(s) in the archived log")
    return OK


def tool_status(name: str, is_error: bool, content: Any) -> str:
    """The status of one tool result: error, semantic-error (MCP tools only) or ok."""
    if is_error:
        return "error"
    if name.startswith(MCP_PREFIX) and _error_envelope(content):
        return "semantic-error"
    return "ok"


def _error_envelope(content: Any) -> bool:
    """A JSON object with a string `error`, or text starting `error:` (the first text part)."""
    text = content
    if isinstance(content, list):
        text = next((b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"), None)
    if not isinstance(text, str):
        return False
    s = text.strip()
    if s[:6].lower() == "error:":
        return True
    if s.startswith("{"):
        import orjson  # (here: importing it costs a warm `ledger runs` ~44 M instructions)

        try:
            obj = orjson.loads(s)
        except orjson.JSONDecodeError:
            return False
        return isinstance(obj, dict) and isinstance(obj.get("error"), str)
    return False


def combine_task(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One task's verdict from its runs, oldest first (each: ok, error_kind, error_detail,
    skill_invoked, tool_calls, tool_errors). The rules: skill invoked is false if any run's is
    false (unknown if no run expected one); tool counts are added; the first error kind (and
    its detail) is kept; ok is false if any run is not ok, unknown while a run has no verdict.
    (Cost: unknown if any run's is unknown; the report's group rule.)"""
    first = next((r for r in runs if r.get("error_kind")), None)
    oks = [r.get("ok") for r in runs]
    skills = [r.get("skill_invoked") for r in runs if r.get("skill_invoked") is not None]
    return {
        "ok": False if False in oks else (None if None in oks or not oks else True),
        "error_kind": first["error_kind"] if first else None,
        "error_detail": first.get("error_detail") if first else None,
        "skill_invoked": (False not in skills) if skills else None,
        "tool_calls": sum(r.get("tool_calls") or 0 for r in runs),
        "tool_errors": sum(r.get("tool_errors") or 0 for r in runs),
    }
