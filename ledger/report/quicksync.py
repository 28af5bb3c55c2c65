"""The report's incremental sync of a few changed runs on SQLite, without SQLAlchemy (issue 10).

After one new run, `ledger report` syncs the report's tables with the index: a handful of rows
written, after ~40-60 ms spent importing SQLAlchemy and compiling the ~37 Core statements of
`ledger.report.sync.sync_facts`. `sync_small(url)` does what sync_facts (not `full`) does in
that usual case, statement for statement, through the sqlite3 driver:

1. the same preconditions: the change log's triggers on `runs`, report_state's price version,
   fact rules, group rules and run count (anything else is a full rebuild: the Core path's);
2. the runs of the change log (report_changes, taken whole: the write lock is held) and the
   runs the facts hold as running whose row changed, their facts rebuilt (a run record's rows
   as tuples by ledger.report.fullsync; a (run, model) row re-priced only when its usage
   fingerprint changed, FactBuilder.rows with the cached estimates);
3. the count check (a mismatch needs the Core path's reconcile), the rollups of the touched
   slots and days, the touched report_groups groups and report_group_days cells (their sorted
   figures updated by the runs' old and new values), report_state.

The SQL is the SQL sync_facts sends (same filters, groupings and aggregates, so SQLite sums in
the same order and stores the same values and types). Whenever the case is not simple (a
precondition fails, more than SMALL runs changed, a reconcile is needed, a group's figures do
not add up) nothing is written (the transaction rolls back) and it returns False: the caller
takes the Core path. tests/test_quicksync.py holds the tables it writes to sync_facts', row
for row, value and type.
"""

from __future__ import annotations

import sqlite3
from types import SimpleNamespace
from typing import Any, Iterable, Sequence

from ledger.report import facts as F
from ledger.report import fullsync
from ledger.report.schema import (
    CELL_COLUMNS, CELL_KINDS, CHANGE_TRIGGERS, GROUP_COLUMNS, GROUP_KINDS, GROUP_VALUES, GROUP_VERDICTS,
    MODEL_MEASURES, RUN_MEASURES, SLOTS_PER_DAY, VALUE_KINDS,
)

SMALL = 500  # changed runs at most (more: the Core path, whose statements then cost little)
LOG_ROWS = 4 * SMALL  # change-log rows read at most (a run rewritten several times logs several)
BATCH = 1000  # keys / slots per statement, as ledger.report.sync
FACT_COLS = fullsync.FACT_COLS
# (a kind whose figures are kept without cells would need _refresh_values: the Core path's)
_SIMPLE_KINDS = set(VALUE_KINDS) <= set(CELL_KINDS)


class Declined(Exception):
    """Not a case for the small sync: rolled back, the caller syncs through SQLAlchemy."""


def sync_small(url: str, *, estimator: F.Estimator | None = None, price_version: str | None = None,
               limit: int = SMALL, groups: bool = True, why: list[str] | None = None) -> bool:
    """Sync the report's tables of the SQLite index at `url` as sync_facts would (not `full`)
    when only a few runs changed; True when done (committed), False when declined (nothing
    written; `why`, when given, gets the reason). Raises ledger.index.rawwrite.NotAtHead when the schema is not at head, and
    what the driver raises (a read-only index, a busy one)."""
    from ledger.index.rawwrite import raw_writing

    pv = price_version or F._price_version()
    builder = F.FactBuilder(pv, estimator or F._default_estimator(), F.SyncStats())
    try:
        with raw_writing(url) as con:
            _sync(con, builder, limit, groups)
    except Declined as exc:
        if why is not None:
            why.append(str(exc))
        return False
    return True


def _sync(con: sqlite3.Connection, b: F.FactBuilder, limit: int, groups: bool = True) -> None:
    state = dict(con.execute("SELECT key, value FROM report_state").fetchall())
    (triggers,) = con.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'runs' AND name IN (?, ?, ?)",
        CHANGE_TRIGGERS).fetchone()
    fact_runs = state.get("fact_runs")
    if (triggers != len(CHANGE_TRIGGERS) or state.get("price_version") != b.price_version or fact_runs is None
            or state.get("fact_rules") != F.FACT_RULES or not _SIMPLE_KINDS):
        raise Declined("a full rebuild")
    group_state = state.get("group_rules")
    # the group tables kept up to date, or not built and not needed yet (sync_facts's rule)
    if not (group_state == F.GROUP_RULES or (group_state == F.GROUPS_DEFERRED and not groups)):
        raise Declined("the group tables to build")
    try:
        runs_before = int(fact_runs)
    except ValueError:
        raise Declined("fact_runs unreadable") from None
    touched: set[int] = set()
    keys = _take_log(con, limit)
    _rebuild(con, b, keys, touched)
    running = _running_changed(con)
    if len(keys) + len(running) > limit:
        raise Declined("too many changed runs")
    _rebuild(con, b, running, touched)
    fact_runs = str(runs_before + b.stats.fact_runs_delta)
    (runs,) = con.execute("SELECT count(*) FROM runs").fetchone()
    if runs != int(fact_runs):
        raise Declined("the facts need a reconcile")
    if touched:
        _refresh_rollups(con, touched)
    if b.groups and group_state == F.GROUP_RULES:
        _refresh_groups(con, b.groups, b.cells, b.deltas)
    new_state = {"price_version": b.price_version, "fact_runs": fact_runs, "fact_rules": F.FACT_RULES,
                 "group_rules": group_state}
    if {k: state.get(k) for k in new_state} != new_state:
        con.execute(f"DELETE FROM report_state WHERE key IN ({_marks(len(new_state))})", tuple(new_state))
        con.executemany("INSERT INTO report_state (key, value) VALUES (?, ?)", list(new_state.items()))


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _chunks(items: Sequence[Any], n: int = BATCH) -> Iterable[list[Any]]:
    for i in range(0, len(items), n):
        yield list(items[i:i + n])


def _by_home(keys: Iterable[tuple[int, str]]) -> list[tuple[int, list[str]]]:
    out: dict[int, list[str]] = {}
    for h, rid in keys:
        out.setdefault(h, []).append(rid)
    return sorted(out.items())


def _take_log(con: sqlite3.Connection, limit: int) -> list[tuple[int, str]]:
    """The change log's runs, the log emptied (sync._logged: under the write lock every row
    there is committed and none can be added before this transaction ends)."""
    rows = con.execute("SELECT home_id, run_id FROM report_changes LIMIT ?", (LOG_ROWS + 1,)).fetchall()
    if not rows:
        return []
    keys = sorted(set(rows))
    if len(rows) > LOG_ROWS or len(keys) > limit:
        raise Declined("too many changed runs")
    con.execute("DELETE FROM report_changes")
    return keys


def _running_changed(con: sqlite3.Connection) -> list[tuple[int, str]]:
    """sync._running_changed: runs the facts hold as running whose row differs."""
    rows = con.execute(
        "SELECT report_facts.home_id, report_facts.run_id, runs.run_id IS NULL OR report_facts.indexed_at != "
        "runs.indexed_at OR report_facts.state != runs.state OR CAST(runs.settled AS INTEGER) != report_facts.settled "
        "FROM report_facts LEFT OUTER JOIN runs ON runs.home_id = report_facts.home_id AND runs.run_id = "
        "report_facts.run_id WHERE report_facts.settled = 0 AND report_facts.first = 1 AND report_facts.state != "
        "'abandoned'").fetchall()
    return sorted({(h, rid) for h, rid, differs in rows if differs})


# -- the facts of changed runs (sync._rebuild) ------------------------------------------------

_CACHED_COLS = ("home_id", "run_id", "model_key", "usage_fingerprint", "cost_estimated", "unpriced",
                "cost_estimated_partial", "slot", "first", "piece", *GROUP_KINDS, *(src for _, src in GROUP_VALUES))
_INSERT_FACTS = f"INSERT INTO report_facts ({', '.join(FACT_COLS)}) VALUES ({_marks(len(FACT_COLS))})"


def _select_keys(con: sqlite3.Connection, sql: str, keys: Sequence[tuple[int, str]]) -> list[tuple]:
    """`sql` (ending in `WHERE home_id = ? AND run_id IN ({})`, then any ORDER BY) per home."""
    out: list[tuple] = []
    for home, rids in _by_home(keys):
        out.extend(con.execute(sql.format(_marks(len(rids))), (home, *rids)).fetchall())
    return out


def _rebuild(con: sqlite3.Connection, b: F.FactBuilder, keys: Sequence[tuple[int, str]], touched: set[int]) -> None:
    for chunk in _chunks(keys):
        runs = [fullsync.run_row(r) for r in _select_keys(
            con, f"SELECT {', '.join(fullsync.RUN_NAMES)} FROM runs WHERE home_id = ? AND run_id IN ({{}})", chunk)]
        cached = _load_cached(con, chunk, touched, b)
        b.stats.removed += len(chunk) - len(runs)
        b.stats.fact_runs_delta += len(runs) - len(cached)
        for home, rids in _by_home(chunk):
            con.execute(f"DELETE FROM report_facts WHERE home_id = ? AND run_id IN ({_marks(len(rids))})",
                        (home, *rids))
        _write(con, b, runs, cached, touched)


def _load_cached(con: sqlite3.Connection, keys: Sequence[tuple[int, str]], touched: set[int],
                 b: F.FactBuilder) -> dict[tuple[int, str], dict[tuple[int, str], tuple]]:
    """sync._load_cached: the estimates the facts of `keys` hold; their slots touched, their
    rows noted as leaving (report_groups)."""
    out: dict[tuple[int, str], dict[tuple[int, str], tuple]] = {}
    sql = f"SELECT {', '.join(_CACHED_COLS)} FROM report_facts WHERE home_id = ? AND run_id IN ({{}})"
    for r in _select_keys(con, sql, keys):
        row = dict(zip(_CACHED_COLS, r))
        out.setdefault((row["home_id"], row["run_id"]), {})[(row["slot"], row["model_key"])] = (
            row["usage_fingerprint"], row["cost_estimated"], row["unpriced"], row["cost_estimated_partial"])
        touched.add(row["slot"])
        b.note(row, -1)
    return out


def _write(con: sqlite3.Connection, b: F.FactBuilder, runs: Sequence[Any],
           cached: dict[tuple[int, str], dict[tuple[int, str], tuple]], touched: set[int]) -> None:
    """sync._write: the facts of `runs` built and inserted (their old facts are gone)."""
    keys = [(r.home_id, r.run_id) for r in runs]
    streams: dict[tuple[int, str], list[Any]] = {}
    # (in key order: a model's streams are summed in that order)
    for r in _select_keys(con, f"SELECT {', '.join(fullsync.STREAM_NAMES)} FROM usage_streams WHERE home_id = ? "
                               "AND run_id IN ({}) ORDER BY home_id, run_id, stream_id", keys):
        streams.setdefault((r[0], r[1]), []).append(fullsync.stream_row(r))
    subjects: dict[tuple[int, str], list[str]] = {}
    for h, rid, sel in _select_keys(con, "SELECT home_id, run_id, selector FROM subjects WHERE home_id = ? "
                                         "AND run_id IN ({}) ORDER BY home_id, run_id, position", keys):
        subjects.setdefault((h, rid), []).append(sel)
    rows: list[tuple] = []
    for run in runs:
        k = (run.home_id, run.run_id)
        old = cached.get(k)
        if old:  # estimates to reuse where the usage did not change: FactBuilder.rows itself
            ns = SimpleNamespace(**run._asdict())  # (verdict_facts reads a plain object's __dict__)
            rows.extend(fullsync._as_tuple(d) for d in b.rows(ns, streams.get(k, ()), old, subjects.get(k, ())))
        else:
            rows.extend(fullsync.fact_tuples(b, run, streams.get(k, ()), subjects.get(k, ())))
    touched.update(r[0] for r in rows)  # (slot)
    for r in rows:
        b.note(dict(zip(FACT_COLS, r)), +1)
    b.stats.rebuilt += len(runs)
    if rows:
        con.executemany(_INSERT_FACTS, rows)


# -- rollups (sync.refresh_rollups) -----------------------------------------------------------

def _measures(measures: tuple, table: str = "report_facts") -> str:
    """sync._rollup_select's aggregates: `func(table.src) AS name`."""
    out = []
    for name, func, src in measures:
        expr = "count(*)" if func == "count" and not src else f"{func}({table}.{src})"
        out.append(f"{expr} AS {name}")
    return ", ".join(out)


_DAY_MEASURES = RUN_MEASURES + MODEL_MEASURES
_DAY = f"report_facts.slot / {SLOTS_PER_DAY}"
_INSERT_SLOTS = (
    f"INSERT INTO report_slots (slot, model_key, {', '.join(m[0] for m in _DAY_MEASURES)}) "
    f"SELECT report_facts.slot, report_facts.model_key, {_measures(_DAY_MEASURES)} FROM report_facts "
    "WHERE report_facts.slot IN ({}) GROUP BY report_facts.slot, report_facts.model_key")
_DAY_GROUP = (_DAY, "report_facts.harness", "coalesce(report_facts.run_model, '')", "report_facts.model_key",
              "report_facts.outcome")
_INSERT_DAYS = (
    f"INSERT INTO report_days (day, harness, run_model_key, model_key, outcome, "
    f"{', '.join(m[0] for m in _DAY_MEASURES)}) "
    f"SELECT {_DAY} AS day, report_facts.harness, coalesce(report_facts.run_model, '') AS run_model_key, "
    f"report_facts.model_key, report_facts.outcome, {_measures(_DAY_MEASURES)} FROM report_facts "
    f"WHERE report_facts.slot >= ? AND report_facts.slot < ? GROUP BY {', '.join(_DAY_GROUP)}")


def _refresh_rollups(con: sqlite3.Connection, slots: set[int]) -> None:
    ordered = sorted(slots)
    for chunk in _chunks(ordered):
        con.execute(f"DELETE FROM report_slots WHERE slot IN ({_marks(len(chunk))})", chunk)
        con.execute(_INSERT_SLOTS.format(_marks(len(chunk))), chunk)
    for d in sorted({s // SLOTS_PER_DAY for s in ordered}):
        con.execute("DELETE FROM report_days WHERE day = ?", (d,))
        con.execute(_INSERT_DAYS, (d * SLOTS_PER_DAY, (d + 1) * SLOTS_PER_DAY))  # a PK range


# -- report_groups / report_group_days (sync.refresh_groups) ----------------------------------

def _verdicts(table: str = "report_facts") -> str:
    return ", ".join(f"sum({table}.{n}) AS {n}" for n in GROUP_VERDICTS)


def _rank(table: str, cost: str, part: str) -> str:
    """The known cost of the `auto` mode from the two sums (sync._group_select's rank_auto)."""
    c, p = f"sum({table}.{cost})", f"sum({table}.{part})"
    return f"CASE WHEN ({c} IS NULL AND {p} IS NULL) THEN NULL ELSE coalesce({c}, 0) + coalesce({p}, 0) END"


def _group_select(kind: str, where: str) -> str:
    """sync._group_select: the report_groups rows of `kind` from the facts matching `where`."""
    col = f"report_facts.{kind}"
    return (f"SELECT ? AS kind, CASE WHEN ({col} IS NULL) THEN 1 ELSE 0 END AS gnull, coalesce({col}, '') AS gkey, "
            f"{_measures(RUN_MEASURES)}, {_verdicts()}, "
            f"{_rank('report_facts', 'run_cost_auto', 'run_cost_auto_partial')} AS rank_auto "
            f"FROM report_facts WHERE {where} GROUP BY {col}")


def _cell_select(kind: str, where: str) -> str:
    """sync._cell_select: report_group_days rows of `kind` per key and UTC day."""
    col = f"report_facts.{kind}"
    return (f"SELECT ? AS kind, CASE WHEN ({col} IS NULL) THEN 1 ELSE 0 END AS gnull, coalesce({col}, '') AS gkey, "
            f"{_DAY} AS day, {_measures(RUN_MEASURES)}, {_verdicts()} "
            f"FROM report_facts WHERE {where} GROUP BY {col}, {_DAY}")


_MERGE = {"sum": "sum", "count": "sum", "min": "min", "max": "max"}


def _group_from_cells(where: str) -> str:
    """sync._group_from_cells: report_groups rows summed from their days."""
    t = "report_group_days"
    merged = ", ".join(f"{_MERGE[func]}({t}.{name}) AS {name}" for name, func, _ in RUN_MEASURES)
    return (f"SELECT ? AS kind, {t}.gnull, {t}.gkey, {merged}, {_verdicts(t)}, "
            f"{_rank(t, 'run_cost_auto', 'run_cost_auto_partial')} AS rank_auto "
            f"FROM {t} WHERE {t}.kind = ? AND {where} GROUP BY {t}.gnull, {t}.gkey")


def _key_cond(table: str, keys: Sequence[str | None]) -> tuple[str, list[str]]:
    """sync._key_cond: the (gnull, gkey) of `keys` (None: the group without a key)."""
    named = sorted(k for k in keys if k is not None)
    conds = [f"{table}.gnull = 0 AND {table}.gkey IN ({_marks(len(named))})"] if named else []
    if len(named) < len(keys):
        conds.append(f"{table}.gnull = 1")
    return f"({' OR '.join(conds)})", named


def _col_cond(col: str, keys: Sequence[str | None]) -> tuple[str, list[str]]:
    """sync._col_cond: the facts whose `col` is one of `keys` (None: IS NULL)."""
    named = sorted(k for k in keys if k is not None)
    conds = [f"{col} IN ({_marks(len(named))})"] if named else []
    if len(named) < len(keys):
        conds.append(f"{col} IS NULL")
    return f"({' OR '.join(conds)})", named


def _refresh_groups(con: sqlite3.Connection, groups: set[tuple[str, str | None]],
                    cells: set[tuple[str, str | None, int]], deltas: dict[tuple[str, str | None], list[Any]]) -> None:
    for kind in GROUP_KINDS:
        if kind in CELL_KINDS:
            _refresh_cells(con, kind, groups, cells, deltas)
            continue
        col = f"report_facts.{kind}"
        keys = sorted(k for knd, k in groups if knd == kind and k is not None)
        wheres: list[tuple[str, list[str]]] = [(f"{col} IN ({_marks(len(c))})", c) for c in _chunks(keys)]
        if (kind, None) in groups:
            wheres.append((f"{col} IS NULL", []))
            con.execute("DELETE FROM report_groups WHERE kind = ? AND gnull = 1", (kind,))
        for chunk in _chunks(keys):
            con.execute(f"DELETE FROM report_groups WHERE kind = ? AND gnull = 0 AND gkey IN ({_marks(len(chunk))})",
                        (kind, *chunk))
        for where, params in wheres:
            con.execute(f"INSERT INTO report_groups ({', '.join(GROUP_COLUMNS)}) {_group_select(kind, where)}",
                        (kind, *params))


def _refresh_cells(con: sqlite3.Connection, kind: str, groups: set[tuple[str, str | None]],
                   cells: set[tuple[str, str | None, int]], deltas: dict[tuple[str, str | None], list[Any]]) -> None:
    """sync._refresh_cells: the touched days of the touched groups from the facts, the groups
    from their days, their sorted figures by delta."""
    by_day: dict[int, set[str | None]] = {}
    for knd, key, day in cells:
        if knd == kind:
            by_day.setdefault(day, set()).add(key)
    insert_cells = f"INSERT INTO report_group_days ({', '.join(CELL_COLUMNS)}) "
    for day, day_keys in sorted(by_day.items()):
        cond, named = _key_cond("report_group_days", list(day_keys))
        con.execute(f"DELETE FROM report_group_days WHERE report_group_days.kind = ? AND report_group_days.day = ? "
                    f"AND {cond}", (kind, day, *named))
        fcond, fnamed = _col_cond(f"report_facts.{kind}", list(day_keys))
        con.execute(insert_cells + _cell_select(kind, f"report_facts.slot >= ? AND report_facts.slot < ? AND {fcond}"),
                    (kind, day * SLOTS_PER_DAY, (day + 1) * SLOTS_PER_DAY, *fnamed))
    keys = sorted({key for knd, key in groups if knd == kind}, key=lambda k: (k is None, k or ""))
    value_names = [name for name, _ in GROUP_VALUES]
    for chunk in _chunks(keys):
        gcond, gnamed = _key_cond("report_groups", chunk)
        old = {(r[0], r[1]): r for r in con.execute(
            f"SELECT gnull, gkey, {', '.join(value_names)} FROM report_groups WHERE report_groups.kind = ? AND {gcond}",
            (kind, *gnamed))}
        con.execute(f"DELETE FROM report_groups WHERE report_groups.kind = ? AND {gcond}", (kind, *gnamed))
        ccond, cnamed = _key_cond("report_group_days", chunk)
        con.execute(f"INSERT INTO report_groups ({', '.join(GROUP_COLUMNS)}) {_group_from_cells(ccond)}",
                    (kind, kind, *cnamed))
        if kind not in VALUE_KINDS:
            continue
        for key in chunk:
            ident = (1, "") if key is None else (0, key)
            before = old.get(ident)
            counters = deltas.get((kind, key))
            values = []
            for j, name in enumerate(value_names):
                integer = name == "values_duration_ms"
                current = F._unpack(before[2 + j] if before is not None else None, integer)
                if counters is not None and not F._apply(current, counters[j]):
                    raise Declined("a group's figures do not add up")  # (the Core path reads them again)
                values.append(F.pack_values(current, integer))
            con.execute(f"UPDATE report_groups SET {', '.join(f'{n} = ?' for n in value_names)} "
                        "WHERE kind = ? AND gnull = ? AND gkey = ?", (*values, kind, *ident))
