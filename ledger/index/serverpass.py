"""An index pass on a server database (PostgreSQL): transactional DDL, and advisory locks that
never block the team (ledger.index.pglocks): the schema lock shared by every pass (exclusive
to create, migrate or rebuild it), one lock per home, waits bounded by the pass's timeout.

A rebuild clears and re-indexes, in ONE transaction, only the homes this machine holds
(other sessions keep seeing the old rows until it commits); other machines' homes are left
as they are. A database holding another application's tables, or a newer ledger's schema,
is never touched automatically.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from typing import Any

from ledger.index import db as dbmod
from ledger.index import homes as homes_mod
from ledger.index import pglocks, serverdb
from ledger.index.db import IndexError_, Notify
from ledger.index.connect import in_transaction, server_connect, transaction
from ledger.index.dbapi import Conn, wrap


class _Locks:
    """The pass's advisory locks on its connection (none on a server without them)."""

    def __init__(self, conn: Any, url: str, timeout: float, notify: Notify) -> None:
        self.conn = conn
        self.url = url
        self.timeout = timeout
        self.notify = notify
        self.pg = wrap(conn).dialect == "postgresql"

    def schema(self, shared: bool) -> Any:
        if not self.pg:
            return nullcontext()
        return pglocks.held(self.conn, (serverdb.PG_LOCK_KEY,), f"the index {dbmod.redact_url(self.url)}",
                            self.timeout, self.notify, shared=shared)

    def home(self, home: str, home_id: int) -> Any:
        if not self.pg:
            return nullcontext()
        # (a rebuild is one transaction: its home locks are the transaction's)
        return pglocks.held(self.conn, (pglocks.HOME_NS, home_id), f"the home {home} in the index", self.timeout,
                            self.notify, xact=in_transaction(self.conn))


def index_server(homes: list[str], url: str, rebuild: bool, notify: Notify, progress: Any,
                 racy_ns: int | None, full: bool = False, lock_timeout: float | None = None) -> Any:
    """Index `homes` into the server database at `url` (see the module's docstring); returns
    an IndexSummary."""
    from ledger.index.indexer import Indexer

    timeout = pglocks.DEFAULT_TIMEOUT if lock_timeout is None else lock_timeout
    raw = server_connect(url, app_name="ledger index")
    try:
        conn = Conn(raw, "postgresql")
        locks = _Locks(conn, url, timeout, notify)
        _ready_schema(conn, url, rebuild, notify, locks)
        with locks.schema(shared=True):
            if rebuild:
                return _rebuild(conn, homes, progress, racy_ns, full, locks)
            return Indexer(progress=progress, racy_ns=racy_ns, full=full,
                           home_lock=locks.home).index(conn, homes)
    finally:
        raw.close()


def _ready_schema(conn: Any, url: str, rebuild: bool, notify: Notify, locks: _Locks) -> None:
    """The schema checked under the shared schema lock; created or migrated (a newer one
    dropped, for a rebuild) under the exclusive one."""
    with locks.schema(shared=True):
        with transaction(conn):
            status = serverdb.inspect_server(conn)
    if status.kind == "foreign":
        raise IndexError_(f"the database {dbmod.redact_url(url)} is not a ledger index: {status.detail}",
                          hint="point --db / LEDGER_DB at an empty database (ledger creates its schema)")
    if status.kind == "newer" and not rebuild:
        raise IndexError_(f"the index {dbmod.redact_url(url)}: {status.detail}",
                          hint="upgrade ledger (`pip install -U ledger`), or rebuild it for this "
                               "version with `ledger index --rebuild`")
    if status.kind == "ok":
        return
    with locks.schema(shared=False):
        with dbmod.migrating(conn.raw) as sa_conn:  # (SQLAlchemy over the pass's connection, for Alembic)
            _migrate(sa_conn, url, notify)


def _migrate(conn: Any, url: str, notify: Notify) -> None:
    """Create or upgrade the schema, or drop a newer ledger's (a rebuild), in the caller's
    transaction under the exclusive schema lock."""
    status = serverdb.inspect_server(conn)  # (another machine may have done it)
    if status.kind == "newer":
        if _other_machines(conn):
            raise IndexError_(
                f"the index {dbmod.redact_url(url)}: {status.detail}; it holds (or may hold) "
                "other machines' homes, so it is not rebuilt from this one",
                hint="upgrade ledger on this machine (`pip install -U ledger`)")
        serverdb.drop_index_objects(conn)
        status = serverdb.ServerStatus("fresh")
    if status.kind in ("fresh", "upgrade"):
        dbmod.upgrade(conn)
        if status.kind == "upgrade":
            notify(f"ledger: upgraded the index from schema revision {status.revision} "
                   f"to {dbmod.HEAD}")


def _rebuild(conn: Any, homes: list[str], progress: Any, racy_ns: int | None, full: bool,
             locks: _Locks) -> Any:
    """Clear and re-index this machine's homes (and `homes`) in one transaction."""
    from ledger.index.indexer import Indexer

    with transaction(conn):
        known = _machine_homes(conn, homes)
    all_homes = homes_mod.merge(homes, known)
    with transaction(conn):
        ids = _lock_homes(conn, all_homes, locks)
        serverdb.clear_home_rows(conn, ids)
        summary = Indexer(progress=progress, single_transaction=True, racy_ns=racy_ns,
                          full=full, home_lock=locks.home).index(conn, all_homes)
    summary.rebuilt = True
    return summary


def _machine_homes(conn: Any, homes: list[str]) -> list[str]:
    """This machine's homes in the index (and rows from before 0006 whose path is here)."""
    rows = wrap(conn).rows("SELECT path FROM homes WHERE machine = ? OR machine IS NULL ORDER BY home_id",
                           (homes_mod.machine_id(),))
    return [r[0] for r in rows if r[0] in homes or os.path.isdir(r[0])]


def _lock_homes(conn: Any, all_homes: list[str], locks: _Locks) -> list[int]:
    """The index's ids of `all_homes`, each home locked before any row is touched (no deadlock
    with a pass of the same home); held until the transaction's commit."""
    located = [(p, homes_mod.lookup(conn, homes_mod.locate(p, create=False)))
               for p in all_homes if os.path.isdir(p)]
    ids = sorted(h for _p, h in located if h is not None)
    for p, h in sorted(located, key=lambda x: x[1] or 0):
        if h is not None:
            locks.home(p, h).__enter__()
    return ids


def _other_machines(conn: Any) -> int:
    """How many other machines' homes a (possibly newer) index holds; -1 when it cannot tell."""
    from ledger.home import machine_id

    c = wrap(conn)
    try:
        with c.savepoint("ledger_machines"):
            rows = c.rows("SELECT DISTINCT machine FROM homes")
    except Exception:  # noqa: BLE001 - a schema this ledger does not know
        return -1
    return len({r[0] for r in rows if r[0] not in (None, machine_id())})
