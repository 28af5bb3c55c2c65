"""Incremental indexing: project run records into the index, proportional to what changed.

Per record the indexer keeps a cursor (`index_cursors`) committed in the **same
transaction** as the rows it produced:

- `dir_sig` (mtime/inode of the run directory: a new terminal.json, provider-session.json
  replaced, events.jsonl created) and `events_sig` (size/mtime/inode of events.jsonl).
  A pass stats these two per run and nothing else: when both are unchanged the record is
  not opened (`unchanged`). A signature younger than RACY_NS at the start of the pass is
  marked racy (a change in the same clock tick would not move the mtime) and re-checked
  on the next pass.
- `events_offset` (just past the last complete line) and `fold_state` (the reducer's JSON
  state): an appended events.jsonl is folded from the offset, never re-read.
- `prefix_sha256` of the first `prefix_len` (<= 4 KiB) bytes, and the inode: a file that
  shrank below the offset, changed inode or whose prefix changed was **rewritten**. It is
  re-read whole and the run gets one more evidence gap per detected rewrite
  (`record_rewrites`, included in `evidence_gaps`). This is the one fact the index knows
  that the files no longer show: a rebuild from the records cannot see it.
- `files_sig` (size/mtime/inode of manifest.json and terminal.json, and whether the receipt
  was valid): the manifest is immutable and the receipt write-once, so when either changed
  since it was indexed (overwritten in place, edited, deleted) the run gets one more
  `record_rewrites` gap per file; a run whose receipt vanished is no longer settled (its
  state falls back to liveness: abandoned / unknown) and carries that gap.
- Unsettled runs whose files did not change only get their liveness re-checked
  (running -> abandoned when the launcher is gone).
- Sealing (`index_shards`, the rule in sealing.py): a settled record quiet for SEAL_GRACE_NS
  is sealed, and so are a damaged record and an abandoned one (its launcher gone for good);
  a shard directory whose records are all sealed is not listed again while its own signature
  is unchanged (a new or removed run changes it): its settled records are not stat'ed, its
  damaged and abandoned ones still are (a later write to them opens the shard). A no-change
  pass thus stats ~256 shard directories and the few never-settled or damaged runs.

What a pass checks. A plain pass: every shard directory (stat); in each shard that is not
sealed (or whose directory changed), every record's directory and events.jsonl (stat), and
its manifest.json and, when settled, terminal.json (stat: a change in place, which leaves
the directory alone, is caught there). Damage to a record of a sealed shard that does not
touch the shard directory (an in-place edit, a truncated events.jsonl, a deleted
terminal.json) is not seen by a plain pass. `full=True` (`ledger index --full`) opens every
shard and re-checks every file of every record against its cursor whatever the sealing
says: the stats above, context.json's signature, and the hash of events.jsonl's first
bytes (an in-place edit that kept size and mtime); damaged records are re-read. Content past
the prefix of an unchanged-looking events.jsonl is `ledger verify`'s to re-read.

Unreadable records stay visible: a record that cannot be read (bad manifest, malformed
complete line, a symlink where its directory should be) keeps a cursor with status
`damaged` and no rows; `ledger runs` lists it with state `unreadable` and reports count it
(`unreadable_runs`). A symlinked shard `runs/<xx>` is listed as a problem on every pass
(the listing is made anyway); its runs are not in the home. Symlinks are never followed.

A damaged record (bad manifest, malformed complete line...) is listed with its path and
reason, its cursor remembers the problem (so it is not re-read until it changes) and it
has no rows; the scan goes on. Directories that disappeared are removed from the index.

Records are processed in batches of BATCH as they are found (memory stays flat in the size
of the history), each batch's cursors committed with its rows. Large batches are projected
in forked worker processes, pipelined with the writes: on SQLite each worker writes its
slice's rows into a scratch SQLite file next to the index (removed after use; a dead
indexer's are cleaned by the next pass) that the writer copies with INSERT ... SELECT; on
other databases rows come back to the writer for Core's executemany. A fresh build
(`prepare`) creates its schema while the workers read the first records.

Modules: this one runs a pass (homes, batches, transactions, the summary) over the sources
of `sourcelist.py` (a source discovers what changed since its cursors and folds each changed
item into rows + its new cursor; run records are the first); `scan.py` finds what changed
in the run records (signatures, shards, sealing, work items); `project.py` turns a record
into rows (encoders, column plans); `workers.py` runs the worker processes and their
scratch files; `bulk.py` copies a batch into the database.
"""

from __future__ import annotations

import gc
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ledger.home import home_problem
from ledger.index import db as dbmod
from ledger.index import copies, pglocks, sealing
from ledger.index import homes as homes_mod
from ledger.index.bulk import analyze_if_unknown, copy_batch, insert_dicts, insert_encoded
from ledger.index.connect import transaction
from ledger.index.dbapi import wrap
from ledger.index.project import Folded
from ledger.index.scan import CHILD_TABLES, LINK_SIG, PREFIX_BYTES, Work, delete_runs, launcher_dict
from ledger.index.sourcelist import SOURCES
from ledger.index.sources import PassContext, Source
from ledger.index.summary import IndexSummary  # noqa: F401 - what a pass returns (ops imports it here)
from ledger.index.work import tally
from ledger.index.workers import SCRATCH_PREFIX, Workers
from ledger.records.model import ScanProblem

# (re-exported: imported from here by other modules and tests)
__all__ = [
    "BATCH", "CHILD_TABLES", "FAST_SQLITE", "FIRST_BATCH", "IndexSummary", "Indexer", "LINK_SIG", "PARALLEL_MIN",
    "PREFIX_BYTES", "SCRATCH_PREFIX", "Work", "insert_encoded", "launcher_dict",
]

BATCH = 1000
# SQLite gets rows encoded for its driver (project.py); False: through Core like other databases
FAST_SQLITE = True
PARALLEL_MIN = 64  # records in a batch before projecting them in worker processes
FIRST_BATCH = 256  # the first batch is small: the workers start while the scan goes on


Progress = Callable[[int, int], None]  # (done, total)


@dataclass
class _Pending:
    """A batch being folded while the previous one is written."""

    source: Source
    batch: list[Work]
    prevs: dict[str, Any]  # full cursor rows of the batch's known items
    now: Any
    handle: Any  # None: fold here; else workers.Workers.start()'s
    encode: bool


class Indexer:
    """Index homes on an open connection (a DB-API one, or an SQLAlchemy one: tests, a
    server's pass); `engine` is not used (kept for callers). `progress(done, total)` is
    called while working."""

    def __init__(self, engine: Any = None, *, progress: Progress | None = None, single_transaction: bool = False,
                 racy_ns: int | None = None, full: bool = False, workers: int | None = None,
                 prepare: Callable[[Any], None] | None = None,
                 sources: Iterable[Source] = SOURCES,
                 home_lock: Callable[[str, int], Any] | None = None) -> None:
        """`prepare`, for a build into an empty database: called once (with the connection)
        before the first write; until then the scan does not query the database, so the
        schema is created while the workers already read the first records."""
        self.engine = engine
        self._prepare = prepare
        self._home_lock = home_lock  # (home, home_id) -> a context held while the home is indexed
        self._fresh_homes: dict[str, int] = {}
        self.full = full
        self.progress = progress
        self.single = single_transaction
        self.racy_ns = sealing.RACY_NS if racy_ns is None else racy_ns
        self.summary = IndexSummary()
        self.sources = tuple(sources)
        self.workers = workers if workers is not None else min(4, os.cpu_count() or 1)
        self._pool = Workers(self.workers)
        self._pending: _Pending | None = None
        self._done = 0

    # -- public -------------------------------------------------------------------------

    def index(self, conn: Any, homes: Iterable[str | os.PathLike[str]]) -> IndexSummary:
        """One pass over `homes` on connection `conn` (transactions are begun per batch,
        or by the caller when single_transaction)."""
        t0 = time.perf_counter()
        # A pass allocates millions of short-lived containers (parsed events, rows) and frees
        # them by reference counting; the cyclic GC would walk the whole heap again and again
        # (~15% of a cold index). It is paused for the pass (the forked workers inherit that)
        # and the young generations are collected once per batch, so memory stays flat.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            for home in homes:
                home = os.path.abspath(os.fspath(home))
                why = home_problem(home)
                if why is not None:
                    # not here (another machine's, a missing mount) or not readable: its runs
                    # stay as they are; a home leaves the index only by `ledger homes forget`
                    self.summary.absent.append(home)
                    continue
                self._index_home(conn, home)
            self._ready(conn)  # (a fresh build of no home still gets its schema)
        finally:
            self._pool.close()
            if gc_was_enabled:
                gc.enable()
        self.summary.seconds = time.perf_counter() - t0
        return self.summary

    # -- helpers --------------------------------------------------------------------------

    def _txn(self, conn: Any) -> Any:
        if self.single:
            return nullcontext()
        return transaction(conn)

    def _ready(self, conn: Any) -> None:
        """Before the first write of a fresh build: create the schema, register the homes."""
        if self._prepare is None:
            return
        prepare, self._prepare = self._prepare, None
        prepare(conn)
        with self._txn(conn):
            for loc, home_id in self._fresh_homes.items():
                homes_mod.register(conn, loc, home_id)

    def _home_id(self, conn: Any, home: str) -> int:
        loc = homes_mod.locate(home, create=False)  # (ids are written by ops.index_homes)
        if self._prepare is not None:  # a fresh build: ids in order, rows written by _ready()
            return self._fresh_homes.setdefault(loc, len(self._fresh_homes) + 1)
        with self._txn(conn):
            found = homes_mod.find(conn, loc)
            return found if found is not None else homes_mod.register(conn, loc)

    def _index_home(self, conn: Any, home: str) -> None:
        self.summary.homes.append(home)
        home_id = self._home_id(conn, home)
        if self._home_lock is None:
            self._index_home_locked(conn, home, home_id)
        else:
            with self._home_lock(home, home_id):
                self._index_home_locked(conn, home, home_id)

    def _index_home_locked(self, conn: Any, home: str, home_id: int) -> None:
        start_ns = time.time_ns()
        fresh = self._prepare is not None  # an empty database: nothing to look up
        c = wrap(conn)
        encode = FAST_SQLITE and c.sqlite
        ctx = PassContext(conn=conn, home=home, home_id=home_id, full=self.full, fresh=fresh,
                          racy_before=start_ns - self.racy_ns, seal_before=start_ns - sealing.SEAL_GRACE_NS,
                          summary=self.summary, encode=encode, txn=lambda: self._txn(conn),
                          ready=lambda: self._ready(conn))
        processed_any = False
        dirty = False
        discoveries = []
        for source in self.sources:
            found = source.discover(ctx)
            batch: list[Work] = []
            for w in found:
                batch.append(w)
                if len(batch) >= (BATCH if self._done or self._pending is not None else FIRST_BATCH):
                    self._flush(conn, home_id, source, batch, found)
                    processed_any = True
            if batch:
                self._flush(conn, home_id, source, batch, found)
                processed_any = True
            self._drain(conn, home_id, found)
            dirty = found.settle() or dirty
            discoveries.append(found)
        if fresh or processed_any or dirty:  # a pass that found nothing writes nothing
            self._ready(conn)
            with self._txn(conn):
                for found in discoveries:
                    found.write_state(lambda table, rows: insert_dicts(conn, table, rows, encode))
                c.execute("UPDATE homes SET last_indexed_at = ? WHERE home_id = ?", (c.dt(dbmod.now_utc()), home_id))
        elif not c.sqlite:
            # a shared index: `ledger homes list` shows when each home last synced, changes or
            # not (the server's clock: client clocks disagree)
            with self._txn(conn):
                c.execute("UPDATE homes SET last_indexed_at = now() WHERE home_id = ?", (home_id,))

    def _flush(self, conn: Any, home_id: int, source: Source, batch: list[Work], found: Any) -> None:
        """Start folding a batch and write the previous one (pipelined: the workers read and
        fold batch k+1 while this process writes batch k, each batch in one transaction)."""
        work = list(batch)
        batch.clear()
        pending = self._start_batch(conn, home_id, source, work)
        previous, self._pending = self._pending, pending
        if previous is not None:
            self._finish_batch(conn, home_id, previous, found)

    def _drain(self, conn: Any, home_id: int, found: Any) -> None:
        previous, self._pending = self._pending, None
        if previous is not None:
            self._finish_batch(conn, home_id, previous, found)

    def _start_batch(self, conn: Any, home_id: int, source: Source, batch: list[Work]) -> _Pending:
        known = [w.name for w in batch if w.cur is not None]
        prevs: dict[str, Any] = {}
        if known:
            with self._txn(conn):
                prevs = source.previous(conn, home_id, known)
        now = dbmod.now_utc()
        encode = FAST_SQLITE and wrap(conn).sqlite
        handle = None
        if self.workers > 1 and len(batch) >= PARALLEL_MIN:
            handle = self._pool.start(conn, source.fold, home_id, batch, prevs, now, encode)
        return _Pending(source, batch, prevs, now, handle, encode)

    def _finish_batch(self, conn: Any, home_id: int, p: _Pending, found: Any) -> None:
        self._ready(conn)  # (a fresh build creates its schema here, while the workers read)
        scratch: list[str] = []
        if p.handle is None:
            fold = p.source.fold
            results = [fold(home_id, w, p.prevs.get(w.name), p.now, p.encode) for w in p.batch]
        else:
            results, scratch = self._pool.results(p.handle)
        self._write_batch(conn, home_id, p, results, scratch)
        if not self._done:  # (once a pass: the first batch)
            analyze_if_unknown(conn, lambda: self._txn(conn), p.source.tables)
        found.folded(p.batch)
        self._done += len(p.batch)
        gc.collect(1)
        if self.progress is not None:
            self.progress(self._done, 0)

    def _write_batch(self, conn: Any, home_id: int, p: _Pending, results: list[Folded], scratch: list[str]) -> None:
        """Count the batch's outcomes and write its rows and cursors in one transaction."""
        s = self.summary
        source, now, encode = p.source, p.now, p.encode
        known = [w.name for w in p.batch if w.cur is not None]
        out: dict[str, list[Any]] = {t: [] for t in source.tables}
        tally(s, p.batch, results, p.prevs, out, out[source.tables[-1]],
              lambda w, problem, prev: source.damaged(home_id, w, now, encode, problem, prev))

        def replace() -> None:
            if known:
                source.delete(conn, home_id, known, True)

        written = {w.name: w for w, res in zip(p.batch, results) if res[1] is None}

        def after() -> None:
            if source.name == "runs" and written and self._may_hold_copies(conn):
                self._drop_copies(conn, home_id, written)

        copy_batch(conn, lambda: self._txn(conn), source.tables, out, scratch, encode, replace, after)

    def _may_hold_copies(self, conn: Any) -> bool:
        """Whether another home may hold a run of this batch. SQLite has one writer: with one
        home in the index there is none. A server database is always checked (a home
        registered meanwhile could be writing the same run)."""
        c = wrap(conn)
        if not c.sqlite:
            return True
        if self._prepare is not None:  # (a fresh build: its homes are known)
            return len(self._fresh_homes) > 1
        return c.scalar("SELECT count(*) FROM homes") > 1

    def _drop_copies(self, conn: Any, home_id: int, written: dict[str, Work]) -> None:
        """In the batch's transaction: runs another home holds already are its (ledger.index.copies)."""
        names = sorted(written)
        c = wrap(conn)
        if c.dialect == "postgresql":
            pglocks.lock_copies(conn, names)
        found = copies.others(conn, home_id, names)
        if not found:
            return
        delete_runs(conn, home_id, list(found), with_cursors=False)
        same = [n for n, (_h, ok) in found.items() if ok]
        if same:
            c.execute(f"UPDATE index_cursors SET status = ? WHERE home_id = ? AND run_id IN ({c.marks(len(same))})",
                      (copies.COPY, home_id, *same))
            self.summary.copies += len(same)
        for name, (other, ok) in found.items():
            if ok:
                continue
            reason = (f"another home has a run with this id and a different manifest "
                      f"({copies.home_label(conn, other)}); this copy is not counted")
            path = written[name].path
            c.execute("UPDATE index_cursors SET status = ?, problem = ?, problem_path = ?, settled = ? "
                      "WHERE home_id = ? AND run_id = ?", ("damaged", reason, path, False, home_id, name))
            self.summary.skipped.append(ScanProblem(path, reason))

