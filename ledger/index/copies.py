"""A run is counted once across the whole index, whichever homes hold a copy (issue 11).

Run ids are UUIDs (sessions: the client's session id), so the same id in two homes is one
run reached twice: a synced copy of a home, a home pushed to a central store, a laptop's
home indexed by the laptop and by the team. The first home to write the run keeps it; a
later home's copy has its rows deleted in the same transaction that wrote them and its
cursor marked `copy` (not read again until it changes). A copy whose manifest differs
(created_at, harness, cwd, host, parent) is not the same run: it is kept out too, and listed
like a damaged record (`ledger runs` shows it unreadable, reports count it) so it is seen,
never silently merged. When the first writer's run leaves the index (its directory removed,
`ledger homes forget`), the copies are released: their cursors are dropped and their shards
opened, so the next pass of their homes indexes one of them.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

from ledger.index.dbapi import wrap

COPY = "copy"  # index_cursors.status of a run counted from another home
# manifest facts that make two records the same run
_SAME = ("created_at", "harness", "cwd", "host", "parent_run_id")
CHUNK = 500
_OTHERS = ("SELECT r.run_id, o.home_id, " + ", ".join(f"r.{n}" for n in _SAME) + ", "
           + ", ".join(f"o.{n}" for n in _SAME)
           + " FROM runs r JOIN runs o ON o.run_id = r.run_id AND o.home_id != r.home_id"
           " WHERE r.home_id = ? AND r.run_id IN ({}) ORDER BY r.run_id, o.home_id")
# a copy of a run kept out of the index: counted from another home, or listed as damaged
# because its manifest differs from that home's
_HELD = ("home_id != ? AND run_id IN ({}) AND (status = ? OR (status = 'damaged' AND problem LIKE "
         "'%another home%'))")


class Chosen(NamedTuple):
    """Run ids chosen by a SELECT (`?` placeholders) instead of listed."""

    sql: str
    params: tuple


def others(conn: Any, home_id: int, run_ids: list[str]) -> dict[str, tuple[int, bool]]:
    """{run_id: (other home_id, same manifest)} for the runs of `run_ids` that another home
    holds (this home's rows must already be written)."""
    c = wrap(conn)
    out: dict[str, tuple[int, bool]] = {}
    n = len(_SAME)
    for i in range(0, len(run_ids), CHUNK):
        chunk = run_ids[i:i + CHUNK]
        for row in c.rows(_OTHERS.format(c.marks(len(chunk))), (home_id, *chunk)):
            if row[0] in out:
                continue
            mine, theirs = row[2:2 + n], row[2 + n:]
            out[row[0]] = (row[1], tuple(mine) == tuple(theirs))  # (both rows from this database)
    return out


def home_label(conn: Any, home_id: int) -> str:
    row = wrap(conn).one("SELECT path, uid FROM homes WHERE home_id = ?", (home_id,))
    if row is None:
        return f"home {home_id}"
    return f"{row[0]} (home id {row[1] or 'none'})"


def release(conn: Any, home_id: int, run_ids: Sequence[str] | Chosen) -> None:
    """The runs `run_ids` (a list, or Chosen by a SELECT) left home `home_id`: the copies
    other homes hold of them are read again by those homes' next pass."""
    c = wrap(conn)
    if isinstance(run_ids, Chosen):
        held, params = _HELD.format(run_ids.sql), (home_id, *run_ids.params, COPY)
    elif not run_ids:
        return  # (IN () holds no run)
    else:
        held, params = _HELD.format(c.marks(len(run_ids))), (home_id, *run_ids, COPY)
    shards = c.rows(f"SELECT DISTINCT home_id, shard FROM index_cursors WHERE {held}", params)
    if not shards:
        return
    c.execute(f"DELETE FROM index_cursors WHERE {held}", params)
    for hid, shard in shards:
        c.execute("UPDATE index_shards SET sealed = ?, dir_sig = '' WHERE home_id = ? AND shard = ?",
                  (False, hid, shard))
