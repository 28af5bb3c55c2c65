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

The rules of a fact row are in ledger.report.facts, the rollups' statements in
ledger.report.rollups. Plain SQL on ledger.index.dbapi.Conn, SQLite and PostgreSQL alike (no
SQLAlchemy: callers may still hand over an SQLAlchemy connection, whose transaction it runs
in). On SQLite, a full sync builds the facts through ledger.report.fullsync (its tuples, a fork
for a big home), and the report syncs a few changed runs through ledger.report.quicksync
without opening an engine.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Iterable, Mapping, Sequence

from ledger.index.dbapi import Conn, wrap
from ledger.report import fullsync
from ledger.report.facts import (  # noqa: F401 - re-exported (tests, scripts)
    COMMAND_HARNESS, VERDICT_FACTS, Estimator, FactBuilder, RunValues, SyncStats, _apply, _counters, _default_estimator,
    _fingerprint, _price_version, _unpack, pack_values, run_outcome, verdict_facts,
)
from ledger.report.factsql import keys_in
from ledger.report.rollups import chunks, refresh_groups, refresh_rollups  # noqa: F401 - re-exported (tests)
from ledger.report.schema import (  # noqa: F401 - re-exported
    CELL_COLUMNS, CELL_KINDS, CHANGE_TRIGGERS, COUNTER_COLUMNS, FACT_COLUMNS, FACT_RULES, GROUP_COLUMNS, GROUP_KINDS,
    GROUP_RULES, GROUP_VALUES, GROUP_VERDICTS, GROUPS_DEFERRED, MODEL_MEASURES, RUN_COLUMNS, RUN_MEASURES,
    SLOT_SECONDS, SLOTS_PER_DAY, STREAM_COLUMNS, TOKEN_COLUMNS, VALUE_KINDS,
)

BATCH = 1000
CHANGES_CHUNK = 20_000  # change-log rows taken per statement (memory stays flat after a big pass)
PG_LOCK_KEY = 0x4C445250  # "LDRP": one report sync at a time on a shared PostgreSQL index

FACTS, RUNS, CHANGES = "report_facts", "runs", "report_changes"
Cached = dict[tuple[int, str], dict[tuple[int, str], tuple]]  # run -> (slot, model_key) -> estimate


# -- reading what a run's facts are built from --------------------------------------------------

def _get_state(c: Conn) -> dict[str, str | None]:
    return dict(c.rows("SELECT report_state.key, report_state.value FROM report_state"))


def _set_state(c: Conn, values: Mapping[str, str | None]) -> None:
    c.execute(f"DELETE FROM report_state WHERE report_state.key IN ({c.marks(len(values))})", tuple(values))
    c.executemany("INSERT INTO report_state (key, value) VALUES (?, ?)", list(values.items()))


def _select_keys(c: Conn, table: str, cols: Sequence[str], keys: Sequence[tuple[int, str]],
                 order: Sequence[str] = ()) -> list[tuple]:
    """`cols` of `table`'s rows of the runs `keys` (in `order`)."""
    if not keys:
        return []
    cond = keys_in(keys, table)
    tail = f" ORDER BY {', '.join(f'{table}.{o}' for o in order)}" if order else ""
    return c.rows(f"SELECT {', '.join(f'{table}.{n}' for n in cols)} FROM {table} WHERE {cond.text}{tail}",
                  cond.params)


def _load_runs(c: Conn, keys: Sequence[tuple[int, str]]) -> list[Any]:
    # (booleans and created_at as SQLAlchemy's types read them: fullsync.run_row)
    return [fullsync.run_row(r) for r in _select_keys(c, RUNS, RUN_COLUMNS, keys)]


def _load_streams(c: Conn, keys: Sequence[tuple[int, str]]) -> dict[tuple[int, str], list[Any]]:
    out: dict[tuple[int, str], list[Any]] = {}
    # (in key order: a model's streams are summed in that order)
    for r in _select_keys(c, "usage_streams", STREAM_COLUMNS, keys, ("home_id", "run_id", "stream_id")):
        out.setdefault((r[0], r[1]), []).append(fullsync.stream_row(r))
    return out


def _load_subjects(c: Conn, keys: Sequence[tuple[int, str]]) -> dict[tuple[int, str], list[str]]:
    out: dict[tuple[int, str], list[str]] = {}
    for h, rid, sel in _select_keys(c, "subjects", ("home_id", "run_id", "selector"), keys,
                                    ("home_id", "run_id", "position")):
        out.setdefault((h, rid), []).append(sel)
    return out


_CACHED_COLS = ("home_id", "run_id", "model_key", "usage_fingerprint", "cost_estimated", "unpriced",
                "cost_estimated_partial", "slot", "first", "piece", *GROUP_KINDS, *(src for _, src in GROUP_VALUES))


def _load_cached(c: Conn, keys: Sequence[tuple[int, str]], touched: set[int],
                 builder: "FactBuilder | None" = None) -> Cached:
    """The estimates the facts of `keys` hold (all priced with the current price data: a
    new price version rebuilds everything); adds their slots to `touched`, and notes the
    rows leaving to `builder` (report_groups)."""
    out: Cached = {}
    for r in _select_keys(c, FACTS, _CACHED_COLS, keys):
        row = dict(zip(_CACHED_COLS, r))
        out.setdefault((row["home_id"], row["run_id"]), {})[(row["slot"], row["model_key"])] = (
            row["usage_fingerprint"], row["cost_estimated"], row["unpriced"], row["cost_estimated_partial"])
        touched.add(row["slot"])
        if builder is not None:
            builder.note(row, -1)
    return out


def _delete_facts(c: Conn, keys: Sequence[tuple[int, str]]) -> None:
    if keys:
        cond = keys_in(keys, FACTS)
        c.execute(f"DELETE FROM {FACTS} WHERE {cond.text}", cond.params)


# -- writing facts ------------------------------------------------------------------------------

def _write(c: Conn, builder: FactBuilder, runs: Sequence[Any], cached: Cached, touched: set[int]) -> None:
    """Build and insert the facts of `runs` (their old facts are already gone)."""
    keys = [(r.home_id, r.run_id) for r in runs]
    streams = _load_streams(c, keys)
    subjects = _load_subjects(c, keys)
    rows: list[tuple] = []
    for run in runs:
        k = (run.home_id, run.run_id)
        old = cached.get(k)
        if old:  # estimates to reuse where the usage did not change: FactBuilder.rows itself
            ns = SimpleNamespace(**run._asdict())  # (verdict_facts reads a plain object's __dict__)
            rows.extend(fullsync._as_tuple(d) for d in builder.rows(ns, streams.get(k, ()), old, subjects.get(k, ())))
        else:  # (the tuples of FactBuilder.rows without a cache)
            rows.extend(fullsync.fact_tuples(builder, run, streams.get(k, ()), subjects.get(k, ())))
    touched.update(r[0] for r in rows)  # (slot)
    for r in rows:
        builder.note(dict(zip(FACT_COLUMNS, r)), +1)
    builder.stats.rebuilt += len(runs)
    fullsync.insert_facts(c, rows)


def _rebuild(c: Conn, builder: FactBuilder, keys: Sequence[tuple[int, str]], touched: set[int]) -> None:
    """Rebuild the facts of `keys` (runs that no longer exist lose their facts), reusing
    the cached estimates; the slots whose rows changed are added to `touched`."""
    for chunk in chunks(keys, BATCH):
        runs = _load_runs(c, chunk)
        cached = _load_cached(c, chunk, touched, builder)
        builder.stats.removed += len(chunk) - len(runs)
        builder.stats.fact_runs_delta += len(runs) - len(cached)
        _delete_facts(c, chunk)
        _write(c, builder, runs, cached, touched)


# On SQLite a full sync builds the facts through fullsync.write_all (its tuples straight from
# the driver's rows, a fork for a big home: ~3x faster); False takes the path below, as
# PostgreSQL does (tests compare the two).
DRIVER_FULL_SYNC = True
NOTIFY_AT = 10_000  # a full sync of more runs than this says so on stderr (it takes a while)


def _full(c: Conn, builder: FactBuilder, notify: Callable[[str], None] | None) -> None:
    """Rebuild every fact, walking the runs' primary key (memory stays flat)."""
    if notify is not None:
        total = _count_runs(c)
        if total >= NOTIFY_AT:
            notify(f"ledger: pricing {total:,} runs for reports ({builder.price_version}); "
                   "this happens once, later reports reuse the estimates")
    c.execute(f"DELETE FROM {FACTS}")
    # (before the runs are read: a change committed after this statement stays logged and is
    # rebuilt by the next sync, one committed before it is read below)
    c.execute(f"DELETE FROM {CHANGES}")
    if c.sqlite and DRIVER_FULL_SYNC:
        fullsync.write_all(c.raw, builder)
        return
    unused: set[int] = set()  # the rollups are rebuilt whole after a full sync
    cols = ", ".join(f"{RUNS}.{n}" for n in RUN_COLUMNS)
    for (home_id,) in c.rows("SELECT homes.home_id FROM homes ORDER BY homes.home_id"):
        last: str | None = None
        while True:  # keyset pagination
            after = "" if last is None else f" AND {RUNS}.run_id > ?"
            runs = [fullsync.run_row(r) for r in c.rows(
                f"SELECT {cols} FROM {RUNS} WHERE {RUNS}.home_id = ?{after} ORDER BY {RUNS}.run_id LIMIT ?",
                (home_id, *(() if last is None else (last,)), BATCH))]
            if not runs:
                break
            last = runs[-1].run_id
            _write(c, builder, runs, {}, unused)
            unused.clear()


# -- what changed -------------------------------------------------------------------------------

def _logged(c: Conn) -> Iterable[list[tuple[int, str]]]:
    """Take the change log: each chunk's rows are deleted and their run keys returned in one
    statement (DELETE ... RETURNING), so a row is gone only once the sync has it; a row of
    a transaction still open is neither seen nor deleted. Stops after the rows there were
    when it began (a busy team's indexers cannot keep one sync going)."""
    t = CHANGES
    top = c.scalar(f"SELECT max({t}.seq) FROM {t}")
    if top is None:
        return
    while True:
        rows = c.rows(f"DELETE FROM {t} WHERE {t}.seq IN (SELECT {t}.seq FROM {t} WHERE {t}.seq <= ? "
                      f"ORDER BY {t}.seq LIMIT ?) RETURNING {t}.home_id, {t}.run_id", (top, CHANGES_CHUNK))
        if rows:
            yield sorted({(h, rid) for h, rid in rows})
        if len(rows) < CHANGES_CHUNK:
            return


# runs the facts hold as running, and whether their row differs from what the facts were built from
RUNNING_CHANGED = (
    f"SELECT {FACTS}.home_id, {FACTS}.run_id, {RUNS}.run_id IS NULL OR {FACTS}.indexed_at != {RUNS}.indexed_at "
    f"OR {FACTS}.state != {RUNS}.state OR CAST({RUNS}.settled AS INTEGER) != {FACTS}.settled "
    f"FROM {FACTS} LEFT OUTER JOIN {RUNS} ON {RUNS}.home_id = {FACTS}.home_id AND {RUNS}.run_id = {FACTS}.run_id "
    f"WHERE {FACTS}.settled = 0 AND {FACTS}.first = 1 AND {FACTS}.state != 'abandoned'")


def _running_changed(c: Conn) -> tuple[list[tuple[int, str]], int]:
    """Runs the facts hold as running whose row differs from what the facts were built from
    (the indexer turns running into abandoned in place; the log sees that UPDATE too, this
    is the net under it). Returns (changed keys, candidates checked). One indexed query."""
    rows = c.rows(RUNNING_CHANGED)
    return sorted({(h, rid) for h, rid, differs in rows if differs}), len(rows)


def has_change_triggers(conn: Any) -> bool:
    """Whether the triggers filling report_changes are on `runs` (a copy of the table made
    without them, e.g. by a hand-made SQLite table rebuild, would log nothing)."""
    c = wrap(conn)
    names = tuple(CHANGE_TRIGGERS)
    if c.dialect == "postgresql":
        sql = (f"SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass('runs') "
               f"AND tgname IN ({c.marks(len(names))}) AND tgenabled <> 'D'")
    else:
        sql = ("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'runs' "
               f"AND name IN ({c.marks(len(names))})")
    return c.scalar(sql, names) == len(names)


def _reconcile(c: Conn, builder: FactBuilder, touched: set[int]) -> None:
    """Both-way anti-join: runs without facts are built, facts without runs dropped."""
    same = f"{FACTS}.home_id = {RUNS}.home_id AND {FACTS}.run_id = {RUNS}.run_id"
    missing = c.rows(f"SELECT {RUNS}.home_id, {RUNS}.run_id FROM {RUNS} "
                     f"WHERE NOT (EXISTS (SELECT * FROM {FACTS} WHERE {same}))")
    orphans = c.rows(f"SELECT {FACTS}.home_id, {FACTS}.run_id FROM {FACTS} "
                     f"WHERE {FACTS}.first = 1 AND NOT (EXISTS (SELECT * FROM {RUNS} WHERE {same}))")
    _rebuild(c, builder, sorted(set(map(tuple, missing)) | set(map(tuple, orphans))), touched)
    builder.stats.reconciled = True


def _count_runs(c: Conn) -> int:
    return int(c.scalar(f"SELECT count(*) FROM {RUNS}"))


def _count_fact_runs(c: Conn) -> int:
    return int(c.scalar(f"SELECT count(*) FROM {FACTS} WHERE {FACTS}.first = 1"))


# -- the sync -----------------------------------------------------------------------------------

def sync_facts(conn: Any, *, estimator: Estimator | None = None, price_version: str | None = None,
               full: bool = False, notify: Callable[[str], None] | None = None, groups: bool = True) -> SyncStats:
    """Bring report_facts up to date with runs/usage_streams, inside the caller's transaction
    (`conn`: an SQLAlchemy, sqlite3 or psycopg connection, or a Conn). `groups`: the report to
    answer reads report_groups (aggregate.reads_groups). While the group tables are not built
    (GROUPS_DEFERRED) and no report needs them, they stay so; once built they are kept up to
    date like the other tables."""
    import time

    t0 = time.perf_counter()
    c = wrap(conn)
    stats = SyncStats()
    pv = price_version or _price_version()
    builder = FactBuilder(pv, estimator or _default_estimator(), stats)
    if c.dialect == "postgresql":
        c.execute(f"SELECT pg_advisory_xact_lock({PG_LOCK_KEY})")
    state = _get_state(c)
    fact_runs = state.get("fact_runs")
    touched: set[int] = set()
    logged = has_change_triggers(c)
    if not logged and notify is not None:
        notify("ledger: the index's change log triggers on `runs` (migration 0007) are missing, so every report "
               "rebuilds its tables (slow); fix: ledger index --rebuild (on PostgreSQL, into an empty database)")
    if (full or not logged or state.get("price_version") != pv or fact_runs is None
            or state.get("fact_rules") != FACT_RULES):
        stats.full = True
        _full(c, builder, notify)
    else:
        for keys in _logged(c):
            stats.checked += len(keys)
            _rebuild(c, builder, keys, touched)
        running, checked = _running_changed(c)
        stats.checked += checked
        _rebuild(c, builder, running, touched)
    if stats.full:
        fact_runs = str(_count_fact_runs(c))
    else:
        fact_runs = str(int(fact_runs) + stats.fact_runs_delta)
    if _count_runs(c) != int(fact_runs):
        _reconcile(c, builder, touched)  # (the log covers removals: a safety net)
        fact_runs = str(_count_fact_runs(c))
    if stats.full:
        refresh_rollups(c, None)
    elif touched:
        refresh_rollups(c, touched)
    group_state = _sync_groups(c, builder, state.get("group_rules"), groups)
    new_state = {"price_version": pv, "fact_runs": fact_runs, "fact_rules": FACT_RULES, "group_rules": group_state}
    if {k: state.get(k) for k in new_state} != new_state:
        _set_state(c, new_state)
    stats.seconds = time.perf_counter() - t0
    return stats


def _sync_groups(c: Conn, builder: FactBuilder, rules: str | None, wanted: bool) -> str:
    """report_groups / report_group_days brought up to date (or left unbuilt while no report
    reads them); the group_rules report_state records."""
    stats = builder.stats
    built = rules == GROUP_RULES
    if (stats.full or not built) and (wanted or built):
        refresh_groups(c, None)
        stats.groups = -1
    elif not built:  # (not needed yet: made by the first report that reads them)
        if rules not in (None, GROUPS_DEFERRED):  # (made by older rules: stale)
            c.execute("DELETE FROM report_groups")
            c.execute("DELETE FROM report_group_days")
        return GROUPS_DEFERRED
    elif builder.groups:
        refresh_groups(c, builder.groups, builder.cells, builder.deltas)
        stats.groups = len(builder.groups)
    return GROUP_RULES
