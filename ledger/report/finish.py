"""A report's groups made its rows and totals: sorted, cut to --limit, given their own
fields (a run's, a task's, a home's labels, a session's project), and the pricing notes."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Sequence

from ledger.index.rawread import Conn
from ledger.report.accumulate import Agg, _num, row_dict
from ledger.report.factsql import FACTS, _cost_columns, _rows, _select
from ledger.report.query import Report, ReportQuery, resolved_order
from ledger.report.sqltext import Sql


def _sort_rows(q: ReportQuery, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Time reports by bucket; others by known cost, then tokens, runs, key. Unknown costs last."""
    desc = resolved_order(q) == "desc"
    if q.is_time:
        return sorted(rows, key=lambda d: d["key"] or "", reverse=desc)

    def by(d: dict[str, Any]) -> tuple:
        return (d["cost_usd_known"] or 0.0, d["total_tokens"] if d["total_tokens"] is not None else -1,
                d["runs"], "" if d["key"] is None else str(d["key"]))

    known = sorted((d for d in rows if d["cost_usd_known"] is not None), key=by, reverse=desc)
    unknown = sorted((d for d in rows if d["cost_usd_known"] is None), key=by, reverse=desc)
    return known + unknown


def _finish(q: ReportQuery, groups: dict[Any, Agg], totals: Agg, conn: Conn, conds: list[Sql], t0: float,
            info: dict[Any, list[Any]] | None = None) -> Report:
    import time

    rows = [row_dict(k, agg, q) for k, agg in groups.items()]
    if q.kind == "run" and info:
        for d in rows:
            _run_fields(d, info[d["key"]])
    if q.kind == "task" and info:
        for d in rows:
            d.update(info[d["key"]])
    if q.kind == "home":
        _home_labels(conn, rows)
    rows = _sort_rows(q, rows)
    if q.limit is not None:
        rows = rows[:q.limit]
    if q.kind == "session" and rows:  # (issue 29: which project, and when last active)
        from ledger.report.projects import session_fields

        found = session_fields(conn, [d["key"] for d in rows], conds)
        for d in rows:
            d["project"], d["last_activity"] = found.get(d["key"], (None, None))
    tot = row_dict("total", totals, q)
    tot.pop("key")
    if q.kind == "task" and info is not None:  # the tool counts of every task (the rows', --limit or not)
        tot["tool_calls"] = sum(t.get("tool_calls") or 0 for t in info.values())
        tot["tool_errors"] = sum(t.get("tool_errors") or 0 for t in info.values())
    pricing = _pricing(conn, q, conds, tot)
    return Report(query=q, rows=rows, totals=tot, pricing=pricing, seconds=time.perf_counter() - t0)


def _run_fields(d: dict[str, Any], info: Sequence[Any]) -> None:
    """A `report run` row's own fields (_run_extra): start, harness, model, outcome, duration."""
    created_s, harness, model, outcome, duration = info
    d["started"] = datetime.fromtimestamp(int(created_s), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    d.update({"harness": harness, "model": model, "outcome": outcome, "duration_ms": _num(duration)})


def _home_labels(c: Conn, rows: list[dict[str, Any]]) -> None:
    """`report home`: each row's key is the home's path; its id and machine ride along (two
    machines may hold a home at the same path, issue 11)."""
    homes = {int(h): (path, uid, machine) for h, path, uid, machine in
             _rows(c, Sql("SELECT homes.home_id, homes.path, homes.uid, homes.machine FROM homes"))}
    for d in rows:
        path, uid, machine = homes.get(int(d["key"]), (None, None, None))
        d["key"] = path
        d["home_id"] = uid
        d["machine"] = machine


def _pricing(c: Conn, q: ReportQuery, conds: list[Sql], totals: dict[str, Any]) -> dict[str, Any]:
    """The price data version and every reason a cost of this report is unknown."""
    from ledger.pricing import price_data_version

    f = FACTS
    _, cost = _cost_columns(q)
    unknown: list[dict[str, Any]] = []
    if q.cost != "reported":
        stmt = _select([f"{f}.model", f"{f}.unpriced", f"count(DISTINCT {f}.run_id)"], f,
                       [Sql(f"{f}.unpriced IS NOT NULL"), Sql(f"{cost} IS NULL"), *conds],
                       [f"{f}.model", f"{f}.unpriced"], f" ORDER BY {f}.model, {f}.unpriced")
        for model, reason, n in _rows(c, stmt):
            unknown.append({"model": model, "reason": reason, "runs": int(n)})
        if totals["unmeasured_usage_runs"]:
            unknown.append({"model": None, "reason": "no usage reported", "runs": totals["unmeasured_usage_runs"]})
    else:
        (n,) = _rows(c, _select([f"count(DISTINCT {f}.run_id)"], f, [
            Sql(f"{cost} IS NULL"), Sql(f"coalesce({f}.harness, ?) != ?", ("", "command")), *conds]))[0]
        if n:
            unknown.append({"model": None, "reason": "no provider-reported cost (for all or part of the usage)",
                            "runs": int(n)})
    return {"cost": q.cost, "price_data": price_data_version(), "unpriced": unknown}
