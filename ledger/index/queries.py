"""Read runs back from the index as RunSnapshot objects (the `ledger runs` / `show` answers).

The JSON printed from these snapshots is byte-identical to the records path: the same
dataclasses and `to_dict()` / `views.snapshot_detail()` are used, the columns round-trip
exactly (UTC microsecond timestamps, BIGINT counters, double-precision costs), and the
detail of one run (its streams, attempts, tool uses) is rendered from the reducer state
stored with the record's cursor, i.e. exactly what the records reader computes.
Liveness of unsettled runs is recomputed here, at query time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson
import sqlalchemy as sa

from ledger.errors import AmbiguousRun, LedgerError, RecordError, RunNotFound
from ledger.index.indexer import launcher_dict
from ledger.index.models import IndexCursor, Run, RunSubject, ToolUse
from ledger.records.selection import RECENT_DAYS
from ledger.records.fold import new_state, stream_totals
from ledger.records.ids import PREFIX
from ledger.records.liveness import liveness
from ledger.records.model import INT_COUNTERS, RunSnapshot, Subject, UsageTotals
from ledger.records.reader import unreadable_snapshot
from ledger.records.timefmt import format_utc
from ledger.records.verdict import Verdict, judge

runs_t = Run.__table__
subjects_t = RunSubject.__table__
cursors_t = IndexCursor.__table__

_USAGE = INT_COUNTERS  # the RunSnapshot's usage fields
_COLS = [runs_t.c[n] for n in (
    "run_id", "parent_run_id", "repo", "worktree", "skill", "outcome", "created_at", "ended_at", "streams",
    "final_streams", "usage_gaps", *_USAGE, "cost_usd", "evidence_gaps", "harness", "model", "surface", "source", "settled",
    "host", "boot_id", "launcher_pid", "launcher_start_ticks", "cwd", "path", "provider_session_id",
    "final_answer", "api_retries", "skill_invoked", "ok", "error_kind", "error_detail")]


def _state(r: Any) -> str:
    if r.settled:
        return "settled"
    return liveness(r.host or "", r.boot_id, launcher_dict(r.launcher_pid, r.launcher_start_ticks))


def _snapshot(r: Any, subjects: list[Subject], state: str | None = None) -> RunSnapshot:
    state = _state(r) if state is None else state
    if r.settled:
        verdict = Verdict(r.ok, r.error_kind, r.error_detail)
    else:  # liveness is recomputed here: so is the verdict that follows it
        verdict = judge(state=state, outcome=None, result=None, evidence_gaps=0, skill_invoked=None)
    usage = UsageTotals(streams=r.streams, final_streams=r.final_streams, gaps=r.usage_gaps,
                        cost_usd=r.cost_usd, **{n: getattr(r, n) for n in _USAGE})
    return RunSnapshot(
        id=r.run_id, parent_run_id=r.parent_run_id, repo=r.repo, worktree=r.worktree, subjects=subjects,
        skill=r.skill, outcome=r.outcome, started=format_utc(r.created_at), ended=format_utc(r.ended_at),
        usage=usage, evidence_gaps=r.evidence_gaps, harness=r.harness, model=r.model, surface=r.surface,
        source=r.source,
        state=state, host=r.host, cwd=r.cwd, path=r.path, provider_session_id=r.provider_session_id,
        final_answer=r.final_answer, api_retries=r.api_retries, skill_invoked=r.skill_invoked,
        ok=verdict.ok, error_kind=verdict.error_kind, error_detail=verdict.error_detail,
    )


def _subjects(conn: Any, home_id: int, where: Any = None) -> dict[str, list[Subject]]:
    s = subjects_t.c
    q = sa.select(s.run_id, s.selector, s.source).where(s.home_id == home_id)
    if where is not None:
        q = q.where(where)
    out: dict[str, list[Subject]] = {}
    for run_id, selector, source in conn.execute(q.order_by(s.run_id, s.position)):
        out.setdefault(run_id, []).append(Subject(selector, source))
    return out


@dataclass
class Candidate:
    """What the selection rule (ledger.records.selection) reads of a run: `ledger runs` picks
    among these and builds full snapshots only for the runs it shows."""

    id: str
    started: str | None
    state: str
    harness: str | None
    outcome: str | None
    skill: str | None
    source: str
    subjects: list[Subject]


_CANDIDATE_COLS = [runs_t.c[n] for n in (
    "run_id", "created_at", "settled", "harness", "outcome", "skill", "source", "host", "boot_id", "launcher_pid",
    "launcher_start_ticks")]


def _window(home_id: int, all_: bool, now: datetime | None) -> tuple[list[Any], Any]:
    """The rows `ledger runs` chooses from: every run with `all_`, else the candidates of the
    default selection (recent runs and every unsettled run); and the same for subjects."""
    r = runs_t.c
    cond = [r.home_id == home_id]
    sub_cond = None
    if not all_:
        now = now or datetime.now(timezone.utc)
        cutoff = now - timedelta(days=RECENT_DAYS + 1)
        cond.append(sa.or_(r.created_at >= cutoff, r.settled == sa.false()))
        rs = runs_t.alias("rs")
        sub_cond = sa.exists().where(rs.c.home_id == subjects_t.c.home_id, rs.c.run_id == subjects_t.c.run_id,
                                     sa.or_(rs.c.created_at >= cutoff, rs.c.settled == sa.false()))
    return cond, sub_cond


def list_candidates(conn: Any, home_id: int | None, all_: bool, now: datetime | None = None) -> list[Any]:
    """The selection's inputs, light (no usage, no verdict): ten thousand runs cost a few
    tuples each instead of a full snapshot. Unreadable records are full (they hold nothing)."""
    if home_id is None:
        return []
    cond, sub_cond = _window(home_id, all_, now)
    subjects = _subjects(conn, home_id, sub_cond)
    out: list[Any] = [
        Candidate(row.run_id, format_utc(row.created_at), _state(row), row.harness, row.outcome, row.skill,
                  row.source, subjects.get(row.run_id, []))
        for row in conn.execute(sa.select(*_CANDIDATE_COLS).where(*cond))]
    c = cursors_t.c
    out.extend(unreadable_snapshot(run_id, path) for run_id, path in conn.execute(
        sa.select(c.run_id, c.problem_path).where(c.home_id == home_id, c.status == "damaged")))
    return out


def snapshots_of(conn: Any, home_id: int, chosen: list[Any]) -> list[RunSnapshot]:
    """Full snapshots of the chosen candidates, in their order (each keeps the state the
    selection saw: liveness is not asked twice)."""
    want = {c.id: c for c in chosen if isinstance(c, Candidate)}
    full: dict[str, RunSnapshot] = {}
    ids = sorted(want)
    r = runs_t.c
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        for row in conn.execute(sa.select(*_COLS).where(r.home_id == home_id, r.run_id.in_(chunk))):
            full[row.run_id] = _snapshot(row, want[row.run_id].subjects, want[row.run_id].state)
    return [full.get(c.id, c) if isinstance(c, Candidate) else c for c in chosen]


def list_runs(conn: Any, home_id: int | None, all_: bool, now: datetime | None = None) -> list[RunSnapshot]:
    """Snapshots of a home's runs: every run with `all_`, else the candidates of the default
    selection (recent runs and every unsettled run; views.select_runs picks exactly)."""
    if home_id is None:
        return []
    cond, sub_cond = _window(home_id, all_, now)
    subjects = _subjects(conn, home_id, sub_cond)
    out = [_snapshot(row, subjects.get(row.run_id, [])) for row in conn.execute(sa.select(*_COLS).where(*cond))]
    # unreadable records have no row in `runs`: listed from their cursors (state `unreadable`,
    # kept by every selection like the other unterminated runs), as the records path lists them
    c = cursors_t.c
    out.extend(unreadable_snapshot(run_id, path) for run_id, path in conn.execute(
        sa.select(c.run_id, c.problem_path).where(c.home_id == home_id, c.status == "damaged")))
    return out


def _prefix_match(col: Any, sel: str) -> Any:
    n = len(sel)
    return sa.or_(sa.func.substr(col, 1, n) == sel,
                  sa.and_(sa.func.substr(col, 1, len(PREFIX)) == PREFIX, sa.func.substr(col, len(PREFIX) + 1, n) == sel))


def resolve(conn: Any, home_id: int | None, selector: str) -> str:
    """A unique-prefix selector (with or without `run_`) -> run id, by the records' rules.

    Damaged records take part (as in the records path) and raise their RecordError.
    """
    sel = (selector or "").strip()
    if not sel:
        raise LedgerError("Run id cannot be empty", hint="list ids with `ledger runs`")
    c = cursors_t.c
    rows = [] if home_id is None else conn.execute(
        sa.select(c.run_id, c.status, c.problem_path, c.problem)
        .where(c.home_id == home_id, _prefix_match(c.run_id, sel))).all()
    if not rows and home_id is not None:  # an imported session (no record, no cursor)
        r = runs_t.c
        rows = [(rid, "indexed", None, None) for (rid,) in conn.execute(
            sa.select(r.run_id).where(r.home_id == home_id, r.source != "record",
                                      sa.func.substr(r.run_id, 1, len(sel)) == sel).limit(2))]
    if not rows:
        raise RunNotFound(f"Run {sel} was not found", hint="list ids with `ledger runs --all`")
    if len(rows) > 1:
        raise AmbiguousRun(f"Run prefix {sel} is ambiguous", hint="give more characters of the id (`ledger runs --all`)")
    run_id, status, ppath, problem = rows[0]
    if status == "damaged":
        raise RecordError(ppath, problem)
    return run_id


def get_run(conn: Any, home_id: int | None, selector: str) -> RunSnapshot:
    """The full snapshot of one run (streams, attempts, tool uses from the stored fold state)."""
    run_id = resolve(conn, home_id, selector)
    r = runs_t.c
    row = conn.execute(sa.select(*_COLS).where(r.home_id == home_id, r.run_id == run_id)).one()
    snap = _snapshot(row, _subjects(conn, home_id, subjects_t.c.run_id == run_id).get(run_id, []))
    if snap.source != "record":  # an imported session: its tool uses are rows (no fold state)
        t = ToolUse.__table__.c
        snap.tool_uses = {name: n for name, n in conn.execute(
            sa.select(t.tool_name, t.uses).where(t.home_id == home_id, t.run_id == run_id).order_by(t.tool_name))}
        return snap
    c = cursors_t.c
    raw = conn.execute(sa.select(c.fold_state).where(c.home_id == home_id, c.run_id == run_id)).scalar_one()
    state = orjson.loads(raw) if raw is not None else new_state()  # (None: to be re-read, migration 0004)
    snap.streams = stream_totals(state)
    snap.attempts = sorted(state["attempts"].values(), key=lambda a: a["attempt_key"])
    snap.tool_uses = dict(state["tools"])
    snap.api_retries = state["retries"]
    snap.skill_invoked = state["skill_invoked"]
    snap.final_answer = state["answer"]
    snap.tool_status = dict(state.get("tool_status") or {})
    return snap
