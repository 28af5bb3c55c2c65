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
- Sealing (`index_shards`): a settled record quiet for SEAL_GRACE_NS is sealed; a shard
  directory whose records are all sealed is not opened again while its own signature is
  unchanged (a new or removed run changes it). A no-change pass over a settled history thus
  stats ~256 shard directories, not every run.

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
"""

from __future__ import annotations

import gc
import hashlib
import os
import shutil
import sqlite3
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable, Iterable

import orjson
import sqlalchemy as sa

from ledger.errors import RecordError
from ledger.index import db as dbmod
from ledger.index.models import (
    COUNTER_COLUMNS, Attempt, Home, IndexCursor, IndexShard, Run, RunSubject, ToolUse, UsageStream,
)
from ledger.records import reader
from ledger.records.fold import OVERFLOW, _known, reduce_usage
from ledger.records.ids import PREFIX
from ledger.records.liveness import liveness
from ledger.records.model import I64_MAX, MAX_ACROSS_STREAMS, ScanProblem
from ledger.records.timefmt import is_canonical_utc, parse_rfc3339

BATCH = 1000
PREFIX_BYTES = 4096
RACY_NS = 100_000_000  # 100 ms: coarse filesystem timestamps tick at most every ~10 ms
# A settled record whose directory and events.jsonl have been quiet this long is sealed:
# its shard is not looked into while the shard directory is unchanged (DESIGN §7: touch only
# unsettled runs and new directories). Loopflow may append an event just after terminal.json;
# `ledger index --full` looks into every shard.
SEAL_GRACE_NS = 10_000_000_000
_MANIFEST = os.sep + reader.MANIFEST
_TERMINAL = os.sep + reader.TERMINAL
_CONTEXT = os.sep + reader.CONTEXT
_EVENTS = os.sep + reader.EVENTS
_CONTEXT_REF = reader.CONTEXT + "="  # context_sig of a ref to context.json (the only valid one)

runs_t = Run.__table__
subjects_t = RunSubject.__table__
attempts_t = Attempt.__table__
streams_t = UsageStream.__table__
tools_t = ToolUse.__table__
cursors_t = IndexCursor.__table__
homes_t = Home.__table__
shards_t = IndexShard.__table__
CHILD_TABLES = (subjects_t, attempts_t, streams_t, tools_t)


@dataclass
class IndexSummary:
    """What one `ledger index` did (printed as one line, or as JSON with --json)."""

    db: str = ""
    homes: list[str] = field(default_factory=list)
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    rewritten: int = 0
    records_read: int = 0
    skipped: list[ScanProblem] = field(default_factory=list)
    rebuilt: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "db": self.db, "homes": self.homes, "new": self.new, "updated": self.updated,
            "unchanged": self.unchanged, "removed": self.removed, "rewritten": self.rewritten,
            "records_read": self.records_read,
            "skipped": [p.to_dict() for p in self.skipped], "rebuilt": self.rebuilt,
            "seconds": round(self.seconds, 3),
        }

    def line(self) -> str:
        skipped = f"{len(self.skipped)} skipped (damaged)" if self.skipped else "0 skipped"
        extra = f", {self.removed} removed" if self.removed else ""
        extra += f", {self.rewritten} rewritten" if self.rewritten else ""
        return (f"indexed: {self.new} new, {self.updated} updated, {self.unchanged} unchanged, "
                f"{skipped}{extra} in {self.seconds:.2f}s"
                + (" (rebuilt)" if self.rebuilt else ""))


Progress = Callable[[int, int], None]  # (done, total)


def _sig(st: os.stat_result) -> str:
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"


def _subdirs(path: str, sort: bool = True) -> list[tuple[str, str, bool]]:
    """(name, path, is_symlink) of the directories and symlinks in `path`; `.`-names skipped
    (reader.iter_run_entries' rules). A symlink is listed as a problem, never followed."""
    try:
        with os.scandir(path) as it:
            out = [(e.name, e.path, e.is_symlink()) for e in it
                   if e.name[0] != "." and (e.is_dir(follow_symlinks=False) or e.is_symlink())]
    except OSError:
        return []
    return sorted(out) if sort else out


LINK_SIG = "link:"  # dir_sig prefix of a symlink where a run directory should be (lstat()ed)


def _files_sig(msig: str, tsig: str, tvalid: bool) -> str:
    """index_cursors.files_sig: manifest.json and terminal.json signatures (`-`: absent), and
    whether the receipt was valid: `size:mtime:ino|size:mtime:ino|1`."""
    return f"{msig}|{tsig}|{1 if tvalid else 0}"


def _files_unchanged(path: str, cur: tuple, full: bool) -> bool:
    """Whether the files of an indexed record that the directory / events.jsonl signatures do
    not cover are as the cursor saw them: manifest.json and (of a settled run) terminal.json
    overwritten in place (stat signatures; a replaced or deleted file changes the directory);
    with `full` also context.json (signature) and events.jsonl's first bytes (prefix hash: an
    in-place edit that kept the size and the mtime). Hot path of a pass over open shards."""
    fs = cur[7]
    if fs is None:  # a cursor from before files were signed: trusted, except by --full
        return not full
    try:
        st = os.lstat(path + _MANIFEST)
        if not fs.startswith(f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}|"):
            return False
        if cur[1]:  # settled: the receipt was there
            st = os.lstat(path + _TERMINAL)
            if f"|{st.st_size}:{st.st_mtime_ns}:{st.st_ino}|" not in fs:
                return False
    except OSError:
        return False
    if full:
        cs = cur[8]
        if cs and cs.startswith(_CONTEXT_REF) and not cs.startswith(f"{_CONTEXT_REF}{_file_sig(path + _CONTEXT)}/"):
            return False
        if cur[9] and _prefix(path + _EVENTS, cur[9]) != cur[10]:
            return False
    return True


def _i64(v: int) -> int:
    return v - (1 << 64) if v > I64_MAX else v


def _text(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    return orjson.dumps(v).decode()


def _int_or(v: Any, default: int) -> int:
    if isinstance(v, int) and not isinstance(v, bool) and -I64_MAX - 1 <= v <= I64_MAX:
        return v
    return default


def _ticks(v: Any) -> int | None:
    """Launcher start ticks as stored: None stays None; anything liveness() could not match -> -1."""
    if v is None:
        return None
    if isinstance(v, bool):
        return -1
    if isinstance(v, int):
        return v if 0 <= v <= I64_MAX else -1
    if isinstance(v, float) and v.is_integer() and 0 <= v <= I64_MAX:
        return int(v)
    return -1


def _launcher_cols(launcher: Any) -> tuple[int | None, int | None]:
    """(pid, start_ticks) such that liveness(launcher_dict(pid, ticks)) == liveness(launcher)."""
    pid = launcher.get("pid") if isinstance(launcher, dict) else None
    if type(pid) is not int:
        return None, None  # liveness: unknown
    pid = max(0, min(pid, I64_MAX))  # <= 0: unknown; past i64: no such process (abandoned)
    return pid, _ticks(launcher.get("start_ticks"))


def launcher_dict(pid: int | None, ticks: int | None) -> dict[str, Any] | None:
    return None if pid is None else {"pid": pid, "start_ticks": ticks}


def _file_sig(path: str) -> str:
    try:
        return _sig(os.lstat(path))
    except OSError:
        return "-"


def _prefix(path: str, n: int) -> str | None:
    if n <= 0:
        return None
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read(n)).hexdigest()
    except OSError:
        return "-"


# SQLite bulk writes skip SQLAlchemy's per-row parameter processing (the largest cost of a
# cold index): rows are built as tuples holding what SQLAlchemy would store (_rows,
# _cursor_row) and go straight to the driver, through the workers' scratch files or
# executemany. A test compares every stored value and SQLite type with Core's
# (FAST_SQLITE = False). Other databases get the rows as dicts through Core's executemany.
FAST_SQLITE = True
_PLANS: dict[str, tuple[str, tuple[str, ...]]] = {}


def _plan(table: sa.Table) -> tuple[str, tuple[str, ...]]:
    """(INSERT statement, column names) of a table."""
    plan = _PLANS.get(table.name)
    if plan is None:
        names = tuple(col.name for col in table.columns)
        sql = (f'INSERT INTO "{table.name}" ({", ".join(chr(34) + n + chr(34) for n in names)}) '
               f'VALUES ({", ".join("?" for _ in names)})')
        plan = _PLANS[table.name] = (sql, names)
    return plan


_NOW_TEXT: list[Any] = [None, None]


def _now_text(now: Any) -> str | None:
    """`now` in SQLite's storage format, formatted once per batch (every row carries it)."""
    if now is None:
        return None
    if _NOW_TEXT[0] is not now:
        _NOW_TEXT[0], _NOW_TEXT[1] = now, _enc_datetime(now)
    return _NOW_TEXT[1]


def insert_encoded(conn: Any, table: sa.Table, params: list[tuple]) -> None:
    """Bulk insert rows encoded for SQLite's driver (tuples in column order)."""
    conn.connection.driver_connection.cursor().executemany(_plan(table)[0], params)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _plain(row: Any) -> Any:
    """A cursor row as a picklable namespace (attribute access like the Row)."""
    if row is None:
        return None
    from types import SimpleNamespace

    return SimpleNamespace(**row._mapping)


def _extra_counter_total(state: dict[str, Any], name: str) -> int | None:
    """Run total of a counter reduce_usage() does not carry (cache write 5m/1h split)."""
    total: int | None = None
    for st in state["streams"].values():
        v = st["c"].get(name)
        if v is None:
            continue
        if v == OVERFLOW:
            return None
        total = v if total is None else (max(total, v) if name in MAX_ACROSS_STREAMS else total + v)
    return total if total is None or total <= I64_MAX else None


@dataclass
class _Work:
    path: str
    name: str
    dsig: str
    esig: str | None
    esize: int | None  # events.jsonl size and inode as stat()ed with esig (None: no file)
    eino: int | None
    cur: tuple | None  # the light cursor row (see _index_home)
    racy: bool
    shard: str
    sealable: bool  # quiet for SEAL_GRACE; cleared unless the record turns out settled (or damaged)
    verify: bool = False  # --full: an unchanged events.jsonl signature is not trusted (prefix re-hashed)

    def __reduce__(self) -> tuple:
        # sent to the workers as a plain tuple: pickling dataclass state cost ~10 us per record
        return (_Work, (self.path, self.name, self.dsig, self.esig, self.esize, self.eino, self.cur, self.racy,
                        self.shard, self.sealable, self.verify))


PARALLEL_MIN = 64  # records in a batch before projecting them in worker processes
FIRST_BATCH = 256  # the first batch is small: the workers start while the scan goes on


_OUT_TABLES = ("runs", "subjects", "attempts", "usage_streams", "tool_uses", "index_cursors")
# In the scratch files a run's tool counts travel as one JSON object (SQLite's json_each turns
# it into tool_uses rows): ~5 rows per run fewer to bind in Python.
_TOOLS_JSON = "tool_uses_json"
_TOOLS_JSON_INSERT = f'INSERT INTO "{_TOOLS_JSON}" (home_id, run_id, tools) VALUES (?, ?, ?)'

_TABLES = {t.name: t for t in (runs_t, subjects_t, attempts_t, streams_t, tools_t, cursors_t)}
_CURSOR_SETTLED = 6  # index of `settled` in an index_cursors row (see _EXPECTED_COLS)


def _project_one(ix: "Indexer", home_id: int, w: "_Work", prev: Any, now: Any, encode: bool,
                 out: dict[str, list[tuple]] | None = None) -> tuple:
    """Project one record: (rows per table or None, problem, racy, rewrites detected, settled).

    Failures map to a ScanProblem like reader.scan() does. Rows are tuples in column order;
    with `encode` their values are already what SQLite's driver is given. Given `out`, the
    rows are appended to its lists instead (and None is returned for them); a failed record
    leaves no row there."""
    shared = out is not None
    if out is None:
        out = {k: [] for k in _OUT_TABLES}
    sizes = [len(v) for v in out.values()] if shared else None
    before = ix.summary.rewritten
    try:
        ix._project(home_id, w, prev, now, out, encode)
        problem, racy = None, w.racy
    except RecordError as exc:
        problem, racy = ScanProblem(exc.path, exc.reason), w.racy
    except OSError as exc:  # may be transient: the record is retried next pass (racy)
        problem, racy = ScanProblem(exc.filename or w.path, f"record cannot be read ({exc.strerror or exc})"), True
    except Exception as exc:  # noqa: BLE001 - one broken record never hides the others
        problem, racy = ScanProblem(w.path, f"record cannot be read ({type(exc).__name__}: {exc})"), True
    rewrites = ix.summary.rewritten - before
    ix.summary.rewritten = before
    if problem is not None:
        if shared:  # drop whatever the failed record appended
            for v, n in zip(out.values(), sizes):  # type: ignore[arg-type]
                del v[n:]
        return None, problem, racy, rewrites, False
    settled = bool(out["index_cursors"][-1][_CURSOR_SETTLED])
    return None if shared else {k: v for k, v in out.items() if v}, None, racy, rewrites, settled


def _project_task(args: tuple) -> tuple:
    """_project_one in a worker process."""
    home_id, w, prev, now, encode = args
    probe = Indexer.__new__(Indexer)  # only the pure projection methods are used
    probe.summary = IndexSummary()
    return _project_one(probe, home_id, w, prev, now, encode)


def _project_part(args: tuple) -> list[tuple]:
    """Project a slice of a batch in a worker process and write its rows into a scratch SQLite
    file (a copy of `template`: the index's tables, untyped, no index), for the writer to copy
    with one INSERT ... SELECT per table: no row crosses the process boundary as Python
    objects (unpickling them cost the writer more than inserting them). Returns per record
    (None, problem, racy, rewrites, settled), as _project_one without its rows."""
    home_id, works, prevs, now, out_path, template = args
    probe = Indexer.__new__(Indexer)  # only the pure projection methods are used
    probe.summary = IndexSummary()
    tables: dict[str, list[tuple]] = {k: [] for k in _OUT_TABLES}
    tables[_TOOLS_JSON] = []
    metas = []
    for w, prev in zip(works, prevs):
        metas.append(_project_one(probe, home_id, w, prev, now, True, tables))
    shutil.copyfile(template, out_path)
    db = sqlite3.connect(out_path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = OFF")  # scratch: the writer reads it once, then it is deleted
        db.execute("PRAGMA synchronous = OFF")
        db.execute("BEGIN")
        for k, rows in tables.items():
            if rows:
                db.executemany(_TOOLS_JSON_INSERT if k == _TOOLS_JSON else _plan(_TABLES[k])[0], rows)
        db.execute("COMMIT")
    finally:
        db.close()
    return metas


SCRATCH_PREFIX = ".ledger-index-parts-"  # + the indexing process's pid + "-" + random


def _remove_stale_scratch(directory: str) -> None:
    """Scratch directories left by an indexer that died (its pid is gone) are removed."""
    try:
        names = [n for n in os.listdir(directory) if n.startswith(SCRATCH_PREFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(SCRATCH_PREFIX):].partition("-")[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # alive (or not ours to signal): leave it
        except ProcessLookupError:
            pass
        except OSError:
            continue
        shutil.rmtree(os.path.join(directory, name), ignore_errors=True)


def _scratch_template(directory: str) -> str:
    path = os.path.join(directory, "template.sqlite")
    db = sqlite3.connect(path)
    try:
        db.execute(f"PRAGMA page_size = {dbmod.PAGE_SIZE}")
        db.execute("PRAGMA journal_mode = OFF")  # (a scratch template: no fsync)
        db.execute("PRAGMA synchronous = OFF")
        for table in _TABLES.values():
            db.execute(f'CREATE TABLE "{table.name}" ({", ".join(chr(34) + n + chr(34) for n in _plan(table)[1])})')
        db.execute(f'CREATE TABLE "{_TOOLS_JSON}" (home_id, run_id, tools)')
        db.commit()
    finally:
        db.close()
    return path


class Indexer:
    """Index homes into an open engine. `progress(done, total)` is called while working."""

    def __init__(self, engine: Any, *, progress: Progress | None = None, single_transaction: bool = False,
                 racy_ns: int | None = None, full: bool = False, workers: int | None = None,
                 prepare: Callable[[Any], None] | None = None) -> None:
        """`prepare`, for a build into an empty database: called once (with the connection)
        before the first write; until then the scan does not query the database, so the
        schema is created while the workers already read the first records."""
        self.engine = engine
        self._prepare = prepare
        self._fresh_homes: dict[str, int] = {}
        self.full = full
        self.progress = progress
        self.single = single_transaction
        self.racy_ns = RACY_NS if racy_ns is None else racy_ns
        self.summary = IndexSummary()
        self.workers = workers if workers is not None else min(4, os.cpu_count() or 1)
        self._pool: Any = None
        self._scratch: str | None = None  # directory of the workers' scratch files (SQLite)
        self._no_scratch = False
        self._template = ""
        self._parts = 0
        self._pending: tuple | None = None
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
                self._index_home(conn, os.path.abspath(os.fspath(home)))
            self._ready(conn)  # (a fresh build of no home still gets its schema)
        finally:
            if self._pool is not None:
                self._pool.terminate()
                self._pool.join()
                self._pool = None
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)
                self._scratch = None
            if gc_was_enabled:
                gc.enable()
        self.summary.seconds = time.perf_counter() - t0
        return self.summary

    def _project_here(self, home_id: int, batch: list["_Work"], prevs: dict[str, Any], now: Any,
                      encode: bool) -> list[tuple]:
        """Project a small batch in this process (same result shape as _project_task)."""
        return [_project_one(self, home_id, w, prevs.get(w.name), now, encode) for w in batch]

    # -- helpers --------------------------------------------------------------------------

    def _txn(self, conn: Any) -> Any:
        if self.single:
            from contextlib import nullcontext

            return nullcontext()
        return conn.begin()

    def _ready(self, conn: Any) -> None:
        """Before the first write of a fresh build: create the schema, register the homes."""
        if self._prepare is None:
            return
        prepare, self._prepare = self._prepare, None
        prepare(conn)
        with self._txn(conn):
            for home, home_id in self._fresh_homes.items():
                conn.execute(sa.insert(homes_t).values(home_id=home_id, path=home, added_at=dbmod.now_utc()))

    def _home_id(self, conn: Any, home: str) -> int:
        if self._prepare is not None:  # a fresh build: ids in order, rows written by _ready()
            return self._fresh_homes.setdefault(home, len(self._fresh_homes) + 1)
        with self._txn(conn):
            row = conn.execute(sa.select(homes_t.c.home_id).where(homes_t.c.path == home)).first()
            if row is not None:
                return row[0]
            conn.execute(sa.insert(homes_t).values(path=home, added_at=dbmod.now_utc()))
            return conn.execute(sa.select(homes_t.c.home_id).where(homes_t.c.path == home)).scalar_one()

    def _index_home(self, conn: Any, home: str) -> None:
        s = self.summary
        s.homes.append(home)
        home_id = self._home_id(conn, home)
        start_ns = time.time_ns()
        racy_before = start_ns - self.racy_ns
        seal_before = start_ns - SEAL_GRACE_NS
        sh = shards_t.c
        c = cursors_t.c
        r = runs_t.c
        fresh = self._prepare is not None  # an empty database: nothing to look up
        full = self.full
        shard_rows: dict[str, tuple] = {}
        if not fresh:
            with self._txn(conn):
                shard_rows = {row[0]: tuple(row[1:]) for row in conn.execute(sa.text(
                    "SELECT shard, dir_sig, sealed, runs FROM index_shards WHERE home_id = :h"), {"h": home_id})}
        # 1. shard directories: a sealed shard whose directory did not change is not opened
        scan: list[tuple[str, str, str, bool]] = []
        skipped: list[str] = []
        # sorted: rows then reach the database in primary-key order (b-tree appends, ~25% cheaper)
        for shard, spath, link in _subdirs(os.path.join(home, "runs")):
            if link:  # listed on every pass (the listing is made anyway); its runs are not in the home
                s.skipped.append(ScanProblem(spath, reader.SYMLINK_REASON))
                continue
            try:
                sst = os.stat(spath)
            except OSError:
                continue
            ssig = f"{sst.st_mtime_ns}:{sst.st_ino}"
            sracy = sst.st_mtime_ns >= racy_before
            row = shard_rows.get(shard)
            if not self.full and row is not None and row[1] and row[0] == ssig and not sracy:
                skipped.append(shard)
                s.unchanged += row[2]
            else:
                scan.append((shard, spath, ssig, sracy))
        on_disk = {x[0] for x in scan}.union(skipped)
        gone_shards = [sd for sd in shard_rows if sd not in on_disk]
        unsettled: dict[str, tuple] = {}
        if not fresh:
            with self._txn(conn):
                if skipped:  # damaged records of sealed shards are still listed on every pass
                    skipped_set = set(skipped)
                    s.skipped.extend(ScanProblem(pp, pr) for sd, pp, pr in conn.execute(
                        sa.select(c.shard, c.problem_path, c.problem)
                        .where(c.home_id == home_id, c.status == "damaged").order_by(c.run_id)) if sd in skipped_set)
                unsettled = {row[0]: tuple(row[1:]) for row in conn.execute(
                    sa.select(r.run_id, r.host, r.boot_id, r.launcher_pid, r.launcher_start_ticks, r.state)
                    .where(r.home_id == home_id, r.settled == sa.false()))}
        relive: list[dict[str, Any]] = []
        shard_state: dict[str, list] = {}  # shard -> [dir_sig, sealed, runs]
        removed_any = False
        if gone_shards:
            with self._txn(conn):
                for t in CHILD_TABLES + (runs_t,):
                    conn.execute(sa.delete(t).where(t.c.home_id == home_id, t.c.run_id.in_(
                        sa.select(c.run_id).where(c.home_id == home_id, c.shard.in_(gone_shards)))))
                n = conn.execute(sa.delete(cursors_t).where(c.home_id == home_id, c.shard.in_(gone_shards))).rowcount
                conn.execute(sa.delete(shards_t).where(sh.home_id == home_id, sh.shard.in_(gone_shards)))
            s.removed += max(0, n or 0)
            removed_any = True
        # 2. the other shards: two stats per run, records processed in batches as found
        batch: list[_Work] = []
        done = 0
        processed_any = False
        stat = os.stat
        events_name = os.sep + reader.EVENTS
        for i in range(0, len(scan), 64):
            group = scan[i:i + 64]
            cursors: dict[str, tuple] = {}
            if not (fresh and self._prepare is not None):
                with self._txn(conn):
                    cursors = {row[0]: tuple(row[1:]) for row in conn.execute(sa.text(
                        "SELECT run_id, status, settled, racy, dir_sig, events_sig, problem_path, problem, files_sig"
                        + (", context_sig, prefix_len, prefix_sha256" if full else "") +
                        " FROM index_cursors WHERE home_id = :h AND shard IN :shards")
                        .bindparams(sa.bindparam("shards", expanding=True)),
                        {"h": home_id, "shards": [g[0] for g in group]}).fetchall()}
            seen: set[str] = set()
            for shard, spath, ssig, sracy in group:
                state = shard_state[shard] = [ssig, not sracy, 0]
                for name, path, link in _subdirs(spath):
                    if not name.startswith(PREFIX):
                        continue
                    try:
                        # a symlink is not followed: its own lstat() signature; _project lists it
                        dst = os.lstat(path) if link else stat(path)
                    except OSError:
                        continue
                    seen.add(name)
                    state[2] += 1
                    dsig = f"{LINK_SIG}{dst.st_mtime_ns}:{dst.st_ino}" if link else f"{dst.st_mtime_ns}:{dst.st_ino}"
                    try:
                        if link:
                            raise FileNotFoundError
                        est = stat(path + events_name)
                        esig = f"{est.st_size}:{est.st_mtime_ns}:{est.st_ino}"
                        emtime, esize, eino = est.st_mtime_ns, est.st_size, est.st_ino
                    except OSError:
                        esig, emtime, esize, eino = None, 0, None, None
                    racy = dst.st_mtime_ns >= racy_before or emtime >= racy_before
                    quiet = not racy and dst.st_mtime_ns < seal_before and emtime < seal_before
                    cur = cursors.get(name)
                    if cur is not None and not cur[2] and cur[3] == dsig and cur[4] == esig and (
                            (not full or link) if cur[0] == "damaged" else _files_unchanged(path, cur, full)):
                        # (--full re-reads every damaged record: it may have been repaired in place)
                        if cur[1]:  # settled and unchanged
                            s.unchanged += 1
                            state[1] = state[1] and quiet
                            continue
                        if cur[0] == "damaged":
                            s.skipped.append(ScanProblem(cur[5], cur[6]))
                            s.unchanged += 1
                            state[1] = state[1] and quiet
                            continue
                        state[1] = False  # unsettled: only its liveness may have changed
                        u = unsettled.get(name)
                        if u is not None:
                            live = liveness(u[0] or "", u[1], launcher_dict(u[2], u[3]))
                            if live != u[4]:
                                relive.append({"h": home_id, "r": name, "state": live})
                        if not racy:
                            s.unchanged += 1
                            continue
                    batch.append(_Work(path, name, dsig, esig, esize, eino, cur, racy, shard, quiet, full))
                    if len(batch) >= (BATCH if self._done or self._pending is not None else FIRST_BATCH):
                        done += self._flush(conn, home_id, batch, shard_state, done)
                        processed_any = True
            gone = [name for name in cursors if name not in seen]
            if gone:
                with self._txn(conn):
                    self._delete(conn, home_id, gone, with_cursors=True)
                s.removed += len(gone)
                removed_any = True
        if batch:
            done += self._flush(conn, home_id, batch, shard_state, done)
            processed_any = True
        self._drain(conn, home_id, shard_state)
        if relive:
            with self._txn(conn):
                conn.execute(sa.update(runs_t).where(runs_t.c.home_id == sa.bindparam("h"),
                                                     runs_t.c.run_id == sa.bindparam("r"))
                             .values(state=sa.bindparam("state")), relive)
        changed = [{"home_id": home_id, "shard": sd, "dir_sig": st[0], "sealed": st[1], "runs": st[2]}
                   for sd, st in shard_state.items()
                   if sd not in shard_rows or (shard_rows[sd][0], bool(shard_rows[sd][1]), shard_rows[sd][2])
                   != (st[0], st[1], st[2])]
        if fresh or processed_any or removed_any or relive or changed:  # a pass that found nothing writes nothing
            self._ready(conn)
            with self._txn(conn):
                if changed:
                    conn.execute(sa.delete(shards_t).where(sh.home_id == home_id,
                                                           sh.shard.in_([x["shard"] for x in changed])))
                    if FAST_SQLITE and conn.dialect.name == "sqlite":
                        names = _plan(shards_t)[1]
                        insert_encoded(conn, shards_t, [tuple(_enc_bool(x[n]) if n == "sealed" else x[n]
                                                              for n in names) for x in changed])
                    else:
                        conn.execute(sa.insert(shards_t), changed)
                conn.execute(sa.update(homes_t).where(homes_t.c.home_id == home_id)
                             .values(last_indexed_at=dbmod.now_utc()))

    def _flush(self, conn: Any, home_id: int, batch: list[_Work], shard_state: dict[str, list], done: int) -> int:
        """Start projecting a batch and write the previous one (pipelined: the workers read and
        fold batch k+1 while this process writes batch k, each batch in one transaction)."""
        n = len(batch)
        work = list(batch)
        batch.clear()
        pending = self._start_batch(conn, home_id, work)
        previous, self._pending = self._pending, pending
        if previous is not None:
            self._finish_batch(conn, home_id, previous, shard_state)
        return n

    def _drain(self, conn: Any, home_id: int, shard_state: dict[str, list]) -> None:
        previous, self._pending = self._pending, None
        if previous is not None:
            self._finish_batch(conn, home_id, previous, shard_state)

    def _start_batch(self, conn: Any, home_id: int, batch: list[_Work]) -> tuple:
        known = [w.name for w in batch if w.cur is not None]
        prevs: dict[str, Any] = {}
        if known:
            c = cursors_t.c
            with self._txn(conn):
                for row in conn.execute(sa.select(cursors_t).where(c.home_id == home_id, c.run_id.in_(known))):
                    prevs[row.run_id] = row
        now = dbmod.now_utc()
        encode = FAST_SQLITE and conn.dialect.name == "sqlite"
        workers = self.workers
        if workers > 1 and len(batch) >= PARALLEL_MIN:
            if self._pool is None:
                import multiprocessing as mp

                # fork: the workers inherit the imported modules; they never touch the database
                self._pool = mp.get_context("fork").Pool(workers)
            directory = self._scratch_dir(conn) if encode else None
            if directory is not None:
                # one slice per worker, each written to its own scratch file
                size = -(-len(batch) // workers)
                parts = []
                for i in range(0, len(batch), size):
                    self._parts += 1
                    out_path = os.path.join(directory, f"part-{self._parts}.sqlite")
                    part = batch[i:i + size]
                    parts.append((out_path, self._pool.apply_async(_project_part, ((
                        home_id, part, [_plain(prevs.get(w.name)) for w in part], now, out_path,
                        self._template),))))
                return batch, prevs, now, ("parts", parts), encode
            args = [(home_id, w, _plain(prevs.get(w.name)), now, encode) for w in batch]
            handle = self._pool.map_async(_project_task, args, chunksize=max(1, len(args) // (workers * 4)))
        else:
            handle = None
        return batch, prevs, now, handle, encode

    def _scratch_dir(self, conn: Any) -> str | None:
        """The workers' scratch directory, next to the SQLite index file (None for an
        in-memory database: rows then travel back to this process)."""
        if self._scratch is None and not self._no_scratch:
            self._no_scratch = True  # until proven otherwise below
            database = conn.engine.url.database
            if not database or database == ":memory:" or database.startswith("file:"):
                return None
            try:  # json_each (SQLite >= 3.38 has it built in) expands the tool counts
                conn.connection.driver_connection.execute("SELECT value FROM json_each('[1]')").fetchall()
            except sqlite3.Error:
                return None
            directory = os.path.dirname(os.path.abspath(database))
            _remove_stale_scratch(directory)
            try:
                self._scratch = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=directory)
                self._template = _scratch_template(self._scratch)
            except (OSError, sqlite3.Error):  # no room for scratch files: rows travel back instead
                if self._scratch is not None:
                    shutil.rmtree(self._scratch, ignore_errors=True)
                    self._scratch = None
                return None
            self._no_scratch = False
        return self._scratch

    def _finish_batch(self, conn: Any, home_id: int, pending: tuple, shard_state: dict[str, list]) -> None:
        self._ready(conn)  # (a fresh build creates its schema here, while the workers read)
        batch, prevs, now, handle, encode = pending
        scratch: list[str] = []
        if handle is None:
            results = self._project_here(home_id, batch, prevs, now, encode)
        elif isinstance(handle, tuple):  # ("parts", [(scratch file, async result)])
            results = []
            try:
                for out_path, part in handle[1]:
                    scratch.append(out_path)
                    results.extend(part.get())
            except BaseException:
                for out_path, _ in handle[1]:
                    _unlink(out_path)
                raise
        else:
            results = handle.get()
        self._process_batch(conn, home_id, batch, prevs, now, results, encode, scratch)
        for w in batch:
            if not w.sealable:
                shard_state[w.shard][1] = False
        self._done += len(batch)
        gc.collect(1)
        if self.progress is not None:
            self.progress(self._done, 0)

    def _delete(self, conn: Any, home_id: int, names: list[str], with_cursors: bool) -> None:
        for t in CHILD_TABLES + (runs_t,) + ((cursors_t,) if with_cursors else ()):
            conn.execute(sa.delete(t).where(t.c.home_id == home_id, t.c.run_id.in_(names)))

    def _process_batch(self, conn: Any, home_id: int, batch: list[_Work], full: dict[str, Any], now: Any,
                       results: list[tuple], encode: bool, scratch: list[str] = ()) -> None:  # type: ignore[assignment]
        s = self.summary
        known = [w.name for w in batch if w.cur is not None]
        out: dict[str, list[Any]] = {k: [] for k in _OUT_TABLES}
        for w, (rows, problem, racy, rewrites, settled) in zip(batch, results):
            prev = full.get(w.name)
            s.records_read += 1
            s.rewritten += rewrites
            w.racy = racy
            if problem is not None:
                if w.racy:
                    w.sealable = False
                if prev is not None and prev.status == "damaged" and prev.problem == problem.reason:
                    s.unchanged += 1  # (--full re-reads damaged records: still the same damage)
                s.skipped.append(problem)
                out["index_cursors"].append(self._cursor_row(
                    home_id, w, now, encode, status="damaged", problem=(problem.path, problem.reason),
                    rewrites=prev.record_rewrites if prev is not None else 0))
                continue
            if rows:
                for k, v in rows.items():
                    out[k].extend(v)
            if not settled:
                w.sealable = False
            if prev is None:
                s.new += 1
            elif w.racy and prev.dir_sig == w.dsig and prev.events_sig == w.esig and prev.status == "indexed":
                s.unchanged += 1
            else:
                s.updated += 1
        raw = conn.connection.driver_connection if scratch else None
        aliases: list[str] = []
        try:
            for i, out_path in enumerate(scratch):  # (ATTACH is refused inside a transaction)
                raw.execute(f"ATTACH DATABASE ? AS ledger_part{i}", (out_path,))
                aliases.append(f"ledger_part{i}")
            with self._txn(conn):
                if known:
                    self._delete(conn, home_id, known, with_cursors=True)
                for table in (runs_t, subjects_t, attempts_t, streams_t, tools_t, cursors_t):
                    if aliases:
                        cols = ", ".join(f'"{n}"' for n in _plan(table)[1])
                        for alias in aliases:
                            if table is tools_t:
                                raw.execute(f'INSERT INTO main."tool_uses" ({cols}) SELECT t.home_id, t.run_id, '
                                            f'j.key, j.value FROM {alias}."{_TOOLS_JSON}" AS t, json_each(t.tools) AS j')
                            raw.execute(f'INSERT INTO main."{table.name}" ({cols}) '
                                        f'SELECT {cols} FROM {alias}."{table.name}"')
                    rows = out[table.name]
                    if rows:
                        if encode:
                            insert_encoded(conn, table, rows)
                        else:
                            names = _plan(table)[1]
                            conn.execute(sa.insert(table), [dict(zip(names, r)) for r in rows])
        finally:
            for alias in aliases:
                raw.execute(f"DETACH DATABASE {alias}")
            for out_path in scratch:
                _unlink(out_path)

    def _cursor_row(self, home_id: int, w: _Work, now: Any, encode: bool, *, status: str,
                    problem: tuple[str, str] | None = None, settled: bool = False, files_sig: str | None = None,
                    context_sig: str | None = None, context_ok: bool | None = None, offset: int = 0,
                    torn: bool = False, prefix_len: int = 0, prefix_sha: str | None = None, rewrites: int = 0,
                    state: bytes | None = None) -> tuple:
        """An index_cursors row (column order: _EXPECTED_COLS["index_cursors"])."""
        B, D = (_enc_bool, _now_text) if encode else (_same, _same)
        return (
            home_id, w.name, w.shard, status, problem[1] if problem else None, problem[0] if problem else None,
            B(settled), B(w.racy), w.dsig, w.esig, files_sig, context_sig, B(context_ok),
            _i64(w.eino) if w.eino is not None else None, offset, B(torn), prefix_len, prefix_sha,
            rewrites, state.decode() if state is not None else None, D(now),
        )

    def _project(self, home_id: int, w: _Work, prev: Any, now: Any, out: dict[str, list[tuple]],
                 encode: bool) -> None:
        """Read what changed in one record and append its rows + cursor to `out` (tuples in
        column order; encoded for SQLite's driver when `encode`)."""
        path = w.path
        if w.dsig.startswith(LINK_SIG):
            raise RecordError(path, reader.SYMLINK_REASON)
        events_path = path + _EVENTS  # (a scandir path: no trailing separator)
        # manifest.json is immutable and terminal.json write-once: signed (stat()ed before they
        # are read) so that a later change, even in place, is seen (see _files_unchanged)
        msig, tsig = _file_sig(path + _MANIFEST), _file_sig(path + _TERMINAL)
        manifest = reader.read_manifest(path)
        terminal = reader.read_terminal(path)  # before the events, like read_run()
        files_sig = _files_sig(msig, tsig, terminal.present and terminal.valid)
        rewrites = prev.record_rewrites if prev is not None else 0
        if prev is not None and prev.status == "indexed" and prev.files_sig:
            # Files the format never changes, changed since they were indexed: flagged like a
            # rewritten events.jsonl (the files alone no longer show it). A receipt counts
            # once it was read valid (one read mid-write, before its bytes landed, is not).
            pmsig, ptsig, pvalid = prev.files_sig.split("|")
            if pmsig != msig:
                rewrites += 1
                self.summary.rewritten += 1
            if ptsig != "-" and pvalid == "1" and ptsig != tsig:
                rewrites += 1  # replaced, edited or deleted: the run no longer looks cleanly settled
                self.summary.rewritten += 1
        state: dict[str, Any] | None = None
        offset = 0
        torn = False
        fold = True
        head: list[bytes] | None = None
        if prev is not None and prev.status == "indexed" and prev.fold_state is not None:
            poff = prev.events_offset
            if w.esig == prev.events_sig and not w.verify:
                state, offset, torn, fold = orjson.loads(prev.fold_state), poff, prev.torn, False
            elif (w.esize is not None and _i64(w.eino) == prev.events_ino and w.esize >= poff
                  and _prefix(events_path, prev.prefix_len) == prev.prefix_sha256):
                state, offset = orjson.loads(prev.fold_state), poff  # appended: fold from the offset
            elif poff > 0:
                rewrites += 1  # shrank, replaced or prefix changed: re-read whole, flag it
                self.summary.rewritten += 1
        if fold:
            # only up to the size stat()ed with the cursor's signature: a file created or grown
            # since (the writer thread appends while we work) is picked up by the next pass
            # instead of being mistaken for a rewrite then
            size = w.esize if w.esize is not None else 0
            head = [] if offset == 0 else None  # a whole read: the prefix hash comes from its first chunk
            state, offset, torn = reader.fold_events(path, state, offset, size=size, head=head)
        assert state is not None
        # context binding: re-hash only when the context file changed
        ctx_ref = manifest.context
        if ctx_ref is None:
            context_sig, context_ok = "none", True
        else:
            context_sig = str(ctx_ref.get("path") or reader.CONTEXT) + "=" + _file_sig(
                os.path.join(path, str(ctx_ref.get("path") or reader.CONTEXT))) + f"/{ctx_ref.get('content_sha256')}:{ctx_ref.get('bytes')}"
            if prev is not None and prev.context_sig == context_sig and prev.context_ok is not None:
                context_ok = prev.context_ok
            else:
                context_ok = reader.context_valid(path, manifest)
        provider_session = reader.read_provider_session(path)
        prefix_len = min(PREFIX_BYTES, offset)
        if prev is not None and not fold and prev.prefix_len == prefix_len:
            prefix_sha = prev.prefix_sha256
        elif head and len(head[0]) >= prefix_len > 0:
            prefix_sha = hashlib.sha256(head[0][:prefix_len]).hexdigest()
        else:
            prefix_sha = _prefix(events_path, prefix_len)
        self._rows(home_id, path, manifest, terminal, state, torn, context_ok, provider_session, rewrites, now,
                   encode, out)
        out["index_cursors"].append(self._cursor_row(
            home_id, w, now, encode, status="indexed", settled=terminal.present, files_sig=files_sig,
            context_sig=context_sig, context_ok=context_ok, offset=offset, torn=torn, prefix_len=prefix_len,
            prefix_sha=prefix_sha, rewrites=rewrites, state=orjson.dumps(state)))

    def _rows(self, home_id: int, path: str, manifest: Any, terminal: Any, state: dict[str, Any], torn: bool,
              context_ok: bool, provider_session: str | None, rewrites: int, now: Any, encode: bool,
              out: dict[str, list[tuple]]) -> None:
        """The run's rows, as reader.build_snapshot() sees the run (the index == records tests
        hold the two together), built straight as tuples in column order."""
        B = _enc_bool if encode else _same
        u = reduce_usage(state, 1 if torn else 0)
        if terminal.present:
            live = "settled"
        else:
            live = liveness(manifest.host, manifest.boot_id, manifest.launcher)
        created = parse_rfc3339(manifest.created_at)
        ended = terminal.ended_dt if terminal.valid else None
        pid, ticks = _launcher_cols(manifest.launcher)
        rid = manifest.run_id
        skill_invoked = state["skill_invoked"]
        out["runs"].append((
            home_id, rid, manifest.parent_run_id,
            _enc_datetime(created, manifest.created_at) if encode else created,
            _enc_datetime(ended, terminal.ended_at) if encode else ended,
            (ended - created) // _MS if ended is not None else None,
            manifest.harness, manifest.model, manifest.surface, manifest.repo, manifest.worktree, manifest.skill,
            manifest.cwd, manifest.host or None, manifest.boot_id, pid, ticks,
            terminal.outcome if terminal.valid else None, B(terminal.present), live,
            u.gaps + (0 if context_ok else 1) + (0 if terminal.valid else 1) + rewrites, u.gaps, rewrites,
            u.streams, u.final_streams, u.input_tokens, u.output_tokens, u.total_input_tokens, u.peak_input_tokens,
            u.context_window_tokens, u.reasoning_tokens, u.cache_read_tokens, u.cache_write_tokens,
            _extra_counter_total(state, "cache_write_5m_tokens"), _extra_counter_total(state, "cache_write_1h_tokens"),
            u.cost_usd, provider_session or state["session"], state["answer"], B(state.get("answer_exact")),
            _int_or(state["retries"], 0), B(skill_invoked) if isinstance(skill_invoked, bool) else None,
            path, (_now_text(now) if encode else now),
        ))
        rows = out["subjects"]
        for pos, subj in enumerate(manifest.subjects):
            rows.append((home_id, rid, pos, subj.selector, _text(subj.source) or "declared"))
        rows = out["attempts"]
        for _, att in sorted(state["attempts"].items()):  # (primary-key order)
            rows.append((home_id, rid, att["attempt_key"], _text(att.get("provider")), _text(att.get("model")),
                         _text(att.get("started_at")), _text(att.get("finished_at")), _text(att.get("outcome"))))
        rows = out["usage_streams"]
        for sid, st in sorted(state["streams"].items()):
            c = st["c"]
            rows.append((home_id, rid, sid, _text(st["provider"]), _text(st["model"]), _text(st["attempt"]),
                         _text(st["turn"]), st["n"], B(bool(st["final"])),
                         *[_known(c[name]) if name in c else None for name in COUNTER_COLUMNS], st["cost"]))
        tools = state["tools"]
        if tools and _TOOLS_JSON in out:  # scratch transport: one JSON object per run, expanded by SQLite
            text = orjson.dumps(tools, option=orjson.OPT_SORT_KEYS).decode()
            if "\\u0000" not in text:  # (SQLite's JSON cuts a key at an escaped NUL: those go as rows)
                out[_TOOLS_JSON].append((home_id, rid, text))
                tools = {}
        rows = out["tool_uses"]
        for tool, n in sorted(tools.items()):
            rows.append((home_id, rid, tool, n))


_MS = timedelta(milliseconds=1)


def _same(v: Any) -> Any:
    return v


def _enc_bool(v: Any) -> Any:
    return None if v is None else (1 if v else 0)


def _enc_datetime(v: Any, text: str | None = None) -> Any:
    """SQLAlchemy's SQLite DATETIME storage text (zero-padded fields, no offset: ours are UTC).
    `text`, the RFC 3339 form the value was parsed from, is reused when canonical."""
    if v is None:
        return None
    if text is not None and is_canonical_utc(text):
        return f"{text[:10]} {text[11:26]}"
    return (f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}"
            f".{v.microsecond:06d}")


# The row builders above write tuples in these column orders: checked against the models at
# import, so a schema change cannot silently shift values into the wrong columns.
_RUN_COLS = (
    "home_id", "run_id", "parent_run_id", "created_at", "ended_at", "duration_ms", "harness", "model",
    "surface", "repo", "worktree", "skill", "cwd", "host", "boot_id", "launcher_pid", "launcher_start_ticks",
    "outcome", "settled", "state", "evidence_gaps", "usage_gaps", "record_rewrites", "streams",
    "final_streams", "input_tokens", "output_tokens", "total_input_tokens", "peak_input_tokens",
    "context_window_tokens", "reasoning_tokens", "cache_read_tokens", "cache_write_tokens",
    "cache_write_5m_tokens", "cache_write_1h_tokens", "cost_usd", "provider_session_id", "final_answer",
    "final_answer_exact", "api_retries", "skill_invoked", "path", "indexed_at",
)
_EXPECTED_COLS = {
    "runs": _RUN_COLS,
    "subjects": ("home_id", "run_id", "position", "selector", "source"),
    "attempts": ("home_id", "run_id", "attempt_key", "provider", "model", "started_at", "finished_at", "outcome"),
    "usage_streams": ("home_id", "run_id", "stream_id", "provider", "model", "attempt_key", "turn_key",
                      "observations", "final_receipt", *COUNTER_COLUMNS, "cost_usd"),
    "tool_uses": ("home_id", "run_id", "tool_name", "uses"),
    "index_cursors": ("home_id", "run_id", "shard", "status", "problem", "problem_path", "settled", "racy",
                      "dir_sig", "events_sig", "files_sig", "context_sig", "context_ok", "events_ino",
                      "events_offset", "torn", "prefix_len", "prefix_sha256", "record_rewrites", "fold_state",
                      "indexed_at"),
}
for _name, _cols in _EXPECTED_COLS.items():
    if _plan(_TABLES[_name])[1] != _cols:  # pragma: no cover - a models change without this update
        raise RuntimeError(f"indexer row layout of {_name} differs from the model: update _EXPECTED_COLS and the builder")
