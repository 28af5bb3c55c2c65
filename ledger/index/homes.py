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
from dataclasses import dataclass
from typing import Any, Sequence

import sqlalchemy as sa

from ledger.home import ensure_home_uid, machine_id, read_home_uid
from ledger.index import db as dbmod
from ledger.index.models import Home

homes_t = Home.__table__


@dataclass(frozen=True)
class Location:
    uid: str | None
    machine: str
    path: str


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


def _match(loc: Location) -> Any:
    c = homes_t.c
    uid = c.uid.is_(None) if loc.uid is None else c.uid == loc.uid
    return sa.and_(uid, c.machine == loc.machine, c.path == loc.path)


def lookup(conn: Any, loc: Location) -> int | None:
    """The row of this location for a reader (nothing written): its own, else a row from
    before migration 0006 with its path."""
    c = homes_t.c
    row = conn.execute(sa.select(c.home_id).where(_match(loc))).first()
    if row is None:
        row = conn.execute(sa.select(c.home_id).where(c.path == loc.path, c.uid.is_(None),
                                                      sa.or_(c.machine.is_(None), c.machine == loc.machine))
                           .order_by(c.home_id).limit(1)).first()
    return None if row is None else row[0]


def find(conn: Any, loc: Location) -> int | None:
    """The row of this location, adopting a row without an id that has its path: written
    before migration 0006 (no machine either: the first machine to index that path after the
    upgrade takes it), or by a reader on this machine before the home had its id."""
    c = homes_t.c
    row = conn.execute(sa.select(c.home_id).where(_match(loc))).first()
    if row is not None:
        return row[0]
    # a row from before 0006, or of this home before it had an id (a reader indexed it first)
    legacy = conn.execute(sa.select(c.home_id).where(c.path == loc.path, c.uid.is_(None),
                                                     sa.or_(c.machine.is_(None), c.machine == loc.machine))
                          .order_by(c.home_id).limit(1)).first()
    if legacy is None:
        return None
    conn.execute(sa.update(homes_t).where(c.home_id == legacy[0]).values(uid=loc.uid, machine=loc.machine))
    return legacy[0]


def register(conn: Any, loc: Location, home_id: int | None = None) -> int:
    values = {"path": loc.path, "uid": loc.uid, "machine": loc.machine, "added_at": dbmod.now_utc()}
    if home_id is not None:
        values["home_id"] = home_id
    conn.execute(sa.insert(homes_t).values(**values))
    return conn.execute(sa.select(homes_t.c.home_id).where(_match(loc))).scalar_one()


# --------------------------------------------------------------------------------------
# `ledger homes list|forget`: a home leaves an index only when someone says so


def listing(conn: Any) -> list[dict[str, Any]]:
    """Every home of the index with its runs (counted rows) and copies (kept out as another
    home's), oldest first. `here`: this machine holds it at that path."""
    from ledger.index.models import IndexCursor, Run

    c, r, cur = homes_t.c, Run.__table__, IndexCursor.__table__
    runs = dict(conn.execute(sa.select(r.c.home_id, sa.func.count()).group_by(r.c.home_id)).fetchall())
    held = dict(conn.execute(sa.select(cur.c.home_id, sa.func.count()).where(cur.c.status == "copy")
                             .group_by(cur.c.home_id)).fetchall())
    mine = machine_id()
    out = []
    for hid, uid, machine, path, added, last in conn.execute(
            sa.select(c.home_id, c.uid, c.machine, c.path, c.added_at, c.last_indexed_at).order_by(c.home_id)):
        out.append({"id": hid, "home_id": uid, "machine": machine, "path": path, "runs": runs.get(hid, 0),
                    "copies": held.get(hid, 0), "added_at": _iso(added), "last_indexed_at": _iso(last),
                    "here": machine in (None, mine) and os.path.isdir(path)})
    return out


def _iso(v: Any) -> str | None:
    if v is None:
        return None
    from datetime import timezone

    if v.tzinfo is None:
        v = v.replace(tzinfo=timezone.utc)
    return v.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def select_rows(conn: Any, selector: str) -> list[int]:
    """The rows a `forget` selector names: the row number (`id`), the home's id, or a path."""
    c = homes_t.c
    if selector.isdigit():
        return [r[0] for r in conn.execute(sa.select(c.home_id).where(c.home_id == int(selector)))]
    rows = [r[0] for r in conn.execute(sa.select(c.home_id).where(c.uid == selector).order_by(c.home_id))]
    if rows:
        return rows
    path = os.path.abspath(selector)
    return [r[0] for r in conn.execute(sa.select(c.home_id).where(
        sa.or_(c.path == path, c.path == os.path.realpath(path))).order_by(c.home_id))]


def forget(conn: Any, home_id: int) -> int:
    """Remove one home row and everything indexed from it (its records are not touched);
    the copies other homes hold of its runs are read again by their next pass. Returns the
    number of runs that were counted from it."""
    from ledger.index.copies import release
    from ledger.index.models import Run
    from ledger.index.serverdb import clear_home_rows

    r = Run.__table__
    n = conn.execute(sa.select(sa.func.count()).select_from(r).where(r.c.home_id == home_id)).scalar_one()
    release(conn, home_id, sa.select(r.c.run_id).where(r.c.home_id == home_id))
    clear_home_rows(conn, [home_id])
    conn.execute(sa.delete(homes_t).where(homes_t.c.home_id == home_id))
    return int(n)
