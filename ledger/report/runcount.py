"""Runs, not pieces: the piece counts of a report's groups (and totals) turned into run
counts, for the imported sessions stored one piece per slot."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable, Iterable

from ledger.index.rawread import Conn
from ledger.report.accumulate import COST, COST_N, M_COST, M_COST_N, M_PART, M_ROWS, PART, PIECES, Agg, _num
from ledger.report.buckets import make_buckets
from ledger.report.factsql import FACTS, _cost_columns, _key_column, _rows, _select
from ledger.report.kinds import SLOT_SECONDS
from ledger.report.query import ReportQuery
from ledger.report.sqltext import Sql


# runs, not pieces: an imported session is stored as one piece per 15-minute slot it spent
# in (ledger.report.facts); the sums over pieces are the run's, but a count of pieces is not
# a count of runs. `_count_runs` turns the piece counts of every group (and of the totals)
# into run counts: how many runs bear a cost, how many of them are not fully known, and per
# model (--breakdown) how many runs used it and how many of those have its cost unknown.
#
# The counting is in SQL as far as it is cheap (issue 28: reading the 16,000 piece rows of
# 2,000 sessions one by one into Python was 60 % of a warm report). One statement groups the
# sessions' fact rows per (group key, home) and lists the runs of each group's pieces (and of
# its unknown pieces, and per model of its rows) with group_concat; Python only unites those
# lists per group. Time reports group by the 15-minute slot: the report_facts scan is in slot
# order (its primary key), so SQLite groups without sorting, and each slot maps to its bucket
# once (every bucket boundary is on a slot's; else the rows' own instants are grouped). The
# lists are checked against counts from the same statement: a run id holding the separator
# makes the piece rows be read one by one (`_row_form`), never a wrong count.

SEP = " "  # (no run id of ledger's holds a space; _grouped_form checks each list's count)


def _count_runs(c: Conn, q: ReportQuery, conds: list[Sql], groups: dict[Any, Agg], totals: Agg) -> None:
    """Piece counts -> run counts, in place. Only imported sessions have more than one piece
    (a run record has one slot), so only their fact rows are read (none: nothing to do)."""
    if not groups or not _rows(c, Sql("SELECT 1 FROM log_sessions LIMIT 1")):
        return
    # the per-model counts serve only groups holding models (--breakdown)
    per_model = bool(totals.models) or any(agg.models for agg in groups.values())
    f = FACTS
    grouped = q.kind != "model"  # (`report model`: _collect_served counts runs, not pieces)
    if q.kind == "task":
        from ledger.report.tasks import task_keys

        keys = task_keys(c)
        rows = _row_form(c, q, conds, "NULL", per_model, lambda home, run, _: keys.get((home, run), run))
        tally = _tally(rows, per_model, grouped)
    elif q.is_time or not grouped:
        rows = _grouped_form(c, q, conds, f"{f}.slot", per_model)
        if not rows:
            return
        group_of: Any = None
        if q.is_time:
            lo, hi = min(int(r[0]) for r in rows), max(int(r[0]) for r in rows)
            buckets = make_buckets(datetime.fromtimestamp(lo * SLOT_SECONDS, timezone.utc),
                                   datetime.fromtimestamp((hi + 1) * SLOT_SECONDS - 1, timezone.utc),
                                   q.zone, q.kind, q.week_start)
            if buckets.slot % SLOT_SECONDS:  # a bucket starts inside a slot (a historical offset)
                rows = _grouped_form(c, q, conds, f"{f}.created_s", per_model)
                group_of = _memo(buckets.label_of_epoch)
            else:
                group_of = _memo(lambda slot: buckets.label_of_epoch(int(slot) * SLOT_SECONDS))
        tally = _tally(((group_of(r[0]) if group_of else None, *r[1:]) for r in rows), per_model, grouped)
    else:
        tally = _tally(_grouped_form(c, q, conds, _key_column(q, SLOT_SECONDS), per_model), per_model, grouped)
    for (k, is_group), acc in tally.items():
        agg = groups.get(k) if is_group else totals
        if agg is not None:
            _recount(agg, acc)


def _memo(fn: Any) -> Any:
    """fn, computed once per distinct argument (a slot per bucket lookup, not a row)."""
    memo: dict[Any, Any] = {}

    def get(x: Any) -> Any:
        v = memo.get(x)
        if v is None and x not in memo:
            v = memo[x] = fn(x)
        return v
    return get


def _flags(q: ReportQuery) -> tuple[str, str, str]:
    """(a piece, an unknown piece, an unknown row) as conditions on report_facts."""
    f = FACTS
    run_cost, model_cost = _cost_columns(q)
    return f"{f}.piece <> 0", f"{f}.piece = 1 AND {run_cost} IS NULL", f"{model_cost} IS NULL"


def _where(conds: list[Sql]) -> list[Sql]:
    # the imported sessions' rows: every run that is not a record is an unlinked session of
    # log_sessions (ledger.index.logrows: a linked session has no run), and it is the
    # report_facts scan alone (no lookup per row) that keeps the slot order
    return [Sql(f"{FACTS}.source <> 'record'"), *conds]


def _grouped_form(c: Conn, q: ReportQuery, conds: list[Sql], key: str, per_model: bool) -> list[tuple]:
    """Per (key, home[, model]): [key, home, pieces, piece runs, unknown piece runs, (model,
    runs of its rows, runs of its unknown rows)], the runs as lists (one entry per row)."""
    f = FACTS
    piece, unknown, unknown_row = _flags(q)
    concat = "group_concat" if c.dialect == "sqlite" else "string_agg"

    def runs(cond: str | None) -> str:
        return f"{concat}({f'{f}.run_id' if cond is None else f'CASE WHEN {cond} THEN {f}.run_id END'}, '{SEP}')"

    # one list is counted in SQL and must split into that many ids: the widest (every row per
    # model, else the pieces); the others list some of its rows, so they split right with it
    cols = [key, f"{f}.home_id", f"sum({f}.piece)", runs(piece), runs(unknown)]
    group = [key, f"{f}.home_id"]
    if per_model:
        cols += [f"{f}.model_key", runs(None), runs(unknown_row), "count(*)"]
        group.append(f"{f}.model_key")
    else:
        cols.append(f"count(CASE WHEN {piece} THEN 1 END)")
    out = []
    for r in _rows(c, _select(cols, f, _where(conds), group)):
        lists = [_split(x) for x in r[3:5]] + ([_split(r[6]), _split(r[7])] if per_model else [])
        if len(lists[2 if per_model else 0]) != (_num(r[-1]) or 0):  # (a separator in an id)
            return _row_form(c, q, conds, key, per_model)
        out.append((r[0], r[1], r[2], lists[0], lists[1], *((r[5], lists[2], lists[3]) if per_model else ())))
    return out


def _split(text: str | None) -> list[str]:
    """A group_concat list of run ids."""
    return [] if text is None else text.split(SEP)


def _row_form(c: Conn, q: ReportQuery, conds: list[Sql], key: str, per_model: bool,
              key_of: Callable[[Any, str, Any], Any] | None = None) -> list[tuple]:
    """The rows of _grouped_form one fact row each (the lists of one run or none); `key_of`
    (home, run id, key) -> the row's group key."""
    f = FACTS
    piece, unknown, unknown_row = _flags(q)
    cols = [key, f"{f}.home_id", f"{f}.piece", f"{f}.run_id", f"CASE WHEN {unknown} THEN 1 ELSE 0 END"]
    if per_model:
        cols += [f"{f}.model_key", f"CASE WHEN {unknown_row} THEN 1 ELSE 0 END"]
    out = []
    for r in _rows(c, _select(cols, f, _where(conds))):
        run = [r[3]]
        out.append((r[0] if key_of is None else key_of(r[1], r[3], r[0]), r[1], r[2], run if r[2] else [],
                    run if r[4] else [], *((r[5], run, run if r[6] else []) if per_model else ())))
    return out


def _tally(rows: Iterable[tuple], per_model: bool, grouped: bool) -> dict[tuple[Any, bool], list[Any]]:
    """Per group ((key, True); (None, False): the totals): [pieces, unknown pieces, runs with a
    piece, runs with an unknown one, per model [rows, unknown rows, runs, runs with an unknown
    row]], from rows [group, home, pieces, piece runs, unknown piece runs, (model, row runs,
    unknown row runs)]."""
    sums: dict[tuple[Any, bool], list[Any]] = {}  # group -> [pieces, unknown pieces, {model: [rows, unknown]}]
    runs: dict[tuple[Any, Any], list[Any]] = {}  # (group, home) -> the run id sets, the same shape
    every = ((None, False),)
    for k, home, pieces, piece_runs, unknown_runs, *by_model in rows:
        if pieces.__class__ is not int:
            pieces = _num(pieces) or 0
        for g in ((k, True), *every) if grouped else every:
            acc = sums.get(g)
            if acc is None:
                acc = sums[g] = [0, 0, {}]
            ids = runs.get((g, home))
            if ids is None:
                ids = runs[(g, home)] = [set(), set(), {}]
            acc[0] += pieces
            acc[1] += len(unknown_runs)
            ids[0].update(piece_runs)
            if unknown_runs:
                ids[1].update(unknown_runs)
            if per_model:
                model, row_runs, unknown_row_runs = by_model
                model = None if model == "" else model
                m = acc[2].get(model)
                if m is None:
                    m = acc[2][model] = [0, 0]
                m[0] += len(row_runs)
                m[1] += len(unknown_row_runs)
                mids = ids[2].get(model)
                if mids is None:
                    mids = ids[2][model] = [set(), set()]
                mids[0].update(row_runs)
                if unknown_row_runs:
                    mids[1].update(unknown_row_runs)
    out = {g: [acc[0], acc[1], 0, 0, {m: [n, bad, 0, 0] for m, (n, bad) in acc[2].items()}] for g, acc in sums.items()}
    for (g, _), ids in runs.items():  # (a run is (home, run id): a team index holds several homes)
        acc = out[g]
        acc[2] += len(ids[0])
        acc[3] += len(ids[1])
        for model, (used, unknown) in ids[2].items():
            acc[4][model][2] += len(used)
            acc[4][model][3] += len(unknown)
    return out


def _recount(agg: Agg, acc: list[Any]) -> None:
    """One group's counts of pieces replaced by counts of runs (see _count_runs)."""
    v = agg.v
    pieces, unknown = _num(v[PIECES]) or 0, (_num(v[PIECES]) or 0) - (_num(v[COST_N]) or 0)
    runs = pieces - acc[0] + acc[2]
    unmeasured = unknown - acc[1] + acc[3]
    v[PIECES], v[COST_N] = runs, runs - unmeasured
    if runs - unmeasured == 0 and v[COST] is not None:  # no run fully known: every known figure is a part
        v[PART] = _num(v[COST]) + (_num(v[PART]) or 0)
        v[COST] = None
    for model, (rows, unknown_rows, used, unknown_runs) in acc[4].items():
        mv = agg.models.get(model)
        if mv is None:
            continue
        n, bad = _num(mv[M_ROWS]) or 0, (_num(mv[M_ROWS]) or 0) - (_num(mv[M_COST_N]) or 0)
        n2 = n - rows + used
        bad2 = bad - unknown_rows + unknown_runs
        mv[M_ROWS], mv[M_COST_N] = n2, n2 - bad2
        if n2 - bad2 == 0 and mv[M_COST] is not None:
            mv[M_PART] = _num(mv[M_COST]) + (_num(mv[M_PART]) or 0)
            mv[M_COST] = None
