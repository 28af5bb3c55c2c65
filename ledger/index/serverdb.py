"""An index on a server database (PostgreSQL): its open-check and its wholesale drop and clear.

A server index is migrated in place under the schema lock (ledger.index.pglocks); a database
holding another application's tables, or a newer ledger's schema, is told apart here so that
it is never touched automatically.
"""

from __future__ import annotations

from typing import Any

from ledger.index import db as dbmod
from ledger.plainclass import Plain

PG_LOCK_KEY = 0x4C444752  # advisory lock key serialising index passes on one database


class ServerStatus(Plain):
    """`kind`: ok | fresh | upgrade | foreign | newer."""

    __slots__ = ("kind", "detail", "revision")

    def __init__(self, kind: str, detail: str = "", revision: str | None = None) -> None:
        self.kind = kind
        self.detail = detail
        self.revision = revision


def inspect_server(conn: Any) -> ServerStatus:
    import sqlalchemy as sa

    insp = sa.inspect(conn)
    tables = set(insp.get_table_names())
    rev = dbmod.current_revision(conn) if "alembic_version" in tables else None
    if "ledger_meta" in tables:
        app = conn.exec_driver_sql("SELECT value FROM ledger_meta WHERE key = 'application'").fetchone()
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


def drop_index_objects(conn: Any) -> None:
    """Drop ledger's views and tables (a rebuild on a server database, in one transaction)."""
    from ledger.index.models import ALL_TABLES, VIEWS
    from ledger.index.report_tables import REPORT_TABLES, REPORT_VIEWS

    for view in REPORT_VIEWS + VIEWS:
        conn.exec_driver_sql(f"DROP VIEW IF EXISTS {view} CASCADE")
    for table in REPORT_TABLES + ALL_TABLES:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table} CASCADE")
    conn.exec_driver_sql("DROP TABLE IF EXISTS alembic_version")


def clear_index_rows(conn: Any) -> None:
    """Delete every indexed row and cursor (homes stay), in the caller's transaction."""
    from ledger.index.models import DATA_TABLES, LOG_TABLES
    from ledger.index.report_tables import REPORT_TABLES  # derived from the rows deleted here

    for table in REPORT_TABLES + DATA_TABLES + ("index_cursors", "index_shards") + LOG_TABLES:
        conn.exec_driver_sql(f"DELETE FROM {table}")


def clear_home_rows(conn: Any, home_ids: list[int]) -> None:
    """Delete the indexed rows and cursors of these homes only (a rebuild from one machine of
    a shared index, issue 11); the report's derived tables are cleared (rebuilt by the next
    report)."""
    from ledger.index.models import DATA_TABLES, LOG_TABLES
    from ledger.index.report_tables import REPORT_TABLES

    for table in REPORT_TABLES:
        conn.exec_driver_sql(f"DELETE FROM {table}")
    if not home_ids:
        return
    ids = ", ".join(str(int(h)) for h in home_ids)
    for table in DATA_TABLES + ("index_cursors", "index_shards") + LOG_TABLES:
        conn.exec_driver_sql(f"DELETE FROM {table} WHERE home_id IN ({ids})")

