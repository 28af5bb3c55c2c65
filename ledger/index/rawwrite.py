"""A write transaction on an SQLite index through the driver, without SQLAlchemy (issue 10).

After one new run, a command that writes it into the index (and its report facts) spent most
of its time importing SQLAlchemy, not writing. The small writers (ledger.index.quickpass,
ledger.report.quicksync) use this: ops.writing()'s transaction (ledger.index.connect: the
writer lock, the shared file lock, WAL, BEGIN IMMEDIATE), only on an index whose schema is at
head (anything else is the full path's to create, migrate or rebuild).
"""

from __future__ import annotations

import sqlite3
from typing import ContextManager

from ledger.index import db as dbmod
from ledger.index.connect import sqlite_writing


class NotAtHead(Exception):
    """The index is missing, damaged, foreign or not at head: the caller takes the full path."""


def raw_writing(url: str) -> ContextManager[sqlite3.Connection]:
    """A sqlite3 connection inside BEGIN IMMEDIATE, committed when the block ends without an
    exception and rolled back otherwise. Raises NotAtHead before writing anything when the
    schema is not at head."""
    path = dbmod.sqlite_path(url)

    def at_head() -> None:
        if dbmod.inspect_sqlite(path).kind != "ok":
            raise NotAtHead(str(path))

    at_head()  # (before the locks: no lock file is made next to a file or directory that is not an index)
    return sqlite_writing(path, usable=at_head)  # (again under them: swapped or changed meanwhile)
