"""Runs, not pieces: the piece counts of a report's groups (and totals) turned into run
counts, for the imported sessions stored one piece per slot."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ledger.index.rawread import Conn
from ledger.report.accumulate import COST, COST_N, M_COST, M_COST_N, M_PART, M_ROWS, PART, PIECES, Agg, _num
from ledger.report.buckets import make_buckets
from ledger.report.factsql import FACTS, _cost_columns, _key_column, _none_if_empty, _rows, _select
from ledger.report.kinds import SLOT_SECONDS
from ledger.report.query import ReportQuery
from ledger.report.sqltext import Sql


# runs, not pieces: an imported session is stored as one piece per 15-minute slot it spent
# in (ledger.report.facts); the sums over pieces are the run's, but a count of pieces is not
# a count of runs. `_count_runs` turns the piece counts of every group (and of the totals)
# into run counts: how many runs bear a cost, how many of them are not fully known, and per
# model (--breakdown) how many runs used it and how many of those have its cost unknown.

def _count_runs(c: Conn, q: ReportQuery, conds: list[Sql], groups: dict[Any, Agg], totals: Agg) -> None:
    """Piece counts -> run counts, in place. Only imported sessions have more than one piece
    (a run record has one slot), so only their fact rows are read (none: nothing to do)."""
    if not groups or not _rows(c, Sql("SELECT 1 FROM log_sessions LIMIT 1")):
        return
    f = FACTS
    run_cost, model_cost = _cost_columns(q)
    key = "NULL" if q.kind == "task" else (f"{f}.created_s" if q.is_time else _key_column(q, SLOT_SECONDS))
    cols = [key, f"{f}.model_key", f"{f}.home_id", f"{f}.run_id", f"{f}.piece",
            f"CASE WHEN {f}.piece = 1 AND {run_cost} IS NULL THEN 1 ELSE 0 END",
            f"CASE WHEN {model_cost} IS NULL THEN 1 ELSE 0 END"]
    source = (f"log_sessions AS counted CROSS JOIN {f}")  # (SQLite keeps the order: the facts' run index)
    on = Sql(f"counted.linked_run_id IS NULL AND {f}.home_id = counted.home_id AND {f}.run_id = counted.row_id")
    rows = _rows(c, _select(cols, source, [on, *conds]))
    if not rows:
        return
    key_of: Any = None
    if q.is_time:
        lo, hi = min(int(r[0]) for r in rows), max(int(r[0]) for r in rows)
        buckets = make_buckets(datetime.fromtimestamp(lo, timezone.utc), datetime.fromtimestamp(hi, timezone.utc),
                               q.zone, q.kind, q.week_start)
        key_of = buckets.label_of_epoch
    elif q.kind == "task":
        from ledger.report.tasks import task_keys

        keys = task_keys(c)
    elif q.kind == "model":
        key_of = _none_if_empty
    # per group (None: the totals): [pieces, unknown pieces, runs with a piece, runs with an
    # unknown one], and per model [rows, unknown rows, runs, runs with an unknown row]
    seen: dict[Any, list[Any]] = {}
    for k, model, home, rid, piece, unknown_piece, unknown_row in rows:
        model = _none_if_empty(model)
        if q.kind == "task":
            k = keys.get((home, rid), rid)
        elif key_of is not None:
            k = key_of(int(k) if q.is_time else k)
        run = (home, rid)
        for g in ((k, True), (None, False)):
            acc = seen.get(g)
            if acc is None:
                acc = seen[g] = [0, 0, set(), set(), {}]
            acc[0] += piece
            acc[1] += unknown_piece
            if piece:
                acc[2].add(run)
            if unknown_piece:
                acc[3].add(run)
            m = acc[4].get(model)
            if m is None:
                m = acc[4][model] = [0, 0, set(), set()]
            m[0] += 1
            m[1] += unknown_row
            m[2].add(run)
            if unknown_row:
                m[3].add(run)
    for (k, grouped), acc in seen.items():
        if grouped and q.kind == "model":
            continue  # (_collect_served counts runs, not pieces)
        agg = groups.get(k) if grouped else totals
        if agg is not None:
            _recount(agg, acc)


def _recount(agg: Agg, acc: list[Any]) -> None:
    """One group's counts of pieces replaced by counts of runs (see _count_runs)."""
    v = agg.v
    pieces, unknown = _num(v[PIECES]) or 0, (_num(v[PIECES]) or 0) - (_num(v[COST_N]) or 0)
    runs = pieces - acc[0] + len(acc[2])
    unmeasured = unknown - acc[1] + len(acc[3])
    v[PIECES], v[COST_N] = runs, runs - unmeasured
    if runs - unmeasured == 0 and v[COST] is not None:  # no run fully known: every known figure is a part
        v[PART] = _num(v[COST]) + (_num(v[PART]) or 0)
        v[COST] = None
    for model, (rows, unknown_rows, used, unknown_runs) in acc[4].items():
        mv = agg.models.get(model)
        if mv is None:
            continue
        n, bad = _num(mv[M_ROWS]) or 0, (_num(mv[M_ROWS]) or 0) - (_num(mv[M_COST_N]) or 0)
        n2 = n - rows + len(used)
        bad2 = bad - unknown_rows + len(unknown_runs)
        mv[M_ROWS], mv[M_COST_N] = n2, n2 - bad2
        if n2 - bad2 == 0 and mv[M_COST] is not None:
            mv[M_PART] = _num(mv[M_COST]) + (_num(mv[M_PART]) or 0)
            mv[M_COST] = None
