"""Writing a batch's rows into the index, in the batch's transaction.

On SQLite rows built by the workers are copied from their scratch files with one
INSERT ... SELECT per table (ATTACH is refused inside a transaction, so the files are
attached first), and rows built here go straight to the driver's executemany (encoded
tuples). PostgreSQL gets them with COPY (psycopg), other databases as dicts through Core's
executemany. The caller deletes
what the batch replaces and writes the cursors in the same transaction, so a record's
cursor is never committed without its rows.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from typing import Any, Callable, Sequence

import sqlalchemy as sa

from ledger.index.project import TOOLS_JSON, enc_bool, plan


def insert_encoded(conn: Any, table: sa.Table, params: list[tuple]) -> None:
    """Bulk insert rows encoded for SQLite's driver (tuples in column order)."""
    conn.connection.driver_connection.cursor().executemany(plan(table)[0], params)


def insert_dicts(conn: Any, table: sa.Table, rows: list[dict[str, Any]], encode: bool) -> None:
    """Bulk insert rows given as dicts (booleans encoded for the driver when `encode`)."""
    if encode:
        bools = {col.name for col in table.columns if isinstance(col.type, sa.Boolean)}
        names = plan(table)[1]
        insert_encoded(conn, table, [tuple(enc_bool(x[n]) if n in bools else x[n] for n in names) for x in rows])
    else:
        conn.execute(sa.insert(table), rows)


# PostgreSQL gets a batch's rows with COPY (False: Core's executemany, as other databases)
PG_COPY = True


def copy_rows(conn: Any, table: sa.Table, rows: list[tuple]) -> None:
    """COPY rows (tuples in column order, values as Core would bind them) into a PostgreSQL
    table through psycopg, in the connection's transaction: one statement per table and
    batch instead of one INSERT per row (round trips and per-row parameters were most of the
    writer's time: 20,000 runs 2x faster)."""
    cols = ", ".join(f'"{n}"' for n in plan(table)[1])
    with conn.connection.driver_connection.cursor() as cur:
        with cur.copy(f'COPY "{table.name}" ({cols}) FROM STDIN') as copy:
            for row in rows:
                copy.write_row(row)


# Below this many rows in the statistics of a batch's first table (`runs`), PostgreSQL is
# asked to ANALYZE the batch's tables once the first batch of a pass is written.
STATS_MIN_ROWS = 1000
ANALYZE_WAIT_MS = 500  # for ANALYZE's table lock; then the pass goes on without statistics


def analyze_if_unknown(conn: Any, txn: Callable[[], AbstractContextManager[Any]], tables: Sequence[sa.Table]) -> None:
    """PostgreSQL plans a foreign-key check once per connection and keeps that plan. Planned
    while `runs` has no statistics (an empty database), it may look a parent row up through
    an index on `home_id` alone and filter `run_id`: each child row then reads every run of
    its home so far and a first load slows down quadratically (66 runs/s at 100k). Statistics
    taken after the first batch make the planner pick the primary key (and drop the plans
    cached before them)."""
    if conn.dialect.name != "postgresql" or not tables:
        return
    with txn():
        rows = conn.execute(sa.text("SELECT reltuples FROM pg_class WHERE oid = CAST(:t AS regclass)"),
                            {"t": tables[0].name}).scalar()
        if rows is not None and rows >= STATS_MIN_ROWS:
            return
        # ANALYZE's lock is held to the end of its transaction (in a rebuild, the whole
        # rebuild): a pass that finds it taken goes on without new statistics, never waits long
        before = conn.exec_driver_sql("SELECT current_setting('lock_timeout')").scalar()
        try:
            with conn.begin_nested():
                conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{int(ANALYZE_WAIT_MS)}ms'")
                conn.exec_driver_sql("ANALYZE " + ", ".join(f'"{t.name}"' for t in tables))
                conn.execute(sa.text("SELECT set_config('lock_timeout', :v, true)"), {"v": before})
        except sa.exc.OperationalError as exc:
            if getattr(exc.orig, "sqlstate", None) != "55P03":  # (lock_not_available)
                raise


def copy_batch(conn: Any, txn: Callable[[], AbstractContextManager[Any]], tables: Sequence[sa.Table],
               out: dict[str, list[tuple]], scratch: Sequence[str], encode: bool,
               replace: Callable[[], None], after: Callable[[], None] | None = None) -> None:
    """In one transaction: `replace()` (delete what the batch rewrites), then per table the
    rows of the scratch files and those in `out` (tuples in column order), then `after()`
    (the copies check, ledger.index.copies). The scratch files are detached and deleted
    whatever happens."""
    raw = conn.connection.driver_connection if scratch else None
    aliases: list[str] = []
    try:
        for i, out_path in enumerate(scratch):  # (ATTACH is refused inside a transaction)
            raw.execute(f"ATTACH DATABASE ? AS ledger_part{i}", (out_path,))
            aliases.append(f"ledger_part{i}")
        with txn():
            replace()
            for table in tables:
                if aliases:
                    cols = ", ".join(f'"{n}"' for n in plan(table)[1])
                    for alias in aliases:
                        if table.name == "tool_uses":
                            raw.execute(f'INSERT INTO main."tool_uses" ({cols}) SELECT t.home_id, t.run_id, '
                                        f"j.key, json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), "
                                        f"json_extract(j.value, '$[2]'), json_extract(j.value, '$[3]') "
                                        f'FROM {alias}."{TOOLS_JSON}" AS t, json_each(t.tools) AS j')
                        raw.execute(f'INSERT INTO main."{table.name}" ({cols}) '
                                    f'SELECT {cols} FROM {alias}."{table.name}"')
                rows = out[table.name]
                if rows:
                    if encode:
                        insert_encoded(conn, table, rows)
                    elif PG_COPY and conn.dialect.name == "postgresql":
                        copy_rows(conn, table, rows)
                    else:
                        names = plan(table)[1]
                        conn.execute(sa.insert(table), [dict(zip(names, r)) for r in rows])
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
