"""What changed in a home's run records since the last pass (see indexer.py for the rules).

File signatures, the shard and run listing, sealing, and the work items handed to the
projection: a pass stats the shard directories, opens the shards that are not sealed (or
whose directory changed), stats each record's directory and events.jsonl and compares them
with the record's cursor. Nothing here parses a record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, NamedTuple

from ledger.index import copies, runrows
from ledger.index.dbapi import wrap
from ledger.index.runrows import CHILD_TABLES, delete_runs  # noqa: F401 - (re-exported: indexer, sources)
from ledger.index.sealing import (  # noqa: F401 - (re-exported: project.py, tests)
    CONTEXT, DAMAGED, EVENTS, LINK_SIG, MANIFEST, TERMINAL, SeenCursor, ShardScan, file_sig, files_unchanged, kept,
    kept_open, live_now, prefix_sha, record_unchanged, run_dirs, seals, shard_skipped, shard_walk, subdirs, watched,
    watched_changes, watched_unchanged,
)
from ledger.records import reader
from ledger.records.model import ScanProblem
from ledger.records.verdict import judge
from ledger.index.work import PREFIX_BYTES, Work, files_sig, launcher_dict, sig  # noqa: F401 - (re-exported)

if TYPE_CHECKING:
    from ledger.index.work import PassContext

SHARD_GROUP = 64  # shards whose cursors are loaded with one query

_SEEN_COLS = "run_id, status, settled, racy, dir_sig, events_sig, problem_path, problem, files_sig"
_SEEN_FULL_COLS = ", context_sig, prefix_len, prefix_sha256"


class ShardRow(NamedTuple):
    """index_shards as the last pass left it."""

    dir_sig: str
    sealed: bool
    runs: int


@dataclass
class ShardState:
    """A shard as this pass finds it (written to index_shards when it differs from ShardRow)."""

    dir_sig: str
    sealed: bool
    runs: int = 0


class UnsettledRun(NamedTuple):
    """An unsettled run's liveness inputs and stored state (re-checked when it did not change)."""

    host: str | None
    boot_id: str | None
    launcher_pid: int | None
    launcher_start_ticks: int | None
    state: str


class RunScan:
    """One home's pass over `runs/<xx>/run_*/`: iterating yields the records to read, in
    primary-key order (b-tree appends, ~25% cheaper), as they are found; records that
    disappeared are deleted on the way. `folded()` hears which records were written,
    `settle()` then writes what changed besides them (liveness, index_shards)."""

    def __init__(self, ctx: "PassContext") -> None:
        self.ctx = ctx
        self.shard_rows: dict[str, ShardRow] = {}
        self.shard_state: dict[str, ShardState] = {}
        self.relive: list[dict[str, Any]] = []
        self.removed_any = False
        self.changed: list[dict[str, Any]] = []

    def __iter__(self) -> Iterator[Work]:
        ctx = self.ctx
        conn, home_id, s, full = wrap(ctx.conn), ctx.home_id, ctx.summary, ctx.full
        racy_before, seal_before = ctx.racy_before, ctx.seal_before
        if not ctx.fresh:  # (an empty database: nothing to look up)
            with ctx.txn():
                self.shard_rows = {row[0]: ShardRow(*row[1:]) for row in runrows.shard_rows(conn, home_id)}
        shard_rows = self.shard_rows
        # 1. shard directories: a sealed shard whose directory did not change is not listed
        walk = shard_walk(ctx.home, shard_rows, full, racy_before)
        # (a symlink: listed on every pass, the listing is made anyway; its runs are not in the home)
        s.skipped.extend(ScanProblem(spath, reader.SYMLINK_REASON) for spath in walk.links)
        scan, candidates = walk.open, walk.sealed  # (sealed and unchanged: skipped unless a watched record changed)
        on_disk = {x[0] for x in scan}.union(candidates)
        gone_shards = [sd for sd in shard_rows if sd not in on_disk]
        unsettled: dict[str, UnsettledRun] = {}
        skipped: list[str] = []
        if not ctx.fresh:
            damaged: list[Any] = []
            with ctx.txn():
                if candidates:  # damaged records of sealed shards are still listed on every pass
                    damaged = runrows.damaged_cursors(conn, home_id)
                found = runrows.unsettled_runs(conn, home_id)
            unsettled = {row[0]: UnsettledRun(*row[1:6]) for row in found}
            if candidates:
                # the damaged and abandoned records of a sealed shard are still stat()ed (sealing.py):
                # one that changed opens its shard
                opened: set[str] = set()
                for sd, _what in watched_changes(candidates, damaged, found, racy_before, opened):
                    opened.add(sd)
                if opened:
                    scan = sorted(scan + [candidates[sd] for sd in opened])
                skipped = [sd for sd in candidates if sd not in opened]
                for sd in skipped:
                    s.unchanged += shard_rows[sd].runs
                skipped_set = set(skipped)
                s.skipped.extend(ScanProblem(pp, pr) for sd, _n, pp, pr, *_ in damaged if sd in skipped_set)
        if gone_shards:
            with ctx.txn():
                in_gone = f"home_id = ? AND shard IN ({conn.marks(len(gone_shards))})"
                params = (home_id, *gone_shards)
                gone_runs = f"SELECT run_id FROM index_cursors WHERE {in_gone}"
                copies.release(conn, home_id, copies.Chosen(gone_runs, params))
                for t in CHILD_TABLES + ("runs",):
                    conn.execute(f'DELETE FROM "{t}" WHERE home_id = ? AND run_id IN ({gone_runs})', (home_id, *params))
                n = conn.execute(f"DELETE FROM index_cursors WHERE {in_gone}", params)
                conn.execute(f"DELETE FROM index_shards WHERE {in_gone}", params)
            s.removed += max(0, n or 0)
            self.removed_any = True
        # 2. the other shards: two stats per run, records yielded as found
        relive = self.relive
        shard_state = self.shard_state
        seen_sql = (f"SELECT {_SEEN_COLS}{_SEEN_FULL_COLS if full else ''} FROM index_cursors "
                    "WHERE home_id = ? AND shard IN ({})")
        for i in range(0, len(scan), SHARD_GROUP):
            group = scan[i:i + SHARD_GROUP]
            cursors: dict[str, SeenCursor] = {}
            if not ctx.fresh:
                with ctx.txn():
                    cursors = {row[0]: SeenCursor(*row[1:]) for row in conn.rows(
                        seen_sql.format(conn.marks(len(group))), (home_id, *(g[0] for g in group)))}
            seen: set[str] = set()
            for shard, spath, ssig, sracy in group:
                state = shard_state[shard] = ShardState(ssig, not sracy)
                # (a symlink is not followed: its own lstat() signature; the projection lists it)
                for name, path, link, dsig, esig, esize, eino, racy, quiet in run_dirs(spath, racy_before,
                                                                                      seal_before):
                    seen.add(name)
                    state.runs += 1
                    cur = cursors.get(name)
                    if record_unchanged(path, cur, dsig, esig, link, full):
                        if kept(cur, s, ScanProblem):  # settled (or damaged) and unchanged
                            state.sealed = state.sealed and quiet
                            continue
                        # unsettled: only its liveness may have changed
                        u = unsettled.get(name)
                        live = live_now(u)
                        if u is not None and live != u.state:
                            # an unsettled run's verdict follows its liveness alone
                            v = judge(state=live, outcome=None, result=None, evidence_gaps=0, skill_invoked=None)
                            relive.append({"h": home_id, "r": name, "state": live, "ok": v.ok,
                                           "ek": v.error_kind, "ed": v.error_detail})
                        # (a launcher gone for good: sealed with what is known, its files still watched)
                        state.sealed = state.sealed and quiet and seals(cur, live)
                        if not racy:
                            s.unchanged += 1
                            continue
                    yield Work(path, name, dsig, esig, esize, eino, cur, racy, shard, quiet, full)
            gone = [name for name in cursors if name not in seen]
            if gone:
                with ctx.txn():
                    copies.release(conn, home_id, gone)
                    delete_runs(conn, home_id, gone, with_cursors=True)
                s.removed += len(gone)
                self.removed_any = True

    def folded(self, batch: list[Work]) -> None:
        """A batch was written: a shard holding a record that may still change is not sealed (an
        unsettled record read now seals only if it was found abandoned: sealing.seals)."""

        def states(names: list[str]) -> dict[str, str | None]:
            with self.ctx.txn():
                return runrows.unsettled_states(self.ctx.conn, self.ctx.home_id, names)

        for shard in kept_open(batch, states):
            self.shard_state[shard].sealed = False

    def settle(self) -> bool:
        """After the last batch: store the liveness changes of unchanged unsettled runs and work
        out the shards to rewrite. Whether anything changed besides the batches."""
        ctx = self.ctx
        if self.relive:
            with ctx.txn():
                wrap(ctx.conn).executemany(
                    "UPDATE runs SET state = ?, ok = ?, error_kind = ?, error_detail = ? WHERE home_id = ? AND run_id = ?",
                    [(x["state"], x["ok"], x["ek"], x["ed"], x["h"], x["r"]) for x in self.relive])
        rows = self.shard_rows
        self.changed = [{"home_id": ctx.home_id, "shard": sd, "dir_sig": st.dir_sig, "sealed": st.sealed,
                         "runs": st.runs}
                        for sd, st in self.shard_state.items()
                        if sd not in rows or (rows[sd].dir_sig, bool(rows[sd].sealed), rows[sd].runs)
                        != (st.dir_sig, st.sealed, st.runs)]
        return bool(self.removed_any or self.relive or self.changed)

    def write_state(self, insert_rows: Any) -> None:
        """In the pass's closing transaction: the shards that changed. `insert_rows(table,
        dicts)` is the indexer's bulk insert."""
        if self.changed:
            runrows.drop_shards(self.ctx.conn, self.ctx.home_id, [x["shard"] for x in self.changed])
            insert_rows("index_shards", self.changed)
