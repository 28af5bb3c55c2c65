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

from typing import Any

import sqlalchemy as sa

from ledger.index.models import Home, IndexCursor, IndexShard, Run

runs_t = Run.__table__
cursors_t = IndexCursor.__table__
shards_t = IndexShard.__table__
homes_t = Home.__table__

COPY = "copy"  # index_cursors.status of a run counted from another home
# manifest facts that make two records the same run
_SAME = ("created_at", "harness", "cwd", "host", "parent_run_id")
CHUNK = 500


def others(conn: Any, home_id: int, run_ids: list[str]) -> dict[str, tuple[int, bool]]:
    """{run_id: (other home_id, same manifest)} for the runs of `run_ids` that another home
    holds (this home's rows must already be written)."""
    r = runs_t.c
    o = runs_t.alias("o")
    cols = [getattr(r, n) for n in _SAME] + [getattr(o.c, n) for n in _SAME]
    out: dict[str, tuple[int, bool]] = {}
    n = len(_SAME)
    for i in range(0, len(run_ids), CHUNK):
        chunk = run_ids[i:i + CHUNK]
        q = (sa.select(r.run_id, o.c.home_id, *cols)
             .select_from(runs_t.join(o, sa.and_(o.c.run_id == r.run_id, o.c.home_id != r.home_id)))
             .where(r.home_id == home_id, r.run_id.in_(chunk)).order_by(r.run_id, o.c.home_id))
        for row in conn.execute(q):
            if row[0] in out:
                continue
            mine, theirs = row[2:2 + n], row[2 + n:]
            out[row[0]] = (row[1], tuple(mine) == tuple(theirs))  # (both rows from this database)
    return out


def home_label(conn: Any, home_id: int) -> str:
    row = conn.execute(sa.select(homes_t.c.path, homes_t.c.uid).where(homes_t.c.home_id == home_id)).first()
    if row is None:
        return f"home {home_id}"
    return f"{row[0]} (home id {row[1] or 'none'})"


def release(conn: Any, home_id: int, run_ids: Any) -> None:
    """The runs `run_ids` (a list, or a SELECT of run ids) left home `home_id`: the copies
    other homes hold of them are read again by those homes' next pass."""
    c = cursors_t.c
    held = sa.and_(c.home_id != home_id, c.run_id.in_(run_ids),
                   sa.or_(c.status == COPY, sa.and_(c.status == "damaged", c.problem.like("%another home%"))))
    shards = conn.execute(sa.select(c.home_id, c.shard).where(held).distinct()).fetchall()
    if not shards:
        return
    conn.execute(sa.delete(cursors_t).where(held))
    sh = shards_t.c
    for hid, shard in shards:
        conn.execute(sa.update(shards_t).where(sh.home_id == hid, sh.shard == shard).values(sealed=False,
                                                                                              dir_sig=""))
