"""Which row of `homes` a home on this machine is (issue 11: a shared index never confuses
two homes, never counts one home twice, never removes a home that is not here).

A row is one *location* of a home: (uid, machine, path). `uid` is the id written once into
the home (ledger.home.HOME_ID_FILE); a home that cannot be written and has none yet is
known by (no uid, machine, path). `path` is the resolved path, so a symlink to a home is
the home itself. A copy of a home (same uid, other path or machine) is a row of its own
whose runs are the first writer's already: the indexer keeps one copy of each run
(ledger.index.copies).
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from ledger.home import ensure_home_uid, machine_id, read_home_uid
from ledger.index import db as dbmod
from ledger.index.dbapi import wrap
from ledger.plainclass import FrozenPlain


class Location(FrozenPlain):
    """A frozen dataclass, written out (ledger.plainclass: the no-change check looks a home's
    row up without importing `dataclasses`)."""

    __slots__ = ("uid", "machine", "path")
    uid: str | None
    machine: str
    path: str

    def __init__(self, uid: str | None, machine: str, path: str) -> None:
        object.__setattr__(self, "uid", uid)
        object.__setattr__(self, "machine", machine)
        object.__setattr__(self, "path", path)


def locate(home: str | os.PathLike[str], create: bool = True) -> Location:
    """This machine's location of `home`. With `create`, a home without an id gets one."""
    path = os.path.realpath(os.fspath(home))
    uid = ensure_home_uid(path) if create else read_home_uid(path)
    return Location(uid, machine_id(), path)


def merge(first: Sequence[str], more: Sequence[str]) -> list[str]:
    """The homes of `first`, then those of `more` it lacks, each once (the homes a rebuild
    indexes: the ones asked for and the ones the index already held)."""
    out: list[str] = []
    for h in list(first) + list(more):
        if h not in out:
            out.append(h)
    return out


def _match(loc: Location) -> tuple[str, tuple]:
    """(WHERE clause, parameters) of this location's row."""
    uid = "uid IS NULL" if loc.uid is None else "uid = ?"
    return f"{uid} AND machine = ? AND path = ?", ((loc.uid,) if loc.uid is not None else ()) + (loc.machine, loc.path)


def _legacy(c: Any, loc: Location) -> tuple | None:
    """A row without an id that has this path: from before migration 0006 (no machine), or of
    this machine's home before it had its id."""
    return c.one("SELECT home_id FROM homes WHERE path = ? AND uid IS NULL AND (machine IS NULL OR machine = ?) "
                 "ORDER BY home_id LIMIT 1", (loc.path, loc.machine))


def _own(c: Any, loc: Location) -> tuple | None:
    where, params = _match(loc)
    return c.one(f"SELECT home_id FROM homes WHERE {where}", params)


def located(conn: Any, loc: Location) -> int | None:
    """The row of exactly this location (none adopted: ledger.index.fresh, which writes nothing)."""
    row = _own(wrap(conn), loc)
    return None if row is None else row[0]


def lookup(conn: Any, loc: Location) -> int | None:
    """The row of this location for a reader (nothing written): its own, else a row from
    before migration 0006 with its path."""
    c = wrap(conn)
    row = _own(c, loc)
    if row is None:
        row = _legacy(c, loc)
    return None if row is None else row[0]


def find(conn: Any, loc: Location) -> int | None:
    """The row of this location, adopting a row without an id that has its path: written
    before migration 0006 (no machine either: the first machine to index that path after the
    upgrade takes it), or by a reader on this machine before the home had its id."""
    c = wrap(conn)
    row = _own(c, loc)
    if row is not None:
        return row[0]
    # a row from before 0006, or of this home before it had an id (a reader indexed it first)
    legacy = _legacy(c, loc)
    if legacy is None:
        return None
    c.execute("UPDATE homes SET uid = ?, machine = ? WHERE home_id = ?", (loc.uid, loc.machine, legacy[0]))
    return legacy[0]


def register(conn: Any, loc: Location, home_id: int | None = None) -> int:
    c = wrap(conn)
    values = {"path": loc.path, "uid": loc.uid, "machine": loc.machine, "added_at": c.dt(dbmod.now_utc())}
    if home_id is not None:
        values["home_id"] = home_id
    c.execute(f"INSERT INTO homes ({', '.join(values)}) VALUES ({c.marks(len(values))})", tuple(values.values()))
    row = _own(c, loc)
    if row is None:  # (as scalar_one(): the row just written must be there)
        raise LookupError(f"no homes row for {loc.path} after writing it")
    return row[0]


# --------------------------------------------------------------------------------------
# `ledger homes list|forget`: a home leaves an index only when someone says so


def listing(conn: Any) -> list[dict[str, Any]]:
    """Every home of the index with its runs (counted rows) and copies (kept out as another
    home's), oldest first. `here`: this machine holds it at that path."""
    c = wrap(conn)
    runs = dict(c.rows("SELECT home_id, count(*) FROM runs GROUP BY home_id"))
    held = dict(c.rows("SELECT home_id, count(*) FROM index_cursors WHERE status = 'copy' GROUP BY home_id"))
    mine = machine_id()
    out = []
    for hid, uid, machine, path, added, last in c.rows(
            "SELECT home_id, uid, machine, path, added_at, last_indexed_at FROM homes ORDER BY home_id"):
        out.append({"id": hid, "home_id": uid, "machine": machine, "path": path, "runs": runs.get(hid, 0),
                    "copies": held.get(hid, 0), "added_at": _iso(added), "last_indexed_at": _iso(last),
                    "here": machine in (None, mine) and os.path.isdir(path)})
    return out


def _iso(v: Any) -> str | None:
    if v is None:
        return None
    from datetime import datetime, timezone

    if isinstance(v, str):  # (SQLite: the stored text, UTC)
        v = datetime.fromisoformat(v)
    if v.tzinfo is None:
        v = v.replace(tzinfo=timezone.utc)
    return v.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def select_rows(conn: Any, selector: str) -> list[int]:
    """The rows a `forget` selector names: the row number (`id`), the home's id, or a path."""
    c = wrap(conn)
    if selector.isdigit():
        return [r[0] for r in c.rows("SELECT home_id FROM homes WHERE home_id = ?", (int(selector),))]
    rows = [r[0] for r in c.rows("SELECT home_id FROM homes WHERE uid = ? ORDER BY home_id", (selector,))]
    if rows:
        return rows
    path = os.path.abspath(selector)
    return [r[0] for r in c.rows("SELECT home_id FROM homes WHERE path = ? OR path = ? ORDER BY home_id",
                                 (path, os.path.realpath(path)))]


def forget(conn: Any, home_id: int) -> int:
    """Remove one home row and everything indexed from it (its records are not touched);
    the copies other homes hold of its runs are read again by their next pass. Returns the
    number of runs that were counted from it."""
    from ledger.index.copies import Chosen, release
    from ledger.index.serverdb import clear_home_rows

    c = wrap(conn)
    n = c.scalar("SELECT count(*) FROM runs WHERE home_id = ?", (home_id,))
    release(c, home_id, Chosen("SELECT run_id FROM runs WHERE home_id = ?", (home_id,)))
    clear_home_rows(conn, [home_id])  # (the caller's connection: serverdb runs it through SQLAlchemy)
    c.execute("DELETE FROM homes WHERE home_id = ?", (home_id,))
    return int(n)
