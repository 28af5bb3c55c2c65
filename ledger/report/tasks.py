"""`ledger report task`: runs grouped into tasks, with the task verdict rule.

A task is a run with the runs under it (`parent_run_id`, followed up to the root), and
root runs sharing their first subject are one task: the key is the root's first subject,
else the root's run id. Per task the standard report fields are the group sums (a task's
cost is unknown if any run's is: the report's rule), and ledger.records.verdict.combine_task
gives ok, the first error kind, skill invoked and the tool counts.
"""

from __future__ import annotations

from typing import Any

from ledger.index.rawread import boolean
from ledger.records.verdict import combine_task
from ledger.report.factsql import FACTS, _Collector, _facts_stmt, _rows, _select
from ledger.report.sqltext import Sql

TASK_FIELDS = ("started", "ok", "error_kind", "error_detail", "skill_invoked", "tool_calls", "tool_errors")


def task_keys(c: Any) -> dict[tuple[int, str], str]:
    """(home_id, run_id) -> task key, for every run of the index (`c`: a rawread.Conn)."""
    parent = {(h, rid): p for h, rid, p in c.rows("SELECT runs.home_id, runs.run_id, runs.parent_run_id FROM runs")}
    subject = {(h, rid): sel for h, rid, sel in c.rows(
        "SELECT subjects.home_id, subjects.run_id, subjects.selector FROM subjects WHERE subjects.position = 0")}
    out: dict[tuple[int, str], str] = {}
    for key in parent:
        root, seen = key, {key}
        while parent.get(root) is not None and (root[0], parent[root]) in parent and (root[0], parent[root]) not in seen:
            root = (root[0], parent[root])
            seen.add(root)
        out[key] = subject.get(root) or root[1]
    return out


def collect_tasks(c: Any, q: Any, conds: list[Any]) -> Any:
    """A _Collector of task groups (standard fields) whose `info` holds each task's verdict."""
    keys = task_keys(c)
    col = _Collector(q)
    rows = _rows(c, _facts_stmt(q, conds, per_run=True))  # [home_id, (model), vectors, run_id]
    col.add([(keys.get((row[0], row[-1]), row[-1]),) + tuple(row[1:-1]) for row in rows])
    f = FACTS
    stmt = _select([f"{f}.home_id", f"{f}.run_id", f"{f}.created_s", "runs.ok", "runs.error_kind", "runs.error_detail",
                    "runs.skill_invoked", "runs.tool_calls", "runs.tool_errors", "runs.tool_semantic_errors"],
                   f"{f} JOIN runs ON runs.home_id = {f}.home_id AND runs.run_id = {f}.run_id",
                   [Sql(f"{f}.first = 1"), *conds], tail=f" ORDER BY {f}.created_s, {f}.run_id")
    tasks: dict[str, list[dict[str, Any]]] = {}
    started: dict[str, int] = {}
    for h, rid, created, ok, kind, detail, skill, calls, errs, sems in _rows(c, stmt):
        k = keys.get((h, rid), rid)
        started.setdefault(k, created)
        tasks.setdefault(k, []).append({"ok": boolean(ok), "error_kind": kind, "error_detail": detail,
                                        "skill_invoked": boolean(skill), "tool_calls": calls,
                                        "tool_errors": (errs or 0) + (sems or 0)})
    from datetime import datetime, timezone

    for k, runs in tasks.items():
        col.info[k] = {"started": datetime.fromtimestamp(int(started[k]), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                       **combine_task(runs)}
    return col
