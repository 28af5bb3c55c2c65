"""The statements a pass over run records runs besides a record's own rows, written once for
the pass (ledger.index.scan), the no-change check (ledger.index.fresh) and the small pass
(ledger.index.quickpass): a home's shard rows, its watched records, its unsettled runs, and
the deletes. Plain SQL on any connection ledger.index.dbapi.wrap takes (the check and the
small pass hand a sqlite3 connection, the pass its own), so the three cannot drift apart.
"""

from __future__ import annotations

from typing import Any, Sequence

from ledger.index.dbapi import wrap
from ledger.index.sealing import DAMAGED

CHILD_TABLES = ("subjects", "attempts", "usage_streams", "tool_uses")  # a run's rows besides `runs`


def shard_rows(conn: Any, home_id: int) -> list[tuple]:
    """(shard, dir_sig, sealed, runs) of each index_shards row of a home, as stored."""
    return wrap(conn).rows("SELECT shard, dir_sig, sealed, runs FROM index_shards WHERE home_id = ?", (home_id,))


def damaged_cursors(conn: Any, home_id: int) -> list[tuple]:
    """(shard, run_id, problem_path, problem, racy, dir_sig, events_sig) of a home's damaged
    records, by run id (sorted here: ORDER BY run_id made SQLite walk the primary key, every
    cursor of the home, instead of the status index: 80-140 ms at 100,000 runs, now 3 ms)."""
    return sorted(wrap(conn).rows(
        "SELECT shard, run_id, problem_path, problem, racy, dir_sig, events_sig FROM index_cursors "
        "WHERE home_id = ? AND status = ?", (home_id, DAMAGED)), key=lambda row: row[1])


def unsettled_runs(conn: Any, home_id: int) -> list[tuple]:
    """A home's unsettled runs: (run_id, host, boot_id, launcher_pid, launcher_start_ticks,
    state) and their cursors' (shard, status, racy, dir_sig, events_sig, files_sig)."""
    return wrap(conn).rows(
        "SELECT r.run_id, r.host, r.boot_id, r.launcher_pid, r.launcher_start_ticks, r.state, "
        "c.shard, c.status, c.racy, c.dir_sig, c.events_sig, c.files_sig FROM runs r JOIN index_cursors c "
        "ON c.home_id = r.home_id AND c.run_id = r.run_id WHERE r.home_id = ? AND r.settled = false", (home_id,))


def unsettled_states(conn: Any, home_id: int, names: Sequence[str]) -> dict[str, str]:
    """{run_id: state} of those of `names` that are written unsettled (the batch just read)."""
    if not names:
        return {}
    c = wrap(conn)
    return dict(c.rows(f"SELECT run_id, state FROM runs WHERE home_id = ? AND run_id IN ({c.marks(len(names))}) "
                       "AND settled = false", (home_id, *names)))


def delete_runs(conn: Any, home_id: int, names: list[str], with_cursors: bool) -> None:
    """The rows (and with `with_cursors` the cursors) of these runs of a home."""
    if not names:  # (IN () deletes nothing)
        return
    c = wrap(conn)
    marks = c.marks(len(names))
    for t in CHILD_TABLES + ("runs",) + (("index_cursors",) if with_cursors else ()):
        c.execute(f'DELETE FROM "{t}" WHERE home_id = ? AND run_id IN ({marks})', (home_id, *names))


def drop_shards(conn: Any, home_id: int, shards: Sequence[str]) -> None:
    """The index_shards rows of these shards of a home (rewritten by the caller)."""
    if shards:
        c = wrap(conn)
        c.execute(f"DELETE FROM index_shards WHERE home_id = ? AND shard IN ({c.marks(len(shards))})",
                  (home_id, *shards))
