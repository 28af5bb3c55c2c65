"""An index on a server database (PostgreSQL): its open-check and its wholesale drop and clear.

A server index is migrated in place under the schema lock (ledger.index.pglocks); a database
holding another application's tables, or a newer ledger's schema, is told apart here so that
it is never touched automatically.
"""

from __future__ import annotations

from typing import Any

from ledger.index import db as dbmod
from ledger.index.dbapi import Conn, wrap
from ledger.index.reportshape import REPORT_TABLES
from ledger.index.tablenames import ALL_TABLES, CURSOR_TABLES, DATA_TABLES, LOG_TABLES
from ledger.plainclass import Plain
from ledger.sqlviews import REPORT_VIEWS, VIEWS

PG_LOCK_KEY = 0x4C444752  # advisory lock key serialising index passes on one database


class ServerStatus(Plain):
    """`kind`: ok | fresh | upgrade | foreign | newer."""

    __slots__ = ("kind", "detail", "revision")

    def __init__(self, kind: str, detail: str = "", revision: str | None = None) -> None:
        self.kind = kind
        self.detail = detail
        self.revision = revision


# the index's names SQLAlchemy's `inspect(conn).get_table_names()` answered with: ordinary and
# partitioned tables, not temporary ones, visible on the search path, outside pg_catalog
_TABLES_SQL = ("SELECT c.relname FROM pg_catalog.pg_class c "
               "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
               "WHERE c.relkind IN ('r', 'p') AND c.relpersistence <> 't' "
               "AND pg_catalog.pg_table_is_visible(c.oid) AND n.nspname <> 'pg_catalog'")


def inspect_server(conn: Any) -> ServerStatus:
    """The server database's status (`conn`: a Conn, a psycopg or an SQLAlchemy connection),
    read in the caller's transaction."""
    c = wrap(conn)
    tables = {r[0] for r in c.rows(_TABLES_SQL)}
    rev = _revision(c) if "alembic_version" in tables else None
    if "ledger_meta" in tables:
        app = c.one("SELECT value FROM ledger_meta WHERE key = 'application'")
        if app is None or app[0] != dbmod.APPLICATION:
            return ServerStatus("foreign", "its ledger_meta table is not a ledger index's")
    elif rev is not None or tables & {"runs", "homes", "index_cursors"}:
        return ServerStatus("foreign", "it holds another application's tables")
    else:
        return ServerStatus("fresh")
    if rev == dbmod.HEAD:
        return ServerStatus("ok", revision=rev)
    if rev in dbmod.known_revisions():
        return ServerStatus("upgrade", revision=rev)
    return ServerStatus("newer", f"its schema revision {rev!r} is unknown to this ledger (knows up to {dbmod.HEAD})",
                        revision=rev)


def _revision(c: Conn) -> str | None:
    """Alembic's revision (ledger.index.db.current_revision, once the table is known to exist)."""
    rows = c.rows("SELECT version_num FROM alembic_version")
    return rows[0][0] if len(rows) == 1 else None


def drop_index_objects(conn: Any) -> None:
    """Drop ledger's views and tables (a rebuild on a server database, in one transaction)."""
    c = wrap(conn)
    for view in REPORT_VIEWS + VIEWS:
        c.execute(f"DROP VIEW IF EXISTS {view} CASCADE")
    for table in REPORT_TABLES + ALL_TABLES:
        c.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
    c.execute("DROP TABLE IF EXISTS alembic_version")


def clear_index_rows(conn: Any) -> None:
    """Delete every indexed row and cursor (homes stay), in the caller's transaction."""
    c = wrap(conn)
    # (the report's derived tables first: derived from the rows deleted here)
    for table in REPORT_TABLES + DATA_TABLES + CURSOR_TABLES + LOG_TABLES:
        c.execute(f"DELETE FROM {table}")


def clear_home_rows(conn: Any, home_ids: list[int]) -> None:
    """Delete the indexed rows and cursors of these homes only (a rebuild from one machine of
    a shared index, issue 11); the report's derived tables are cleared (rebuilt by the next
    report)."""
    c = wrap(conn)
    for table in REPORT_TABLES:
        c.execute(f"DELETE FROM {table}")
    if not home_ids:
        return
    ids = ", ".join(str(int(h)) for h in home_ids)
    for table in DATA_TABLES + CURSOR_TABLES + LOG_TABLES:
        c.execute(f"DELETE FROM {table} WHERE home_id IN ({ids})")
