"""Read runs back from the index as RunSnapshot objects (the `ledger runs` / `show` answers).

The JSON printed from these snapshots is byte-identical to the records path: the same
dataclasses and `to_dict()` / `views.snapshot_detail()` are used, the columns round-trip
exactly (UTC microsecond timestamps, BIGINT counters, double-precision costs), and the
detail of one run (its streams, attempts, tool uses) is rendered from the reducer state
stored with the record's cursor, i.e. exactly what the records reader computes.
Liveness of unsettled runs is recomputed here, at query time.

Plain SQL through the driver (ledger.index.rawread): no SQLAlchemy is loaded to answer
from an index that is already up to date (issue 10). Every function takes a rawread.Conn,
a sqlite3 connection or an SQLAlchemy connection.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any


from ledger.errors import AmbiguousRun, LedgerError, RecordError, RunNotFound
from ledger.index.rawread import Conn, boolean, utc_text, wrap
from ledger.plainclass import Plain
from ledger.records.fold import new_state, stream_totals
from ledger.records.ids import PREFIX
from ledger.records.liveness import liveness
from ledger.records.model import ALL_INT_COUNTERS, INT_COUNTERS, RunSnapshot, Subject, UsageStreamTotals, UsageTotals
from ledger.records.reader import unreadable_snapshot
from ledger.records.selection import RECENT_DAYS
from ledger.records.verdict import Verdict, judge

_USAGE = INT_COUNTERS  # the RunSnapshot's usage fields
_COLS = ("run_id", "parent_run_id", "repo", "worktree", "skill", "outcome", "created_at", "ended_at", "streams",
         "final_streams", "usage_gaps", *_USAGE, "cost_usd", "evidence_gaps", "harness", "model", "surface", "source",
         "settled", "host", "boot_id", "launcher_pid", "launcher_start_ticks", "cwd", "path", "provider_session_id",
         "final_answer", "api_retries", "skill_invoked", "ok", "error_kind", "error_detail", "command", "exit_code",
         "arm", "trial", "trials")
_SELECT = "SELECT " + ", ".join(_COLS) + " FROM runs"
_BOOLS = ("settled", "skill_invoked", "ok")  # Boolean columns (SQLite: 0/1)


def _row(values: tuple) -> dict[str, Any]:
    d = dict(zip(_COLS, values))
    for name in _BOOLS:
        d[name] = boolean(d[name])
    return d


def _launcher(pid: int | None, ticks: int | None) -> dict[str, Any] | None:
    """The launcher liveness() reads back from the index's launcher columns."""
    return None if pid is None else {"pid": pid, "start_ticks": ticks}


def _liveness(host: str | None, boot_id: str | None, pid: int | None, ticks: int | None) -> str:
    return liveness(host or "", boot_id, _launcher(pid, ticks))


def _snapshot(r: dict[str, Any], subjects: list[Subject], state: str | None = None) -> RunSnapshot:
    if state is None:
        state = "settled" if r["settled"] else _liveness(r["host"], r["boot_id"], r["launcher_pid"],
                                                         r["launcher_start_ticks"])
    if r["settled"]:
        verdict = Verdict(r["ok"], r["error_kind"], r["error_detail"])
    else:  # liveness is recomputed here: so is the verdict that follows it
        verdict = judge(state=state, outcome=None, result=None, evidence_gaps=0, skill_invoked=None)
    usage = UsageTotals(streams=r["streams"], final_streams=r["final_streams"], gaps=r["usage_gaps"],
                        cost_usd=r["cost_usd"], **{n: r[n] for n in _USAGE})
    return RunSnapshot(
        id=r["run_id"], parent_run_id=r["parent_run_id"], repo=r["repo"], worktree=r["worktree"], subjects=subjects,
        skill=r["skill"], outcome=r["outcome"], started=utc_text(r["created_at"]), ended=utc_text(r["ended_at"]),
        usage=usage, evidence_gaps=r["evidence_gaps"], harness=r["harness"], model=r["model"], surface=r["surface"],
        source=r["source"],
        state=state, host=r["host"], cwd=r["cwd"], path=r["path"], provider_session_id=r["provider_session_id"],
        final_answer=r["final_answer"], api_retries=r["api_retries"], skill_invoked=r["skill_invoked"],
        ok=verdict.ok, error_kind=verdict.error_kind, error_detail=verdict.error_detail,
        command=r["command"], exit_code=r["exit_code"], arm=r["arm"], trial=r["trial"], trials=r["trials"],
    )


def _subjects(c: Conn, home_id: int, where: str = "", params: tuple = ()) -> dict[str, list[Subject]]:
    out: dict[str, list[Subject]] = {}
    for run_id, selector, source in c.rows(
            f"SELECT run_id, selector, source FROM subjects WHERE home_id = ?{where} ORDER BY run_id, position",
            (home_id, *params)):
        out.setdefault(run_id, []).append(Subject(selector, source))
    return out


class Candidate(Plain):
    """What the selection rule (ledger.records.selection) reads of a run: `ledger runs` picks
    among these and builds full snapshots only for the runs it shows."""

    __slots__ = ("id", "started", "state", "harness", "outcome", "skill", "source", "subjects", "worktree", "cwd")

    def __init__(
            self,
            id: str,
            started: str | None,
            state: str,
            harness: str | None,
            outcome: str | None,
            skill: str | None,
            source: str,
            subjects: list[Subject],
            worktree: str | None = None,  # (with the cwd: the run's project, `--project`)
            cwd: str | None = None,
    ) -> None:
        self.id = id
        self.started = started
        self.state = state
        self.harness = harness
        self.outcome = outcome
        self.skill = skill
        self.source = source
        self.subjects = subjects
        self.worktree = worktree
        self.cwd = cwd


def _datetime_param(c: Conn, dt: datetime) -> Any:
    """A timestamp compared with a DateTime column: SQLite compares SQLAlchemy's storage text."""
    if c.dialect != "sqlite":
        return dt
    u = dt.astimezone(timezone.utc)
    return (f"{u.year:04d}-{u.month:02d}-{u.day:02d} {u.hour:02d}:{u.minute:02d}:{u.second:02d}"
            f".{u.microsecond:06d}")


def _window(c: Conn, all_: bool, now: datetime | None) -> tuple[str, tuple, str, tuple]:
    """The rows `ledger runs` chooses from: every run with `all_`, else the candidates of the
    default selection (recent runs and every unsettled run); and the same for subjects.
    (SQL conditions to append after `home_id = ?`, and their parameters.)"""
    if all_:
        return "", (), "", ()
    now = now or datetime.now(timezone.utc)
    cutoff = _datetime_param(c, now - timedelta(days=RECENT_DAYS + 1))
    return (" AND (created_at >= ? OR settled = ?)", (cutoff, False),
            " AND EXISTS (SELECT 1 FROM runs AS rs WHERE rs.home_id = subjects.home_id AND rs.run_id = subjects.run_id"
            " AND (rs.created_at >= ? OR rs.settled = ?))", (cutoff, False))


def _unreadable(c: Conn, home_id: int) -> list[RunSnapshot]:
    # unreadable records have no row in `runs`: listed from their cursors (state `unreadable`,
    # kept by every selection like the other unterminated runs), as the records path lists them
    out = [unreadable_snapshot(run_id, path) for run_id, path in c.rows(
        "SELECT run_id, problem_path FROM index_cursors WHERE home_id = ? AND status = ?", (home_id, "damaged"))]
    # and the archive files of imported sessions that cannot be read whole (logsource keeps
    # them per client in log_state): each listed by its path below the home, as unreadable
    for source, state in c.rows("SELECT source, state FROM log_state WHERE home_id = ? AND source LIKE ?",
                                (home_id, "%-log/problems")):
        from ledger.sources.archiveformat import parse_problems

        client = source[:-len("-log/problems")]
        out.extend(unreadable_snapshot(f"sources/{client}/{rel}", f"sources/{client}/{rel}")
                   for rel in sorted(parse_problems(state)))
    return out


_CANDIDATE_SELECT = ("SELECT run_id, created_at, settled, harness, outcome, skill, source, host, boot_id, launcher_pid, "
                     "launcher_start_ticks, worktree, cwd FROM runs")


def list_candidates(conn: Any, home_id: int | None, all_: bool, now: datetime | None = None) -> list[Any]:
    """The selection's inputs, light (no usage, no verdict): ten thousand runs cost a few
    tuples each instead of a full snapshot. Unreadable records are full (they hold nothing)."""
    if home_id is None:
        return []
    c = wrap(conn)
    cond, params, sub_cond, sub_params = _window(c, all_, now)
    subjects = _subjects(c, home_id, sub_cond, sub_params)
    out = _candidates_of(c.rows(f"{_CANDIDATE_SELECT} WHERE home_id = ?{cond}", (home_id, *params)), subjects)
    out.extend(_unreadable(c, home_id))
    return out


def newest_candidates(conn: Any, home_id: int | None, top: int, cutoff: datetime) -> tuple[list[Any], int]:
    """The candidates of a default selection that shows at most `top` runs of the window
    (runs started at or after `cutoff`) when nothing else applies (selection.pushed_limit):
    the window's runs started at or after its `top`-th newest start (the ties there included:
    the rule orders them), every unsettled and unreadable run (their own rule); and how many
    runs the window holds (`select(window_size=)`: the hidden count). A busy week costs its
    `top` newest rows, not every run of the week."""
    if home_id is None:
        return [], 0
    c = wrap(conn)
    cut = _datetime_param(c, cutoff)
    # (each query its own index: created_at's covering one for the edge and the count)
    (size,) = c.one("SELECT count(*) FROM runs WHERE home_id = ? AND created_at >= ?", (home_id, cut))
    rows: list[tuple] = []
    if top > 0:
        nth = c.one("SELECT created_at FROM runs WHERE home_id = ? AND created_at >= ? ORDER BY created_at DESC "
                    "LIMIT 1 OFFSET ?", (home_id, cut, top - 1))
        rows = c.rows(f"{_CANDIDATE_SELECT} WHERE home_id = ? AND created_at >= ?",
                      (home_id, cut if nth is None else nth[0]))  # (None: the window holds at most `top` runs)
    seen = {r[0] for r in rows}
    rows += [r for r in c.rows(f"{_CANDIDATE_SELECT} WHERE home_id = ? AND settled = ?", (home_id, False))
             if r[0] not in seen]
    subjects: dict[str, list[Subject]] = {}
    ids = sorted(r[0] for r in rows)
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        subjects.update(_subjects(c, home_id, f" AND run_id IN ({c.marks(len(chunk))})", tuple(chunk)))
    out = _candidates_of(rows, subjects)
    out.extend(_unreadable(c, home_id))
    return out, size


def count_runs(conn: Any, home_id: int | None) -> int:
    """How many runs `--all` lists without a filter (list_candidates(all_=True), counted):
    the home's runs and its unreadable ones."""
    if home_id is None:
        return 0
    c = wrap(conn)
    return c.one("SELECT count(*) FROM runs WHERE home_id = ?", (home_id,))[0] + len(_unreadable(c, home_id))


def _candidates_of(rows: list[tuple], subjects: dict[str, list[Subject]]) -> list[Any]:
    return [Candidate(run_id, utc_text(created), "settled" if settled else _liveness(host, boot, pid, ticks),
                      harness, outcome, skill, source, subjects.get(run_id, []), worktree, cwd)
            for run_id, created, settled, harness, outcome, skill, source, host, boot, pid, ticks, worktree, cwd
            in rows]


def snapshots_of(conn: Any, home_id: int, chosen: list[Any]) -> list[RunSnapshot]:
    """Full snapshots of the chosen candidates, in their order (each keeps the state the
    selection saw: liveness is not asked twice)."""
    c = wrap(conn)
    want = {x.id: x for x in chosen if isinstance(x, Candidate)}
    full: dict[str, RunSnapshot] = {}
    ids = sorted(want)
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        for values in c.rows(f"{_SELECT} WHERE home_id = ? AND run_id IN ({c.marks(len(chunk))})", (home_id, *chunk)):
            r = _row(values)
            full[r["run_id"]] = _snapshot(r, want[r["run_id"]].subjects, want[r["run_id"]].state)
    return [full.get(x.id, x) if isinstance(x, Candidate) else x for x in chosen]


def list_runs(conn: Any, home_id: int | None, all_: bool, now: datetime | None = None) -> list[RunSnapshot]:
    """Snapshots of a home's runs: every run with `all_`, else the candidates of the default
    selection (recent runs and every unsettled run; views.select_runs picks exactly)."""
    if home_id is None:
        return []
    c = wrap(conn)
    cond, params, sub_cond, sub_params = _window(c, all_, now)
    subjects = _subjects(c, home_id, sub_cond, sub_params)
    out = [_snapshot(r, subjects.get(r["run_id"], [])) for r in map(_row, c.rows(
        f"{_SELECT} WHERE home_id = ?{cond}", (home_id, *params)))]
    out.extend(_unreadable(c, home_id))
    return out


def _after(prefix: str) -> str:
    """The least text above every text starting with `prefix` (ASCII: its last character the next)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def resolve(conn: Any, home_id: int | None, selector: str) -> str:
    """A unique-prefix selector (with or without `run_`) -> run id, by the records' rules.

    Damaged records take part (as in the records path) and raise their RecordError.
    """
    sel = (selector or "").strip()
    if not sel:
        raise LedgerError("Run id cannot be empty", hint="list ids with `ledger runs`")
    c = wrap(conn)
    n, p = len(sel), len(PREFIX)
    pick = "SELECT run_id, status, problem_path, problem FROM index_cursors WHERE home_id = ? AND "
    rows: list = []
    if home_id is None:
        pass
    elif c.dialect == "sqlite" and sel.isascii():
        # (SQLite compares text byte-wise: each prefix's key range seeks the primary key
        # instead of testing every cursor of the home; the substr tests stay the rule)
        rows = c.rows(f"{pick}run_id >= ? AND run_id < ? AND substr(run_id, 1, ?) = ? UNION "
                      f"{pick}run_id >= ? AND run_id < ? AND substr(run_id, 1, ?) = ? AND substr(run_id, ?, ?) = ?",
                      (home_id, sel, _after(sel), n, sel,
                       home_id, PREFIX + sel, _after(PREFIX + sel), p, PREFIX, p + 1, n, sel))
    else:
        rows = c.rows(f"{pick}(substr(run_id, 1, ?) = ? OR (substr(run_id, 1, ?) = ? AND substr(run_id, ?, ?) = ?))",
                      (home_id, n, sel, p, PREFIX, p + 1, n, sel))
    if not rows and home_id is not None:  # an imported session (no record, no cursor)
        rows = [(rid, "indexed", None, None) for (rid,) in c.rows(
            "SELECT run_id FROM runs WHERE home_id = ? AND source != ? AND substr(run_id, 1, ?) = ? LIMIT 2",
            (home_id, "record", n, sel))]
    if not rows:
        raise RunNotFound(f"Run {sel} was not found", hint="list ids with `ledger runs --all`")
    if len(rows) > 1:
        raise AmbiguousRun(f"Run prefix {sel} is ambiguous", hint="give more characters of the id (`ledger runs --all`)")
    run_id, status, ppath, problem = rows[0]
    if status == "damaged":
        raise RecordError(ppath, problem)
    return run_id


_STREAM_COLS = ("stream_id", "provider", "model", "attempt_key", "turn_key", "observations", "final_receipt",
                *ALL_INT_COUNTERS, "cost_usd")


def _stream_rows(c: Conn, home_id: int, run_id: str) -> list[UsageStreamTotals]:
    """An imported session's usage streams (one per model and 15-minute slot, `<model>@<slot>`),
    as `usage.streams` counts them."""
    out = []
    for values in c.rows(f"SELECT {', '.join(_STREAM_COLS)} FROM usage_streams WHERE home_id = ? AND run_id = ? "
                         "ORDER BY stream_id", (home_id, run_id)):
        d = dict(zip(_STREAM_COLS, values))
        out.append(UsageStreamTotals(
            stream_id=d["stream_id"], provider=d["provider"], model=d["model"], attempt_key=d["attempt_key"],
            turn_key=d["turn_key"], observations=d["observations"], final_receipt=bool(boolean(d["final_receipt"])),
            counters={k: d[k] for k in ALL_INT_COUNTERS}, cost_usd=d["cost_usd"]))
    return out


def children_of(conn: Any, home_id: int | None, run_id: str) -> list[dict[str, Any]]:
    """The runs whose parent is `run_id` (replays, runs started inside the agent), oldest first."""
    if home_id is None:
        return []
    c = wrap(conn)
    out = []
    for values in c.rows(f"{_SELECT} WHERE home_id = ? AND parent_run_id = ? ORDER BY created_at, run_id",
                         (home_id, run_id)):
        s = _snapshot(_row(values), [])
        out.append({"id": s.id, "outcome": s.outcome, "state": s.state, "started": s.started,
                    "harness": s.harness, "surface": s.surface})
    return out


def get_run(conn: Any, home_id: int | None, selector: str) -> RunSnapshot:
    """The full snapshot of one run (streams, attempts, tool uses from the stored fold state)."""
    c = wrap(conn)
    run_id = resolve(c, home_id, selector)
    r = _row(c.rows(f"{_SELECT} WHERE home_id = ? AND run_id = ?", (home_id, run_id))[0])
    snap = _snapshot(r, _subjects(c, home_id, " AND run_id = ?", (run_id,)).get(run_id, []))
    if snap.source != "record":  # an imported session: its tool uses and streams are rows (no fold state)
        _row_figures(c, home_id, run_id, snap)
        return snap
    (raw,) = c.rows("SELECT fold_state FROM index_cursors WHERE home_id = ? AND run_id = ?", (home_id, run_id))[0]
    # (json, not orjson: its import costs ~44 M instructions; the state is orjson's own JSON)
    state = json.loads(raw) if raw is not None else new_state()  # (None: to be re-read, migration 0004)
    snap.streams = stream_totals(state)
    snap.attempts = sorted(state["attempts"].values(), key=lambda a: a["attempt_key"])
    snap.tool_uses = dict(state["tools"])
    snap.api_retries = state["retries"]
    snap.skill_invoked = state["skill_invoked"]
    snap.final_answer = state["answer"]
    snap.tool_status = dict(state.get("tool_status") or {})
    if not snap.streams and not snap.tool_uses and snap.surface == "interactive":
        # an interactive run whose session a later import resolved: the session's figures
        # are rows of the run (ledger.index.logrows._adopting), as an imported session's
        _row_figures(c, home_id, run_id, snap)
    return snap


def _row_figures(c: Any, home_id: int | None, run_id: str, snap: RunSnapshot) -> None:
    """A run's tool uses and streams from their rows (an imported session's)."""
    snap.tool_uses = {name: n for name, n in c.rows(
        "SELECT tool_name, uses FROM tool_uses WHERE home_id = ? AND run_id = ? ORDER BY tool_name",
        (home_id, run_id))}
    snap.streams = _stream_rows(c, home_id, run_id)
