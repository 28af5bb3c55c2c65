"""Keep `report_facts` in step with the index, pricing only what changed.

A sync runs before every report (after the index itself is brought up to date), in one
write transaction:

1. If the price data changed (`ledger.pricing.price_data_version()` differs from the one
   the facts were priced with), the facts' rules changed, nothing was synced yet, or
   `full` (`ledger report --resync`), every run is rebuilt.
2. Otherwise the runs to rebuild are those in the change log, `report_changes`: triggers
   on `runs` add a run's key there in the same transaction that inserts, updates or
   deletes its row (migration 0007). The sync deletes the log rows it sees (DELETE ...
   RETURNING, so nothing is deleted unseen) and rebuilds those runs. No clock is involved:
   a run indexed by a machine whose clock is behind, or by a pass that commits after a
   later one, is logged when it commits, and a transaction still open at the sync leaves
   its rows for the next one. The runs the facts hold as running are compared too (cheap,
   and kept in case a change ever reaches `runs` without the triggers).
3. Then the number of runs must equal the number of runs in the facts (kept in
   report_state, recounted only after a change); if not, a full anti-join reconciles both
   ways (a safety net: the log already covers removed runs).

If the triggers are missing (a copy of the table made without them), every sync is a full
one, and says so.

Rebuilding a run re-prices a (run, model) row only when its usage fingerprint (a hash of
its streams' counters, costs and receipts) or the price data version changed; otherwise
the cached estimate is kept. Work is proportional to what changed, not to the history.

The rules of a fact row are in ledger.report.facts (no SQLAlchemy). On SQLite, a full sync
builds the facts through the driver (ledger.report.fullsync), and the report syncs a few
changed runs through the driver too (ledger.report.quicksync, the same statements as here).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

import sqlalchemy as sa

from ledger.index.models import COUNTER_COLUMNS, Home, Run, RunSubject, UsageStream
from ledger.report import schema
from ledger.report.facts import (  # noqa: F401 - re-exported (tests, scripts)
    COMMAND_HARNESS, FACT_RULES, GROUP_RULES, GROUPS_DEFERRED, VERDICT_FACTS, Estimator, FactBuilder, RunValues, SyncStats,
    _apply, _counters, _default_estimator, _fingerprint, _price_version, _unpack, pack_values, run_outcome, verdict_facts,
)
from ledger.report.models import (
    CELL_KINDS, CHANGE_TRIGGERS, GROUP_KINDS, GROUP_VALUES, GROUP_VERDICTS, MODEL_MEASURES, RUN_MEASURES,
    SLOT_SECONDS, ReportChange, ReportDay, ReportFact, ReportGroup, ReportGroupDay, ReportSlot, ReportState,
)
from ledger.report.schema import (  # noqa: F401 - re-exported
    CELL_COLUMNS, GROUP_COLUMNS, SLOTS_PER_DAY, TOKEN_COLUMNS, VALUE_KINDS,
)

BATCH = 1000
CHANGES_CHUNK = 20_000  # change-log rows taken per statement (memory stays flat after a big pass)
PG_LOCK_KEY = 0x4C445250  # "LDRP": one report sync at a time on a shared PostgreSQL index

runs_t = Run.__table__
streams_t = UsageStream.__table__
subjects_t = RunSubject.__table__
homes_t = Home.__table__
facts_t = ReportFact.__table__
slots_t = ReportSlot.__table__
days_t = ReportDay.__table__
state_t = ReportState.__table__
groups_t = ReportGroup.__table__
cells_t = ReportGroupDay.__table__
changes_t = ReportChange.__table__

_RUN_COLS = tuple(runs_t.c[name] for name in schema.RUN_COLUMNS)  # (verdict counts: migration 0004)
_STREAM_COLS = tuple(streams_t.c[name] for name in schema.STREAM_COLUMNS)


def schema_disagreements() -> list[str]:
    """Where ledger.report.schema (the driver writers' copy) differs from the models."""
    return [name for name, mine, theirs in (
        ("COUNTER_COLUMNS", schema.COUNTER_COLUMNS, COUNTER_COLUMNS),
        ("report_facts", schema.FACT_COLUMNS, tuple(c.name for c in facts_t.columns)),
        ("report_groups", sorted(schema.GROUP_COLUMNS + [n for n, _ in GROUP_VALUES]),
         sorted(c.name for c in groups_t.columns)),
        ("report_group_days", tuple(schema.CELL_COLUMNS), tuple(c.name for c in cells_t.columns)),
        ("report_slots", ("slot", "model_key") + tuple(m[0] for m in RUN_MEASURES + MODEL_MEASURES),
         tuple(c.name for c in slots_t.columns)),
    ) if mine != theirs]


if schema_disagreements():  # pragma: no cover - a schema change must update ledger/report/schema.py
    raise RuntimeError(f"ledger/report/schema.py disagrees with the models: {schema_disagreements()}")


# --------------------------------------------------------------------------------------


def keys_in(home_col: Any, run_col: Any, keys: Iterable[tuple[int, str]]) -> Any:
    """(home_id, run_id) IN keys, written so both SQLite and PostgreSQL search the key index
    (SQLite scans the table for a row-value IN list)."""
    by_home: dict[int, list[str]] = {}
    for h, rid in keys:
        by_home.setdefault(h, []).append(rid)
    return sa.or_(*(sa.and_(home_col == h, run_col.in_(rids)) for h, rids in sorted(by_home.items())))


def _get_state(conn: Any) -> dict[str, str | None]:
    return {k: v for k, v in conn.execute(sa.select(state_t.c.key, state_t.c.value))}


def _set_state(conn: Any, values: Mapping[str, str | None]) -> None:
    conn.execute(sa.delete(state_t).where(state_t.c.key.in_(list(values))))
    conn.execute(sa.insert(state_t), [{"key": k, "value": v} for k, v in values.items()])


def _load_runs(conn: Any, keys: Sequence[tuple[int, str]]) -> list[Any]:
    if not keys:
        return []
    return list(conn.execute(sa.select(*_RUN_COLS).where(keys_in(runs_t.c.home_id, runs_t.c.run_id, keys))))


def _load_streams(conn: Any, keys: Sequence[tuple[int, str]]) -> dict[tuple[int, str], list[Any]]:
    out: dict[tuple[int, str], list[Any]] = {}
    if not keys:
        return out
    s = streams_t.c
    q = sa.select(*_STREAM_COLS).where(keys_in(s.home_id, s.run_id, keys)).order_by(s.home_id, s.run_id, s.stream_id)
    for st in conn.execute(q):  # (in key order: a model's streams are summed in that order)
        out.setdefault((st.home_id, st.run_id), []).append(st)
    return out


def _load_subjects(conn: Any, keys: Sequence[tuple[int, str]]) -> dict[tuple[int, str], list[str]]:
    out: dict[tuple[int, str], list[str]] = {}
    if not keys:
        return out
    s = subjects_t.c
    q = sa.select(s.home_id, s.run_id, s.selector).where(keys_in(s.home_id, s.run_id, keys)).order_by(
        s.home_id, s.run_id, s.position)
    for h, rid, sel in conn.execute(q):
        out.setdefault((h, rid), []).append(sel)
    return out


def _load_cached(conn: Any, keys: Sequence[tuple[int, str]], touched: set[int],
                 builder: "FactBuilder | None" = None
                 ) -> dict[tuple[int, str], dict[tuple[int, str], tuple[int, float | None, str | None, float | None]]]:
    """The estimates the facts of `keys` hold (all priced with the current price data: a
    new price version rebuilds everything); adds their slots to `touched`, and notes the
    rows leaving to `builder` (report_groups)."""
    out: dict[tuple[int, str], dict[tuple[int, str], tuple[int, float | None, str | None, float | None]]] = {}
    if not keys:
        return out
    f = facts_t.c
    q = sa.select(f.home_id, f.run_id, f.model_key, f.usage_fingerprint, f.cost_estimated, f.unpriced,
                  f.cost_estimated_partial, f.slot, f.first, f.piece, *(f[k] for k in GROUP_KINDS),
                  *(f[src] for _, src in GROUP_VALUES)).where(keys_in(f.home_id, f.run_id, keys))
    for r in conn.execute(q):
        out.setdefault((r.home_id, r.run_id), {})[(r.slot, r.model_key)] = (
            r.usage_fingerprint, r.cost_estimated, r.unpriced, r.cost_estimated_partial)
        touched.add(r.slot)
        if builder is not None:
            builder.note(r._mapping, -1)
    return out


def _delete_facts(conn: Any, keys: Sequence[tuple[int, str]]) -> None:
    if keys:
        conn.execute(sa.delete(facts_t).where(keys_in(facts_t.c.home_id, facts_t.c.run_id, keys)))


def _write(conn: Any, builder: FactBuilder, runs: Sequence[Any],
           cached: Mapping[tuple[int, str], Mapping[tuple[int, str], tuple[int, float | None, str | None, float | None]]],
           touched: set[int]) -> None:
    """Build and insert the facts of `runs` (their old facts are already gone)."""
    keys = [(r.home_id, r.run_id) for r in runs]
    streams = _load_streams(conn, keys)
    subjects = _load_subjects(conn, keys)
    rows: list[dict[str, Any]] = []
    for run in runs:
        k = (run.home_id, run.run_id)
        rows.extend(builder.rows(run, streams.get(k, ()), cached.get(k, {}), subjects.get(k, ())))
    touched.update(r["slot"] for r in rows)
    for r in rows:
        builder.note(r, +1)
    builder.stats.rebuilt += len(runs)
    if rows:
        conn.execute(sa.insert(facts_t), rows)


def _rebuild(conn: Any, builder: FactBuilder, keys: Sequence[tuple[int, str]], touched: set[int]) -> None:
    """Rebuild the facts of `keys` (runs that no longer exist lose their facts), reusing
    the cached estimates; the slots whose rows changed are added to `touched`."""
    for i in range(0, len(keys), BATCH):
        chunk = list(keys[i:i + BATCH])
        runs = _load_runs(conn, chunk)
        cached = _load_cached(conn, chunk, touched, builder)
        builder.stats.removed += len(chunk) - len(runs)
        builder.stats.fact_runs_delta += len(runs) - len(cached)
        _delete_facts(conn, chunk)
        _write(conn, builder, runs, cached, touched)


def _rollup_select(measures: tuple, group: list[Any], where: list[Any]) -> Any:
    f = facts_t.c
    cols = []
    for name, func, src in measures:
        if func == "count":
            expr = sa.func.count(f[src]) if src else sa.func.count()
        else:
            expr = getattr(sa.func, func)(f[src])
        cols.append(expr.label(name))
    return sa.select(*group, *cols).where(*where).group_by(*group)


def refresh_rollups(conn: Any, slots: set[int] | None) -> None:
    """Recompute the report_slots / report_days rows of `slots` (None: all) from the facts."""
    f = facts_t.c
    day_measures = RUN_MEASURES + MODEL_MEASURES
    day_names = ["day", "harness", "run_model_key", "model_key", "outcome"] + [m[0] for m in day_measures]
    day = (f.slot // SLOTS_PER_DAY).label("day")
    day_group = [day, f.harness, sa.func.coalesce(f.run_model, "").label("run_model_key"), f.model_key, f.outcome]

    def insert_slots(where: list[Any]) -> None:
        conn.execute(sa.insert(slots_t).from_select(
            ["slot", "model_key"] + [m[0] for m in day_measures],
            _rollup_select(day_measures, [f.slot, f.model_key], where)))

    def insert_days(where: list[Any]) -> None:
        conn.execute(sa.insert(days_t).from_select(day_names, _rollup_select(day_measures, day_group, where)))

    if slots is None:
        conn.execute(sa.delete(slots_t))
        conn.execute(sa.delete(days_t))
        insert_slots([])
        insert_days([])
        return
    ordered = sorted(slots)
    for i in range(0, len(ordered), BATCH):
        chunk = ordered[i:i + BATCH]
        conn.execute(sa.delete(slots_t).where(slots_t.c.slot.in_(chunk)))
        insert_slots([f.slot.in_(chunk)])
    for d in sorted({s // SLOTS_PER_DAY for s in ordered}):
        conn.execute(sa.delete(days_t).where(days_t.c.day == d))
        insert_days([f.slot >= d * SLOTS_PER_DAY, f.slot < (d + 1) * SLOTS_PER_DAY])  # a PK range


def _group_select(kind: str, where: list[Any], sort: bool = False) -> Any:
    """[kind, gnull, gkey, RUN_MEASURES..., verdict sums] of report_facts grouped by `kind`'s
    column (the same sums a report's GROUP BY makes)."""
    f = facts_t.c
    col = f[kind]
    measures = _rollup_select(RUN_MEASURES, [], where).selected_columns
    cost, part = sa.func.sum(f.run_cost_auto), sa.func.sum(f.run_cost_auto_partial)
    # (the known cost as ledger.report.top._ranked computes it from the two sums)
    rank = sa.case((sa.and_(cost.is_(None), part.is_(None)), None),
                   else_=sa.func.coalesce(cost, 0) + sa.func.coalesce(part, 0))
    # every group on SQLite (`sort`): `+col` makes it sort the table; its walk of the column's
    # index looks every fact row up by key, twice as slow at 100,000 runs (a few groups, the
    # incremental case, use the index)
    key = sa.literal_column(f"+{facts_t.name}.{kind}") if sort else col
    return sa.select(sa.literal(kind).label("kind"),
                     sa.case((col.is_(None), 1), else_=0).label("gnull"),
                     sa.func.coalesce(col, "").label("gkey"), *measures,
                     *(sa.func.sum(f[n]).label(n) for n in GROUP_VERDICTS), rank.label("rank_auto")
                     ).where(*where).group_by(key)


def _refresh_values(conn: Any, kind: str, where: list[Any]) -> None:
    """The sorted figures (GROUP_VALUES) of the groups of `kind` whose rows match `where`: each
    run's (facts.RunValues: its whole cost over its pieces, its first row's duration)."""
    f = facts_t.c
    runs = RunValues()
    names = ["home_id", "run_id", "first", "piece", *VALUE_KINDS, *(c for _, c in GROUP_VALUES)]
    for row in conn.execute(sa.select(*(f[n] for n in dict.fromkeys(names))).where(
            sa.or_(f.first == 1, f.piece == 1), *where)):
        runs.add(row._mapping)
    per_group: dict[Any, list[list[Any]]] = {}
    for keys, figures in runs.take():
        lists = per_group.get(keys[kind])
        if lists is None:
            lists = per_group[keys[kind]] = [[] for _ in GROUP_VALUES]
        for i, v in enumerate(figures):
            if v is not None:
                lists[i].append(v)
    g = groups_t.c
    for key, lists in per_group.items():
        values = {name: pack_values(lists[i], name == "values_duration_ms") for i, (name, _) in enumerate(GROUP_VALUES)}
        conn.execute(sa.update(groups_t).where(g.kind == kind, g.gnull == (1 if key is None else 0),
                                               g.gkey == ("" if key is None else key)).values(**values))


def _key_cond(gnull: Any, gkey: Any, keys: Sequence[str | None]) -> Any:
    named = sorted(k for k in keys if k is not None)
    conds = [sa.and_(gnull == 0, gkey.in_(named))] if named else []
    if len(named) < len(keys):
        conds.append(gnull == 1)
    return sa.or_(*conds) if conds else sa.false()


def _col_cond(col: Any, keys: Sequence[str | None]) -> Any:
    named = sorted(k for k in keys if k is not None)
    conds = [col.in_(named)] if named else []
    if len(named) < len(keys):
        conds.append(col.is_(None))
    return sa.or_(*conds) if conds else sa.false()


def _cell_select(kind: str, where: list[Any]) -> Any:
    """report_group_days rows of `kind` from the facts matching `where`: per key and UTC day."""
    f = facts_t.c
    col = f[kind]
    day = (f.slot // SLOTS_PER_DAY).label("day")
    measures = _rollup_select(RUN_MEASURES, [], where).selected_columns
    return sa.select(sa.literal(kind).label("kind"), sa.case((col.is_(None), 1), else_=0).label("gnull"),
                     sa.func.coalesce(col, "").label("gkey"), day, *measures,
                     *(sa.func.sum(f[n]).label(n) for n in GROUP_VERDICTS)).where(*where).group_by(col, day)


def _group_from_cells(kind: str, where: list[Any]) -> Any:
    """report_groups rows of `kind` summed from their days (sums and counts add, min / max combine)."""
    c = cells_t.c
    merge = {"sum": sa.func.sum, "count": sa.func.sum, "min": sa.func.min, "max": sa.func.max}
    cost, part = sa.func.sum(c.run_cost_auto), sa.func.sum(c.run_cost_auto_partial)
    rank = sa.case((sa.and_(cost.is_(None), part.is_(None)), None),
                   else_=sa.func.coalesce(cost, 0) + sa.func.coalesce(part, 0))
    return sa.select(sa.literal(kind).label("kind"), c.gnull, c.gkey,
                     *(merge[func](c[name]).label(name) for name, func, _ in RUN_MEASURES),
                     *(sa.func.sum(c[n]).label(n) for n in GROUP_VERDICTS), rank.label("rank_auto")
                     ).where(c.kind == kind, *where).group_by(c.gnull, c.gkey)


def _refresh_cells(conn: Any, kind: str, groups: set[tuple[str, str | None]],
                   cells: set[tuple[str, str | None, int]], deltas: dict[tuple[str, str | None], list[Any]]) -> None:
    """A kind of CELL_KINDS: the touched days of the touched groups from the facts (each a
    range of the facts' key), the groups from their days, their sorted figures by delta."""
    f, c, g = facts_t.c, cells_t.c, groups_t.c
    by_day: dict[int, set[str | None]] = {}
    for knd, key, day in cells:
        if knd == kind:
            by_day.setdefault(day, set()).add(key)
    for day, keys in sorted(by_day.items()):
        conn.execute(sa.delete(cells_t).where(c.kind == kind, c.day == day, _key_cond(c.gnull, c.gkey, list(keys))))
        conn.execute(sa.insert(cells_t).from_select(CELL_COLUMNS, _cell_select(kind, [
            f.slot >= day * SLOTS_PER_DAY, f.slot < (day + 1) * SLOTS_PER_DAY, _col_cond(f[kind], list(keys))])))
    keys = sorted({key for knd, key in groups if knd == kind}, key=lambda k: (k is None, k or ""))
    for i in range(0, len(keys), BATCH):
        chunk = keys[i:i + BATCH]
        old = {(r.gnull, r.gkey): r for r in conn.execute(
            sa.select(g.gnull, g.gkey, *(g[name] for name, _ in GROUP_VALUES)).where(
                g.kind == kind, _key_cond(g.gnull, g.gkey, chunk)))}
        conn.execute(sa.delete(groups_t).where(g.kind == kind, _key_cond(g.gnull, g.gkey, chunk)))
        conn.execute(sa.insert(groups_t).from_select(GROUP_COLUMNS, _group_from_cells(
            kind, [_key_cond(c.gnull, c.gkey, chunk)])))
        if kind not in VALUE_KINDS:
            continue
        for key in chunk:
            ident = (1, "") if key is None else (0, key)
            before = old.get(ident)
            counters = deltas.get((kind, key))
            values = {}
            for j, (name, _) in enumerate(GROUP_VALUES):
                integer = name == "values_duration_ms"
                current = _unpack(before[2 + j] if before is not None else None, integer)
                if counters is not None and not _apply(current, counters[j]):
                    values = None  # (never expected) the group's figures read again from the facts
                    break
                values[name] = pack_values(current, integer)
            if values is None:
                _refresh_values(conn, kind, [_col_cond(f[kind], [key])])
            else:
                conn.execute(sa.update(groups_t).where(g.kind == kind, g.gnull == ident[0], g.gkey == ident[1])
                             .values(**values))


def refresh_groups(conn: Any, groups: set[tuple[str, str | None]] | None,
                   cells: set[tuple[str, str | None, int]] | None = None,
                   deltas: dict[tuple[str, str | None], list[Any]] | None = None) -> None:
    """Recompute the report_groups rows of `groups` ((kind, key); None: all) from the facts;
    a kind of CELL_KINDS through its `cells` ((kind, key, day) touched) and the `deltas` of
    its figures (FactBuilder.note)."""
    g = groups_t.c
    if groups is None:
        conn.execute(sa.delete(groups_t))
        conn.execute(sa.delete(cells_t))
        for kind in GROUP_KINDS:
            if kind in CELL_KINDS:
                conn.execute(sa.insert(cells_t).from_select(CELL_COLUMNS, _cell_select(kind, [])))
                conn.execute(sa.insert(groups_t).from_select(GROUP_COLUMNS, _group_from_cells(kind, [])))
            else:
                conn.execute(sa.insert(groups_t).from_select(GROUP_COLUMNS, _group_select(
                    kind, [], sort=conn.dialect.name == "sqlite")))
            if kind in VALUE_KINDS:
                _refresh_values(conn, kind, [])
        return
    f = facts_t.c
    for kind in GROUP_KINDS:
        if kind in CELL_KINDS:
            _refresh_cells(conn, kind, groups, cells or set(), deltas or {})
            continue
        keys = sorted(k for knd, k in groups if knd == kind and k is not None)
        wheres = [[f[kind].in_(keys[i:i + BATCH])] for i in range(0, len(keys), BATCH)]
        if (kind, None) in groups:
            wheres.append([f[kind].is_(None)])
            conn.execute(sa.delete(groups_t).where(g.kind == kind, g.gnull == 1))
        for i in range(0, len(keys), BATCH):
            conn.execute(sa.delete(groups_t).where(g.kind == kind, g.gnull == 0, g.gkey.in_(keys[i:i + BATCH])))
        for where in wheres:
            conn.execute(sa.insert(groups_t).from_select(GROUP_COLUMNS, _group_select(kind, where)))
            if kind in VALUE_KINDS:
                _refresh_values(conn, kind, where)


# On SQLite a full sync builds the facts through the driver (ledger.report.fullsync, ~3x
# faster); False takes the Core path below, as other databases do (tests compare the two).
DRIVER_FULL_SYNC = True
NOTIFY_AT = 10_000  # a full sync of more runs than this says so on stderr (it takes a while)


def _full(conn: Any, builder: FactBuilder, notify: Callable[[str], None] | None) -> None:
    """Rebuild every fact, walking the runs' primary key (memory stays flat)."""
    if notify is not None:
        total = _count_runs(conn)
        if total >= NOTIFY_AT:
            notify(f"ledger: pricing {total:,} runs for reports ({builder.price_version}); "
                   "this happens once, later reports reuse the estimates")
    conn.execute(sa.delete(facts_t))
    # (before the runs are read: a change committed after this statement stays logged and is
    # rebuilt by the next sync, one committed before it is read below)
    conn.execute(sa.delete(changes_t))
    if conn.dialect.name == "sqlite" and DRIVER_FULL_SYNC:
        from ledger.report.fullsync import write_all

        write_all(conn.connection.driver_connection, builder)
        return
    r = runs_t.c
    unused: set[int] = set()  # the rollups are rebuilt whole after a full sync
    for (home_id,) in conn.execute(sa.select(homes_t.c.home_id).order_by(homes_t.c.home_id)).fetchall():
        last: str | None = None
        while True:  # keyset pagination
            q = sa.select(*_RUN_COLS).where(r.home_id == home_id).order_by(r.run_id).limit(BATCH)
            if last is not None:
                q = q.where(r.run_id > last)
            runs = list(conn.execute(q))
            if not runs:
                break
            last = runs[-1].run_id
            _write(conn, builder, runs, {}, unused)
            unused.clear()


def _logged(conn: Any) -> Iterable[list[tuple[int, str]]]:
    """Take the change log: each chunk's rows are deleted and their run keys returned in one
    statement (DELETE ... RETURNING), so a row is gone only once the sync has it; a row of
    a transaction still open is neither seen nor deleted. Stops after the rows there were
    when it began (a busy team's indexers cannot keep one sync going)."""
    c = changes_t.c
    top = conn.execute(sa.select(sa.func.max(c.seq))).scalar()
    if top is None:
        return
    while True:
        chunk = sa.select(c.seq).where(c.seq <= top).order_by(c.seq).limit(CHANGES_CHUNK)
        rows = conn.execute(sa.delete(changes_t).where(c.seq.in_(chunk.scalar_subquery()))
                            .returning(c.home_id, c.run_id)).fetchall()
        if rows:
            yield sorted({(h, rid) for h, rid in rows})
        if len(rows) < CHANGES_CHUNK:
            return


def _running_changed(conn: Any) -> tuple[list[tuple[int, str]], int]:
    """Runs the facts hold as running whose row differs from what the facts were built from
    (the indexer turns running into abandoned in place; the log sees that UPDATE too, this
    is the net under it). Returns (changed keys, candidates checked). One indexed query."""
    r, f = runs_t.c, facts_t.c
    keys: set[tuple[int, str]] = set()
    checked = 0
    differs = sa.or_(r.run_id.is_(None), f.indexed_at != r.indexed_at, f.state != r.state,
                     sa.cast(r.settled, sa.Integer) != f.settled)
    join = sa.and_(r.home_id == f.home_id, r.run_id == f.run_id)
    q = (sa.select(f.home_id, f.run_id, differs).select_from(facts_t.outerjoin(runs_t, join))
         .where(f.settled == 0, f.first == 1, f.state != "abandoned"))
    for h, rid, d in conn.execute(q):
        checked += 1
        if d:
            keys.add((h, rid))
    return sorted(keys), checked


def has_change_triggers(conn: Any) -> bool:
    """Whether the triggers filling report_changes are on `runs` (a copy of the table made
    without them, e.g. by a hand-made SQLite table rebuild, would log nothing)."""
    names = list(CHANGE_TRIGGERS)
    if conn.dialect.name == "postgresql":
        q = sa.text("SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass('runs') "
                    "AND tgname = ANY(:names) AND tgenabled <> 'D'").bindparams(names=names)
    else:
        q = sa.text("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'runs' "
                    "AND name IN (:a, :b, :c)").bindparams(a=names[0], b=names[1], c=names[2])
    return conn.execute(q).scalar_one() == len(names)


def _reconcile(conn: Any, builder: FactBuilder, touched: set[int]) -> None:
    """Both-way anti-join: runs without facts are built, facts without runs dropped."""
    r, f = runs_t.c, facts_t.c
    missing = [(h, rid) for h, rid in conn.execute(
        sa.select(r.home_id, r.run_id).where(~sa.exists().where(f.home_id == r.home_id, f.run_id == r.run_id)))]
    orphans = [(h, rid) for h, rid in conn.execute(
        sa.select(f.home_id, f.run_id).where(f.first == 1, ~sa.exists().where(
            r.home_id == f.home_id, r.run_id == f.run_id)))]
    _rebuild(conn, builder, sorted(set(missing) | set(orphans)), touched)
    builder.stats.reconciled = True


def _count_runs(conn: Any) -> int:
    return conn.execute(sa.select(sa.func.count()).select_from(runs_t)).scalar_one()


def _count_fact_runs(conn: Any) -> int:
    return conn.execute(sa.select(sa.func.count()).select_from(facts_t).where(facts_t.c.first == 1)).scalar_one()


def sync_facts(conn: Any, *, estimator: Estimator | None = None, price_version: str | None = None,
               full: bool = False, notify: Callable[[str], None] | None = None, groups: bool = True) -> SyncStats:
    """Bring report_facts up to date with runs/usage_streams, inside the caller's transaction.
    `groups`: the report to answer reads report_groups (aggregate.reads_groups). While the
    group tables are not built (GROUPS_DEFERRED) and no report needs them, they stay so; once
    built they are kept up to date like the other tables."""
    import time

    t0 = time.perf_counter()
    stats = SyncStats()
    pv = price_version or _price_version()
    builder = FactBuilder(pv, estimator or _default_estimator(), stats)
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_LOCK_KEY})")
    state = _get_state(conn)
    fact_runs = state.get("fact_runs")
    touched: set[int] = set()
    logged = has_change_triggers(conn)
    if not logged and notify is not None:
        notify("ledger: the index's change log triggers on `runs` (migration 0007) are missing, so every report "
               "rebuilds its tables (slow); fix: ledger index --rebuild (on PostgreSQL, into an empty database)")
    if (full or not logged or state.get("price_version") != pv or fact_runs is None
            or state.get("fact_rules") != FACT_RULES):
        stats.full = True
        _full(conn, builder, notify)
    else:
        for keys in _logged(conn):
            stats.checked += len(keys)
            _rebuild(conn, builder, keys, touched)
        running, checked = _running_changed(conn)
        stats.checked += checked
        _rebuild(conn, builder, running, touched)
    if stats.full:
        fact_runs = str(_count_fact_runs(conn))
    else:
        fact_runs = str(int(fact_runs) + stats.fact_runs_delta)
    if _count_runs(conn) != int(fact_runs):
        _reconcile(conn, builder, touched)  # (the log covers removals: a safety net)
        fact_runs = str(_count_fact_runs(conn))
    if stats.full:
        refresh_rollups(conn, None)
    elif touched:
        refresh_rollups(conn, touched)
    built = state.get("group_rules") == GROUP_RULES
    group_state = GROUP_RULES
    if (stats.full or not built) and (groups or built):
        refresh_groups(conn, None)
        stats.groups = -1
    elif not built:  # (not needed yet: made by the first report that reads them)
        group_state = GROUPS_DEFERRED
        if state.get("group_rules") not in (None, GROUPS_DEFERRED):  # (made by older rules: stale)
            conn.execute(sa.delete(groups_t))
            conn.execute(sa.delete(cells_t))
    elif builder.groups:
        refresh_groups(conn, builder.groups, builder.cells, builder.deltas)
        stats.groups = len(builder.groups)
    new_state = {"price_version": pv, "fact_runs": fact_runs, "fact_rules": FACT_RULES, "group_rules": group_state}
    if {k: state.get(k) for k in new_state} != new_state:
        _set_state(conn, new_state)
    stats.seconds = time.perf_counter() - t0
    return stats
