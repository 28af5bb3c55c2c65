"""The checks before an SQLite index is touched: its directory exists, the file is ledger's,
a rebuild loses no other machine's home, the index is this home's and not a copy's, and
PRAGMA quick_check of every page (`--full`, `ledger db check`).

Read with the sqlite3 module alone (read-only URIs, ledger.index.db._ro_uri): nothing here
needs SQLAlchemy, so the commands that only check stay cheap.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from ledger.home import home_problem
from ledger.index import db as dbmod
from ledger.index.db import IndexError_


def homes_in(url: str) -> list[str]:
    """Homes recorded in an existing (readable) SQLite index: a rebuild keeps indexing them."""
    import sqlite3

    try:
        con = sqlite3.connect(dbmod._ro_uri(dbmod.sqlite_path(url)), uri=True, timeout=5)
        try:
            return [r[0] for r in con.execute("SELECT path FROM homes ORDER BY home_id")]
        finally:
            con.close()
    except sqlite3.Error:
        return []


def refuse_losing_homes(url: str, homes: Sequence[str]) -> None:
    """A rebuild of an SQLite index is made from the records on this machine: it refuses
    when the index holds a home that is not here (another machine's, a missing mount),
    whose runs it would lose (issue 11)."""
    import sqlite3

    from ledger.home import machine_id

    try:
        con = sqlite3.connect(dbmod._ro_uri(dbmod.sqlite_path(url)), uri=True, timeout=5)
        try:
            cols = {r[1] for r in con.execute("PRAGMA table_info(homes)")}
            sql = "SELECT path, machine FROM homes" if "machine" in cols else "SELECT path, NULL FROM homes"
            rows = con.execute(sql).fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return
    mine = machine_id()
    away = sorted({p for p, m in rows if p not in homes and ((m is not None and m != mine)
                                                               or home_problem(p) is not None)})
    if away:
        raise IndexError_(f"the index holds {len(away)} home(s) that are not on this machine ({away[0]}"
                          + (", ..." if len(away) > 1 else "") + "); a rebuild from here would lose their runs",
                          hint="rebuild where those homes are, remove them first with `ledger homes forget PATH`, "
                               "or build a new index with --db")


def copied_from(url: str, homes: Sequence[str]) -> list[str]:
    """The homes a home's own index holds when it holds none of `homes` on this machine: it
    was made for another home (a home copied or moved with its index.sqlite), whose runs it
    would go on reporting next to this home's (issue 32). [] when it is this home's index
    (or empty)."""
    import sqlite3

    from ledger.home import machine_id

    try:
        con = sqlite3.connect(dbmod._ro_uri(dbmod.sqlite_path(url)), uri=True, timeout=5)
        try:
            rows = con.execute("SELECT path, machine FROM homes ORDER BY home_id").fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return []
    mine = machine_id()
    reals = {os.path.realpath(h) for h in homes} | {os.path.abspath(h) for h in homes}
    if not rows or any(p in reals and m in (None, mine) for p, m in rows):
        return []
    return list(dict.fromkeys(p for p, _m in rows))


def refuse_foreign(path: Path, status: Any, owned: bool) -> None:
    """Never move what is not provably ledger's (DESIGN principle 7): a directory anywhere, and
    at a place the user named, a file that carries no trace of being a ledger index."""
    if status.kind != "corrupt" or (status.ours and status.regular) or (owned and status.regular):
        return
    what = status.detail if not status.regular else f"{status.detail}, not a ledger index"
    raise IndexError_(f"cannot open the index {path}: it is {what}; nothing was changed",
                      hint="point --db / LEDGER_DB at a ledger index or at a new file "
                           "(e.g. --db ~/ledger-index.sqlite); move the file away yourself if it is unwanted")


def check_parent(path: Path, create: bool = False) -> None:
    """The index's directory must exist: a read never creates directories outside a home.
    `create`: the commands that are asked to build an index (`ledger index`, `ledger db
    upgrade`) create it (0700), as `mkdir -p` would."""
    parent = path.parent
    if create and not parent.exists():
        parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not parent.is_dir():
        raise IndexError_(f"cannot open the index {path}: the directory {parent} does not exist",
                          hint=f"create it (`mkdir -p {parent}`) or pass another --db / LEDGER_DB")


def quick_check(path: Path) -> list[str]:
    """PRAGMA quick_check of every page (O(size)): [] when the file is sound."""
    import sqlite3

    try:
        con = sqlite3.connect(dbmod._ro_uri(path), uri=True, timeout=dbmod.BUSY_TIMEOUT_MS / 1000)
        try:
            res = [str(r[0]) for r in con.execute("PRAGMA quick_check").fetchall()]
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        return [str(exc)]
    return [] if res == ["ok"] else res
