"""`report session|skill` from report_groups: each group's measures kept whole by the sync,
ranked for --limit as ledger.report.top ranks the facts' groups, its medians read from the
sorted figures the table keeps."""

from __future__ import annotations

from typing import Any

from ledger.index.rawread import Conn
from ledger.report.accumulate import COST, CR, CW, IN, OUT, PART, RUNS, Agg, _num
from ledger.report.factsql import GROUPS, _Collector, _rows, _run_aggregates, _select, _totals_stmt
from ledger.report.kinds import VERDICT_FACTS
from ledger.report.medians import _merged_middle, _middle
from ledger.report.query import ReportQuery, resolved_order, time_bounds
from ledger.report.sqltext import Sql, _key_in, _or
from ledger.report.top import _RANK_FIELDS, _SLACK_ABS, _SLACK_REL, _ranked


# report_groups' kinds, and those whose runs' figures it keeps sorted (ledger.index.report_tables
# GROUP_KINDS, ledger.report.sync.VALUE_KINDS: tests/test_report_groups.py checks they agree)
GROUP_KINDS = ("session", "skill")
VALUE_KINDS = ("skill",)


def _group_key() -> str:
    return f"CASE WHEN {GROUPS}.gnull = 1 THEN NULL ELSE {GROUPS}.gkey END"


def _group_rank_bound(c: Conn, q: ReportQuery) -> Sql | None:
    """`report session|skill --limit N` (cost auto): the groups' known costs are kept in
    report_groups.rank_auto with an index, so the N-th is found by walking N entries; the
    groups at or past it (less a slack twice _ranked's) are the only ones ranked. None when
    fewer than N groups have a known cost (the unknown ones are ranked too)."""
    n = int(q.limit or 0)
    if q.cost != "auto" or not 0 < n <= 10_000:
        return None
    g = GROUPS
    way = " DESC" if resolved_order(q) == "desc" else " ASC"
    found = _rows(c, Sql(f"SELECT {g}.rank_auto FROM {g} WHERE {g}.kind = ? AND {g}.rank_auto IS NOT NULL "
                         f"ORDER BY {g}.rank_auto{way} LIMIT 1 OFFSET {n - 1}", (q.kind,)))
    if not found:
        return None
    b = float(found[0][0])
    slack = 2 * (_SLACK_ABS + abs(b) * _SLACK_REL)
    return Sql(f"{g}.rank_auto >= ?", (b - slack,)) if way == " DESC" else Sql(f"{g}.rank_auto <= ?", (b + slack,))


def _group_rank_stmt(q: ReportQuery) -> Sql:
    """[key, the _RANK_FIELDS] of every group of q.kind in report_groups (one row each)."""
    g = GROUPS
    cols = {COST: f"run_cost_{q.cost}", PART: f"run_cost_{q.cost}_partial", IN: "input_tokens", OUT: "output_tokens",
            CR: "cache_read_tokens", CW: "cache_write_tokens", RUNS: "runs"}
    return _select([_group_key(), *(f"{g}.{cols[i]}" for i in _RANK_FIELDS)], g, [Sql(f"{g}.kind = ?", (q.kind,))])


def _collect_groups(c: Conn, q: ReportQuery) -> _Collector:
    """`report session|skill` without filters, range or --breakdown: report_groups holds
    each group's measures whole (the sync recomputes the groups a change touched), and for
    the evaluation view its runs' costs and durations sorted: the medians are read, not
    computed. With --limit the groups are ranked as _collect_top ranks them, from one row
    per group instead of every fact."""
    g = GROUPS
    col = _Collector(q)
    kind = Sql(f"{g}.kind = ?", (q.kind,))
    conds = [kind]
    if q.limit is not None:
        inner = _group_rank_stmt(q)
        bound = _group_rank_bound(c, q)
        if bound is not None:  # only the groups whose cost is near the N-th's or past it
            inner = Sql(inner.text + f" AND {bound.text}", inner.params + bound.params)
        ranked = _rows(c, _ranked(q, inner, totals=False))
        keys = [row[1] for row in ranked if row[0] == 0]
        named = [k for k in keys if k is not None]
        which = ([Sql(f"{g}.gnull = 0 AND {_key_in(f'{g}.gkey', named).text}", tuple(named))] if named else [])
        which += [Sql(f"{g}.gnull = 1")] if None in keys else []
        conds.append(_or(which) if which else Sql("1 = 0"))
        totals = col.totals = Agg()
        start, end = time_bounds(q)
        totals.add(_rows(c, _totals_stmt(q, start, end, []))[0])
        # the groups' costs summed in their order: what merging every group gives (no --limit)
        # (read in key order: `gnull IN` keeps SQLite on the primary key, not the rank index)
        cost, part = _rows(c, _select([f"sum({g}.run_cost_{q.cost})", f"sum({g}.run_cost_{q.cost}_partial)"], g,
                                      [kind, Sql(f"{g}.gnull IN (0, 1)")]))[0]
        totals.v[COST], totals.v[PART] = _num(cost), _num(part)
        if q.evaluation:
            totals.add_verdicts(_rows(c, _select([f"sum({g}.{n})" for n in VERDICT_FACTS], g, [kind]))[0], 0)
    verdicts = [f"sum({g}.{n})" for n in VERDICT_FACTS] if q.evaluation else []
    col.add(_rows(c, _select([_group_key(), *_run_aggregates(q, g), *verdicts], g, conds,
                             [f"{g}.gnull", f"{g}.gkey"])))
    if q.evaluation:
        _group_medians(c, q, col, conds)
    return col


def _group_medians(c: Conn, q: ReportQuery, col: _Collector, conds: list[Sql]) -> None:
    """The medians of the groups read, and of every run (the totals: each run is in exactly
    one group), from report_groups' sorted figures (see _medians for the rule)."""
    import array
    import sys

    g = GROUPS
    figures: list[tuple[Any, Any, Any]] = []
    for key, costs, durations in _rows(c, _select([_group_key(), f"{g}.values_cost_{q.cost}", f"{g}.values_duration_ms"],
                                                  g, [Sql(f"{g}.kind = ?", (q.kind,))])):
        a, b = array.array("d"), array.array("q")
        a.frombytes(costs or b"")
        b.frombytes(durations or b"")
        if sys.byteorder != "little":  # pragma: no cover - (stored little-endian)
            a.byteswap()
            b.byteswap()
        figures.append((key, a, b))
    for key, a, b in figures:
        agg = col.groups.get(key)
        if agg is not None:
            agg.medians = [_middle(a), _middle(b)]
    col.total_medians = [_merged_middle([a for _, a, _ in figures]), _merged_middle([b for _, _, b in figures])]
    col.medians_done = True


def _groups_built(c: Conn) -> bool:
    """report_groups is built (a read-only index may hold it deferred: the facts answer)."""
    from ledger.index.reportshape import GROUP_RULES

    return _rows(c, Sql("SELECT value FROM report_state WHERE key = 'group_rules'")) == [(GROUP_RULES,)]
