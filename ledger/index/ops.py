"""Open-check-index-read: the operations commands use (`ledger index`, `runs`, `show`, `sql`).

`index_homes()` brings the index up to date with the records (creating, upgrading or
rebuilding it as needed, see ledger.index.db for the checks and locks); `reading()` gives
a connection that sees one consistent version of the index.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ledger.index import db as dbmod
from ledger.index.db import IndexError_, Notify

ProgressFactory = Callable[[], Any]  # returns a context manager yielding progress(done, total)


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


def _merge_homes(first: Sequence[str], more: Sequence[str]) -> list[str]:
    out: list[str] = []
    for h in list(first) + list(more):
        if h not in out:
            out.append(h)
    return out


def index_homes(homes: Sequence[str | os.PathLike[str]], url: str, *, rebuild: bool = False,
                notify: Notify = _quiet, progress: Callable[[int, int], None] | None = None,
                racy_ns: int | None = None, full: bool = False) -> Any:
    """Index `homes` into the database at `url`; returns an IndexSummary.

    `full` looks into every shard directory, sealed ones included (see indexer.SEAL_GRACE_NS).
    """

    from ledger.index.indexer import IndexSummary

    import time

    t0 = time.perf_counter()
    homes_abs = [os.path.abspath(os.fspath(h)) for h in homes]
    summary: IndexSummary
    if dbmod.is_sqlite(url):
        summary = _index_sqlite(homes_abs, url, rebuild, notify, progress, racy_ns, full)
    else:
        summary = _index_server(homes_abs, url, rebuild, notify, progress, racy_ns, full)
    summary.db = dbmod.redact_url(url)
    summary.seconds = time.perf_counter() - t0  # everything: checks, migrations, swap included
    return summary


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


def _index_sqlite(homes: list[str], url: str, rebuild: bool, notify: Notify, progress: Any,
                  racy_ns: int | None, full: bool = False) -> Any:
    from ledger.index.indexer import Indexer

    path = dbmod.sqlite_path(url)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with dbmod.flock(dbmod.writer_lock(path), exclusive=True):
        status = dbmod.inspect_sqlite(path)
        if status.kind == "corrupt":
            # double-check with nobody else having the file open (a concurrent checkpoint
            # could show a header ahead of the file size for an instant)
            with dbmod.flock(dbmod.file_lock(path), exclusive=True):
                status = dbmod.inspect_sqlite(path)
        if status.kind == "upgrade" and not rebuild:
            with dbmod.flock(dbmod.file_lock(path), exclusive=True):
                eng = dbmod.engine(url, mode="write")
                try:
                    with eng.connect() as conn, conn.begin():
                        dbmod.upgrade(conn)
                finally:
                    eng.dispose()
            notify(f"ledger: upgraded the index {path} from schema revision {status.revision} to {dbmod.HEAD}")
            status = dbmod.FileStatus("ok", revision=dbmod.HEAD)
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
        all_homes = _merge_homes(homes, known)
        if status.kind == "missing":
            notify(f"ledger: no index at {path} yet; building it from the records")
        elif status.kind == "corrupt":
            notify(f"ledger: the index {path} is {status.detail}; setting it aside and rebuilding it from the records")
        tmp, summary = _build_fresh(path, all_homes, progress, racy_ns)
        with dbmod.flock(dbmod.file_lock(path), exclusive=True):
            if status.kind == "corrupt" and path.exists():
                aside = dbmod.set_aside(path)
                notify(f"ledger: kept the damaged index as {aside}")
            dbmod.swap_in(tmp, path)
        summary.homes = homes if not known else all_homes
        return summary


def _index_server(homes: list[str], url: str, rebuild: bool, notify: Notify, progress: Any,
                  racy_ns: int | None, full: bool = False) -> Any:
    """PostgreSQL (or another server database): transactional DDL, an advisory lock.

    A rebuild drops and recreates ledger's tables, migrates and indexes in ONE transaction:
    other sessions keep seeing the old index until it commits. A database holding another
    application's tables, or a newer ledger's schema, is never touched automatically.
    """
    from ledger.index.indexer import Indexer

    eng = dbmod.engine(url)
    try:
        with eng.connect() as conn:
            pg = conn.dialect.name == "postgresql"
            if pg:
                conn.exec_driver_sql(f"SELECT pg_advisory_lock({dbmod.PG_LOCK_KEY})")
                conn.commit()
            try:
                with conn.begin():
                    status = dbmod.inspect_server(conn)
                if status.kind == "foreign":
                    raise IndexError_(f"the database {dbmod.redact_url(url)} is not a ledger index: {status.detail}",
                                      hint="point --db / LEDGER_DB at an empty database (ledger creates its schema)")
                if status.kind == "newer" and not rebuild:
                    raise IndexError_(f"the index {dbmod.redact_url(url)}: {status.detail}",
                                      hint="upgrade ledger (`pip install -U ledger`), or rebuild it for this "
                                           "version with `ledger index --rebuild`")
                if rebuild or status.kind == "newer":
                    known: list[str] = []
                    if status.kind == "upgrade":
                        with conn.begin():
                            dbmod.upgrade(conn)
                        status = dbmod.ServerStatus("ok", revision=dbmod.HEAD)
                    if status.kind == "ok":
                        with conn.begin():
                            known = [r[0] for r in conn.exec_driver_sql("SELECT path FROM homes ORDER BY home_id")]
                    all_homes = _merge_homes(homes, known)
                    with conn.begin():
                        if status.kind == "ok":
                            # DELETE, not DROP/TRUNCATE: those are not MVCC-safe, a reader whose
                            # snapshot predates the commit would see the new tables empty
                            dbmod.clear_index_rows(conn)
                        else:
                            dbmod.drop_index_objects(conn)
                            dbmod.upgrade(conn)
                        summary = Indexer(eng, progress=progress, single_transaction=True,
                                          racy_ns=racy_ns, full=full).index(conn, all_homes)
                    summary.rebuilt = True
                    return summary
                if status.kind in ("fresh", "upgrade"):
                    with conn.begin():
                        dbmod.upgrade(conn)
                    if status.kind == "upgrade":
                        notify(f"ledger: upgraded the index from schema revision {status.revision} to {dbmod.HEAD}")
                return Indexer(eng, progress=progress, racy_ns=racy_ns, full=full).index(conn, homes)
            finally:
                if pg:
                    if conn.in_transaction():
                        conn.rollback()
                    conn.exec_driver_sql(f"SELECT pg_advisory_unlock({dbmod.PG_LOCK_KEY})")
                    conn.commit()
    finally:
        eng.dispose()


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
        with eng.connect() as conn, conn.begin():
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
        with eng.connect() as conn, conn.begin():
            yield conn
    finally:
        eng.dispose()


def home_id(conn: Any, home: str | os.PathLike[str]) -> int | None:
    import sqlalchemy as sa

    from ledger.index.models import Home

    t = Home.__table__
    return conn.execute(sa.select(t.c.home_id).where(t.c.path == os.path.abspath(os.fspath(home)))).scalar()


# --------------------------------------------------------------------------------------
# `ledger db`


def db_status(url: str) -> dict[str, Any]:
    """{revision, head, status, detail} without changing anything."""
    out: dict[str, Any] = {"db": dbmod.redact_url(url), "revision": None, "head": dbmod.HEAD, "status": "", "detail": ""}
    if dbmod.is_sqlite(url):
        st = dbmod.inspect_sqlite(dbmod.sqlite_path(url))
        out.update(revision=st.revision, status=st.kind, detail=st.detail)
        return out
    eng = dbmod.engine(url)
    try:
        with eng.connect() as conn, conn.begin():
            st2 = dbmod.inspect_server(conn)
    finally:
        eng.dispose()
    out.update(revision=st2.revision, status=st2.kind, detail=st2.detail)
    return out


def db_upgrade(url: str) -> str:
    """Create the schema (empty index) or migrate it to head; refuse damaged or foreign ones."""
    if dbmod.is_sqlite(url):
        path = dbmod.sqlite_path(url)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
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
        with eng.connect() as conn, conn.begin():
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
    import ledger.report.models  # noqa: F401 - the report's tables share the metadata and the migrations

    opts: dict[str, Any] = {"compare_type": True}
    if not strict:
        opts["include_object"] = lambda obj, name, type_, reflected, compare_to: not (
            reflected and compare_to is None and type_ in ("table", "index")
            and (type_ == "table" or obj.table.name not in Base.metadata.tables))
    mc = MigrationContext.configure(conn, opts=opts)
    return compare_metadata(mc, Base.metadata)


def db_check(url: str) -> list[str]:
    """Everything the cheap open-check does, plus PRAGMA quick_check and the schema diff."""
    problems: list[str] = []
    st = db_status(url)
    if st["status"] not in ("ok",):
        return [f"{st['status']}: {st['detail'] or 'revision ' + str(st['revision'])}"]
    if dbmod.is_sqlite(url):
        with reading(url) as conn:
            res = [r[0] for r in conn.exec_driver_sql("PRAGMA quick_check").fetchall()]
            if res != ["ok"]:
                problems.extend(f"quick_check: {r}" for r in res[:20])
            problems.extend(f"schema differs from the models: {d}" for d in schema_diff(conn, strict=False))
        return problems
    with reading(url) as conn:
        problems.extend(f"schema differs from the models: {d}" for d in schema_diff(conn, strict=False))
    return problems
