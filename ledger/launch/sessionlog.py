"""The provider session of an interactive run: pinned or found, then read from its own log.

An interactive agent writes no stream ledger can read; its session log is the evidence
(DESIGN §4b). This module

1. **pins** the session where the client lets us: Claude Code gets `--session-id UUID`
   (unless the user gave `--session-id`; a `--resume ID` names it too);
2. otherwise **finds** it after the agent exited: the logs (Codex rollouts, Gemini chats)
   that appeared or grew under the client's config dir while the run lasted, whose own
   header says this run's directory (`cwd`), a start time within the run, and, for Codex,
   an interactive originator. Exactly one is the session; several are recorded as
   `ambiguous` with the candidates, none as `unresolved` with why (never guessed);
3. **archives** the client's logs into the home as `ledger import` does
   (ledger.sources.archive.import_client: the archive is the evidence, and the index links
   the archived session to the run by its session id: counted once, as the run);
4. **reads** the session's usage, tools and tool results with the same reducers the import
   uses (ledger.sources.claude_usage / codex_usage / gemini_usage): per model, the sums of
   the session's responses and, for Claude Code, its own cost (cost-state). The launcher
   writes them into the run record as final usage receipts.

A resumed session (`claude --resume`, `codex resume`) also holds earlier runs' usage: only
the responses that arrived during this run are this run's (their first appearance is after
the run started), and Claude's cost is then the increase of the session's cumulative cost
during the run.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from ledger.errors import LedgerError
from ledger.launch.adapters.base import option_value

RESOLVED, AMBIGUOUS, UNRESOLVED = "resolved", "ambiguous", "unresolved"
CLOCK_SLACK = timedelta(seconds=5)  # a log's own start time may precede the launcher's clock reading a little
CODEX_BATCH_ORIGINATORS = ("codex_exec", "codex-exec")


@dataclass
class Resolution:
    status: str                        # resolved | ambiguous | unresolved
    session_id: str | None = None
    files: list[str] = field(default_factory=list)
    reason: str | None = None          # why not resolved
    candidates: list[str] = field(default_factory=list)  # ambiguous: the session ids that matched

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "session_id": self.session_id, "files": self.files,
                "reason": self.reason, "candidates": self.candidates}


@dataclass
class SessionUsage:
    """One model's share of the session during the run."""

    model: str | None
    counters: dict[str, int | None]
    cost_usd: float | None
    responses: int


@dataclass
class SessionFacts:
    usage: list[SessionUsage]
    tools: dict[str, int]
    tool_results: dict[str, list[int]]  # name -> [ok, error, semantic-error]
    problems: int


def _utc(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _client(harness: str) -> Any:
    from ledger.sources.logdirs import CLIENTS

    return CLIENTS[harness]


def config_roots(harness: str, env: Mapping[str, str]) -> list[Path]:
    """The client's config dirs as the child sees them (its environment)."""
    from ledger.sources.logdirs import default_roots

    return default_roots(_client(harness), env)


# ---------------------------------------------------------------- 1. pinning

CLAUDE_SESSION_FLAGS = ("--session-id",)
CLAUDE_RESUME_FLAGS = ("--resume", "-r")
CLAUDE_CONTINUE_FLAGS = ("--continue", "-c")


def pin_session(harness: str, argv: Sequence[str]) -> tuple[list[str], str | None, bool]:
    """(argv to run, the pinned session id, resumed). Claude Code: the user's `--session-id`,
    a `--resume ID`, else a new UUID passed as `--session-id` (right after the executable).
    Other clients: argv unchanged, nothing pinned."""
    argv = list(argv)
    if harness != "claude":
        return argv, None, _codex_resumed(argv) if harness == "codex" else False
    given = option_value(argv, CLAUDE_SESSION_FLAGS)
    resumed = any(a in CLAUDE_RESUME_FLAGS + CLAUDE_CONTINUE_FLAGS or a.startswith("--resume=") for a in argv[1:])
    if given:
        return argv, given, resumed
    resume = option_value(argv, CLAUDE_RESUME_FLAGS)
    if resume and not resume.startswith("-"):
        if "--fork-session" in argv:
            sid = str(uuid.uuid4())
            return [argv[0], "--session-id", sid, *argv[1:]], sid, True
        return argv, resume, True
    if resumed:  # `--continue` / a bare `--resume` (picker): the session is found, not pinned
        return argv, None, True
    sid = str(uuid.uuid4())
    return [argv[0], "--session-id", sid, *argv[1:]], sid, False


def _codex_resumed(argv: Sequence[str]) -> bool:
    return any(a in ("resume", "fork") for a in argv[1:2])


# ---------------------------------------------------------------- 2. finding

@dataclass
class LogSnapshot:
    """The sizes of a client's log files before the run (what appeared or grew is new)."""

    harness: str
    roots: list[Path]
    sizes: dict[str, int]


def _log_files(harness: str, roots: Sequence[Path]) -> dict[str, int]:
    client = _client(harness)
    out: dict[str, int] = {}
    for root in roots:
        for sub in client.subdirs:
            base = root / sub
            if not base.is_dir():
                continue
            for dirpath, _dirs, files in os.walk(base):
                rel = os.path.relpath(dirpath, root)
                for name in files:
                    if not client.wanted(name, f"{rel}/{name}"):
                        continue
                    p = os.path.join(dirpath, name)
                    try:
                        out[p] = os.stat(p).st_size
                    except OSError:
                        continue
    return out


def snapshot(harness: str, env: Mapping[str, str]) -> LogSnapshot:
    roots = config_roots(harness, env)
    return LogSnapshot(harness, roots, _log_files(harness, roots))


def _changed(snap: LogSnapshot) -> list[str]:
    now = _log_files(snap.harness, snap.roots)
    return sorted(p for p, size in now.items() if size > snap.sizes.get(p, -1))


def resolve(harness: str, snap: LogSnapshot, pinned: str | None, cwd: str, started: datetime) -> Resolution:
    """Which session the run's agent wrote (see the module docstring)."""
    changed = _changed(snap)
    if harness == "claude":
        return _resolve_claude(snap, pinned, changed, cwd, started)
    if harness == "codex":
        return _resolve_by_header(changed, cwd, started, _codex_header, "Codex rollout")
    if harness == "gemini":
        res = _resolve_by_header(changed, cwd, started, _gemini_header, "Gemini chat log")
        if res.status == RESOLVED:  # its subagents' files, in chats/<session id>/
            sub = {p for p in changed if os.path.basename(os.path.dirname(p)) == res.session_id}
            res.files = sorted(set(res.files) | sub)
        return res
    return Resolution(UNRESOLVED, reason=f"no session log is known for {harness}")


def _resolve_claude(snap: LogSnapshot, pinned: str | None, changed: list[str], cwd: str,
                    started: datetime) -> Resolution:
    from ledger.sources.claude_lines import session_of_path

    if pinned:
        files = sorted(p for p in _log_files("claude", snap.roots)
                       if session_of_path(p)[0] == pinned)
        if not files:
            return Resolution(UNRESOLVED, session_id=pinned,
                              reason=f"Claude Code wrote no transcript for session {pinned} "
                                     f"under {', '.join(map(str, snap.roots))} (no prompt was sent?)")
        return Resolution(RESOLVED, session_id=pinned, files=files)
    by_session: dict[str, list[str]] = {}
    for p in changed:
        sid = session_of_path(p)[0]
        if sid:
            by_session.setdefault(sid, []).append(p)
    return _one_of(by_session, "Claude Code transcript", snap)


def _one_of(by_session: dict[str, list[str]], what: str, snap: LogSnapshot | None = None) -> Resolution:
    if len(by_session) == 1:
        ((sid, files),) = by_session.items()
        return Resolution(RESOLVED, session_id=sid, files=sorted(files))
    if not by_session:
        where = f" under {', '.join(map(str, snap.roots))}" if snap is not None else ""
        return Resolution(UNRESOLVED, reason=f"no {what} of this run's directory appeared or grew{where} "
                                             "while it ran")
    return Resolution(AMBIGUOUS, reason=f"{len(by_session)} {what}s of this run's directory changed while it "
                                        "ran: not guessed", candidates=sorted(by_session))


def _first_line(path: str, limit: int = 1 << 20) -> Any:
    from ledger.records import jsonio

    try:
        with open(path, "rb") as f:
            line = f.readline(limit)
    except OSError:
        return None
    try:
        return jsonio.loads(line)
    except (jsonio.JSONDecodeError, ValueError):
        return None


def _codex_header(path: str) -> tuple[str | None, str | None, str | None, bool]:
    """(session id, cwd, start time, interactive) from a rollout's session_meta line."""
    obj = _first_line(path)
    p = obj.get("payload") if isinstance(obj, dict) and obj.get("type") == "session_meta" else None
    if not isinstance(p, dict):
        return None, None, None, False
    sid = p.get("id") if isinstance(p.get("id"), str) else None
    origin = p.get("originator") if isinstance(p.get("originator"), str) else ""
    return sid, p.get("cwd") if isinstance(p.get("cwd"), str) else None, p.get("timestamp"), \
        origin not in CODEX_BATCH_ORIGINATORS


def _gemini_header(path: str) -> tuple[str | None, str | None, str | None, bool]:
    """(session id, None, start time, True) from a chat log's header line (Gemini's chats
    live under a directory per project: cwd is not in the log, the project dir is)."""
    obj = _first_line(path)
    if not isinstance(obj, dict):
        return None, None, None, False
    sid = obj.get("sessionId") if isinstance(obj.get("sessionId"), str) else None
    # a subagent's file (`chats/<session>/<id>.jsonl`) belongs to its parent: not a candidate
    return sid, None, obj.get("startTime"), obj.get("kind") != "subagent"


def _resolve_by_header(changed: list[str], cwd: str, started: datetime, header: Any, what: str) -> Resolution:
    by_session: dict[str, list[str]] = {}
    for p in changed:
        sid, log_cwd, start, interactive = header(p)
        if sid is None or not interactive:
            continue
        if log_cwd is not None and os.path.realpath(log_cwd) != os.path.realpath(cwd):
            continue
        t = _utc(start)
        if t is not None and t < started - CLOCK_SLACK:
            continue  # an older session that grew meanwhile (another terminal's, or resumed)
        by_session.setdefault(sid, []).append(p)
    return _one_of(by_session, what)


# ---------------------------------------------------------------- 3. archiving

def archive(home: Path, harness: str, roots: Sequence[Path]) -> str | None:
    """`ledger import` of the client's config dirs into the home; None, or why it failed."""
    from ledger.sources.archive import import_client
    from ledger.sources.logdirs import has_logs_dir

    client = _client(harness)
    roots = [r for r in roots if has_logs_dir(client, r)]
    if not roots:
        return None
    try:
        import_client(home, client, list(roots), busy_ok=False)
    except (OSError, LedgerError) as exc:  # the session is archived by the next import
        return f"the session log was not archived ({exc})"
    return None


# ---------------------------------------------------------------- 4. reading

def read_usage(harness: str, res: Resolution, started: datetime) -> SessionFacts:
    """The session's usage during the run, per model, by the import's own reducers."""
    reducer = _reducer(harness)
    for f in res.files:
        try:
            with open(f, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        reducer.feed(f, data, 0)
    since = started - CLOCK_SLACK
    sid = res.session_id
    if harness == "claude":
        return _claude_facts(reducer, sid, since)
    if harness == "codex":
        return _codex_facts(reducer, sid, since)
    return _gemini_facts(reducer, sid, since)


def _reducer(harness: str) -> Any:
    if harness == "claude":
        from ledger.sources.claude_usage import ClaudeUsage

        return ClaudeUsage()
    if harness == "codex":
        from ledger.sources.codex_usage import CodexUsage

        return CodexUsage()
    from ledger.sources.gemini_usage import GeminiUsage

    return GeminiUsage()


def _during(time: str | None, since: datetime) -> bool:
    t = _utc(time)
    return t is None or t >= since


def _add(rows: dict[str | None, SessionUsage], model: str | None, counters: Mapping[str, int | None]) -> SessionUsage:
    row = rows.get(model)
    if row is None:
        row = rows[model] = SessionUsage(model, {}, None, 0)
    row.responses += 1
    for k, v in counters.items():
        if v is not None:
            row.counters[k] = (row.counters.get(k) or 0) + v
        else:
            row.counters.setdefault(k, None)
    return row


def _claude_facts(u: Any, sid: str | None, since: datetime) -> SessionFacts:
    rows: dict[str | None, SessionUsage] = {}
    for r in u.responses():
        if r.session_id == sid and _during(r.time, since):
            row = _add(rows, r.model, r.counters)
            if r.cost_usd is not None:
                row.cost_usd = (row.cost_usd or 0.0) + r.cost_usd
    for d in u.cost_deltas():
        if d.session_id == sid and d.cost_usd is not None and _during(d.time, since):
            row = rows.get(d.model)
            if row is not None:
                row.cost_usd = (row.cost_usd or 0.0) + d.cost_usd
    info = u.sessions().get(sid)
    return SessionFacts(list(rows.values()), dict(info.tools) if info else {}, {}, u.problem_count)


def _codex_facts(u: Any, sid: str | None, since: datetime) -> SessionFacts:
    rows: dict[str | None, SessionUsage] = {}
    for d in u.deltas():
        if d.session_id == sid and _during(d.time, since):
            _add(rows, d.model, d.counters)
    tools: dict[str, int] = {}
    results: dict[str, list[int]] = {}
    for s in u.sessions():
        if s.session_id == sid:
            tools, results = dict(s.tools), {k: list(v) for k, v in s.tool_results.items()}
    return SessionFacts(list(rows.values()), tools, results, u.problem_count)


def _gemini_facts(u: Any, sid: str | None, since: datetime) -> SessionFacts:
    rows: dict[str | None, SessionUsage] = {}
    for r in u.responses():
        if r.session_id == sid and _during(r.time, since):
            _add(rows, r.model, r.counters)
    info = u.sessions().get(sid)
    return SessionFacts(list(rows.values()), dict(info.tools) if info else {}, {}, u.problem_count)


def utc_now() -> datetime:
    return datetime.now(timezone.utc)
