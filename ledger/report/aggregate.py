"""Report queries: aggregate in SQL, regroup time buckets in Python.

One implementation for SQLite and PostgreSQL: plain GROUP BY with sums, counts, min and
max, so partial aggregates merge exactly (`accumulate`). Each report reads the smallest
table that can answer it (`_source`): `report_slots` (time reports without filters),
`report_days` (`model` / `harness`, plus the facts of partial days at the ends of the
range), `report_groups` (`groups`), else `report_facts` (`collect`). Time reports group by
the 15-minute UTC slot (the clustering key) and `buckets` maps each slot to its local day,
week or month. A group-by report with `--limit` ranks its groups in SQL and reads only those
it can show (`top`); the evaluation view's verdict counts are SQL sums, its medians one
narrow read of the runs' two figures (`medians`). Piece counts become run counts
(`runcount`), groups become rows (`finish`).

The SQL is written out (`factsql`; `Sql`: text with `?` placeholders and its parameters) and
run through the database driver (ledger.index.rawread): answering from an index that is
already up to date loads no SQLAlchemy (issue 10).
"""

from __future__ import annotations

from typing import Any, Sequence

from ledger.index.rawread import wrap
from ledger.report.accumulate import Agg, row_dict
from ledger.report.collect import _collect_days, _collect_facts, _collect_served, _collect_slots
from ledger.report.factsql import (
    FACTS, _Collector, _facts_stmt, _rows, _run_extra, _select, _totals_stmt, _verdict_aggregates, keys_in,
)
from ledger.report.filters import _filter_conds, _time_conds
from ledger.report.finish import _finish, _run_fields
from ledger.report.groups import GROUP_KINDS, VALUE_KINDS, _collect_groups, _groups_built
from ledger.report.medians import _medians
from ledger.report.query import Report, ReportQuery, time_bounds
from ledger.report.runcount import _count_runs
from ledger.report.top import _totals_models


def reads_groups(q: ReportQuery) -> bool:
    """Whether `q` is answered from report_groups (built by the first sync that serves such a
    report: ledger.report.facts.GROUPS_DEFERRED)."""
    return _source(q) == "groups"


def _source(q: ReportQuery) -> str:
    """Which table answers `q`: a rollup when its dimensions cover the query, else the facts."""
    used = {k for k, v in q.filters.items() if v}
    if q.is_time and not used:
        return "slots"
    if q.kind == "model":
        return "served"
    if q.kind == "harness" and used <= {"harness", "outcome"}:
        return "days"
    if (q.kind in GROUP_KINDS and not used and q.since is None and q.until is None and not q.breakdown
            and (not q.evaluation or q.kind in VALUE_KINDS)):
        return "groups"
    return "facts"


def run_report(conn: Any, q: ReportQuery, source: str | None = None) -> Report:
    """Answer `q` from report_facts (or its rollups) on `conn` (a rawread.Conn, or a driver or
    SQLAlchemy connection), which sees a synced index. `source` forces "facts" (tests prove
    every rollup answers exactly like the facts)."""
    import time

    t0 = time.perf_counter()
    c = wrap(conn)
    start, end = time_bounds(q)
    conds = _time_conds(start, end) + _filter_conds(q, c)
    forced = source is not None  # (the facts as they are: no rollup, no index walk)
    source = source or _source(q)
    if q.kind == "task":  # runs grouped into tasks (ledger.report.tasks)
        from ledger.report.tasks import collect_tasks

        col = collect_tasks(c, q, conds)
    elif source == "slots":
        col = _collect_slots(c, q, start, end)
    elif q.kind == "model":  # (one way to answer it: by the model that served each response)
        col = _collect_served(c, q, conds)
    elif source == "days":
        col = _collect_days(c, q, start, end)
    elif source == "groups" and (forced or _groups_built(c)):
        col = _collect_groups(c, q)
    else:
        col = _collect_facts(c, q, conds, fast=not forced)
    if col is None:  # a time report without data
        return _finish(q, {}, Agg(), c, conds, t0)
    groups = col.groups
    totals = Agg()
    if col.totals is not None:
        totals = col.totals
    elif q.kind in ("subject", "model") or (q.kind == "run" and q.limit is not None):
        # a run with several subjects (models) is in several groups; --limit leaves runs out
        totals.add(_rows(c, _totals_stmt(q, start, end, conds))[0])
        if q.kind == "model" and q.breakdown:
            for agg in groups.values():
                for m, mv in agg.models.items():
                    totals.add_model(m, mv)
        elif q.breakdown:  # the totals' models (every matching run's, each once)
            _totals_models(c, q, conds, totals)
        if q.evaluation:  # (report_slots has no verdicts)
            totals.add_verdicts(_rows(c, _select(_verdict_aggregates(), FACTS, conds))[0], 0)
    else:
        for agg in groups.values():
            totals.merge(agg)
    if q.evaluation and col.medians_done:
        totals.medians = col.total_medians
    elif q.evaluation:
        _medians(c, q, conds, groups, totals)
    _count_runs(c, q, conds, groups, totals)
    return _finish(q, groups, totals, c, conds, t0, col.info)


def run_rows(conn: Any, home_id: int, run_ids: Sequence[str], cost: str = "auto") -> dict[str, dict[str, Any]]:
    """The `report run` rows of these runs of one home (run_id -> row), as `ledger report run`
    computes them: `ledger runs` / `show` print the same figures (one definition of a run's
    cost, basis, tokens, start and duration). A run not in report_facts has no row."""
    c = wrap(conn)
    q = ReportQuery(kind="run", cost=cost)
    out: dict[str, dict[str, Any]] = {}
    ids = list(run_ids)
    for i in range(0, len(ids), 500):
        which = [keys_in([(home_id, rid) for rid in ids[i:i + 500]])]
        col = _Collector(q, n_extra=len(_run_extra()))
        col.add(_rows(c, _facts_stmt(q, which)))
        _count_runs(c, q, which, col.groups, Agg())
        for rid, agg in col.groups.items():
            d = row_dict(rid, agg, q)
            _run_fields(d, col.info[rid])
            out[rid] = d
    return out
