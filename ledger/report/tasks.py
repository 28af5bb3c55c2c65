"""`ledger report task`: runs grouped into tasks, with the task verdict rule.

A task is a run with the runs under it (`parent_run_id`, followed up to the root), and
root runs sharing their first subject are one task: the key is the root's first subject,
else the root's run id. Per task the standard report fields are the group sums (a task's
cost is unknown if any run's is: the report's rule), and ledger.records.verdict.combine_task
gives ok, the first error kind, skill invoked and the tool counts.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from ledger.index.models import Run, RunSubject
from ledger.records.verdict import combine_task

runs_t = Run.__table__
subjects_t = RunSubject.__table__
TASK_FIELDS = ("started", "ok", "error_kind", "error_detail", "skill_invoked", "tool_calls", "tool_errors")


def task_keys(conn: Any) -> dict[tuple[int, str], str]:
    """(home_id, run_id) -> task key, for every run of the index."""
    r, s = runs_t.c, subjects_t.c
    parent = {(h, rid): p for h, rid, p in conn.execute(sa.select(r.home_id, r.run_id, r.parent_run_id))}
    subject = {(h, rid): sel for h, rid, sel in conn.execute(
        sa.select(s.home_id, s.run_id, s.selector).where(s.position == 0))}
    out: dict[tuple[int, str], str] = {}
    for key in parent:
        root, seen = key, {key}
        while parent.get(root) is not None and (root[0], parent[root]) in parent and (root[0], parent[root]) not in seen:
            root = (root[0], parent[root])
            seen.add(root)
        out[key] = subject.get(root) or root[1]
    return out


def collect_tasks(conn: Any, q: Any, conds: list[Any]) -> Any:
    """A _Collector of task groups (standard fields) whose `info` holds each task's verdict."""
    from ledger.report.aggregate import _Collector, _facts_stmt, facts_t

    keys = task_keys(conn)
    col = _Collector(q)
    rows = conn.execute(_facts_stmt(q, conds, per_run=True)).fetchall()  # [home_id, (model), vectors, run_id]
    col.add([(keys.get((row[0], row[-1]), row[-1]),) + tuple(row[1:-1]) for row in rows])
    f, r = facts_t.c, runs_t.c
    stmt = (sa.select(f.home_id, f.run_id, f.created_s, r.ok, r.error_kind, r.error_detail, r.skill_invoked,
                      r.tool_calls, r.tool_errors, r.tool_semantic_errors)
            .select_from(facts_t.join(runs_t, sa.and_(r.home_id == f.home_id, r.run_id == f.run_id)))
            .where(f.first == 1, *conds).order_by(f.created_s, f.run_id))
    tasks: dict[str, list[dict[str, Any]]] = {}
    started: dict[str, int] = {}
    for h, rid, created, ok, kind, detail, skill, calls, errs, sems in conn.execute(stmt):
        k = keys.get((h, rid), rid)
        started.setdefault(k, created)
        tasks.setdefault(k, []).append({"ok": ok, "error_kind": kind, "error_detail": detail, "skill_invoked": skill,
                                        "tool_calls": calls, "tool_errors": (errs or 0) + (sems or 0)})
    from datetime import datetime, timezone

    for k, runs in tasks.items():
        col.info[k] = {"started": datetime.fromtimestamp(int(started[k]), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                       **combine_task(runs)}
    return col
