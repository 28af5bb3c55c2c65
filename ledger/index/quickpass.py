"""The small pass: a few changed run records written into an SQLite index without SQLAlchemy.

After one new run (the usual case for someone running agents all day) the next `ledger runs`,
`show`, `report` or `sql` must index it first. The pass itself takes a few milliseconds;
importing SQLAlchemy, the models and the indexer took ~0.2 s, more than the command's budget
(issue 10: at most 2x `ledger --help`). When the freshness check (ledger.index.fresh) finds
that only this can have changed:

- records of open shards that are new, changed or racy (at most QUICK_MAX), and
- shard states to store (a shard to seal, its signature or run count),

this pass walks the home again under the writer lock (in the write transaction, so nothing
changes between the walk and the writes), reads those records with the pass's own projection
(ledger.index.project.fold_record, counted by ledger.index.work.tally) and writes the rows,
cursors, shard rows and the home's last_indexed_at through the sqlite3 driver
(ledger.index.rawwrite), in one transaction, as the full pass would have written them.

Anything else declines before a byte is written (the transaction is rolled back) and the
caller runs the full pass: another database than SQLite, a schema not at head, more than one
home in the index (a run held by two homes is counted once: ledger.index.copies), a shard
added or gone, a run removed, a launcher gone (running -> abandoned), a watched record of a
sealed shard that changed, an archive of imported sessions that moved or whose links to the
run records this pass would change, any error. tests/test_quickpass.py holds it to the full
pass: the same database, row for row, and the same summary.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any, Sequence

QUICK_MAX = 32  # records: more go to the full pass (it reads them in worker processes)


def index_small(homes: Sequence[str], url: str, racy_ns: int | None = None, why: list[str] | None = None) -> Any:
    """The summary of a small pass over `homes` (ledger.index.fresh.IndexSummary), or None:
    the full pass is needed (nothing was written; `why`, when given, gets the reason:
    ledger.index.fresh.declined)."""
    from ledger.index import db as dbmod
    from ledger.index import fresh, sealing
    from ledger.index.rawwrite import NotAtHead, raw_writing

    if (reason := fresh.unjudged(homes, url)) is not None:
        return fresh.declined(why, reason)
    try:
        with raw_writing(url) as con:
            (n_homes,) = con.execute("SELECT count(*) FROM homes").fetchone()
            if n_homes != 1:
                raise fresh.Decline("more than one home")  # (copies of a run in two homes: ledger.index.copies)
            start_ns = time.time_ns()
            racy_before = start_ns - (sealing.RACY_NS if racy_ns is None else racy_ns)
            summary = fresh.IndexSummary(db=dbmod.redact_url(url))
            for home in homes:
                home = os.path.abspath(os.fspath(home))
                changes = fresh.Changes(QUICK_MAX)
                h = fresh._home(con, home, summary, racy_before, start_ns - sealing.SEAL_GRACE_NS, changes)
                summary.homes.append(home)
                if changes.shards:
                    _write(con, h, home, changes, summary)
            return summary
    except NotAtHead:
        return fresh.declined(why, "the index is not at head")
    except (fresh.Decline, sqlite3.Error, OSError, ValueError) as exc:
        return fresh.declined(why, exc)


def _write(con: sqlite3.Connection, h: int, home: str, changes: Any, s: Any) -> None:
    """What the full pass writes for these records and shards (indexer._write_batch, then
    scan.RunScan.folded / settle / write_state and the home's last_indexed_at)."""
    from ledger.index import db as dbmod
    from ledger.index import runrows
    from ledger.index.sealing import kept_open
    from ledger.index.project import OUT_TABLES, damaged_cursor, enc_datetime, fold_record, plan
    from ledger.index.work import Work, prev_cursors, tally

    works = [Work(*t) for t in changes.works]
    known = [w.name for w in works if w.cur is not None]
    prevs = prev_cursors(lambda sql, params: con.execute(sql, params).fetchall(), h, known)
    now = dbmod.now_utc()
    results = [fold_record(h, w, prevs.get(w.name), now, True) for w in works]
    out: dict[str, list[Any]] = {k: [] for k in OUT_TABLES}
    tally(s, works, results, prevs, out, out["index_cursors"],
          lambda w, problem, prev: damaged_cursor(h, w, now, True, problem, prev))
    runrows.delete_runs(con, h, known, with_cursors=True)  # (the full pass: source.delete)
    for name in OUT_TABLES:
        if out[name]:
            con.executemany(plan(name)[0], out[name])
    # sealing (scan.RunScan.folded): a record that may still change keeps its shard open
    open_ = kept_open(works, lambda names: runrows.unsettled_states(con, h, names))
    shards = []
    for shard, ((sig, sealed, n), row, _works) in changes.shards.items():
        state = (sig, sealed and shard not in open_, n)
        if state != row:
            shards.append((h, shard, state[0], 1 if state[1] else 0, state[2]))
    if shards:  # (scan.RunScan.write_state)
        runrows.drop_shards(con, h, [x[1] for x in shards])
        con.executemany("INSERT INTO index_shards (home_id, shard, dir_sig, sealed, runs) VALUES (?, ?, ?, ?, ?)",
                        shards)
    if s.new or s.updated:  # record runs changed: an imported session may now be one of them
        _check_links(con, h, home)
    if works or shards:
        con.execute("UPDATE homes SET last_indexed_at = ? WHERE home_id = ?", (enc_datetime(dbmod.now_utc()), h))


def _check_links(con: sqlite3.Connection, h: int, home: str) -> None:
    """logsource.LogPass.settle after record runs changed: with a client's archive as the last
    pass left it, the links must not move (else the sessions are projected again: the full
    pass's work); an archive without its change marker is walked whole: the full pass."""
    import json

    from ledger.index import fresh

    def rows(sql: str, params: Sequence[Any]) -> list[tuple]:
        return con.execute(sql, tuple(params)).fetchall()

    for client in fresh.LOG_CLIENTS:
        row = con.execute("SELECT state FROM log_state WHERE home_id = ? AND source = ?",
                          (h, f"{client}-log")).fetchone()
        if row is None:
            continue
        marker = fresh.change_marker(os.path.join(home, "sources", client))
        if marker is None or json.loads(row[0]).get("marker") != marker or fresh.links_changed(rows, h, client):
            raise fresh.Decline(f"{client} sessions archive changed")
