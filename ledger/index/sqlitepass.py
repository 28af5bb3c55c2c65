"""An index pass on an SQLite index, and its rebuild: under the writer lock, the file is checked
(ledger.index.db.inspect_sqlite, ledger.index.sqlitechecks), upgraded in place when its
revision is older, indexed in place when sound, else built afresh next to it and swapped in
under the exclusive file lock (a damaged one set aside: ledger.index.setaside).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from ledger.index import db as dbmod
from ledger.index import homes as homes_mod
from ledger.index import setaside
from ledger.index.connect import sqlite_connect
from ledger.index.db import Notify
from ledger.index.dbapi import Conn
from ledger.index.sqlitechecks import check_parent, copied_from, homes_in, quick_check, refuse_foreign, refuse_losing_homes


def _remove_stale_builds(path: Path) -> None:
    """Build files (`<index>.rebuild-<pid>` and its -journal/-wal/-shm) of a build that died:
    the caller holds the writer lock, so no live ledger process on this host is building."""
    prefix = f"{path.name}.rebuild-"
    try:
        names = [n for n in os.listdir(path.parent) if n.startswith(prefix)]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix):].partition("-")[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # a live process (on a shared directory, another host's is not ours)
        except ProcessLookupError:
            pass
        except OSError:
            continue
        try:
            os.unlink(path.parent / name)
        except OSError:
            pass


def build_fresh(path: Path, homes: list[str], progress: Any, racy_ns: int | None, full: bool = False) -> Any:
    """Build a complete index of `homes` in a temporary file next to `path`; return (tmp, summary)."""
    from ledger.index.indexer import Indexer

    tmp = path.with_name(f"{path.name}.rebuild-{os.getpid()}")
    _remove_stale_builds(path)
    setaside.remove_sqlite_files(tmp)
    # created 0600 before SQLite opens it (its -wal/-shm inherit the mode): nothing leaks
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    try:
        raw = sqlite_connect(tmp, "build")
        try:
            # the schema is created once the first records are being read (see Indexer)
            summary = Indexer(progress=progress, racy_ns=racy_ns, full=full,
                              prepare=lambda _c: dbmod.upgrade_sqlite(raw)).index(Conn(raw, "sqlite"), homes)
            raw.execute("PRAGMA journal_mode = WAL").fetchall()
        finally:
            raw.close()
    except BaseException:
        setaside.remove_sqlite_files(tmp)
        raise
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    summary.rebuilt = True
    return tmp, summary


def index_sqlite(homes: list[str], url: str, rebuild: bool, notify: Notify, progress: Any,
                 racy_ns: int | None, full: bool = False, owned: bool = True) -> Any:
    """Index `homes` into the SQLite index at `url` (see the module's docstring); returns an
    IndexSummary. `owned`: the index is the home's (or its store's) own, at the place ledger
    chose, so a file there that is not a ledger index may be set aside."""
    path = dbmod.sqlite_path(url)
    check_parent(path)
    refuse_foreign(path, dbmod.inspect_sqlite(path), owned)  # before taking locks next to it
    with dbmod.flock(dbmod.writer_lock(path), exclusive=True, waiting="another ledger process updating the index",
                     notify=notify):
        status = _checked_status(url, path, homes, notify, rebuild, full, owned)
        if status.kind == "ok" and not rebuild:
            done = _pass_in_place(url, path, homes, progress, racy_ns, full)
            if not isinstance(done, dbmod.FileStatus):
                return done
            status = done
        return _build_and_swap(url, path, homes, status, rebuild, notify, progress, racy_ns)


def _checked_status(url: str, path: Path, homes: list[str], notify: Notify, rebuild: bool, full: bool,
                    owned: bool) -> Any:
    """The file's status under the writer lock: an older revision upgraded in place (unless it
    is to be rebuilt), damage found by `full`'s quick_check or another home's index as
    "corrupt" (rebuilt); a file that is not ledger's is refused."""
    status = dbmod.inspect_sqlite(path)
    if status.kind == "corrupt":
        # double-check with nobody else having the file open (a concurrent checkpoint
        # could show a header ahead of the file size for an instant)
        with dbmod.flock(dbmod.file_lock(path), exclusive=True, waiting="readers of the index to finish",
                         notify=notify):
            status = dbmod.inspect_sqlite(path)
    refuse_foreign(path, status, owned)
    if status.kind == "ok" and full and not rebuild:
        damage = quick_check(path)
        if damage:
            status = dbmod.FileStatus("corrupt", f"damaged ({damage[0]})")
    if status.kind == "upgrade" and not rebuild:
        with dbmod.flock(dbmod.file_lock(path), exclusive=True, waiting="readers of the index to finish",
                         notify=notify):
            upgrade_file(url)
        notify(f"ledger: upgraded the index {path} from schema revision {status.revision} to {dbmod.HEAD}")
        status = dbmod.FileStatus("ok", revision=dbmod.HEAD)
    if status.kind == "ok" and owned and not rebuild:
        others = copied_from(url, homes)
        if others:  # (issue 32: a home copied with its index reports itself, not the original)
            status = dbmod.FileStatus("corrupt", f"another home's index (it holds {others[0]}"
                                      + (f" and {len(others) - 1} more" if len(others) > 1 else "")
                                      + ", not this home: copied with the home, e.g. `cp -a`, or the home "
                                        "moved or mounted elsewhere)")
    return status


def upgrade_file(url: str) -> None:
    """Migrate the SQLite index at `url` to head in one write transaction (the caller holds the
    writer lock and the exclusive file lock)."""
    raw = sqlite_connect(dbmod.sqlite_path(url), "write")
    try:
        dbmod.upgrade_sqlite(raw)
    finally:
        raw.close()


def _pass_in_place(url: str, path: Path, homes: list[str], progress: Any, racy_ns: int | None,
                   full: bool) -> Any:
    """An index pass on the sound file (its IndexSummary), under the shared file lock; the
    file's status instead when the pass finds it damaged (it is then rebuilt)."""
    from ledger.index.indexer import Indexer

    try:
        with dbmod.flock(dbmod.file_lock(path), exclusive=False):
            raw = sqlite_connect(path, "write")
            try:
                return Indexer(progress=progress, racy_ns=racy_ns, full=full).index(Conn(raw, "sqlite"), homes)
            finally:
                raw.close()
    except Exception as exc:  # noqa: BLE001 - classified below
        from ledger.index.dberrors import driver_error

        orig = driver_error(exc)  # (sqlite3's, or wrapped by SQLAlchemy)
        if orig is None or not dbmod.is_corruption(exc):
            raise
        return dbmod.FileStatus("corrupt", f"damaged ({orig})")


def _build_and_swap(url: str, path: Path, homes: list[str], status: Any, rebuild: bool, notify: Notify,
                    progress: Any, racy_ns: int | None) -> Any:
    """Build the index afresh (every home it knew, with `homes`) and swap it in, a damaged file
    set aside; a rebuild of a readable index refuses to lose another machine's home."""
    known = homes_in(url) if status.kind in ("ok", "upgrade") else []
    if rebuild and status.kind in ("ok", "upgrade"):
        refuse_losing_homes(url, homes)
    all_homes = homes_mod.merge(homes, known)
    if status.kind == "missing":
        notify(f"ledger: no index at {path} yet; building it from the records")
    elif status.kind == "corrupt":
        notify(f"ledger: the index {path} is {status.detail}; setting it aside and rebuilding it from the records")
    tmp, summary = build_fresh(path, all_homes, progress, racy_ns)
    with dbmod.flock(dbmod.file_lock(path), exclusive=True, waiting="readers of the index to finish",
                     notify=notify):
        if status.kind == "corrupt" and path.exists():
            aside = setaside.set_aside(path)
            notify(f"ledger: kept the damaged index as {aside}")
        setaside.swap_in(tmp, path)
    summary.homes = homes if not known else all_homes
    return summary


def repair(homes: Sequence[str | os.PathLike[str]], url: str, reason: str, notify: Notify) -> None:
    """Set a damaged SQLite index aside and rebuild it (the homes it knew are kept)."""
    path = dbmod.sqlite_path(url)
    homes_abs = [os.path.abspath(os.fspath(h)) for h in homes]
    with dbmod.flock(dbmod.writer_lock(path), exclusive=True, waiting="another ledger process updating the index",
                     notify=notify):
        status = dbmod.inspect_sqlite(path)
        if status.kind == "ok" and not quick_check(path):
            return  # someone rebuilt it meanwhile
        if status.kind == "corrupt" and not (status.ours and status.regular):
            refuse_foreign(path, status, owned=False)
        all_homes = homes_mod.merge(homes_abs, homes_in(url))
        notify(f"ledger: the index {path} is damaged ({reason}); setting it aside and rebuilding it from the records")
        tmp, _summary = build_fresh(path, all_homes, None, None)
        with dbmod.flock(dbmod.file_lock(path), exclusive=True, waiting="readers of the index to finish",
                         notify=notify):
            if path.exists():
                notify(f"ledger: kept the damaged index as {setaside.set_aside(path)}")
            setaside.swap_in(tmp, path)
