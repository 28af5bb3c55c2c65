"""`--limit` on a group-by report or on `report run`: the groups (runs) that can be among
the first N are chosen in SQL, then only their rows are read."""

from __future__ import annotations

from typing import Any

from ledger.index.rawread import Conn
from ledger.report.accumulate import COST, COST_DIGITS, CR, CW, IN, OUT, PART, RUNS, TOTAL_PARTS, Agg, _num
from ledger.report.factsql import (
    FACTS, _Collector, _facts_stmt, _key_column, _model_aggregates, _none_if_empty, _rows, _run_aggregates, _select,
    _totals_stmt, _verdict_aggregates,
)
from ledger.report.kinds import SLOT_SECONDS
from ledger.report.query import ReportQuery, resolved_order, time_bounds
from ledger.report.sqltext import Sql, _and, _key_in, known_cost
from ledger.report.subjects import _FURTHER, _FURTHER_ON, _add_more_subjects


# How far a group's known cost may be below the last shown group's (above, ascending) and
# still be read: _sort_rows compares costs rounded to COST_DIGITS, and a group summed from
# per-model rows (--breakdown) or per-run rows (further subjects) may differ from the SQL sum
# in its last bits. Every group that can be among the first is read; _sort_rows decides.
_SLACK_ABS, _SLACK_REL = 1e-9, 1e-9
_MAX_CANDIDATES = 10_000  # more ties than this: every group is read (no IN list)
# the ranking statement's columns after the key: what _sort_rows orders by
_RANK_FIELDS = (COST, PART, IN, OUT, CR, CW, RUNS)


def _collect_top(c: Conn, q: ReportQuery, conds: list[Sql]) -> _Collector:
    """`report KIND --limit N` (a group-by report other than run and task): the groups that
    can be among the first N are chosen in SQL, from the few sums _sort_rows orders by (a
    narrow GROUP BY: SQLite sorts every row it groups, and the width of the rows is most of
    that cost), then only their rows are read as without --limit.

    The totals: the costs are the groups' cost sums summed in the groups' order, what
    merging every group gives to the last bit (with --breakdown a group is merged from its
    models' sums, which may differ in the last bits at a million runs); every other field
    is an integer, from the totals statement. A run with several subjects is in several
    groups: by subject the totals are the totals statement's, as without --limit."""
    col = _Collector(q)
    ranked = _rows(c, _ranked(q, _rank_stmt(q, conds), totals=q.kind != "subject"))
    keys = [row[1] for row in ranked if row[0] == 0]
    restrict = [] if len(keys) > _MAX_CANDIDATES else [_key_in(_key_column(q, SLOT_SECONDS), keys)]
    col.add(_rows(c, _facts_stmt(q, [*conds, *restrict])))
    if q.kind == "subject":
        _add_more_subjects(c, q, conds, col, only=set(keys) if restrict else None)
        return col
    start, end = time_bounds(q)
    totals = col.totals = Agg()
    totals.add(_rows(c, _totals_stmt(q, start, end, conds))[0])
    total = next(row for row in ranked if row[0] == 1)
    totals.v[COST], totals.v[PART] = _num(total[2]), _num(total[3])
    if q.evaluation:
        totals.add_verdicts(_rows(c, _select(_verdict_aggregates(), FACTS, conds))[0], 0)
    if q.breakdown:  # the totals' models
        _totals_models(c, q, conds, totals)
    return col


def _totals_models(c: Conn, q: ReportQuery, conds: list[Sql], totals: Agg) -> None:
    """The totals' per-model vectors (--breakdown) over the matching facts."""
    f = FACTS
    for row in _rows(c, _select([f"{f}.model_key", *_model_aggregates(q)], f, conds, [f"{f}.model_key"])):
        totals.add_model(_none_if_empty(row[0]), row, 1)


def _rank_stmt(q: ReportQuery, conds: list[Sql]) -> Sql:
    """[key, the _RANK_FIELDS sums] per group, over the facts that match. By subject a run
    counts under each of its subjects: the first (on the facts row) and the further ones."""
    f = FACTS
    run = _run_aggregates(q)
    sums = [run[i] for i in _RANK_FIELDS]
    if q.kind != "subject":
        key = _key_column(q, SLOT_SECONDS)
        return _select([key, *sums], f, conds, [key])
    where = _and(conds) if conds else Sql("1 = 1")
    used = ", ".join(f"{f}.{name}" for name in (f"run_cost_{q.cost}", f"run_cost_{q.cost}_partial", *TOTAL_PARTS,
                                                  "first"))
    source = (f"(SELECT {f}.subject AS group_key, {used} FROM {f} WHERE {where.text} UNION ALL "
              f"SELECT further.selector, {used} FROM {_FURTHER} WHERE {_FURTHER_ON} AND {where.text}) AS {f}")
    stmt = _select([f"{f}.group_key", *sums], source, group=[f"{f}.group_key"])
    return Sql(stmt.text, where.params + where.params)


def _ranked(q: ReportQuery, inner: Sql, *, totals: bool) -> Sql:
    """The groups of `inner` (_rank_stmt) that can be among the first q.limit of _sort_rows,
    tagged 0, and (`totals`) one row tagged 1: the sums of the groups' sums, in their order.

    The rank is the sort's: known cost (unknown last), then tokens, then runs, each in the
    report's order. The group at place N is the bound: every group whose cost is within the
    slack of the bound's is read (rounding may tie them), or, when the bound's cost is
    unknown, every known group and every unknown one with (tokens, runs) up to the bound's.
    Keys are not compared in SQL (collations differ): _sort_rows breaks those ties."""
    cols = [f"c{i}" for i in range(1 + len(_RANK_FIELDS))]
    cost, part, t_in, t_out, t_cr, t_cw, runs = (f"g.{x}" for x in cols[1:])
    known = known_cost(cost, part)
    toks = (t_in, t_out, t_cr, t_cw)
    tokens = (f"CASE WHEN {' AND '.join(t + ' IS NULL' for t in toks)} THEN -1 "
              f"ELSE {' + '.join(f'coalesce({t}, 0)' for t in toks)} END")
    desc = resolved_order(q) == "desc"
    way, ge, gt, sign = (" DESC", ">=", ">", "-") if desc else (" ASC", "<=", "<", "+")
    n = int(q.limit or 0)
    out = [f"WITH g({', '.join(cols)}) AS ({inner.text}), "
           f"r AS (SELECT g.c0 AS k, {known} AS kk, {tokens} AS kt, coalesce({runs}, 0) AS kr FROM g)"]
    if n > 0:
        out.append(f", b AS (SELECT r.kk AS bk, r.kt AS bt, r.kr AS br FROM r ORDER BY r.kk IS NULL, r.kk{way}, "
                   f"r.kt{way}, r.kr{way} LIMIT 1 OFFSET {min(n, 2**62) - 1}) "
                   "SELECT 0, r.k, NULL, NULL FROM r LEFT JOIN b ON 1 = 1 WHERE b.br IS NULL "
                   f"OR (b.bk IS NOT NULL AND r.kk {ge} b.bk {sign} ({_SLACK_ABS!r} + abs(b.bk) * {_SLACK_REL!r})) "
                   f"OR (b.bk IS NULL AND (r.kk IS NOT NULL OR r.kt {gt} b.bt OR (r.kt = b.bt AND r.kr {ge} b.br)))")
    else:
        out.append(" SELECT 0, r.k, NULL, NULL FROM r WHERE 1 = 0")
    if totals:
        out.append(f" UNION ALL SELECT 1, NULL, sum({cost}), sum({part}) FROM g")
    return Sql("".join(out), inner.params)


# `report run --limit N`: the runs to show, each ranked by its whole cost

def _run_rank(q: ReportQuery) -> tuple[str, str]:
    """(known cost, tokens) of a run over its fact rows (GROUP BY run): the sum of its pieces'
    known figures (an imported session has one per slot it spent in; ledger.report.facts),
    NULL when nothing is known, what _sort_rows ranks by; its tokens are on its first row."""
    f = FACTS
    cost, part = f"{f}.run_cost_{q.cost}", f"{f}.run_cost_{q.cost}_partial"
    known = (f"CASE WHEN count({cost}) = 0 AND count({part}) = 0 THEN NULL "
             f"ELSE coalesce(sum({cost}), 0) + coalesce(sum({part}), 0) END")
    return known, f"coalesce(max({f}.run_total_tokens), -1)"


def _top_runs(q: ReportQuery, conds: list[Sql]) -> Sql:
    """`report run --limit N`: the N runs to show, chosen in SQL (same order as _sort_rows),
    each ranked by its whole cost (every piece of it that matches)."""
    f = FACTS
    known, tokens = _run_rank(q)
    way = " DESC" if resolved_order(q) == "desc" else " ASC"
    order = [f"{known} IS NULL", known + way, tokens + way, f"{f}.run_id" + way]
    return _select([f"{f}.home_id", f"{f}.run_id"], f, conds, [f"{f}.home_id", f"{f}.run_id"],
                   tail=f" ORDER BY {', '.join(order)} LIMIT {min(int(q.limit or 0), 2**63 - 1)}")  # SQL integers end there


def _top_run_bound(c: Conn, q: ReportQuery, conds: list[Sql]) -> float | None:
    """`report run --limit N` (cost auto, no filter, most expensive first): the N-th largest
    known cost of the runs' first rows, read from the indexes on the run costs (the fully
    known ones, and the known parts of the others) in their order; None (every run is
    ranked) otherwise. A run's first row holds its whole cost unless it is an imported
    session (one piece per slot: its whole cost is at least its first piece's), so no run
    whose first row is below the bound can be among the first N but a session."""
    n = int(q.limit or 0)
    if conds or q.cost != "auto" or not 0 < n <= 10_000 or resolved_order(q) != "desc":
        return None
    f = FACTS
    by_run: dict[tuple[int, str], float] = {}
    # (a run's known part is set only when its cost is not: the partial walk needs no test
    # of the cost, which would make SQLite read that index instead; the cost wins anyway)
    for col in (f"{f}.run_cost_auto_partial", f"{f}.run_cost_auto"):
        by_run.update(((h, rid), v) for h, rid, v in _rows(c, Sql(
            f"SELECT {f}.home_id, {f}.run_id, {col} FROM {f} WHERE {f}.first = 1 AND {col} IS NOT NULL "
            f"ORDER BY {col} DESC LIMIT {n}")))
    known = sorted(by_run.values(), reverse=True)
    if len(known) < n:  # fewer known costs than places: the unknown ones are ranked too
        return None
    return known[n - 1]


def _top_run_keys(c: Conn, q: ReportQuery, conds: list[Sql], fast: bool) -> list[tuple[int, str]]:
    """The runs `report run --limit N` shows. Fast (cost auto, no filter): the runs whose
    first row's known cost passes _top_run_bound (each side has its index), and every imported
    session summed whole, ranked here as _sort_rows ranks them; else ranked in SQL."""
    bound = _top_run_bound(c, q, conds) if fast else None
    if bound is None:
        return [tuple(k) for k in _rows(c, _top_runs(q, conds))]
    f = FACTS
    ranked: dict[tuple[int, str], tuple[Any, Any]] = {}
    for h, rid, cost, part, tokens in _rows(c, Sql(
            f"SELECT {f}.home_id, {f}.run_id, {f}.run_cost_auto, {f}.run_cost_auto_partial, {f}.run_total_tokens "
            f"FROM {f} WHERE {f}.first = 1 AND ({f}.run_cost_auto >= ? OR {f}.run_cost_auto_partial >= ?)",
            (bound, bound))):
        ranked[(h, rid)] = (cost if cost is not None else part, tokens)
    if _rows(c, Sql("SELECT 1 FROM log_sessions LIMIT 1")):
        known, tokens = _run_rank(q)
        for h, rid, k, t in _rows(c, Sql(
                f"SELECT {f}.home_id, {f}.run_id, {known}, max({f}.run_total_tokens) FROM log_sessions AS ranked "
                f"CROSS JOIN {f} WHERE ranked.linked_run_id IS NULL AND {f}.home_id = ranked.home_id AND "
                f"{f}.run_id = ranked.row_id GROUP BY {f}.home_id, {f}.run_id")):
            ranked[(h, rid)] = (k, t)

    def by(item: tuple[tuple[int, str], tuple[Any, Any]]) -> tuple:
        (h, rid), (k, t) = item
        return (k is not None, round(_num(k), COST_DIGITS) if k is not None else 0.0,
                _num(t) if t is not None else -1, rid)

    return [key for key, _ in sorted(ranked.items(), key=by, reverse=True)[:int(q.limit or 0)]]
