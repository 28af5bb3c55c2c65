"""Open-check-index-read: the operations commands use (`ledger index`, `runs`, `show`, `sql`).

`index_homes()` brings the index up to date with the records (creating, upgrading or
rebuilding it as needed: ledger.index.sqlitepass and serverpass, see ledger.index.db for the
checks and locks); `reading()` gives a connection that sees one consistent version of the
index. `ledger db` and `ledger homes` have their own (ledger.index.dbadmin, homesadmin).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence

from ledger.errors import LedgerError
from ledger.home import HOME_HINT, ensure_home_uid, home_problem  # (one rule for every command)
from ledger.index import db as dbmod
from ledger.index.connect import reading, writing  # noqa: F401 - (the commands' connections: a Conn)
from ledger.index.db import IndexError_, Notify


def _quiet(_msg: str) -> None:
    pass


def _store_index(url: str, homes: Sequence[str]) -> bool:
    """Whether `url` is the own index of the record store holding `homes` (STORE/index/)."""
    from ledger.store.layout import index_base, is_store

    stores = {os.path.dirname(os.path.dirname(h)) for h in homes}
    return any(is_store(s) and url == dbmod.default_url(index_base(s)) for s in stores)


def _usable_homes(homes: list[str], url: str, stale_ok: bool, notify: Notify) -> list[str]:
    """The homes to index. A read never creates a home: a missing one is an error, except for
    a reader of a named database (a team index), which answers from the database alone."""
    out = []
    for h in homes:
        why = home_problem(h)
        if why is None:
            out.append(h)
        elif why == "missing" and stale_ok and url != dbmod.default_url(h):
            notify(f"ledger: no ledger home at {h}; answering from the index {dbmod.redact_url(url)} alone")
        elif why == "missing":
            from ledger.sources.logdirs import missing_home_hint

            raise IndexError_(f"no ledger home at {h}", hint=missing_home_hint())
        else:
            raise IndexError_(f"the ledger home {h} is {why}", hint=HOME_HINT)
    return out


def reader_homes(home: str | os.PathLike[str], url: str, named: bool = True, notify: Notify = _quiet) -> list[Path]:
    """The homes a reader (`runs`, `show`, `report`, `sql`) brings up to date in `url`: the
    home (a record store: every home in it). The platform's default home that nobody named
    (no --home, no $LEDGER_HOME) goes only into its own index: a database given with --db /
    $LEDGER_DB (a team's PostgreSQL, another home's index) is read as it is, and stderr says
    the default home was left out (issue 32)."""
    from ledger.store.layout import expand_homes, index_base

    if not named and url != dbmod.default_url(index_base(home)):
        if home_problem(home) is None:
            notify(f"ledger: the default home {home} was not indexed into {dbmod.redact_url(url)} (no --home "
                   f"named it); answering from that index as it is (`--home {home}` brings it up to date there)")
        return []
    return expand_homes([home])


def read_only_failure(exc: BaseException) -> str | None:
    """The reason when `exc` says the index (or its directory) cannot be written, else None:
    a read-only home, mount or role, or a full disk (issue 32: a reader answers from the index
    as it is, `ledger index` says `Error:`; ledger.errors.storage_problem)."""
    import errno

    from ledger.errors import storage_problem

    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return exc.strerror or str(exc)
    if storage_problem(exc) is not None:
        return storage_problem(exc)
    msg = str(getattr(exc, "orig", None) or exc)
    low = msg.lower()
    if any(s in low for s in ("readonly database", "read-only database", "unable to open database file",
                              "read-only file system", "permission denied", "must be owner of")):
        return msg
    return None


def index_homes(homes: Sequence[str | os.PathLike[str]], url: str, *, rebuild: bool = False,
                notify: Notify = _quiet, progress: Callable[[int, int], None] | None = None,
                racy_ns: int | None = None, full: bool = False, stale_ok: bool = False,
                lock_timeout: float | None = None, refresh_only: list[str] | None = None) -> Any:
    """Index `homes` into the database at `url`; returns an IndexSummary.

    `full` looks into every shard directory, sealed ones included (see sealing.SEAL_GRACE_NS),
    and checks every page of an SQLite index first (PRAGMA quick_check).
    `stale_ok` (read commands): a home or index that cannot be written (another user's shared
    home), or a server index whose lock is not granted within `lock_timeout` (default
    pglocks.READER_TIMEOUT for readers, DEFAULT_TIMEOUT for `ledger index`), is answered from
    the index as it is, with a warning, instead of failing.
    """
    from ledger.index import pglocks

    import time

    t0 = time.perf_counter()
    homes_abs = _usable_homes([os.path.abspath(os.fspath(h)) for h in homes], url, stale_ok, notify)
    for h in homes_abs:
        _refresh_archive(h, notify, refresh_only)
        if not stale_ok:  # (a reader writes nothing into a home: its id comes with `ledger index`)
            ensure_home_uid(h)
    if not rebuild and not full:
        # nothing changed (the usual case): said without loading the indexer (issue 10)
        from ledger.index.fresh import unchanged

        quick = unchanged(homes_abs, url)
        if quick is None and dbmod.is_sqlite(url):
            # a few new or changed run records: written without loading the indexer either
            from ledger.index.quickpass import index_small

            quick = index_small(homes_abs, url, racy_ns)
        if quick is not None:
            quick.seconds = time.perf_counter() - t0
            return quick
    from ledger.index.indexer import IndexSummary

    summary: IndexSummary
    try:
        if dbmod.is_sqlite(url):
            from ledger.index.sqlitechecks import check_parent
            from ledger.index.sqlitepass import index_sqlite

            owned = any(url == dbmod.default_url(h) for h in homes_abs) or _store_index(url, homes_abs)
            check_parent(dbmod.sqlite_path(url), create=not stale_ok)
            summary = index_sqlite(homes_abs, url, rebuild, notify, progress, racy_ns, full, owned)
        else:
            from ledger.index.serverpass import index_server

            if lock_timeout is None:
                lock_timeout = pglocks.READER_TIMEOUT if stale_ok else pglocks.DEFAULT_TIMEOUT
            summary = index_server(homes_abs, url, rebuild, notify, progress, racy_ns, full, lock_timeout)
    except pglocks.LockTimeout as exc:
        if not stale_ok:
            raise
        notify(f"ledger: {exc.message}; answering from the index as it is: it may be stale")
        summary = IndexSummary()
        summary.homes = homes_abs
    except IndexError_:
        raise
    except Exception as exc:  # noqa: BLE001 - only a failure to write is answered here
        why = read_only_failure(exc)
        if why is None:
            _raise_server_failure(exc, url)
            raise
        summary = _unwritable(url, why.strip().splitlines()[0], stale_ok, notify)
        summary.homes = homes_abs
    summary.db = dbmod.redact_url(url)
    summary.seconds = time.perf_counter() - t0  # everything: checks, migrations, swap included
    return summary


def _raise_server_failure(exc: BaseException, url: str) -> None:
    """A server database failing mid-pass (connection lost, backend terminated, a constraint
    refusing a row) is an Error naming the URL and the server's first line, never a traceback
    carrying the batch's rows. Every batch is committed with its cursors, so a pass that
    stopped resumes where it was."""
    from ledger.index.dberrors import connection_lost, driver_error

    orig = None if dbmod.is_sqlite(url) else driver_error(exc)  # (the driver's, or wrapped by SQLAlchemy)
    if orig is None:
        return
    first = (str(orig).strip().splitlines() or ["(no message)"])[0]
    lost = connection_lost(exc)
    what = "lost the connection to the index" if lost else "the index refused a write:"
    raise IndexError_(f"{what} {dbmod.redact_url(url)}{':' if lost else ''} {first}",
                      hint="check the server and run `ledger index` again: what was written is kept and the "
                           "pass resumes where it stopped" + ("" if lost else "; `ledger db check` checks the schema")
                      ) from None


IMPORT_RUNNING = "note: an import is running: figures may be incomplete"


def _refresh_archive(home: str, notify: Notify, only: list[str] | None = None) -> None:
    """Imported agent logs are brought up to date before indexing (issue 15): after the first
    `ledger import`, every reader answers with what the clients have written since (`only`:
    those logs alone, see ledger.sources.archive.refresh)."""
    if not os.path.isdir(os.path.join(home, "sources")):
        return  # (nothing was ever imported: one stat)
    from ledger.sources.archive import refresh

    try:
        refresh(Path(home), busy=lambda: notify(IMPORT_RUNNING), only=only)
    except (LedgerError, OSError) as exc:  # the archive is evidence: answer from what it holds
        why = exc.message if isinstance(exc, LedgerError) else (exc.strerror or str(exc))
        notify(f"warning: imported agent logs were not brought up to date ({why}); "
               "`ledger import` says more")


def _unwritable(url: str, why: str, stale_ok: bool, notify: Notify) -> Any:
    """The index cannot be written (a read-only home or mount, a SELECT-only database role).
    A reader answers from it as it is, saying so; `ledger index` and a reader with no usable
    index get an Error."""
    from ledger.index.indexer import IndexSummary

    from ledger.errors import FULL, storage_error

    where = dbmod.sqlite_path(url) if dbmod.is_sqlite(url) else dbmod.redact_url(url)
    full = why == FULL or "database or disk is full" in why.lower()
    if full:
        why = FULL
    disk_hint = storage_error(OSError(28, FULL)).hint if full else None  # (errno.ENOSPC)
    if not stale_ok:
        raise IndexError_(f"cannot update the index {where}: {why}",
                          hint=disk_hint or "run `ledger index` as the owner of the home / of ledger's tables; "
                                            "readers may use a read-only role (docs/sql.md, `ledger sql --role`)")
    if dbmod.is_sqlite(url) and dbmod.inspect_sqlite(dbmod.sqlite_path(url)).kind != "ok":
        raise IndexError_(f"cannot update the index {where} ({why}), and there is no usable index to read",
                          hint=disk_hint or "ask the home's owner to run `ledger index`, or pass a writable "
                                            "--db PATH to index the home into")
    notify(f"ledger: cannot update the index {where} ({why}); answering from it as it is: it may be stale")
    return IndexSummary()


def read_repairing(homes: Sequence[str | os.PathLike[str]], url: str, read: Callable[[], Any],
                   notify: Notify = _quiet) -> Any:
    """`read()`, and when it meets a damaged page of an SQLite index (which the cheap open-check
    cannot see), set the index aside, rebuild it from the records and read once more."""
    try:
        return read()
    except Exception as exc:  # noqa: BLE001 - only page damage is handled here
        if not dbmod.is_sqlite(url) or not dbmod.is_page_damage(exc):
            raise
        reason = str(getattr(exc, "orig", None) or exc)
    from ledger.index.sqlitepass import repair

    repair(homes, url, reason, notify)
    return read()


def home_id(conn: Any, home: str | os.PathLike[str]) -> int | None:
    """The index's row for this machine's `home` (ledger.index.homes), None if not indexed."""
    from ledger.index import homes as homes_mod

    return homes_mod.lookup(conn, homes_mod.locate(home, create=False))
