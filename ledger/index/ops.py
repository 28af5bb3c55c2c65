"""Open-check-index-read: the operations commands use (`ledger index`, `runs`, `show`, `sql`).

`index_homes()` brings the index up to date with the records (creating, upgrading or
rebuilding it as needed, see ledger.index.db for the checks and locks); `reading()` gives
a connection that sees one consistent version of the index.
"""

from __future__ import annotations

import os
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ledger.index import db as dbmod
from ledger.index.db import IndexError_, Notify
from ledger.errors import LedgerError

def _quiet(_msg: str) -> None:
    pass


def _homes_in(url: str) -> list[str]:
    """Homes recorded in an existing (readable) SQLite index: a rebuild keeps indexing them."""
    import sqlite3

    try:
        con = sqlite3.connect(dbmod._ro_uri(dbmod.sqlite_path(url)), uri=True, timeout=5)
        try:
            return [r[0] for r in con.execute("SELECT path FROM homes ORDER BY home_id")]
        finally:
            con.close()
    except sqlite3.Error:
        return []


def _refuse_losing_homes(url: str, homes: Sequence[str]) -> None:
    """A rebuild of an SQLite index is made from the records on this machine: it refuses
    when the index holds a home that is not here (another machine's, a missing mount),
    whose runs it would lose (issue 11)."""
    import sqlite3

    from ledger.home import machine_id

    try:
        con = sqlite3.connect(dbmod._ro_uri(dbmod.sqlite_path(url)), uri=True, timeout=5)
        try:
            cols = {r[1] for r in con.execute("PRAGMA table_info(homes)")}
            sql = "SELECT path, machine FROM homes" if "machine" in cols else "SELECT path, NULL FROM homes"
            rows = con.execute(sql).fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return
    mine = machine_id()
    away = sorted({p for p, m in rows if p not in homes and ((m is not None and m != mine)
                                                               or home_problem(p) is not None)})
    if away:
        raise IndexError_(f"the index holds {len(away)} home(s) that are not on this machine ({away[0]}"
                          + (", ..." if len(away) > 1 else "") + "); a rebuild from here would lose their runs",
                          hint="rebuild where those homes are, remove them first with `ledger homes forget PATH`, "
                               "or build a new index with --db")


def _copied_from(url: str, homes: Sequence[str]) -> list[str]:
    """The homes a home's own index holds when it holds none of `homes` on this machine: it
    was made for another home (a home copied or moved with its index.sqlite), whose runs it
    would go on reporting next to this home's (issue 32). [] when it is this home's index
    (or empty)."""
    import sqlite3

    from ledger.home import machine_id

    try:
        con = sqlite3.connect(dbmod._ro_uri(dbmod.sqlite_path(url)), uri=True, timeout=5)
        try:
            rows = con.execute("SELECT path, machine FROM homes ORDER BY home_id").fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return []
    mine = machine_id()
    reals = {os.path.realpath(h) for h in homes} | {os.path.abspath(h) for h in homes}
    if not rows or any(p in reals and m in (None, mine) for p, m in rows):
        return []
    return list(dict.fromkeys(p for p, _m in rows))


def _store_index(url: str, homes: Sequence[str]) -> bool:
    """Whether `url` is the own index of the record store holding `homes` (STORE/index/)."""
    from ledger.store import index_base, is_store

    stores = {os.path.dirname(os.path.dirname(h)) for h in homes}
    return any(is_store(s) and url == dbmod.default_url(index_base(s)) for s in stores)


def _merge_homes(first: Sequence[str], more: Sequence[str]) -> list[str]:
    out: list[str] = []
    for h in list(first) + list(more):
        if h not in out:
            out.append(h)
    return out


from ledger.home import HOME_HINT, ensure_home_uid, home_problem  # noqa: E402 - one rule for every command


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
    from ledger.store import expand_homes, index_base

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
                lock_timeout: float | None = None) -> Any:
    """Index `homes` into the database at `url`; returns an IndexSummary.

    `full` looks into every shard directory, sealed ones included (see indexer.SEAL_GRACE_NS),
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
        _refresh_archive(h, notify)
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
            owned = any(url == dbmod.default_url(h) for h in homes_abs) or _store_index(url, homes_abs)
            _check_parent(dbmod.sqlite_path(url), create=not stale_ok)
            summary = _index_sqlite(homes_abs, url, rebuild, notify, progress, racy_ns, full, owned)
        else:
            if lock_timeout is None:
                lock_timeout = pglocks.READER_TIMEOUT if stale_ok else pglocks.DEFAULT_TIMEOUT
            summary = _index_server(homes_abs, url, rebuild, notify, progress, racy_ns, full, lock_timeout)
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
    if dbmod.is_sqlite(url):
        return
    import sqlalchemy.exc as sa_exc

    if not isinstance(exc, sa_exc.DBAPIError):
        return
    first = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or ["(no message)"])[0]
    lost = isinstance(exc, (sa_exc.OperationalError, sa_exc.InterfaceError)) or exc.connection_invalidated
    what = "lost the connection to the index" if lost else "the index refused a write:"
    raise IndexError_(f"{what} {dbmod.redact_url(url)}{':' if lost else ''} {first}",
                      hint="check the server and run `ledger index` again: what was written is kept and the "
                           "pass resumes where it stopped" + ("" if lost else "; `ledger db check` checks the schema")
                      ) from None


IMPORT_RUNNING = "note: an import is running: figures may be incomplete"


def _refresh_archive(home: str, notify: Notify) -> None:
    """Imported agent logs are brought up to date before indexing (issue 15): after the first
    `ledger import`, every reader answers with what the clients have written since."""
    if not os.path.isdir(os.path.join(home, "sources")):
        return  # (nothing was ever imported: one stat)
    from ledger.sources.archive import refresh

    try:
        refresh(Path(home), busy=lambda: notify(IMPORT_RUNNING))
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


def _build_fresh(path: Path, homes: list[str], progress: Any, racy_ns: int | None, full: bool = False) -> Any:
    """Build a complete index of `homes` in a temporary file next to `path`; return (tmp, summary)."""
    from ledger.index.indexer import Indexer

    tmp = path.with_name(f"{path.name}.rebuild-{os.getpid()}")
    _remove_stale_builds(path)
    dbmod.remove_sqlite_files(tmp)
    # created 0600 before SQLite opens it (its -wal/-shm inherit the mode): nothing leaks
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    eng = dbmod.engine(f"sqlite:///{tmp}", mode="build")
    try:
        with eng.connect() as conn:
            def create_schema(c: Any) -> None:
                with c.begin():
                    dbmod.upgrade(c)

            # the schema is created once the first records are being read (see Indexer)
            summary = Indexer(eng, progress=progress, racy_ns=racy_ns, full=full,
                              prepare=create_schema).index(conn, homes)
            # outside any transaction (SQLAlchemy would begin one): the raw sqlite3 connection
            conn.connection.driver_connection.execute("PRAGMA journal_mode = WAL").fetchall()
    except BaseException:
        eng.dispose()
        dbmod.remove_sqlite_files(tmp)
        raise
    eng.dispose()
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    summary.rebuilt = True
    return tmp, summary


def _refuse_foreign(path: Path, status: Any, owned: bool) -> None:
    """Never move what is not provably ledger's (DESIGN principle 7): a directory anywhere, and
    at a place the user named, a file that carries no trace of being a ledger index."""
    if status.kind != "corrupt" or (status.ours and status.regular) or (owned and status.regular):
        return
    what = status.detail if not status.regular else f"{status.detail}, not a ledger index"
    raise IndexError_(f"cannot open the index {path}: it is {what}; nothing was changed",
                      hint="point --db / LEDGER_DB at a ledger index or at a new file "
                           "(e.g. --db ~/ledger-index.sqlite); move the file away yourself if it is unwanted")


def _check_parent(path: Path, create: bool = False) -> None:
    """The index's directory must exist: a read never creates directories outside a home.
    `create`: the commands that are asked to build an index (`ledger index`, `ledger db
    upgrade`) create it (0700), as `mkdir -p` would."""
    parent = path.parent
    if create and not parent.exists():
        parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not parent.is_dir():
        raise IndexError_(f"cannot open the index {path}: the directory {parent} does not exist",
                          hint=f"create it (`mkdir -p {parent}`) or pass another --db / LEDGER_DB")


def quick_check(path: Path) -> list[str]:
    """PRAGMA quick_check of every page (O(size)): [] when the file is sound."""
    import sqlite3

    try:
        con = sqlite3.connect(dbmod._ro_uri(path), uri=True, timeout=dbmod.BUSY_TIMEOUT_MS / 1000)
        try:
            res = [str(r[0]) for r in con.execute("PRAGMA quick_check").fetchall()]
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        return [str(exc)]
    return [] if res == ["ok"] else res


def _index_sqlite(homes: list[str], url: str, rebuild: bool, notify: Notify, progress: Any,
                  racy_ns: int | None, full: bool = False, owned: bool = True) -> Any:
    from ledger.index.indexer import Indexer

    path = dbmod.sqlite_path(url)
    _check_parent(path)
    _refuse_foreign(path, dbmod.inspect_sqlite(path), owned)  # before taking locks next to it
    with dbmod.flock(dbmod.writer_lock(path), exclusive=True, waiting="another ledger process updating the index",
                     notify=notify):
        status = dbmod.inspect_sqlite(path)
        if status.kind == "corrupt":
            # double-check with nobody else having the file open (a concurrent checkpoint
            # could show a header ahead of the file size for an instant)
            with dbmod.flock(dbmod.file_lock(path), exclusive=True, waiting="readers of the index to finish",
                             notify=notify):
                status = dbmod.inspect_sqlite(path)
        _refuse_foreign(path, status, owned)
        if status.kind == "ok" and full and not rebuild:
            damage = quick_check(path)
            if damage:
                status = dbmod.FileStatus("corrupt", f"damaged ({damage[0]})")
        if status.kind == "upgrade" and not rebuild:
            with dbmod.flock(dbmod.file_lock(path), exclusive=True, waiting="readers of the index to finish",
                             notify=notify):
                eng = dbmod.engine(url, mode="write")
                try:
                    with eng.connect() as conn, conn.begin():
                        dbmod.upgrade(conn)
                finally:
                    eng.dispose()
            notify(f"ledger: upgraded the index {path} from schema revision {status.revision} to {dbmod.HEAD}")
            status = dbmod.FileStatus("ok", revision=dbmod.HEAD)
        if status.kind == "ok" and owned and not rebuild:
            others = _copied_from(url, homes)
            if others:  # (issue 32: a home copied with its index reports itself, not the original)
                status = dbmod.FileStatus("corrupt", f"another home's index (it holds {others[0]}"
                                          + (f" and {len(others) - 1} more" if len(others) > 1 else "")
                                          + ", not this home: copied with the home, e.g. `cp -a`, or the home "
                                            "moved or mounted elsewhere)")
        if status.kind == "ok" and not rebuild:
            try:
                with dbmod.flock(dbmod.file_lock(path), exclusive=False):
                    eng = dbmod.engine(url, mode="write")
                    try:
                        with eng.connect() as conn:
                            return Indexer(eng, progress=progress, racy_ns=racy_ns, full=full).index(conn, homes)
                    finally:
                        eng.dispose()
            except Exception as exc:  # noqa: BLE001 - classified below
                import sqlalchemy.exc as sa_exc

                if not (isinstance(exc, sa_exc.DBAPIError) and dbmod.is_corruption(exc)):
                    raise
                status = dbmod.FileStatus("corrupt", f"damaged ({getattr(exc, 'orig', exc)})")
        known = _homes_in(url) if status.kind in ("ok", "upgrade") else []
        if rebuild and status.kind in ("ok", "upgrade"):
            _refuse_losing_homes(url, homes)
        all_homes = _merge_homes(homes, known)
        if status.kind == "missing":
            notify(f"ledger: no index at {path} yet; building it from the records")
        elif status.kind == "corrupt":
            notify(f"ledger: the index {path} is {status.detail}; setting it aside and rebuilding it from the records")
        tmp, summary = _build_fresh(path, all_homes, progress, racy_ns)
        with dbmod.flock(dbmod.file_lock(path), exclusive=True, waiting="readers of the index to finish",
                         notify=notify):
            if status.kind == "corrupt" and path.exists():
                aside = dbmod.set_aside(path)
                notify(f"ledger: kept the damaged index as {aside}")
            dbmod.swap_in(tmp, path)
        summary.homes = homes if not known else all_homes
        return summary


def _index_server(homes: list[str], url: str, rebuild: bool, notify: Notify, progress: Any,
                  racy_ns: int | None, full: bool = False, lock_timeout: float | None = None) -> Any:
    """PostgreSQL (or another server database): transactional DDL, advisory locks that never
    block the team (ledger.index.pglocks): the schema lock shared by every pass (exclusive to
    create, migrate or rebuild it), one lock per home, waits bounded by `lock_timeout`.

    A rebuild clears and re-indexes, in ONE transaction, only the homes this machine holds
    (other sessions keep seeing the old rows until it commits); other machines' homes are
    left as they are. A database holding another application's tables, or a newer ledger's
    schema, is never touched automatically.
    """
    import sqlalchemy as sa

    from ledger.index import homes as homes_mod
    from ledger.index import pglocks
    from ledger.index.indexer import Indexer

    timeout = pglocks.DEFAULT_TIMEOUT if lock_timeout is None else lock_timeout
    eng = dbmod.engine(url, app_name="ledger index")
    try:
        with dbmod.server_connection(eng, url) as conn:
            pg = conn.dialect.name == "postgresql"

            def schema_lock(shared: bool) -> Any:
                if not pg:
                    return nullcontext()
                return pglocks.held(conn, (dbmod.PG_LOCK_KEY,), f"the index {dbmod.redact_url(url)}", timeout,
                                    notify, shared=shared)

            def home_lock(home: str, home_id: int) -> Any:
                if not pg:
                    return nullcontext()
                # (a rebuild is one transaction: its home locks are the transaction's)
                return pglocks.held(conn, (pglocks.HOME_NS, home_id), f"the home {home} in the index", timeout,
                                    notify, xact=conn.in_transaction())

            with schema_lock(shared=True):
                with conn.begin():
                    status = dbmod.inspect_server(conn)
            if status.kind == "foreign":
                raise IndexError_(f"the database {dbmod.redact_url(url)} is not a ledger index: {status.detail}",
                                  hint="point --db / LEDGER_DB at an empty database (ledger creates its schema)")
            if status.kind == "newer" and not rebuild:
                raise IndexError_(f"the index {dbmod.redact_url(url)}: {status.detail}",
                                  hint="upgrade ledger (`pip install -U ledger`), or rebuild it for this "
                                       "version with `ledger index --rebuild`")
            if status.kind != "ok":
                with schema_lock(shared=False):
                    with conn.begin():
                        status = dbmod.inspect_server(conn)  # (another machine may have done it)
                        if status.kind == "newer":
                            if _other_machines(conn):
                                raise IndexError_(
                                    f"the index {dbmod.redact_url(url)}: {status.detail}; it holds (or may hold) "
                                    "other machines' homes, so it is not rebuilt from this one",
                                    hint="upgrade ledger on this machine (`pip install -U ledger`)")
                            dbmod.drop_index_objects(conn)
                            status = dbmod.ServerStatus("fresh")
                        if status.kind in ("fresh", "upgrade"):
                            dbmod.upgrade(conn)
                            if status.kind == "upgrade":
                                notify(f"ledger: upgraded the index from schema revision {status.revision} "
                                       f"to {dbmod.HEAD}")
            with schema_lock(shared=True):
                if rebuild:
                    with conn.begin():
                        mine = homes_mod.machine_id()
                        # this machine's homes (and rows from before 0006 whose path is here)
                        known = [r[0] for r in conn.execute(sa.text(
                            "SELECT path FROM homes WHERE machine = :m OR machine IS NULL ORDER BY home_id"),
                            {"m": mine}) if r[0] in homes or os.path.isdir(r[0])]
                    all_homes = _merge_homes(homes, known)
                    with conn.begin():
                        located = [(p, homes_mod.lookup(conn, homes_mod.locate(p, create=False)))
                                   for p in all_homes if os.path.isdir(p)]
                        ids = sorted(h for _p, h in located if h is not None)
                        for p, h in sorted(located, key=lambda x: x[1] or 0):
                            if h is not None:  # locked before any row is touched (no deadlock
                                # with a pass of the same home); held until the commit
                                home_lock(p, h).__enter__()
                        dbmod.clear_home_rows(conn, ids)
                        summary = Indexer(eng, progress=progress, single_transaction=True, racy_ns=racy_ns,
                                          full=full, home_lock=home_lock).index(conn, all_homes)
                    summary.rebuilt = True
                    return summary
                return Indexer(eng, progress=progress, racy_ns=racy_ns, full=full,
                               home_lock=home_lock).index(conn, homes)
    finally:
        eng.dispose()


def _other_machines(conn: Any) -> int:
    """How many other machines' homes a (possibly newer) index holds; -1 when it cannot tell."""
    from ledger.home import machine_id

    try:
        with conn.begin_nested():
            rows = conn.exec_driver_sql("SELECT DISTINCT machine FROM homes").fetchall()
    except Exception:  # noqa: BLE001 - a schema this ledger does not know
        return -1
    return len({r[0] for r in rows if r[0] not in (None, machine_id())})


@contextmanager
def reading(url: str) -> Iterator[Any]:
    """A connection inside one read transaction (one consistent snapshot of the index)."""
    if dbmod.is_sqlite(url):
        path = dbmod.sqlite_path(url)
        with dbmod.flock(dbmod.file_lock(path), exclusive=False):
            if not path.exists():
                raise IndexError_(f"no index at {path}", hint="build it with `ledger index`")
            eng = dbmod.engine(url, mode="read")
            try:
                with eng.connect() as conn, conn.begin():
                    yield conn
            finally:
                eng.dispose()
        return
    eng = dbmod.engine(url)
    try:
        with dbmod.server_connection(eng, url) as conn, conn.begin():
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn
    finally:
        eng.dispose()


@contextmanager
def writing(url: str) -> Iterator[Any]:
    """A write transaction on an existing index for derived data (the report's tables).

    SQLite: under the writer lock, so it queues behind index passes instead of leaning on
    the busy timeout, and the shared file lock, so a swap never happens underneath it.
    """
    if dbmod.is_sqlite(url):
        path = dbmod.sqlite_path(url)
        with dbmod.flock(dbmod.writer_lock(path), exclusive=True), \
                dbmod.flock(dbmod.file_lock(path), exclusive=False):
            eng = dbmod.engine(url, mode="write")
            try:
                with eng.connect() as conn, conn.begin():
                    yield conn
            finally:
                eng.dispose()
        return
    eng = dbmod.engine(url)
    try:
        with dbmod.server_connection(eng, url) as conn, conn.begin():
            yield conn
    finally:
        eng.dispose()


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
    repair(homes, url, reason, notify)
    return read()


def repair(homes: Sequence[str | os.PathLike[str]], url: str, reason: str, notify: Notify = _quiet) -> None:
    """Set a damaged SQLite index aside and rebuild it (the homes it knew are kept)."""
    path = dbmod.sqlite_path(url)
    homes_abs = [os.path.abspath(os.fspath(h)) for h in homes]
    with dbmod.flock(dbmod.writer_lock(path), exclusive=True, waiting="another ledger process updating the index",
                     notify=notify):
        status = dbmod.inspect_sqlite(path)
        if status.kind == "ok" and not quick_check(path):
            return  # someone rebuilt it meanwhile
        if status.kind == "corrupt" and not (status.ours and status.regular):
            _refuse_foreign(path, status, owned=False)
        all_homes = _merge_homes(homes_abs, _homes_in(url))
        notify(f"ledger: the index {path} is damaged ({reason}); setting it aside and rebuilding it from the records")
        tmp, _summary = _build_fresh(path, all_homes, None, None)
        with dbmod.flock(dbmod.file_lock(path), exclusive=True, waiting="readers of the index to finish",
                         notify=notify):
            if path.exists():
                notify(f"ledger: kept the damaged index as {dbmod.set_aside(path)}")
            dbmod.swap_in(tmp, path)


def home_id(conn: Any, home: str | os.PathLike[str]) -> int | None:
    """The index's row for this machine's `home` (ledger.index.homes), None if not indexed."""
    from ledger.index import homes as homes_mod

    return homes_mod.lookup(conn, homes_mod.locate(home, create=False))


# --------------------------------------------------------------------------------------
# `ledger db`


def db_status(url: str) -> dict[str, Any]:
    """{revision, head, status, detail} without changing anything."""
    out: dict[str, Any] = {"db": dbmod.redact_url(url), "revision": None, "head": dbmod.HEAD, "status": "", "detail": ""}
    if dbmod.is_sqlite(url):
        path = dbmod.sqlite_path(url)
        st = dbmod.inspect_sqlite(path)
        out.update(revision=st.revision, status=st.kind, detail=st.detail,
                   set_aside=[os.fspath(p) for p in dbmod.set_aside_copies(path)])
        return out
    eng = dbmod.engine(url)
    try:
        with dbmod.server_connection(eng, url) as conn, conn.begin():
            st2 = dbmod.inspect_server(conn)
    finally:
        eng.dispose()
    out.update(revision=st2.revision, status=st2.kind, detail=st2.detail)
    return out


def db_upgrade(url: str) -> str:
    """Create the schema (empty index) or migrate it to head; refuse damaged or foreign ones."""
    if dbmod.is_sqlite(url):
        path = dbmod.sqlite_path(url)
        _check_parent(path, create=True)
        first = dbmod.inspect_sqlite(path)
        if first.kind == "corrupt":  # before any lock file is created next to it
            raise IndexError_(f"cannot open the index {path}: it is {first.detail}",
                              hint="rebuild it with `ledger index --rebuild` (a file that is not ledger's "
                                   "is never touched: pass another --db)")
        with dbmod.flock(dbmod.writer_lock(path), exclusive=True):
            st = dbmod.inspect_sqlite(path)
            if st.kind == "ok":
                return f"index {path} is at head ({dbmod.HEAD})"
            if st.kind == "corrupt":
                raise IndexError_(f"the index {path} is {st.detail}", hint="rebuild it with `ledger index --rebuild`")
            with dbmod.flock(dbmod.file_lock(path), exclusive=True):
                if st.kind == "missing":
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
                eng = dbmod.engine(url, mode="write")
                try:
                    with eng.connect() as conn, conn.begin():
                        dbmod.upgrade(conn)
                finally:
                    eng.dispose()
            return f"index {path} upgraded from {st.revision or 'empty'} to {dbmod.HEAD}"
    eng = dbmod.engine(url)
    try:
        with dbmod.server_connection(eng, url) as conn, conn.begin():
            st2 = dbmod.inspect_server(conn)
            if st2.kind == "ok":
                return f"index {dbmod.redact_url(url)} is at head ({dbmod.HEAD})"
            if st2.kind in ("foreign", "newer"):
                raise IndexError_(f"the database {dbmod.redact_url(url)}: {st2.detail}",
                                  hint="point --db at an empty database, or `ledger index --rebuild`")
            dbmod.upgrade(conn)
            return f"index {dbmod.redact_url(url)} upgraded from {st2.revision or 'empty'} to {dbmod.HEAD}"
    finally:
        eng.dispose()


def schema_diff(conn: Any, strict: bool = True) -> list[Any]:
    """Alembic autogenerate's diff between the models and the database (empty when they agree).

    Not `strict`: tables in the database that no imported model describes (another
    package's, e.g. the report's, when its models are not loaded) are not reported.
    """
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from ledger.index.models import Base

    opts: dict[str, Any] = {"compare_type": True}
    if not strict:
        opts["include_object"] = lambda obj, name, type_, reflected, compare_to: not (
            reflected and compare_to is None and type_ in ("table", "index")
            and (type_ == "table" or obj.table.name not in Base.metadata.tables))
    mc = MigrationContext.configure(conn, opts=opts)
    return compare_metadata(mc, Base.metadata)


def set_aside_list(url: str) -> list[str]:
    """Damaged index copies kept next to an SQLite index (newest first; see db.KEEP_SET_ASIDE)."""
    if not dbmod.is_sqlite(url):
        return []
    return [os.fspath(p) for p in dbmod.set_aside_copies(dbmod.sqlite_path(url))]


def db_check(url: str, owned: bool = False) -> list[str]:
    """Everything the cheap open-check does, plus PRAGMA quick_check and the schema diff.

    Damage of ledger's own index is reported, never raised: a page that cannot be read is a
    problem on the list. A file that is not ledger's (unless `owned`: the home's own index
    place) is an error, as for every other command.
    """
    problems: list[str] = []
    if dbmod.is_sqlite(url):
        path = dbmod.sqlite_path(url)
        _check_parent(path)
        _refuse_foreign(path, dbmod.inspect_sqlite(path), owned)
    st = db_status(url)
    if st["status"] not in ("ok",):
        return [f"{st['status']}: {st['detail'] or 'revision ' + str(st['revision'])}"]
    if dbmod.is_sqlite(url):
        damage = quick_check(dbmod.sqlite_path(url))
        problems.extend(f"quick_check: {r}" for r in damage[:20])
        if damage:
            return problems  # the schema cannot be trusted on a damaged file
        try:
            with reading(url) as conn:
                problems.extend(f"schema differs from the models: {d}" for d in schema_diff(conn, strict=False))
        except Exception as exc:  # noqa: BLE001 - damage the quick check missed
            if not dbmod.is_page_damage(exc):
                raise
            problems.append(f"damaged: {getattr(exc, 'orig', None) or exc}")
        return problems
    with reading(url) as conn:
        problems.extend(f"schema differs from the models: {d}" for d in schema_diff(conn, strict=False))
    return problems


# --------------------------------------------------------------------------------------
# `ledger homes`


def homes_list(url: str) -> list[dict[str, Any]]:
    from ledger.index import homes as homes_mod

    with reading(url) as conn:
        return homes_mod.listing(conn)


def homes_forget(url: str, selector: str, notify: Notify = _quiet) -> dict[str, Any]:
    """Remove the home `selector` names (one row) from the index: {id, home_id, path, runs}."""
    from ledger.index import homes as homes_mod
    from ledger.index import pglocks

    try:
        return _forget(url, selector, notify)
    except IndexError_:
        raise
    except Exception as exc:  # noqa: BLE001 - only a failure to write is answered here
        why = read_only_failure(exc)
        if why is None:
            raise
        raise IndexError_(f"cannot change the index {dbmod.redact_url(url)}: {why.strip().splitlines()[0]}",
                          hint="run `ledger homes forget` as the owner of ledger's tables") from None


def _forget(url: str, selector: str, notify: Notify) -> dict[str, Any]:
    from ledger.index import homes as homes_mod
    from ledger.index import pglocks

    with writing(url) as conn:
        ids = homes_mod.select_rows(conn, selector)
        if not ids:
            raise IndexError_(f"no home {selector!r} in the index {dbmod.redact_url(url)}",
                              hint="`ledger homes list` shows its homes (forget one by its id, home id or path)")
        if len(ids) > 1:
            raise IndexError_(f"{selector!r} names {len(ids)} homes of the index (ids {', '.join(map(str, ids))})",
                              hint="forget one by its id from `ledger homes list`")
        row = next(h for h in homes_mod.listing(conn) if h["id"] == ids[0])
        if conn.dialect.name == "postgresql":  # (not while a pass of that home is writing)
            with pglocks.held(conn, (pglocks.HOME_NS, ids[0]), f"the home {row['path']} in the index",
                              pglocks.DEFAULT_TIMEOUT, notify, xact=True):
                runs = homes_mod.forget(conn, ids[0])
        else:
            runs = homes_mod.forget(conn, ids[0])
    return {"id": ids[0], "home_id": row["home_id"], "machine": row["machine"], "path": row["path"], "runs": runs}
