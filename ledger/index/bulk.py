"""Writing a batch's rows into the index, in the batch's transaction.

On SQLite rows built by the workers are copied from their scratch files with one
INSERT ... SELECT per table (ATTACH is refused inside a transaction, so the files are
attached first), and rows built here go straight to the driver's executemany (encoded
tuples). PostgreSQL gets them with COPY (psycopg), other databases through one executemany
(ledger.index.dbapi.Conn: plain SQL, the caller's transaction). Tables are named by their
names (ledger.index.project.plan gives their columns). The caller deletes what the batch
replaces and writes the cursors in the same transaction, so a record's cursor is never
committed without its rows.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Callable, Sequence

from ledger.index.dbapi import Conn, wrap
from ledger.index.project import TOOLS_JSON, plan


def insert_encoded(conn: Any, table: str, params: list[tuple]) -> None:
    """Bulk insert rows encoded for SQLite's driver (tuples in column order)."""
    wrap(conn).executemany(plan(table)[0], params)


def _bound(c: Conn, row: Sequence[Any]) -> tuple:
    """A row's values as SQLAlchemy bound them: on SQLite a datetime as its storage text and a
    boolean as 0/1; a server takes Python's values."""
    if not c.sqlite:
        return tuple(row)
    return tuple(c.dt(v) if isinstance(v, datetime) else (int(v) if isinstance(v, bool) else v) for v in row)


def insert_dicts(conn: Any, table: str, rows: list[dict[str, Any]], encode: bool = False) -> None:
    """Bulk insert rows given as dicts, all with the same keys (`encode`: kept for the
    callers; every SQLite row is bound as SQLAlchemy's types bound it)."""
    if not rows:
        return
    c = wrap(conn)
    names = tuple(rows[0])
    sql = f'INSERT INTO "{table}" ({", ".join(chr(34) + n + chr(34) for n in names)}) VALUES ({c.marks(len(names))})'
    c.executemany(sql, [_bound(c, [x[n] for n in names]) for x in rows])


# PostgreSQL gets a batch's rows with COPY (False: one executemany of INSERTs, as other databases)
PG_COPY = True


def copy_rows(conn: Any, table: str, rows: list[tuple]) -> None:
    """COPY rows (tuples in column order, Python values) into a PostgreSQL table, in the
    connection's transaction: one statement per table and batch instead of one INSERT per
    row (round trips and per-row parameters were most of the writer's time: 20,000 runs 2x
    faster)."""
    wrap(conn).insert_rows(table, plan(table)[1], rows)


# Below this many rows in the statistics of a batch's first table (`runs`), PostgreSQL is
# asked to ANALYZE the batch's tables once the first batch of a pass is written.
STATS_MIN_ROWS = 1000
ANALYZE_WAIT_MS = 500  # for ANALYZE's table lock; then the pass goes on without statistics


def lock_not_available(exc: BaseException) -> bool:
    """Whether a lock wait timed out (PostgreSQL's 55P03), raised by psycopg or wrapped by
    SQLAlchemy (its `.orig`)."""
    state = getattr(exc, "sqlstate", None) or getattr(getattr(exc, "orig", None), "sqlstate", None)
    return state == "55P03"


def analyze_if_unknown(conn: Any, txn: Callable[[], AbstractContextManager[Any]], tables: Sequence[str]) -> None:
    """PostgreSQL plans a foreign-key check once per connection and keeps that plan. Planned
    while `runs` has no statistics (an empty database), it may look a parent row up through
    an index on `home_id` alone and filter `run_id`: each child row then reads every run of
    its home so far and a first load slows down quadratically (66 runs/s at 100k). Statistics
    taken after the first batch make the planner pick the primary key (and drop the plans
    cached before them)."""
    c = wrap(conn)
    if c.dialect != "postgresql" or not tables:
        return
    with txn():
        rows = c.scalar("SELECT reltuples FROM pg_class WHERE oid = CAST(? AS regclass)", (tables[0],))
        if rows is not None and rows >= STATS_MIN_ROWS:
            return
        # ANALYZE's lock is held to the end of its transaction (in a rebuild, the whole
        # rebuild): a pass that finds it taken goes on without new statistics, never waits long
        before = c.scalar("SELECT current_setting('lock_timeout')")
        try:
            with c.savepoint("ledger_analyze"):
                c.execute(f"SET LOCAL lock_timeout = '{int(ANALYZE_WAIT_MS)}ms'")
                c.execute("ANALYZE " + ", ".join(f'"{t}"' for t in tables))
                c.execute("SELECT set_config('lock_timeout', ?, true)", (before,))
        except Exception as exc:  # (psycopg's error, or SQLAlchemy's around it)
            if not lock_not_available(exc):
                raise


def copy_batch(conn: Any, txn: Callable[[], AbstractContextManager[Any]], tables: Sequence[str],
               out: dict[str, list[tuple]], scratch: Sequence[str], encode: bool,
               replace: Callable[[], None], after: Callable[[], None] | None = None) -> None:
    """In one transaction: `replace()` (delete what the batch rewrites), then per table the
    rows of the scratch files and those in `out` (tuples in column order), then `after()`
    (the copies check, ledger.index.copies). The scratch files are detached and deleted
    whatever happens."""
    c = wrap(conn)
    raw = c.raw if scratch else None
    aliases: list[str] = []
    try:
        for i, out_path in enumerate(scratch):  # (ATTACH is refused inside a transaction)
            raw.execute(f"ATTACH DATABASE ? AS ledger_part{i}", (out_path,))
            aliases.append(f"ledger_part{i}")
        with txn():
            replace()
            for table in tables:
                if aliases:
                    _copy_scratch(raw, table, aliases)
                rows = out[table]
                if rows:
                    if encode:
                        insert_encoded(c, table, rows)
                    elif PG_COPY and c.dialect == "postgresql":
                        copy_rows(c, table, rows)
                    else:
                        c.executemany(plan(table)[0], [_bound(c, r) for r in rows])
            if after is not None:
                after()
    finally:
        for alias in aliases:
            raw.execute(f"DETACH DATABASE {alias}")
        for out_path in scratch:
            try:
                os.unlink(out_path)
            except FileNotFoundError:
                pass


def _copy_scratch(raw: Any, table: str, aliases: list[str]) -> None:
    """A table's rows from the attached scratch files (SQLite: INSERT ... SELECT)."""
    cols = ", ".join(f'"{n}"' for n in plan(table)[1])
    for alias in aliases:
        if table == "tool_uses":
            raw.execute(f'INSERT INTO main."tool_uses" ({cols}) SELECT t.home_id, t.run_id, '
                        f"j.key, json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), "
                        f"json_extract(j.value, '$[2]'), json_extract(j.value, '$[3]') "
                        f'FROM {alias}."{TOOLS_JSON}" AS t, json_each(t.tools) AS j')
        raw.execute(f'INSERT INTO main."{table}" ({cols}) SELECT {cols} FROM {alias}."{table}"')
