"""The rollups of report_facts the sync keeps: report_slots / report_days (per 15-minute slot
and model, per UTC day and dimension) and report_groups / report_group_days (per session and
skill, per skill and day), recomputed from the facts for the slots, days and groups a change
touched. Plain SQL on ledger.index.dbapi.Conn, SQLite and PostgreSQL alike (no SQLAlchemy):
ledger.report.sync and ledger.report.quicksync send these statements.

The SQL is what SQLAlchemy Core rendered for the sync before (same filters, groupings and
aggregates, so SQLite sums in the same order and stores the same values and types); the
integer day (`slot / 96`) and the '' of a missing key are literals, so PostgreSQL sees the
same expression in a SELECT list and its GROUP BY.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ledger.index.dbapi import Conn, wrap
from ledger.report.facts import RunValues, _apply, _unpack, pack_values
from ledger.report.schema import (
    CELL_COLUMNS, CELL_KINDS, GROUP_COLUMNS, GROUP_KINDS, GROUP_VALUES, GROUP_VERDICTS, MODEL_MEASURES, RUN_MEASURES,
    SLOTS_PER_DAY, VALUE_KINDS,
)
from ledger.report.sqltext import Sql, _and, _key_in, _or, known_cost

BATCH = 1000  # keys / slots per statement
FACTS, SLOTS, DAYS, GROUPS, CELLS = "report_facts", "report_slots", "report_days", "report_groups", "report_group_days"
DAY_MEASURES = RUN_MEASURES + MODEL_MEASURES
DAY = f"{FACTS}.slot / {SLOTS_PER_DAY}"  # (the UTC day of a slot: integer division on both)
NO_ROWS = Sql("1 = 0")  # (an empty IN list: false)


class Undone(Exception):
    """A group's sorted figures did not add up (never expected); `strict` refresh_groups raises
    it instead of reading them again from the facts (ledger.report.quicksync declines)."""


def chunks(items: Sequence[Any], n: int = BATCH) -> Iterable[list[Any]]:
    for i in range(0, len(items), n):
        yield list(items[i:i + n])


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _where(conds: Sequence[Sql]) -> Sql:
    """` WHERE conds` (nothing without conds)."""
    if not conds:
        return Sql("")
    w = _and(conds)
    return Sql(f" WHERE {w.text}", w.params)


def measures(ms: tuple, table: str = FACTS) -> str:
    """The aggregates of `ms` ((name, func, report_facts column) triples): `func(table.src) AS name`."""
    return ", ".join(f"{'count(*)' if func == 'count' and not src else f'{func}({table}.{src})'} AS {name}"
                     for name, func, src in ms)


def verdicts(table: str = FACTS) -> str:
    return ", ".join(f"sum({table}.{n}) AS {n}" for n in GROUP_VERDICTS)


def rank_auto(table: str) -> str:
    """The known cost of the `auto` mode from the two sums (the rank ledger.report.top
    orders groups by): NULL when nothing of it is known."""
    return known_cost(f"sum({table}.run_cost_auto)", f"sum({table}.run_cost_auto_partial)")


# -- report_slots / report_days --------------------------------------------------------------

_DAY_NAMES = ", ".join(m[0] for m in DAY_MEASURES)
_INSERT_SLOTS = (f"INSERT INTO {SLOTS} (slot, model_key, {_DAY_NAMES}) SELECT {FACTS}.slot, {FACTS}.model_key, "
                 f"{measures(DAY_MEASURES)} FROM {FACTS}{{}} GROUP BY {FACTS}.slot, {FACTS}.model_key")
_DAY_GROUP = (DAY, f"{FACTS}.harness", f"coalesce({FACTS}.run_model, '')", f"{FACTS}.model_key", f"{FACTS}.outcome")
_INSERT_DAYS = (f"INSERT INTO {DAYS} (day, harness, run_model_key, model_key, outcome, {_DAY_NAMES}) "
                f"SELECT {DAY} AS day, {FACTS}.harness, coalesce({FACTS}.run_model, '') AS run_model_key, "
                f"{FACTS}.model_key, {FACTS}.outcome, {measures(DAY_MEASURES)} FROM {FACTS}{{}} "
                f"GROUP BY {', '.join(_DAY_GROUP)}")


def refresh_rollups(conn: Any, slots: set[int] | None) -> None:
    """Recompute the report_slots / report_days rows of `slots` (None: all) from the facts."""
    c = wrap(conn)
    if slots is None:
        c.execute(f"DELETE FROM {SLOTS}")
        c.execute(f"DELETE FROM {DAYS}")
        c.execute(_INSERT_SLOTS.format(""))
        c.execute(_INSERT_DAYS.format(""))
        return
    ordered = sorted(slots)
    for chunk in chunks(ordered):
        c.execute(f"DELETE FROM {SLOTS} WHERE {SLOTS}.slot IN ({_marks(len(chunk))})", chunk)
        c.execute(_INSERT_SLOTS.format(f" WHERE {FACTS}.slot IN ({_marks(len(chunk))})"), chunk)
    for d in sorted({s // SLOTS_PER_DAY for s in ordered}):
        c.execute(f"DELETE FROM {DAYS} WHERE {DAYS}.day = ?", (d,))
        c.execute(_INSERT_DAYS.format(f" WHERE {FACTS}.slot >= ? AND {FACTS}.slot < ?"),
                  (d * SLOTS_PER_DAY, (d + 1) * SLOTS_PER_DAY))  # a PK range


# -- report_groups / report_group_days -------------------------------------------------------

def _key_cond(table: str, keys: Sequence[str | None]) -> Sql:
    """The groups of `table` (gnull, gkey) whose key is one of `keys` (None: the group without one)."""
    named = sorted(k for k in keys if k is not None)
    conds = [Sql(f"{table}.gnull = 0 AND {table}.gkey IN ({_marks(len(named))})", tuple(named))] if named else []
    if len(named) < len(keys):
        conds.append(Sql(f"{table}.gnull = 1"))
    return _or(conds) if conds else NO_ROWS


def _col_cond(kind: str, keys: Sequence[str | None]) -> Sql:
    """The facts whose `kind` column is one of `keys` (None: IS NULL)."""
    named = sorted(k for k in keys if k is not None)
    return _key_in(f"{FACTS}.{kind}", named + [None] * (len(named) < len(keys)))


def _group_select(kind: str, conds: Sequence[Sql], sort: bool = False) -> Sql:
    """[kind, gnull, gkey, RUN_MEASURES..., verdict sums, rank_auto] of the facts matching
    `conds` grouped by `kind`'s column (the sums a report's GROUP BY makes). `sort` (every
    group, SQLite): `+col` makes SQLite sort the table; its walk of the column's index looks
    every fact row up by key, twice as slow at 100,000 runs (a few groups use the index)."""
    col = f"{FACTS}.{kind}"
    w = _where(conds)
    return Sql(f"SELECT ? AS kind, CASE WHEN ({col} IS NULL) THEN 1 ELSE 0 END AS gnull, coalesce({col}, '') AS gkey, "
               f"{measures(RUN_MEASURES)}, {verdicts()}, {rank_auto(FACTS)} AS rank_auto FROM {FACTS}{w.text} "
               f"GROUP BY {'+' if sort else ''}{col}", (kind, *w.params))


def _cell_select(kind: str, conds: Sequence[Sql]) -> Sql:
    """report_group_days rows of `kind` from the facts matching `conds`: per key and UTC day."""
    col = f"{FACTS}.{kind}"
    w = _where(conds)
    return Sql(f"SELECT ? AS kind, CASE WHEN ({col} IS NULL) THEN 1 ELSE 0 END AS gnull, coalesce({col}, '') AS gkey, "
               f"{DAY} AS day, {measures(RUN_MEASURES)}, {verdicts()} FROM {FACTS}{w.text} GROUP BY {col}, {DAY}",
               (kind, *w.params))


_MERGE = {"sum": "sum", "count": "sum", "min": "min", "max": "max"}  # (sums and counts add, min / max combine)


def _group_from_cells(kind: str, conds: Sequence[Sql]) -> Sql:
    """report_groups rows of `kind` summed from their days."""
    t = CELLS
    merged = ", ".join(f"{_MERGE[func]}({t}.{name}) AS {name}" for name, func, _ in RUN_MEASURES)
    w = _where([Sql(f"{t}.kind = ?", (kind,)), *conds])
    return Sql(f"SELECT ? AS kind, {t}.gnull, {t}.gkey, {merged}, {verdicts(t)}, {rank_auto(t)} AS rank_auto "
               f"FROM {t}{w.text} GROUP BY {t}.gnull, {t}.gkey", (kind, *w.params))


def _insert(c: Conn, table: str, cols: Sequence[str], select: Sql) -> None:
    """INSERT INTO table (cols) SELECT ..."""
    c.execute(f"INSERT INTO {table} ({', '.join(cols)}) {select.text}", select.params)


_VALUE_NAMES = [name for name, _ in GROUP_VALUES]


def _set_values(c: Conn, kind: str, ident: tuple[int, str], values: Sequence[bytes]) -> None:
    c.execute(f"UPDATE {GROUPS} SET {', '.join(f'{n} = ?' for n in _VALUE_NAMES)} "
              f"WHERE {GROUPS}.kind = ? AND {GROUPS}.gnull = ? AND {GROUPS}.gkey = ?", (*values, kind, *ident))


def _refresh_values(c: Conn, kind: str, conds: Sequence[Sql]) -> None:
    """The sorted figures (GROUP_VALUES) of the groups of `kind` whose rows match `conds`: each
    run's (facts.RunValues: its whole cost over its pieces, its first row's duration)."""
    runs = RunValues()
    names = list(dict.fromkeys(["home_id", "run_id", "first", "piece", *VALUE_KINDS, *(s for _, s in GROUP_VALUES)]))
    w = _where([Sql(f"{FACTS}.first = 1 OR {FACTS}.piece = 1"), *conds])
    for row in c.rows(f"SELECT {', '.join(f'{FACTS}.{n}' for n in names)} FROM {FACTS}{w.text}", w.params):
        runs.add(dict(zip(names, row)))
    per_group: dict[Any, list[list[Any]]] = {}
    for keys, figures in runs.take():
        lists = per_group.get(keys[kind])
        if lists is None:
            lists = per_group[keys[kind]] = [[] for _ in GROUP_VALUES]
        for i, v in enumerate(figures):
            if v is not None:
                lists[i].append(v)
    for key, lists in per_group.items():
        _set_values(c, kind, (1, "") if key is None else (0, key),
                    [pack_values(lists[i], name == "values_duration_ms") for i, name in enumerate(_VALUE_NAMES)])


def _refresh_cells(c: Conn, kind: str, groups: set[tuple[str, str | None]], cells: set[tuple[str, str | None, int]],
                   deltas: dict[tuple[str, str | None], list[Any]], strict: bool) -> None:
    """A kind of CELL_KINDS: the touched days of the touched groups from the facts (each a
    range of the facts' key), the groups from their days, their sorted figures by delta."""
    by_day: dict[int, set[str | None]] = {}
    for knd, key, day in cells:
        if knd == kind:
            by_day.setdefault(day, set()).add(key)
    for day, keys in sorted(by_day.items()):
        cond = _key_cond(CELLS, list(keys))
        w = _where([Sql(f"{CELLS}.kind = ?", (kind,)), Sql(f"{CELLS}.day = ?", (day,)), cond])
        c.execute(f"DELETE FROM {CELLS}{w.text}", w.params)
        _insert(c, CELLS, CELL_COLUMNS, _cell_select(kind, [
            Sql(f"{FACTS}.slot >= ?", (day * SLOTS_PER_DAY,)), Sql(f"{FACTS}.slot < ?", ((day + 1) * SLOTS_PER_DAY,)),
            _col_cond(kind, list(keys))]))
    ordered = sorted({key for knd, key in groups if knd == kind}, key=lambda k: (k is None, k or ""))
    for chunk in chunks(ordered):
        w = _where([Sql(f"{GROUPS}.kind = ?", (kind,)), _key_cond(GROUPS, chunk)])
        old = {(r[0], r[1]): r for r in c.rows(
            f"SELECT {GROUPS}.gnull, {GROUPS}.gkey, {', '.join(f'{GROUPS}.{n}' for n in _VALUE_NAMES)} "
            f"FROM {GROUPS}{w.text}", w.params)}
        c.execute(f"DELETE FROM {GROUPS}{w.text}", w.params)
        _insert(c, GROUPS, GROUP_COLUMNS, _group_from_cells(kind, [_key_cond(CELLS, chunk)]))
        if kind not in VALUE_KINDS:
            continue
        for key in chunk:
            _update_values(c, kind, key, old, deltas, strict)


def _update_values(c: Conn, kind: str, key: str | None, old: dict[tuple, tuple],
                   deltas: dict[tuple[str, str | None], list[Any]], strict: bool) -> None:
    """A group's sorted figures: its old ones with the runs that left and joined it applied."""
    ident = (1, "") if key is None else (0, key)
    before = old.get(ident)
    counters = deltas.get((kind, key))
    values = []
    for j, name in enumerate(_VALUE_NAMES):
        integer = name == "values_duration_ms"
        current = _unpack(before[2 + j] if before is not None else None, integer)
        if counters is not None and not _apply(current, counters[j]):
            if strict:
                raise Undone("a group's figures do not add up")
            _refresh_values(c, kind, [_col_cond(kind, [key])])  # (never expected) read again from the facts
            return
        values.append(pack_values(current, integer))
    _set_values(c, kind, ident, values)


def refresh_groups(conn: Any, groups: set[tuple[str, str | None]] | None,
                   cells: set[tuple[str, str | None, int]] | None = None,
                   deltas: dict[tuple[str, str | None], list[Any]] | None = None, strict: bool = False) -> None:
    """Recompute the report_groups rows of `groups` ((kind, key); None: all) from the facts;
    a kind of CELL_KINDS through its `cells` ((kind, key, day) touched) and the `deltas` of
    its figures (FactBuilder.note). `strict`: raise Undone where figures do not add up."""
    c = wrap(conn)
    if groups is None:
        c.execute(f"DELETE FROM {GROUPS}")
        c.execute(f"DELETE FROM {CELLS}")
        for kind in GROUP_KINDS:
            if kind in CELL_KINDS:
                _insert(c, CELLS, CELL_COLUMNS, _cell_select(kind, []))
                _insert(c, GROUPS, GROUP_COLUMNS, _group_from_cells(kind, []))
            else:
                _insert(c, GROUPS, GROUP_COLUMNS, _group_select(kind, [], sort=c.sqlite))
            if kind in VALUE_KINDS:
                _refresh_values(c, kind, [])
        return
    for kind in GROUP_KINDS:
        if kind in CELL_KINDS:
            _refresh_cells(c, kind, groups, cells or set(), deltas or {}, strict)
            continue
        col = f"{FACTS}.{kind}"
        keys = sorted(k for knd, k in groups if knd == kind and k is not None)
        wheres = [Sql(f"{col} IN ({_marks(len(chunk))})", tuple(chunk)) for chunk in chunks(keys)]
        if (kind, None) in groups:
            wheres.append(Sql(f"{col} IS NULL"))
            c.execute(f"DELETE FROM {GROUPS} WHERE {GROUPS}.kind = ? AND {GROUPS}.gnull = 1", (kind,))
        for chunk in chunks(keys):
            c.execute(f"DELETE FROM {GROUPS} WHERE {GROUPS}.kind = ? AND {GROUPS}.gnull = 0 "
                      f"AND {GROUPS}.gkey IN ({_marks(len(chunk))})", (kind, *chunk))
        for where in wheres:
            _insert(c, GROUPS, GROUP_COLUMNS, _group_select(kind, [where]))
            if kind in VALUE_KINDS:
                _refresh_values(c, kind, [where])
