"""A write transaction on an SQLite index through the driver, without SQLAlchemy (issue 10).

After one new run, a command that writes it into the index (and its report facts) spent most
of its time importing SQLAlchemy, not writing. The small writers (ledger.index.quickpass,
ledger.report.quicksync) use this instead: the same locks as `ledger.index.ops.writing` (the
writer lock, so it queues behind index passes; the shared file lock, so the file is never
swapped underneath it), the same connection settings as `ledger.index.db.engine(mode="write")`
(busy timeout, WAL, synchronous=NORMAL, BEGIN IMMEDIATE), and only on an index whose schema is
at head (anything else is the full path's to create, migrate or rebuild).
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Iterator

from ledger.index import db as dbmod


class NotAtHead(Exception):
    """The index is missing, damaged, foreign or not at head: the caller takes the full path."""


@contextmanager
def raw_writing(url: str) -> Iterator[sqlite3.Connection]:
    """A sqlite3 connection inside BEGIN IMMEDIATE, committed when the block ends without an
    exception and rolled back otherwise. Raises NotAtHead before writing anything when the
    schema is not at head."""
    path = dbmod.sqlite_path(url)
    # (before the locks: no lock file is made next to a file or directory that is not an index)
    if dbmod.inspect_sqlite(path).kind != "ok":
        raise NotAtHead(str(path))
    with dbmod.flock(dbmod.writer_lock(path), exclusive=True), \
            dbmod.flock(dbmod.file_lock(path), exclusive=False):
        if dbmod.inspect_sqlite(path).kind != "ok":  # (swapped or changed meanwhile)
            raise NotAtHead(str(path))
        con = sqlite3.connect(path, timeout=dbmod.BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            con.execute(f"PRAGMA busy_timeout = {dbmod.BUSY_TIMEOUT_MS}")
            con.execute("PRAGMA journal_mode = WAL")
            con.execute("PRAGMA synchronous = NORMAL")
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
        finally:
            con.close()
