"""Where the index lives, how it is opened, checked, migrated, locked and swapped.

Default: SQLite at `$LEDGER_HOME/index.sqlite` in WAL mode; any SQLAlchemy URL via `--db` /
`LEDGER_DB` (PostgreSQL: `postgresql+psycopg://...`).

SQLite files and locks (all next to the database):

- `index.sqlite.lock` (the *file lock*): every ledger process that has the database open
  holds it shared; replacing the file (rebuild, set-aside of a corrupt file) holds it
  exclusive, so nobody ever has the old file open while it is moved (WAL side files are
  per path: a swap under an open connection would mix two databases).
- `index.sqlite.writer.lock` (the *writer lock*): one index pass (or rebuild) at a time;
  taken before the file lock. Two `ledger index` processes queue here instead of failing
  with "database is locked"; SQLite's busy_timeout covers the rest (e.g. a reader's
  checkpoint), and writers use `BEGIN IMMEDIATE`.

Opening checks the file cheaply (no full scan): header magic, page size, the in-header
page count against the file size (a truncated file), `PRAGMA application_id`, the
`ledger_meta` application row and the Alembic revision. A missing, empty, truncated,
garbage, foreign or unknown-revision file is moved aside as `index.sqlite.corrupt-<UTC>`
(with its -wal) and rebuilt from the records into `index.sqlite.rebuild-<pid>`, then
swapped in with `os.replace` under the exclusive file lock (ledger.index.setaside): readers
see the old or the new index, never a half-built one. A known older revision is upgraded in
place (a server database's checks: ledger.index.serverdb).

This module imports SQLAlchemy lazily (only `engine()` and the migration helpers need it)
so the cheap checks cost nothing at import time.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import quote

from ledger.errors import LedgerError
from ledger.plainclass import Plain

APPLICATION = "ledger-index"
PAGE_SIZE = 16384  # of an index built by ledger (SQLite's default is 4096)
APPLICATION_ID = 0x4C444752  # "LDGR" in the SQLite header (PRAGMA application_id)
SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 60_000
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


_REVISION = r"^revision\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]"


def _scripts() -> list[Path]:
    return sorted(f for f in (MIGRATIONS_DIR / "versions").glob("*.py") if not f.name.startswith("__"))


def _scan_revisions() -> tuple[str, tuple[str, ...]]:
    """(head, all revisions) read from the version scripts without importing Alembic.
    tests/test_migrations.py checks both agree with Alembic's own ScriptDirectory."""
    import re

    pat_down = re.compile(r"^down_revision\s*(?::[^=]*)?=\s*(None|['\"]([^'\"]+)['\"])", re.M)
    revs: dict[str, str | None] = {}
    for f in _scripts():
        text = f.read_text()
        m, d = re.search(_REVISION, text, re.M), pat_down.search(text)
        if m:
            revs[m.group(1)] = d.group(2) if d else None
    parents = {v for v in revs.values() if v}
    heads = sorted(r for r in revs if r not in parents)
    return (heads[0] if len(heads) == 1 else ""), tuple(sorted(revs))


def _head() -> str:
    """The newest revision: the last version script's (they are numbered in order), one file
    read, not all of them (every warm read asks; test_migrations checks it is the head)."""
    import re

    scripts = _scripts()
    m = re.search(_REVISION, scripts[-1].read_text(), re.M) if scripts else None
    return m.group(1) if m else ""


_KNOWN: tuple[str, ...] | None = None


def known_revisions() -> tuple[str, ...]:
    """Every revision this ledger knows (asked only of an index not at HEAD)."""
    global _KNOWN
    if _KNOWN is None:
        _KNOWN = _scan_revisions()[1]
    return _KNOWN


HEAD = _head()  # newest revision

Notify = Callable[[str], None]


class IndexError_(LedgerError):
    """The index cannot be used (and will not be repaired automatically)."""


def default_url(home: str | os.PathLike[str]) -> str:
    return f"sqlite:///{os.path.join(os.path.abspath(os.fspath(home)), 'index.sqlite')}"


# Schemes ledger can keep an index in. A bare `postgresql://` means psycopg 3 here (the
# driver ledger installs); SQLAlchemy alone would pick psycopg2, which is not installed.
SERVER_DRIVERS = {"postgresql": "psycopg", "postgres": "psycopg"}
URL_HINT = ("pass --db a path (e.g. --db ~/ledger/index.sqlite), sqlite:////absolute/path.sqlite, "
            "or postgresql+psycopg://user@host/db")


def normalize_url(value: str) -> str:
    """What a person typed for `--db` / `LEDGER_DB` as an SQLAlchemy URL.

    A bare path is an SQLite file (people type paths); `postgresql://` uses psycopg 3.
    Anything ledger cannot keep an index in is refused here, before anything is opened.
    """
    if not value.strip():
        raise IndexError_("cannot open the index: --db / LEDGER_DB is empty", hint=URL_HINT)
    if value == ":memory:":
        raise IndexError_("cannot open the index :memory:: an in-memory SQLite index cannot be kept",
                          hint=URL_HINT)
    if "://" not in value:
        if "\x00" in value:
            raise IndexError_("cannot open the index: the path contains a NUL byte", hint=URL_HINT)
        return "sqlite:///" + os.path.abspath(os.path.expanduser(value)) + ("/" if value.endswith("/") else "")
    scheme, rest = value.split("://", 1)
    dialect, _, driver = scheme.partition("+")
    if dialect == "sqlite":
        if driver and driver != "pysqlite":
            raise IndexError_(f"cannot open the index {value}: SQLite driver {driver!r} is not supported",
                              hint="use sqlite:///PATH")
        if rest.startswith("/~"):  # sqlite:///~/x: a home-relative path, as a shell would expand it
            rest = "/" + os.path.expanduser(rest[1:])
        return "sqlite://" + rest
    if dialect in SERVER_DRIVERS:
        return f"postgresql+{driver or SERVER_DRIVERS[dialect]}://{rest}"
    raise IndexError_(f"cannot open the index {redact_url(value)}: unsupported database {dialect!r} "
                      "(ledger keeps its index in SQLite or PostgreSQL)", hint=URL_HINT)


def resolve_url(home: str | os.PathLike[str], db: str | None = None,
                env: dict[str, str] | os._Environ[str] | None = None) -> str:
    """`--db`, else `$LEDGER_DB`, else SQLite in the (first) home; normalized (see normalize_url)."""
    env = os.environ if env is None else env
    named = db or env.get("LEDGER_DB")
    return normalize_url(named) if named else default_url(home)


def is_sqlite(url: str) -> bool:
    return url.split(":", 1)[0].split("+", 1)[0] == "sqlite"


def sqlite_path(url: str) -> Path:
    """The file of a `sqlite:///...` URL (in-memory databases are refused: nothing to keep)."""
    rest = url.split(":", 1)[1]
    if not rest.startswith("///"):
        raise IndexError_(f"cannot open the index {url}: expected sqlite:///PATH", hint=URL_HINT)
    path = rest[3:].split("?", 1)[0]
    if not path or path == ":memory:":
        raise IndexError_("cannot open the index: an in-memory SQLite index cannot be kept", hint=URL_HINT)
    if path.endswith("/"):
        # a trailing slash names a directory: never an index file, never created or moved
        raise IndexError_(f"cannot open the index {path}: the path names a directory, not an index file",
                          hint=URL_HINT)
    return Path(os.path.abspath(path))


def redact_url(url: str) -> str:
    """The URL without its password (for messages and --json summaries)."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest.split("/", 1)[0]:
        return url
    creds, host = rest.split("@", 1)
    if ":" in creds:
        creds = creds.split(":", 1)[0] + ":***"
    return f"{scheme}://{creds}@{host}"


# --------------------------------------------------------------------------------------
# locks


@contextmanager
def flock(path: Path, exclusive: bool, waiting: str | None = None, notify: Callable[[str], None] | None = None,
          ) -> Iterator[None]:
    """Hold an flock on `path` (created 0600). When another process holds it, `notify` is told
    once what we wait for (`waiting`), so a queued command never hangs silently.

    A lock file that cannot be created (a read-only home) is opened read-only (flock works on
    any descriptor); when it does not exist at all there is no writer to wait for.
    """
    fd: int | None = None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            pass
    if fd is None:
        yield
        return
    try:
        op = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
        except BlockingIOError:
            if notify is not None and waiting:
                notify(f"ledger: waiting for {waiting} (lock {path})")
            fcntl.flock(fd, op)
        yield
    finally:
        os.close(fd)  # releases the lock


def file_lock(db: Path) -> Path:
    return db.with_name(db.name + ".lock")


def writer_lock(db: Path) -> Path:
    return db.with_name(db.name + ".writer.lock")


# --------------------------------------------------------------------------------------
# cheap checks of an SQLite file


class FileStatus(Plain):
    """What the cheap open-check found (a dataclass written out: ledger.plainclass, no
    `dataclasses` import on a warm read). `kind`: ok | missing | upgrade | corrupt. `ours`:
    provably ledger's: missing, empty, or carrying ledger's application_id; only such a file
    may be set aside when the user named it; a directory or device never is."""

    __slots__ = ("kind", "detail", "revision", "ours", "regular")

    def __init__(self, kind: str, detail: str = "", revision: str | None = None, ours: bool = True,
                 regular: bool = True) -> None:
        self.kind = kind
        self.detail = detail
        self.revision = revision
        self.ours = ours
        self.regular = regular


def _ro_uri(path: Path) -> str:
    """A read-only SQLite URI. In a directory nobody may write (a read-only mount, another
    user's home) SQLite cannot create the WAL index (-shm) a WAL database needs to be read;
    there, with no WAL content pending, the file is opened as immutable (nobody can change it)."""
    uri = f"file:{quote(os.fspath(path))}?mode=ro"
    if not os.access(path.parent, os.W_OK) or disk_full(path.parent):
        # (a full disk, issue 32: SQLite cannot grow the -shm either, SQLITE_IOERR_SHMSIZE)
        try:
            pending = os.path.getsize(os.fspath(path) + "-wal") > 0
        except OSError:
            pending = False
        if not pending:
            uri += "&immutable=1"
    return uri


FULL_BELOW = 1 << 20  # bytes free under which a disk counts as full (a -shm grows by 32 KiB)


def disk_full(directory: str | os.PathLike[str]) -> bool:
    """Whether the file system holding `directory` has (almost) no room left (statvfs)."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < FULL_BELOW


def is_full(exc: BaseException) -> bool:
    """True when an SQLite error (raw or through SQLAlchemy) means the disk is full: never
    damage to set aside (issue 32; the rule: ledger.errors.storage_problem)."""
    from ledger.errors import FULL, storage_problem

    return not isinstance(exc, OSError) and storage_problem(exc) == FULL


def inspect_sqlite(path: Path) -> FileStatus:
    """Classify the index file without a full scan (a few hundred bytes + two tiny queries)."""
    import stat as stat_mod

    try:
        st = os.stat(path)
    except FileNotFoundError:
        return FileStatus("missing", "missing")
    except OSError as exc:
        return FileStatus("corrupt", f"unreadable ({exc.strerror})", ours=False, regular=False)
    if stat_mod.S_ISDIR(st.st_mode):
        return FileStatus("corrupt", "a directory, not an index file", ours=False, regular=False)
    if not stat_mod.S_ISREG(st.st_mode):
        return FileStatus("corrupt", "not a regular file", ours=False, regular=False)
    size = st.st_size
    if size == 0:
        return FileStatus("corrupt", "empty (0 bytes)")
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError as exc:
        return FileStatus("corrupt", f"unreadable ({exc.strerror})", ours=False)
    ours = len(head) >= 72 and int.from_bytes(head[68:72], "big") == APPLICATION_ID
    if not head.startswith(SQLITE_MAGIC):
        return FileStatus("corrupt", "not an SQLite database (bad file header)", ours=ours)
    if len(head) < 100:
        return FileStatus("corrupt", f"truncated ({size} bytes)", ours=ours)
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return FileStatus("corrupt", "damaged (bad page size in the header)", ours=ours)
    app_id = int.from_bytes(head[68:72], "big")
    if app_id != APPLICATION_ID:
        return FileStatus("corrupt", f"another application's SQLite database (application_id {app_id:#x})",
                          ours=False)
    npages = int.from_bytes(head[28:32], "big")
    if head[24:28] == head[92:96] and npages and size < npages * page_size:
        return FileStatus("corrupt", f"truncated ({size} of {npages * page_size} bytes)")
    if size % page_size:
        return FileStatus("corrupt", f"truncated ({size} bytes is not a whole number of pages)")
    try:
        con = sqlite3.connect(_ro_uri(path), uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            app = con.execute("SELECT value FROM ledger_meta WHERE key = 'application'").fetchone()
            revs = [r[0] for r in con.execute("SELECT version_num FROM alembic_version")]
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        if is_full(exc):  # no room to read it in (its -shm): the file is not damaged
            import errno

            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(path)) from None
        return FileStatus("corrupt", f"unreadable ({exc})")
    if app is None or app[0] != APPLICATION:
        return FileStatus("corrupt", "not a ledger index (no ledger_meta application row)")
    if len(revs) != 1:
        return FileStatus("corrupt", f"at no single schema revision ({revs})")
    rev = revs[0]
    if rev == HEAD:
        return FileStatus("ok", revision=rev)
    if rev in known_revisions():
        return FileStatus("upgrade", f"at older schema revision {rev}", revision=rev)
    return FileStatus("corrupt", f"at unknown schema revision {rev!r} (this ledger knows up to {HEAD})",
                      revision=rev)


def is_corruption(exc: BaseException) -> bool:
    """True for SQLite errors that mean the file itself is damaged (or is not our schema)."""
    msg = str(getattr(exc, "orig", None) or exc).lower()
    return is_page_damage(exc) or "no such table" in msg


def is_page_damage(exc: BaseException) -> bool:
    """True for SQLite errors that only a damaged file gives (never a mistyped query, never a
    full disk)."""
    if is_full(exc):
        return False
    msg = str(getattr(exc, "orig", None) or exc).lower()
    return any(s in msg for s in ("malformed", "not a database", "file is encrypted", "disk i/o error",
                                  "database corrupt"))


# --------------------------------------------------------------------------------------
# engines


def engine(url: str, mode: str = "write", app_name: str | None = None) -> Any:
    """An SQLAlchemy engine. `mode`: write (BEGIN IMMEDIATE, WAL), read, or build (a temp file).

    SQLite connections get busy_timeout, WAL + synchronous=NORMAL; transactions are begun
    by us (`BEGIN IMMEDIATE` for writers) instead of by the sqlite3 module.
    """
    import sqlalchemy as sa
    from sqlalchemy import event

    if not is_sqlite(url):
        try:
            args = {}
            if app_name and url.startswith("postgresql"):
                # named in pg_stat_activity: a lock's waiters are told who holds it (pglocks)
                import socket

                args["application_name"] = f"{app_name} {socket.gethostname()} pid {os.getpid()}"[:63]
            return sa.create_engine(url, pool_pre_ping=False, connect_args=args)
        except ImportError as exc:
            raise IndexError_(f"cannot open the index {redact_url(url)}: its driver is not installed "
                              f"({exc.name or exc})",
                              hint="use postgresql+psycopg://user@host/db (psycopg 3 comes with ledger)") from None
        except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ValueError) as exc:
            raise IndexError_(f"cannot open the index {redact_url(url)}: {exc}", hint=URL_HINT) from None
    path = sqlite_path(url)
    if mode == "read":
        eng = sa.create_engine("sqlite://", creator=lambda: sqlite3.connect(
            _ro_uri(path), uri=True, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False))
    else:
        eng = sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(eng, "connect")
    def _on_connect(dbapi_conn: Any, _rec: Any) -> None:
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (see _on_begin)
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if mode == "build":
            # a fresh file: 16 KiB pages (bulk inserts into the indexed tables ~25% cheaper than
            # with 4 KiB; an existing index keeps its page size until it is rebuilt)
            cur.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            cur.execute("PRAGMA journal_mode = MEMORY")
            cur.execute("PRAGMA synchronous = OFF")
        elif mode == "write":
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = NORMAL")
        cur.close()

    @event.listens_for(eng, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN" if mode == "read" else "BEGIN IMMEDIATE")

    return eng


@contextmanager
def server_connection(eng: Any, url: str) -> Iterator[Any]:
    """`eng.connect()` with connection failures (unreachable, no such database or role, bad
    password) as an IndexError_ naming the URL without its password."""
    import sqlalchemy as sa

    try:
        conn = eng.connect()
    except sa.exc.DBAPIError as exc:
        raise cannot_connect(url, getattr(exc, "orig", exc)) from None
    with conn:
        yield conn


def cannot_connect(url: str, exc: BaseException) -> IndexError_:
    """The error for a server that refused the connection (`exc`: the driver's error)."""
    reason = str(exc).strip().splitlines()
    return IndexError_(f"cannot open the index {redact_url(url)}: {' '.join(r.strip() for r in reason)}",
                       hint="check that the server runs and the URL's host, port, database, user and "
                            "password are right (--db / LEDGER_DB)")


def alembic_config(url: str | None = None, connection: Any = None) -> Any:
    """An Alembic Config built in code (no alembic.ini), pointing at the packaged migrations."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", os.fspath(MIGRATIONS_DIR))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def upgrade(conn: Any, target: str = "head") -> None:
    """Apply migrations up to `target` on `conn`, inside the caller's transaction."""
    from alembic import command

    command.upgrade(alembic_config(connection=conn), target)


@contextmanager
def migrating(raw: Any) -> Iterator[Any]:
    """An SQLAlchemy connection over the driver connection `raw` (sqlite3 or psycopg, outside
    a transaction) inside one transaction (BEGIN IMMEDIATE on SQLite), committed when the
    block ends: a migration's, and its checks'. The runtime's connections are DB-API ones;
    SQLAlchemy and Alembic are the schema's, over the same connection while it changes.
    `raw` stays open, as it was."""
    import sqlalchemy as sa
    from sqlalchemy import event
    from sqlalchemy.pool import StaticPool

    lite = isinstance(raw, sqlite3.Connection)
    # (no reset on return: the pool would roll back or close what is the caller's)
    eng = sa.create_engine("sqlite://" if lite else "postgresql+psycopg://", creator=lambda: raw,
                           poolclass=StaticPool, pool_reset_on_return=None)
    autocommit = None
    if lite:
        @event.listens_for(eng, "connect")
        def _on_connect(dbapi_conn: Any, _rec: Any) -> None:
            dbapi_conn.isolation_level = None  # (as opened: the transaction is begun below)

        @event.listens_for(eng, "begin")
        def _on_begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        autocommit, raw.autocommit = raw.autocommit, False  # (SQLAlchemy's commit is the driver's)
    conn = eng.connect()
    try:
        with conn.begin():
            yield conn
    finally:
        conn.close()  # (not eng.dispose(): that closes `raw`)
        if autocommit is not None and not raw.closed:
            raw.autocommit = autocommit


def upgrade_sqlite(raw: sqlite3.Connection) -> None:
    """Migrate the SQLite database on `raw` to head in one transaction (see migrating())."""
    with migrating(raw) as conn:
        upgrade(conn)


def script_revisions() -> tuple[list[str], list[str]]:
    """(heads, all revisions) of the migration scripts (imports Alembic)."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    return list(script.get_heads()), [s.revision for s in script.walk_revisions()]


def current_revision(conn: Any) -> str | None:
    import sqlalchemy as sa

    insp = sa.inspect(conn)
    if not insp.has_table("alembic_version"):
        return None
    rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").fetchall()
    return rows[0][0] if len(rows) == 1 else None


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def monotonic() -> float:
    return time.perf_counter()
