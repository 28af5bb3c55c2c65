"""Is the index already up to date? Answered before anything heavy is imported (issue 10).

A read command (`runs`, `show`, `report`, `sql`) and a plain `ledger index` first bring the
index up to date. When nothing changed, that pass writes nothing, but loading it (SQLAlchemy,
the models, the indexer) costs several times what the pass itself does. `unchanged()` makes
the same decisions as a no-change pass with the sqlite3 driver and `os.stat` alone:

- the homes row of each home (its id, this machine, its resolved path: ledger.index.homes);
- the shard directories against `index_shards` (a sealed, quiet, unchanged shard is not
  opened), and in every other shard each record's directory, events.jsonl, manifest.json and
  (settled) terminal.json against its cursor (ledger.index.scan: `RunScan`, `files_unchanged`);
- the liveness of unsettled runs (a launcher gone since the last pass: running -> abandoned);
- the shard state the pass would store (a shard to seal, a run count that moved);
- each client's archive change marker and, when it moved, its files (ledger.index.logsource);
- the schema revision (head, read without Alembic: ledger.index.db.inspect_sqlite).

Anything that differs, or anything it is not sure of (another database than SQLite, an
error, a racy signature), is `None`: the caller runs the normal pass, which does the work.
So the check can only ever cost a pass, never answer stale. tests/test_fresh.py holds it to
the real pass: whenever it says "unchanged", a real pass writes nothing and reports the same.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import TYPE_CHECKING, Any, Sequence

from ledger.index import db as dbmod
from ledger.index import runrows, sealing
from ledger.index.summary import IndexSummary, summary_line  # noqa: F401 - re-exported (quickpass)
from ledger.index.sealing import (  # noqa: F401 - (LINK_SIG, RUN_PREFIX, shard_skipped... re-exported: tests)
    LINK_SIG, RUN_PREFIX, SeenCursor, ShardScan, kept, live_now, record_unchanged, run_dirs, seals, shard_skipped,
    shard_walk, subdirs, watched_changes, watched_unchanged,
)
# the archive's files and marker, read as the log pass reads them (the import step that runs
# before this check has loaded the module already)
from ledger.sources.archiveformat import (  # noqa: F401 - (CHANGED_FILE, ARCHIVE_SKIP re-exported: tests)
    ARCHIVE_SKIP, CHANGED_FILE, PROBLEMS, archive_files, archive_reason, change_marker, parse_problems,
)

if TYPE_CHECKING:
    from ledger.records.model import ScanProblem


def _problem(path: str, reason: str) -> "ScanProblem":
    from ledger.records.model import ScanProblem  # (its dataclasses: ~27 M instructions at import)

    return ScanProblem(path, reason)

SYMLINK_REASON = "a symlink, not a directory: not followed"
from ledger.sources.clients import IMPORTABLE as LOG_CLIENTS  # noqa: E402 - the LogSources, in the indexer's order
# Each client's reducer state version (STATE_VERSION of ledger.sources.<client>_usage, where
# each version is explained), the index's one copy of it: this check and the pass
# (ledger.index.logclients.state_v) read it here, so that neither imports a reducer to know it
# (tests/test_codex_tools_index.py checks it agrees with the reducers). An index holding an
# older reducer state is re-read.
LOG_STATE_V = {"claude": 3, "codex": 5, "gemini": 1}
LOG_STATE_FORMAT = 1  # logsource.STATE_V: the log_state document's own layout ("v")


class Decline(Exception):
    """Something a pass would write (or that this check, or the small pass, does not judge);
    its argument says what (the `why` list of unchanged() and ledger.index.quickpass.index_small
    gets it)."""


def declined(why: list[str] | None, exc: BaseException | str) -> None:
    """Note why a fast path declined in `why` (when the caller passed a list) and return None:
    a decline's reason, or an error's type and text, so a test tells the two apart (an error
    that declined is not a "nothing changed")."""
    if why is not None:
        why.append(exc if isinstance(exc, str) else
                   str(exc) if isinstance(exc, Decline) else f"error: {type(exc).__name__}: {exc}")


class Changes:
    """What the small pass (ledger.index.quickpass) writes: the records of open shards to read
    (the scan's work items, as tuples) and, per shard holding one or whose state moved, the
    state this walk found (dir_sig, sealed before the reads, runs) and the stored row. More
    than `limit` records to read: Decline (the full pass reads them, in worker processes)."""

    __slots__ = ("limit", "works", "shards")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.works: list[tuple] = []
        self.shards: dict[str, tuple[tuple[str, bool, int], tuple[str, bool, int], list[tuple]]] = {}

    def add(self, shard: str, state: tuple[str, bool, int], row: tuple[str, bool, int], works: list[tuple]) -> None:
        self.works.extend(works)
        if len(self.works) > self.limit:
            raise Decline(f"more than {self.limit} records to read")
        self.shards[shard] = (state, row, works)


def unjudged(homes: Sequence[str], url: str) -> str | None:
    """Why the fast paths (this check, ledger.index.quickpass) do not judge a pass over `homes`
    into `url`, or None: they judge only the SQLite index of some home."""
    if not homes:
        return "no home"
    return None if dbmod.is_sqlite(url) else "not a SQLite index"


def unchanged(homes: Sequence[str], url: str, why: list[str] | None = None) -> IndexSummary | None:
    """The summary of a pass over `homes` that would find nothing to do, or None (run the pass;
    `why`, when given, gets the reason: ledger.index.fresh.declined).

    Only the SQLite index of a home (its `index.sqlite` or a named file) is judged; the caller
    has checked the homes (ledger.home) and brought imported logs up to date first."""
    if (reason := unjudged(homes, url)) is not None:
        return declined(why, reason)
    try:
        path = dbmod.sqlite_path(url)
        # missing, damaged, not ledger's (no lock file is created next to it) or not at head
        if (kind := dbmod.inspect_sqlite(path).kind) != "ok":
            return declined(why, f"the index is {kind}")
        # (the shared file lock: the index is never swapped underneath this read)
        with dbmod.flock(dbmod.file_lock(path), exclusive=False):
            con = sqlite3.connect(dbmod._ro_uri(path), uri=True, timeout=dbmod.BUSY_TIMEOUT_MS / 1000,
                                  isolation_level=None)
            try:
                con.execute("BEGIN")  # one snapshot for every query
                if not _at_head(con):  # (swapped meanwhile)
                    return declined(why, "the index is not at head")
                start_ns = time.time_ns()
                summary = IndexSummary(db=dbmod.redact_url(url))
                for home in homes:
                    home = os.path.abspath(os.fspath(home))
                    _home(con, home, summary, start_ns - sealing.RACY_NS, start_ns - sealing.SEAL_GRACE_NS)
                    summary.homes.append(home)
                return summary
            finally:
                con.close()
    except (Decline, sqlite3.Error, OSError, ValueError) as exc:
        return declined(why, exc)
    except Exception as exc:  # noqa: BLE001 - e.g. a damaged home-id.json: the pass says what
        from ledger.errors import LedgerError

        if isinstance(exc, LedgerError):
            return declined(why, exc)
        raise


def _at_head(con: sqlite3.Connection) -> bool:
    """What inspect_sqlite() found before the lock, asked again of the snapshot read: the
    file is still a ledger index at head (the queries of its second connection, without
    opening one: each connection parses the whole schema, ~3 M instructions)."""
    (app_id,) = con.execute("PRAGMA application_id").fetchone()
    app = con.execute("SELECT value FROM ledger_meta WHERE key = 'application'").fetchone()
    revs = con.execute("SELECT version_num FROM alembic_version").fetchall()
    return app_id == dbmod.APPLICATION_ID and app == (dbmod.APPLICATION,) and revs == [(dbmod.HEAD,)]


def _home_id(con: sqlite3.Connection, home: str) -> int:
    """The homes row the pass would use without writing (ledger.index.homes: `find(locate(home,
    create=False))`): the row of the home's id (or none yet), this machine and its resolved
    path. A row to adopt or to register is a write."""
    from ledger.index import homes

    h = homes.located(con, homes.locate(home, create=False))
    if h is None:
        raise Decline("a home to register or adopt")
    return h


def _home(con: sqlite3.Connection, home: str, s: IndexSummary, racy_before: int, seal_before: int,
          changes: "Changes | None" = None) -> int:
    """One home as ledger.index.scan.RunScan and logsource.LogPass see it; raises Decline.
    With `changes` (the small pass), changed records of open shards and shard states to store
    are collected there instead. Returns the home's id."""
    from ledger.home import home_problem

    if home_problem(home) is not None:  # (absent or not a home: the pass says so)
        raise Decline("a home absent or not a home")
    h = _home_id(con, home)
    rows = {r[0]: (r[1], bool(r[2]), r[3]) for r in runrows.shard_rows(con, h)}
    walk = shard_walk(home, rows, False, racy_before)
    s.skipped.extend(_problem(spath, SYMLINK_REASON) for spath in walk.links)
    for shard, *_ in walk.open:
        if shard not in rows:  # a new shard: a row to write (and its runs to read)
            raise Decline(f"a new shard {shard}")
    if len(walk.open) + len(walk.sealed) != len(rows):  # a shard gone: its runs to delete
        raise Decline("a shard gone")
    # unsettled runs: their cursors (a sealed shard's are watched) and liveness inputs
    unsettled = runrows.unsettled_runs(con, h)
    if walk.sealed:
        damaged = runrows.damaged_cursors(con, h)
        # a watched record of a sealed shard that changed: the pass opens the shard and reads it
        for _sd, what in watched_changes(walk.sealed, damaged, unsettled, racy_before, set()):
            raise Decline(what)
        for sd in walk.sealed:
            s.unchanged += rows[sd][2]
        s.skipped.extend(_problem(pp, pr) for sd, _n, pp, pr, *_ in damaged if sd in walk.sealed)
    if walk.open:
        _open_shards(con, h, walk.open, rows, {r[0]: r[1:6] for r in unsettled}, s, racy_before, seal_before, changes)
    for client in LOG_CLIENTS:
        _log_source(con, h, home, client, s)
    return h


def _open_shards(con: sqlite3.Connection, h: int, open_: list[ShardScan],
                 rows: dict[str, tuple[str, bool, int]], unsettled: dict[str, tuple], s: IndexSummary,
                 racy_before: int, seal_before: int, changes: "Changes | None" = None) -> None:
    marks = ",".join("?" * len(open_))
    by_shard: dict[str, dict[str, SeenCursor]] = {}
    for r in con.execute(
            "SELECT shard, run_id, status, settled, racy, dir_sig, events_sig, problem_path, problem, files_sig "
            f"FROM index_cursors WHERE home_id = ? AND shard IN ({marks})", (h, *(o[0] for o in open_))):
        by_shard.setdefault(r[0], {})[r[1]] = SeenCursor(*r[2:])
    for shard, spath, ssig, sracy in open_:
        cursors = by_shard.get(shard, {})
        sealed = not sracy
        n = new = 0
        works: list[Any] = []
        for name, path, link, dsig, esig, esize, eino, racy, quiet in run_dirs(spath, racy_before, seal_before):
            n += 1
            cur = cursors.get(name)
            if cur is None or not record_unchanged(path, cur, dsig, esig, link, False):
                if changes is None:
                    raise Decline(f"a record to read: {name}")  # new, changed, or racy
                new += cur is None
                works.append((path, name, dsig, esig, esize, eino, cur, racy, shard, quiet))
                continue
            if kept(cur, s, _problem):
                sealed = sealed and quiet
            else:
                u = unsettled.get(name)
                live = live_now(u)
                if u is not None and live != u[4]:
                    raise Decline(f"a run's launcher is gone: {name}")  # running -> abandoned
                sealed = sealed and quiet and seals(cur, live)
                if racy:
                    if changes is None:
                        raise Decline(f"a racy record: {name}")
                    works.append((path, name, dsig, esig, esize, eino, cur, racy, shard, quiet))
                    continue
                s.unchanged += 1
        if n - new != len(cursors):  # a run gone (every run seen has a cursor): a deletion
            raise Decline(f"a run gone from shard {shard}")
        if works or rows[shard] != (ssig, sealed, n):  # records to read, a shard to seal or its signature
            if changes is None:
                raise Decline(f"shard {shard} to seal or re-sign")
            changes.add(shard, (ssig, sealed, n), rows[shard], works)


def _state_says(state: str, rv: int, marker: str) -> bool:
    """Whether the log_state document `state`, as the pass writes it (orjson of {"v", "rv",
    "files", "marker"} in that order), holds reducer version `rv` and `marker`, read from its
    two ends without parsing the files between them (5,654 logs make a 0.6 MB document:
    json.loads cost ~27 M instructions of a warm report). Its first members are its first
    bytes, and a document ending in `,"marker":"<marker>"}` (a marker holds no quote or
    backslash) has that marker as its last member, the one json.loads keeps. False for any
    other layout: the caller parses it."""
    return (state.startswith(f'{{"v":{LOG_STATE_FORMAT},"rv":{rv},"files":{{')
            and state.endswith(f',"marker":"{marker}"}}'))


def _log_source(con: sqlite3.Connection, h: int, home: str, client: str, s: IndexSummary) -> None:
    """ledger.index.logsource.LogPass.settle when no run record changed: unchanged while the
    archive's change marker is the one the last pass stored (else its files are compared)."""
    root = os.path.join(home, "sources", client)
    marker = change_marker(root)
    bad = con.execute("SELECT state FROM log_state WHERE home_id = ? AND source = ?",
                      (h, f"{client}-log{PROBLEMS}")).fetchone()
    if bad is not None:  # (damaged archive files: named on every pass, as damaged records are)
        for rel, (offset, reason) in sorted(parse_problems(bad[0]).items()):
            s.skipped.append(_problem(os.path.join(root, rel), archive_reason(offset, reason)))
    row = con.execute("SELECT state FROM log_state WHERE home_id = ? AND source = ?",
                      (h, f"{client}-log")).fetchone()
    if row is not None and marker is not None and _state_says(row[0], LOG_STATE_V[client], marker):
        return  # (the usual case, read from the document's two ends)
    import json

    cur = json.loads(row[0]) if row is not None else {"files": {}}
    if row is not None and cur.get("rv", 1) != LOG_STATE_V[client]:
        raise Decline(f"{client} sessions folded by an older reducer")  # the pass reads the archive again
    if marker is not None and cur.get("marker") == marker:
        return
    files = {rel: [st.st_size, st.st_ino] for rel, st in archive_files(root)} if os.path.isdir(root) else {}
    if row is None:
        if files:
            raise Decline(f"{client} sessions archived, never indexed")
        return
    known = cur.get("files") or {}
    if (any(known.get(rel) != v for rel, v in files.items()) or any(rel not in files for rel in known)
            or marker != cur.get("marker")):
        raise Decline(f"{client} sessions archive changed")


def links_changed(rows: Any, h: int, client: str) -> bool:
    """Whether an imported session's link to a run record (the same provider session, counted
    once: the run record wins) differs from what log_sessions holds; one scan of the home's
    record runs. `rows(sql, params)` runs a query (`?` placeholders): a sqlite3 connection's
    or ledger.index.rawread.Conn's, so that logsource.py and the small pass share the rule."""
    source = f"{client}-log"
    want: dict[str, str] = {}
    for row_id, rid in rows(
            "SELECT s.row_id, r.run_id FROM runs AS r JOIN log_sessions AS s ON s.home_id = r.home_id "
            "AND s.provider_session_id = r.provider_session_id WHERE r.home_id = ? AND r.source = 'record' "
            "AND r.harness = ? AND s.source = ? ORDER BY r.run_id", (h, client, source)):
        want.setdefault(row_id, rid)
    have = dict(rows("SELECT row_id, linked_run_id FROM log_sessions WHERE home_id = ? AND source = ? "
                     "AND linked_run_id IS NOT NULL", (h, source)))
    return want != have
