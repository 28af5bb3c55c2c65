"""The services of `ledger db`: the index's schema revision and status, creating or migrating
it, and `ledger db check` (the cheap open-check, PRAGMA quick_check and Alembic's diff between
the models and the database).
"""

from __future__ import annotations

import os
from contextlib import ExitStack, contextmanager
from typing import Any, Iterator

from ledger.index import db as dbmod
from ledger.index.db import IndexError_
from ledger.index.serverdb import inspect_server
from ledger.index.setaside import set_aside_copies
from ledger.index.sqlitechecks import check_parent, quick_check, refuse_foreign
from ledger.index.sqlitepass import upgrade_file


def db_status(url: str) -> dict[str, Any]:
    """{revision, head, status, detail} without changing anything."""
    out: dict[str, Any] = {"db": dbmod.redact_url(url), "revision": None, "head": dbmod.HEAD, "status": "", "detail": ""}
    if dbmod.is_sqlite(url):
        path = dbmod.sqlite_path(url)
        st = dbmod.inspect_sqlite(path)
        out.update(revision=st.revision, status=st.kind, detail=st.detail,
                   set_aside=[os.fspath(p) for p in set_aside_copies(path)])
        return out
    from ledger.index.pgconnect import opened

    with opened(url) as conn:  # (the driver's connection: reading the status needs no SQLAlchemy)
        st2 = inspect_server(conn)
    out.update(revision=st2.revision, status=st2.kind, detail=st2.detail)
    return out


def db_upgrade(url: str) -> str:
    """Create the schema (empty index) or migrate it to head; refuse damaged or foreign ones."""
    if dbmod.is_sqlite(url):
        path = dbmod.sqlite_path(url)
        check_parent(path, create=True)
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
                upgrade_file(url)
            return f"index {path} upgraded from {st.revision or 'empty'} to {dbmod.HEAD}"
    eng = dbmod.engine(url)
    try:
        with dbmod.server_connection(eng, url) as conn, conn.begin():
            st2 = inspect_server(conn)
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


@contextmanager
def schema_connection(url: str, write: bool = False) -> Iterator[Any]:
    """An SQLAlchemy connection on the index inside one transaction, for what speaks
    SQLAlchemy: the schema diff of `ledger db check` (and tests written in Core). Locks and
    settings as ledger.index.connect's reading() (`write`: writing())."""
    with ExitStack() as stack:
        if dbmod.is_sqlite(url):
            path = dbmod.sqlite_path(url)
            if write:
                stack.enter_context(dbmod.flock(dbmod.writer_lock(path), exclusive=True))
            stack.enter_context(dbmod.flock(dbmod.file_lock(path), exclusive=False))
            if not write and not path.exists():
                raise IndexError_(f"no index at {path}", hint="build it with `ledger index`")
        eng = dbmod.engine(url, mode="write" if write else "read")
        stack.callback(eng.dispose)
        conn = stack.enter_context(dbmod.server_connection(eng, url) if not dbmod.is_sqlite(url) else eng.connect())
        stack.enter_context(conn.begin())
        if not write and conn.dialect.name == "postgresql":
            conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield conn


def set_aside_list(url: str) -> list[str]:
    """Damaged index copies kept next to an SQLite index (newest first; see setaside.KEEP_SET_ASIDE)."""
    if not dbmod.is_sqlite(url):
        return []
    return [os.fspath(p) for p in set_aside_copies(dbmod.sqlite_path(url))]


def db_check(url: str, owned: bool = False) -> list[str]:
    """Everything the cheap open-check does, plus PRAGMA quick_check and the schema diff.

    Damage of ledger's own index is reported, never raised: a page that cannot be read is a
    problem on the list. A file that is not ledger's (unless `owned`: the home's own index
    place) is an error, as for every other command.
    """
    problems: list[str] = []
    if dbmod.is_sqlite(url):
        path = dbmod.sqlite_path(url)
        check_parent(path)
        refuse_foreign(path, dbmod.inspect_sqlite(path), owned)
    st = db_status(url)
    if st["status"] not in ("ok",):
        return [f"{st['status']}: {st['detail'] or 'revision ' + str(st['revision'])}"]
    if dbmod.is_sqlite(url):
        damage = quick_check(dbmod.sqlite_path(url))
        problems.extend(f"quick_check: {r}" for r in damage[:20])
        if damage:
            return problems  # the schema cannot be trusted on a damaged file
        try:
            with schema_connection(url) as conn:
                problems.extend(f"schema differs from the models: {d}" for d in schema_diff(conn, strict=False))
        except Exception as exc:  # noqa: BLE001 - damage the quick check missed
            if not dbmod.is_page_damage(exc):
                raise
            problems.append(f"damaged: {getattr(exc, 'orig', None) or exc}")
        return problems
    with schema_connection(url) as conn:
        problems.extend(f"schema differs from the models: {d}" for d in schema_diff(conn, strict=False))
    return problems
