"""What changed in a home's run records since the last pass (see indexer.py for the rules).

File signatures, the shard and run listing, sealing, and the work items handed to the
projection: a pass stats the shard directories, opens the shards that are not sealed (or
whose directory changed), stats each record's directory and events.jsonl and compares them
with the record's cursor. Nothing here parses a record.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, NamedTuple

import sqlalchemy as sa

from ledger.index import copies
from ledger.index.models import Attempt, IndexCursor, IndexShard, Run, RunSubject, ToolUse, UsageStream
from ledger.records import reader
from ledger.records.ids import PREFIX
from ledger.records.liveness import liveness
from ledger.records.model import ScanProblem
from ledger.records.verdict import judge

if TYPE_CHECKING:
    from ledger.index.sources import PassContext

PREFIX_BYTES = 4096
LINK_SIG = "link:"  # dir_sig prefix of a symlink where a run directory should be (lstat()ed)
MANIFEST = os.sep + reader.MANIFEST
TERMINAL = os.sep + reader.TERMINAL
CONTEXT = os.sep + reader.CONTEXT
EVENTS = os.sep + reader.EVENTS
_CONTEXT_REF = reader.CONTEXT + "="  # context_sig of a ref to context.json (the only valid one)
SHARD_GROUP = 64  # shards whose cursors are loaded with one query

runs_t = Run.__table__
cursors_t = IndexCursor.__table__
shards_t = IndexShard.__table__
CHILD_TABLES = (RunSubject.__table__, Attempt.__table__, UsageStream.__table__, ToolUse.__table__)


# -- signatures -------------------------------------------------------------------------

def sig(st: os.stat_result) -> str:
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"


def file_sig(path: str) -> str:
    try:
        return sig(os.lstat(path))
    except OSError:
        return "-"


def prefix_sha(path: str, n: int) -> str | None:
    """sha256 of the first `n` bytes of a file (None: nothing to hash; `-`: unreadable)."""
    if n <= 0:
        return None
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read(n)).hexdigest()
    except OSError:
        return "-"


def files_sig(msig: str, tsig: str, tvalid: bool) -> str:
    """index_cursors.files_sig: manifest.json and terminal.json signatures (`-`: absent), and
    whether the receipt was valid: `size:mtime:ino|size:mtime:ino|1`."""
    return f"{msig}|{tsig}|{1 if tvalid else 0}"


class SeenCursor(NamedTuple):
    """The light index_cursors row a pass compares a record's signatures with (the last
    three only loaded by --full)."""

    status: str
    settled: bool
    racy: bool
    dir_sig: str
    events_sig: str | None
    problem_path: str | None
    problem: str | None
    files_sig: str | None
    context_sig: str | None = None
    prefix_len: int = 0
    prefix_sha256: str | None = None


_SEEN_COLS = "run_id, status, settled, racy, dir_sig, events_sig, problem_path, problem, files_sig"
_SEEN_FULL_COLS = ", context_sig, prefix_len, prefix_sha256"


def files_unchanged(path: str, cur: SeenCursor, full: bool) -> bool:
    """Whether the files of an indexed record that the directory / events.jsonl signatures do
    not cover are as the cursor saw them: manifest.json and (of a settled run) terminal.json
    overwritten in place (stat signatures; a replaced or deleted file changes the directory);
    with `full` also context.json (signature) and events.jsonl's first bytes (prefix hash: an
    in-place edit that kept the size and the mtime). Hot path of a pass over open shards."""
    fs = cur.files_sig
    if fs is None:  # a cursor from before files were signed: trusted, except by --full
        return not full
    try:
        st = os.lstat(path + MANIFEST)
        if not fs.startswith(f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}|"):
            return False
        if cur.settled:  # settled: the receipt was there
            st = os.lstat(path + TERMINAL)
            if f"|{st.st_size}:{st.st_mtime_ns}:{st.st_ino}|" not in fs:
                return False
    except OSError:
        return False
    if full:
        cs = cur.context_sig
        if cs and cs.startswith(_CONTEXT_REF) and not cs.startswith(f"{_CONTEXT_REF}{file_sig(path + CONTEXT)}/"):
            return False
        if cur.prefix_len and prefix_sha(path + EVENTS, cur.prefix_len) != cur.prefix_sha256:
            return False
    return True


def launcher_dict(pid: int | None, ticks: int | None) -> dict[str, Any] | None:
    """The launcher liveness() reads back from the index's launcher columns."""
    return None if pid is None else {"pid": pid, "start_ticks": ticks}


# -- work items -------------------------------------------------------------------------

@dataclass
class Work:
    """One record to read: what the scan stat()ed, and its light cursor (None: new)."""

    path: str
    name: str
    dsig: str
    esig: str | None
    esize: int | None  # events.jsonl size and inode as stat()ed with esig (None: no file)
    eino: int | None
    cur: SeenCursor | None
    racy: bool
    shard: str
    sealable: bool  # quiet for SEAL_GRACE; cleared unless the record turns out settled (or damaged)
    verify: bool = False  # --full: an unchanged events.jsonl signature is not trusted (prefix re-hashed)

    def __reduce__(self) -> tuple:
        # sent to the workers as a plain tuple: pickling dataclass state cost ~10 us per record
        return (Work, (self.path, self.name, self.dsig, self.esig, self.esize, self.eino, self.cur, self.racy,
                       self.shard, self.sealable, self.verify))


class ShardRow(NamedTuple):
    """index_shards as the last pass left it."""

    dir_sig: str
    sealed: bool
    runs: int


class ShardScan(NamedTuple):
    """A shard directory this pass looks into."""

    shard: str
    path: str
    sig: str
    racy: bool


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


def subdirs(path: str, sort: bool = True) -> list[tuple[str, str, bool]]:
    """(name, path, is_symlink) of the directories and symlinks in `path`; `.`-names skipped
    (reader.iter_run_entries' rules). A symlink is listed as a problem, never followed."""
    try:
        with os.scandir(path) as it:
            out = [(e.name, e.path, e.is_symlink()) for e in it
                   if e.name[0] != "." and (e.is_dir(follow_symlinks=False) or e.is_symlink())]
    except OSError:
        return []
    return sorted(out) if sort else out


def delete_runs(conn: Any, home_id: int, names: list[str], with_cursors: bool) -> None:
    for t in CHILD_TABLES + (runs_t,) + ((cursors_t,) if with_cursors else ()):
        conn.execute(sa.delete(t).where(t.c.home_id == home_id, t.c.run_id.in_(names)))


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
        conn, home_id, s, full = ctx.conn, ctx.home_id, ctx.summary, ctx.full
        racy_before, seal_before = ctx.racy_before, ctx.seal_before
        c = cursors_t.c
        r = runs_t.c
        if not ctx.fresh:  # (an empty database: nothing to look up)
            with ctx.txn():
                self.shard_rows = {row[0]: ShardRow(*row[1:]) for row in conn.execute(sa.text(
                    "SELECT shard, dir_sig, sealed, runs FROM index_shards WHERE home_id = :h"), {"h": home_id})}
        shard_rows = self.shard_rows
        # 1. shard directories: a sealed shard whose directory did not change is not opened
        scan: list[ShardScan] = []
        skipped: list[str] = []
        for shard, spath, link in subdirs(os.path.join(ctx.home, "runs")):
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
            if not full and row is not None and row.sealed and row.dir_sig == ssig and not sracy:
                skipped.append(shard)
                s.unchanged += row.runs
            else:
                scan.append(ShardScan(shard, spath, ssig, sracy))
        on_disk = {x.shard for x in scan}.union(skipped)
        gone_shards = [sd for sd in shard_rows if sd not in on_disk]
        unsettled: dict[str, UnsettledRun] = {}
        if not ctx.fresh:
            with ctx.txn():
                if skipped:  # damaged records of sealed shards are still listed on every pass
                    skipped_set = set(skipped)
                    s.skipped.extend(ScanProblem(pp, pr) for sd, pp, pr in conn.execute(
                        sa.select(c.shard, c.problem_path, c.problem)
                        .where(c.home_id == home_id, c.status == "damaged").order_by(c.run_id)) if sd in skipped_set)
                unsettled = {row[0]: UnsettledRun(*row[1:]) for row in conn.execute(
                    sa.select(r.run_id, r.host, r.boot_id, r.launcher_pid, r.launcher_start_ticks, r.state)
                    .where(r.home_id == home_id, r.settled == sa.false()))}
        if gone_shards:
            with ctx.txn():
                copies.release(conn, home_id, sa.select(c.run_id).where(c.home_id == home_id,
                                                                        c.shard.in_(gone_shards)))
                for t in CHILD_TABLES + (runs_t,):
                    conn.execute(sa.delete(t).where(t.c.home_id == home_id, t.c.run_id.in_(
                        sa.select(c.run_id).where(c.home_id == home_id, c.shard.in_(gone_shards)))))
                n = conn.execute(sa.delete(cursors_t).where(c.home_id == home_id, c.shard.in_(gone_shards))).rowcount
                conn.execute(sa.delete(shards_t).where(shards_t.c.home_id == home_id, shards_t.c.shard.in_(gone_shards)))
            s.removed += max(0, n or 0)
            self.removed_any = True
        # 2. the other shards: two stats per run, records yielded as found
        stat = os.stat
        relive = self.relive
        shard_state = self.shard_state
        seen_sql = sa.text(f"SELECT {_SEEN_COLS}{_SEEN_FULL_COLS if full else ''} FROM index_cursors "
                           "WHERE home_id = :h AND shard IN :shards").bindparams(sa.bindparam("shards", expanding=True))
        for i in range(0, len(scan), SHARD_GROUP):
            group = scan[i:i + SHARD_GROUP]
            cursors: dict[str, SeenCursor] = {}
            if not ctx.fresh:
                with ctx.txn():
                    cursors = {row[0]: SeenCursor(*row[1:]) for row in conn.execute(
                        seen_sql, {"h": home_id, "shards": [g.shard for g in group]}).fetchall()}
            seen: set[str] = set()
            for shard, spath, ssig, sracy in group:
                state = shard_state[shard] = ShardState(ssig, not sracy)
                for name, path, link in subdirs(spath):
                    if not name.startswith(PREFIX):
                        continue
                    try:
                        # a symlink is not followed: its own lstat() signature; the projection lists it
                        dst = os.lstat(path) if link else stat(path)
                    except OSError:
                        continue
                    seen.add(name)
                    state.runs += 1
                    dsig = f"{LINK_SIG}{dst.st_mtime_ns}:{dst.st_ino}" if link else f"{dst.st_mtime_ns}:{dst.st_ino}"
                    try:
                        if link:
                            raise FileNotFoundError
                        est = stat(path + EVENTS)
                        esig = f"{est.st_size}:{est.st_mtime_ns}:{est.st_ino}"
                        emtime, esize, eino = est.st_mtime_ns, est.st_size, est.st_ino
                    except OSError:
                        esig, emtime, esize, eino = None, 0, None, None
                    racy = dst.st_mtime_ns >= racy_before or emtime >= racy_before
                    quiet = not racy and dst.st_mtime_ns < seal_before and emtime < seal_before
                    cur = cursors.get(name)
                    if cur is not None and not cur.racy and cur.dir_sig == dsig and cur.events_sig == esig and (
                            (not full or link) if cur.status == "damaged" else files_unchanged(path, cur, full)):
                        # (--full re-reads every damaged record: it may have been repaired in place)
                        if cur.settled:  # settled and unchanged
                            s.unchanged += 1
                            state.sealed = state.sealed and quiet
                            continue
                        if cur.status == "damaged":
                            s.skipped.append(ScanProblem(cur.problem_path, cur.problem))
                            s.unchanged += 1
                            state.sealed = state.sealed and quiet
                            continue
                        state.sealed = False  # unsettled: only its liveness may have changed
                        u = unsettled.get(name)
                        if u is not None:
                            live = liveness(u.host or "", u.boot_id, launcher_dict(u.launcher_pid,
                                                                                  u.launcher_start_ticks))
                            if live != u.state:
                                # an unsettled run's verdict follows its liveness alone
                                v = judge(state=live, outcome=None, result=None, evidence_gaps=0, skill_invoked=None)
                                relive.append({"h": home_id, "r": name, "state": live, "ok": v.ok,
                                               "ek": v.error_kind, "ed": v.error_detail})
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
        """A batch was written: a shard holding a record that may still change is not sealed."""
        for w in batch:
            if not w.sealable:
                self.shard_state[w.shard].sealed = False

    def settle(self) -> bool:
        """After the last batch: store the liveness changes of unchanged unsettled runs and work
        out the shards to rewrite. Whether anything changed besides the batches."""
        ctx = self.ctx
        if self.relive:
            with ctx.txn():
                ctx.conn.execute(sa.update(runs_t).where(runs_t.c.home_id == sa.bindparam("h"),
                                                         runs_t.c.run_id == sa.bindparam("r"))
                                 .values(state=sa.bindparam("state"), ok=sa.bindparam("ok"),
                                         error_kind=sa.bindparam("ek"), error_detail=sa.bindparam("ed")),
                                 self.relive)
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
            sh = shards_t.c
            self.ctx.conn.execute(sa.delete(shards_t).where(sh.home_id == self.ctx.home_id,
                                                            sh.shard.in_([x["shard"] for x in self.changed])))
            insert_rows(shards_t, self.changed)
