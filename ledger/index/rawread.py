"""Reading the index through the database driver, without SQLAlchemy (issue 10).

`ledger runs`, `show` and `report` read a handful of queries from an index that is usually
already up to date (ledger.index.fresh). Importing SQLAlchemy and the models costs several
times those queries, so they are written in plain SQL that both databases take, and run on:

- SQLite: a read-only sqlite3 connection in one read transaction, under the shared file
  lock (the file is never swapped underneath it);
- PostgreSQL (or another server): REPEATABLE READ, READ ONLY, through its driver.

`reading()` is ledger.index.connect's (ops.reading is the same).

Queries use `?` placeholders (turned into the driver's own). Values come back as each
driver gives them; `boolean()`, `utc_text()` make them what SQLAlchemy's types would.
"""

from __future__ import annotations

import os
from typing import Any

from ledger.index.connect import reading  # noqa: F401 - (re-exported: the readers' read transaction)
from ledger.index.dbapi import Conn, wrap  # noqa: F401 - (re-exported: the readers' connection)


def home_id(conn: Conn, home: str | os.PathLike[str]) -> int | None:
    """The index's row for this machine's `home`, as a reader finds it (ledger.index.homes
    `lookup(locate(home, create=False))`): its own location (id, machine, resolved path),
    else a row of its path without an id (from before migration 0006, or written by a reader
    before the home had its id). None: not indexed."""
    from ledger.home import machine_id, read_home_uid

    path = os.path.realpath(os.fspath(home))
    uid = read_home_uid(path)
    same_uid = "uid IS NULL" if uid is None else "uid = ?"
    row = conn.one(f"SELECT home_id FROM homes WHERE {same_uid} AND machine = ? AND path = ?",
                   ([] if uid is None else [uid]) + [machine_id(), path])
    if row is None:
        row = conn.one("SELECT home_id FROM homes WHERE path = ? AND uid IS NULL AND (machine IS NULL OR machine = ?) "
                       "ORDER BY home_id LIMIT 1", (path, machine_id()))
    return None if row is None else row[0]


def home_elsewhere(conn: Conn, home: str | os.PathLike[str]) -> tuple[int, str] | None:
    """(row, path) of the index's row holding this home's id at another path, for a home
    home_id() does not find at its own: a store indexed where it was mounted before, a home
    moved or copied with its index (issue 32: matched by id, and said). None: no such row
    (or the home has no id)."""
    from ledger.home import read_home_uid

    path = os.path.realpath(os.fspath(home))
    try:
        uid = read_home_uid(path)
    except Exception:  # noqa: BLE001 - (a damaged id file: nothing to match)
        return None
    if uid is None:
        return None
    row = conn.one("SELECT home_id, path FROM homes WHERE uid = ? AND path != ? ORDER BY home_id LIMIT 1", (uid, path))
    return None if row is None else (row[0], row[1])


def not_here_message(url: str, home: str | os.PathLike[str], elsewhere: tuple[int, str] | None) -> str:
    """What a reader says when the index holds no row for `home` at its path."""
    from ledger.index.db import redact_url

    if elsewhere is None:
        return f"ledger: the index {redact_url(url)} holds no home at {home}"
    return (f"ledger: the index {redact_url(url)} holds no home at {home}; it holds the same home id at "
            f"{elsewhere[1]} (indexed where it was before: another mount path, a moved or copied home): answering "
            "from that; `ledger index --rebuild` with the same --home indexes it at this path")


def boolean(v: Any) -> bool | None:
    """A Boolean column (SQLite stores 0/1)."""
    return None if v is None else bool(v)


def utc_text(v: Any) -> str | None:
    """A DateTime column as ledger.records.timefmt.format_utc() writes it. SQLite keeps
    SQLAlchemy's storage text (`YYYY-MM-DD HH:MM:SS.ffffff`, UTC); a server gives datetimes."""
    if v is None:
        return None
    if isinstance(v, str):
        if len(v) == 26 and v[10] == " " and v[19] == ".":
            return f"{v[:10]}T{v[11:]}Z"
        from datetime import datetime

        v = datetime.fromisoformat(v)
    from ledger.records.timefmt import format_utc

    return format_utc(v)
