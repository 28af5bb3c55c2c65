"""What a pass looks at, and when a shard is sealed: the rule scan.py applies and fresh.py mirrors.

Both the index pass (ledger.index.scan) and the no-change check run before the heavy
imports (ledger.index.fresh, sqlite3 and os.stat only) decide with these functions (and walk
a shard with `run_dirs`; the statements they share are ledger.index.runrows'),
so that the check can never answer "unchanged" where the pass would find something. Pure:
os.stat and strings, no SQLAlchemy, no record parsing.

Signatures: a shard directory `mtime_ns:ino`; a run directory `mtime_ns:ino` (`link:` first
for a symlink, lstat()ed, never followed); a file `size:mtime_ns:ino`.

Sealing. A shard directory is sealed when every record in it is either
- settled (terminal.json) and quiet for SEAL_GRACE, or
- damaged (unreadable: its problem is recorded) and quiet, or
- unsettled but abandoned: its launcher is gone for good (ledger.records.liveness: another
  boot, a dead pid, the pid now another process's), and quiet.
A pass does not list a sealed shard whose directory signature is unchanged (a run added or
removed changes it) and does not stat its settled records. Its damaged and abandoned records
("watched": what the index knows of them is what was known when the shard was sealed) still
have their directory and events.jsonl stat()ed (and an abandoned run's manifest.json, as in
an open shard), a few stats per such record: any change there (a damaged record repaired by
replacing a file, an "abandoned" run written to after all) opens the shard and the pass reads
the record again.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Sequence

from ledger.records.liveness import gone_for_good, liveness

# The passes' clocks, here once for the indexer and the warm check alike (ledger.index.fresh,
# quickpass): read as `sealing.RACY_NS` when used, so that one setting reaches every path.
RACY_NS = 100_000_000  # 100 ms: coarse filesystem timestamps tick at most every ~10 ms
# A settled record whose directory and events.jsonl have been quiet this long is sealed:
# its shard is not looked into while the shard directory is unchanged (DESIGN §7: touch only
# unsettled runs and new directories). Loopflow may append an event just after terminal.json;
# `ledger index --full` looks into every shard.
SEAL_GRACE_NS = 10_000_000_000
LINK_SIG = "link:"  # dir_sig prefix of a symlink where a run directory should be (lstat()ed)
RUN_PREFIX = "run_"  # ledger.records.ids.PREFIX
DAMAGED = "damaged"  # index_cursors.status of an unreadable record
MANIFEST = os.sep + "manifest.json"  # os.sep + ledger.records.reader.MANIFEST (and so on)
TERMINAL = os.sep + "terminal.json"
CONTEXT = os.sep + "context.json"
EVENTS = os.sep + "events.jsonl"
_CONTEXT_REF = "context.json="  # context_sig of a ref to context.json (the only valid one)


class SeenCursor(NamedTuple):
    """The light index_cursors row a pass compares a record's signatures with (the last
    three only loaded by --full)."""

    status: str
    settled: bool
    racy: bool
    dir_sig: str | None
    events_sig: str | None
    problem_path: str | None
    problem: str | None
    files_sig: str | None
    context_sig: str | None = None
    prefix_len: int = 0
    prefix_sha256: str | None = None


def file_sig(path: str) -> str:
    try:
        st = os.lstat(path)
    except OSError:
        return "-"
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"


def prefix_sha(path: str, n: int) -> str | None:
    """sha256 of the first `n` bytes of a file (None: nothing to hash; `-`: unreadable)."""
    if n <= 0:
        return None
    try:
        with open(path, "rb") as f:
            import hashlib  # (a record being read or `--full`: not the no-change check)

            return hashlib.sha256(f.read(n)).hexdigest()
    except OSError:
        return "-"


def subdirs(path: str, sort: bool = True) -> list[tuple[str, str, bool]]:
    """(name, path, is_symlink) of the directories and symlinks in `path`; `.`-names skipped
    (reader.iter_run_entries' rules). A symlink is listed as a problem, never followed."""
    try:
        with os.scandir(path) as it:
            out = [(e.name, e.path, e.is_symlink()) for e in it
                   if e.name[0] != "." and (e.is_dir(follow_symlinks=False) or e.is_symlink())]
    except OSError:
        return []
    if sort:
        out.sort()
    return out


class RunDir(NamedTuple):
    """A run directory of an open shard as a pass stats it (events.jsonl: None/0 if absent)."""

    name: str
    path: str
    link: bool  # a symlink where the directory should be: lstat()ed, never followed
    dir_sig: str
    events_sig: str | None
    events_size: int | None
    events_ino: int | None
    racy: bool  # changed within the racy window: read again by the next pass
    quiet: bool  # quiet for SEAL_GRACE: may be sealed


def run_dirs(spath: str, racy_before: int, seal_before: int) -> Iterator[RunDir]:
    """The run directories of a shard directory with their signatures (two stats each; one
    gone meanwhile is left out), in name order: the walk of the pass and of the check."""
    stat, lstat = os.stat, os.lstat
    for name, path, link in subdirs(spath):
        if not name.startswith(RUN_PREFIX):
            continue
        try:
            dst = lstat(path) if link else stat(path)
        except OSError:
            continue
        dsig = f"{LINK_SIG}{dst.st_mtime_ns}:{dst.st_ino}" if link else f"{dst.st_mtime_ns}:{dst.st_ino}"
        esig, emtime, esize, eino = None, 0, None, None
        if not link:
            try:
                est = stat(path + EVENTS)
                esig, emtime = f"{est.st_size}:{est.st_mtime_ns}:{est.st_ino}", est.st_mtime_ns
                esize, eino = est.st_size, est.st_ino
            except OSError:
                pass
        racy = dst.st_mtime_ns >= racy_before or emtime >= racy_before
        yield RunDir(name, path, link, dsig, esig, esize, eino, racy,
                     not racy and dst.st_mtime_ns < seal_before and emtime < seal_before)


def shard_skipped(full: bool, sealed: bool | None, stored_sig: str | None, sig: str, racy: bool) -> bool:
    """Whether a shard directory is not listed (its watched records aside): sealed by the last
    pass, its signature unchanged and not racy, and not a --full pass."""
    return not full and bool(sealed) and stored_sig == sig and not racy


# A shard directory a pass finds: (shard, path, its signature, whether it changed within the
# racy window). A plain tuple: the check builds one per shard on every warm read.
ShardScan = tuple[str, str, str, bool]


class ShardWalk(NamedTuple):
    """A home's shard directories against index_shards (`shard_walk`)."""

    links: list[str]  # symlinks where a shard directory should be: named, never followed
    open: list[ShardScan]  # to look into (new, changed, not sealed, or a --full pass)
    sealed: dict[str, ShardScan]  # sealed and unchanged: skipped unless a watched record changed


def shard_walk(home: str, rows: Mapping[str, Sequence[Any]], full: bool, racy_before: int) -> ShardWalk:
    """The first step of the walk of the pass (ledger.index.scan) and of the check
    (ledger.index.fresh): each shard directory of `home`, stat()ed, against its stored row
    (dir_sig, sealed, runs) in `rows`. A shard stored and not found is gone (the caller's)."""
    walk = ShardWalk([], [], {})
    for shard, spath, link in subdirs(os.path.join(home, "runs")):
        if link:
            walk.links.append(spath)
            continue
        try:
            st = os.stat(spath)
        except OSError:
            continue
        sig, racy = f"{st.st_mtime_ns}:{st.st_ino}", st.st_mtime_ns >= racy_before
        x = (shard, spath, sig, racy)
        row = rows.get(shard)
        if row is not None and shard_skipped(full, row[1], row[0], sig, racy):
            walk.sealed[shard] = x
        else:
            walk.open.append(x)
    return walk


def watched_changes(sealed: Mapping[str, ShardScan], damaged: Sequence[Sequence[Any]],
                    unsettled: Sequence[Sequence[Any]], racy_before: int, opened: set[str]) -> Iterator[tuple[str, str]]:
    """The watched records of the sealed shards (`damaged`: runrows.damaged_cursors' rows, then
    `unsettled`: runrows.unsettled_runs') that changed since the shard was sealed, as (shard,
    what changed); shards in `opened` (the caller's, growing) are not stat()ed again."""
    for sd, name, pp, pr, rc, dsig, esig in damaged:
        if sd in sealed and sd not in opened and not watched_unchanged(os.path.join(sealed[sd][1], name), SeenCursor(
                DAMAGED, False, bool(rc), dsig, esig, pp, pr, None), None, racy_before):
            yield sd, f"a damaged record changed: {name}"
    for r in unsettled:
        if r[6] in sealed and r[6] not in opened and r[7] != DAMAGED and not watched_unchanged(
                os.path.join(sealed[r[6]][1], r[0]),
                SeenCursor(r[7], False, bool(r[8]), r[9], r[10], None, None, r[11]), r[5], racy_before):
            yield r[6], f"an unsettled run changed: {r[0]}"


def kept(cur: SeenCursor, s: Any, problem: Callable[[str, str], Any]) -> bool:
    """Whether an unchanged record needs nothing more: settled, or damaged (its problem named
    again, as on every pass); counted as unchanged in the summary `s`. False: unsettled, its
    liveness is to be judged (`live_now`)."""
    if not cur.settled and cur.status != DAMAGED:
        return False
    if not cur.settled:
        s.skipped.append(problem(cur.problem_path, cur.problem))
    s.unchanged += 1
    return True


def live_now(u: Sequence[Any] | None) -> str | None:
    """The liveness now of an unsettled run from runrows.unsettled_runs' (host, boot_id,
    launcher_pid, launcher_start_ticks, state) (None: not judged, e.g. a copy of another home's
    run): a state that differs from the stored one is a write (running -> abandoned)."""
    if u is None:
        return None
    host, boot_id, pid, ticks = u[0], u[1], u[2], u[3]
    return liveness(host or "", boot_id, None if pid is None else {"pid": pid, "start_ticks": ticks})


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


def record_unchanged(path: str, cur: SeenCursor | None, dsig: str, esig: str | None, link: bool, full: bool) -> bool:
    """Whether a record needs no read: its cursor is not racy, its directory and events.jsonl
    signatures are the cursor's and its other files too (a damaged record: only re-read by
    --full, which re-reads every damaged record but a symlink: it may have been repaired in
    place)."""
    return (cur is not None and not cur.racy and cur.dir_sig == dsig and cur.events_sig == esig
            and ((not full or link) if cur.status == DAMAGED else files_unchanged(path, cur, full)))


def seals(cur: SeenCursor, live: str | None) -> bool:
    """Whether an unchanged (and quiet) record lets its shard be sealed: settled, damaged, or
    unsettled with its launcher gone for good (`live`: its liveness now; None: not judged,
    e.g. a copy of another home's run). A running run, or one whose launcher this machine
    cannot judge (another host's: `unknown`), keeps its shard open: it may still change and
    its liveness is re-checked on every pass."""
    return bool(cur.settled) or cur.status == DAMAGED or (live is not None and gone_for_good(live))


def kept_open(works: Sequence[Any], states: Callable[[list[str]], Mapping[str, str | None]]) -> set[str]:
    """The shards that records just read keep open (scan.RunScan.folded and the small pass,
    ledger.index.quickpass): a record that may still change, or an unsettled one whose stored
    state (`states(names)`: runrows.unsettled_states, asked only when there is one) is not
    gone for good (an unsettled record seals only if it was found abandoned: `seals`)."""
    out = {w.shard for w in works if not w.sealable}
    ask = [w for w in works if w.sealable and w.unsettled]
    if ask:
        found = states([w.name for w in ask])
        out.update(w.shard for w in ask if not gone_for_good(found.get(w.name) or ""))
    return out


def watched(settled: bool, status: str) -> bool:
    """Whether a record of a sealed shard is still stat()ed on every pass (not settled: damaged
    or abandoned). Settled records of a sealed shard are not."""
    return not settled or status == DAMAGED


def watched_unchanged(path: str, cur: SeenCursor, state: str | None, racy_before: int) -> bool:
    """Whether a watched record of a sealed shard (`state`: its stored liveness state; None for
    a damaged record) is as when the shard was sealed: the checks of an unchanged record in an
    open shard (a plain pass). False: the shard is opened and the record read again."""
    if cur.racy or not (cur.status == DAMAGED or (state is not None and gone_for_good(state))):
        return False
    link = cur.dir_sig is not None and cur.dir_sig.startswith(LINK_SIG)
    try:
        st = os.lstat(path) if link else os.stat(path)
    except OSError:
        return False
    dsig = f"{LINK_SIG}{st.st_mtime_ns}:{st.st_ino}" if link else f"{st.st_mtime_ns}:{st.st_ino}"
    if st.st_mtime_ns >= racy_before or dsig != cur.dir_sig:
        return False
    esig = None
    if not link:
        try:
            est = os.stat(path + EVENTS)
        except OSError:
            pass
        else:
            if est.st_mtime_ns >= racy_before:
                return False
            esig = f"{est.st_size}:{est.st_mtime_ns}:{est.st_ino}"
    return record_unchanged(path, cur, dsig, esig, link, False)
