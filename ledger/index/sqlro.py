"""Read-only SQL over the index (`ledger sql`). Read-only for real, not by convention.

SQLite: the file is opened with `mode=ro`, `PRAGMA query_only=1` is set, and an authorizer
denies every writing action *before* it runs, including the ones `query_only` and `mode=ro`
let through because they write other files (ATTACH of a new database file, VACUUM INTO,
which attaches its target) and PRAGMAs that change settings. One statement per query
(sqlite3 refuses more). A progress handler stops the query at the deadline (`timeout`) or
on Ctrl-C (SQLite itself never returns to Python while a statement runs).

PostgreSQL: the query runs on a connection whose *session user* is a reader role that can
SELECT the index's tables and views and nothing else: `ledger_reader` (LOGIN, no other
attribute or membership, created and kept in sync by ledger when the connecting user may
create roles; given a fresh random password when it cannot log in without one), or the
role the user names (`role`). `SET ROLE` / `SET SESSION AUTHORIZATION` on the owner's
connection would not do: with a superuser session, `SELECT set_config('role', 'postgres',
true), query_to_xml(...)` switches back inside one statement (tested). On that connection the transaction is READ
ONLY (switched off neither by the statement nor by `set_config`: the snapshot is taken
first), with `statement_timeout`; a statement starting with a command keyword other than
SELECT, WITH, VALUES, TABLE, EXPLAIN or SHOW is refused before it is sent; it is sent as a
prepared statement (the server refuses more than one command in it), must end with a
reading command tag, and must leave no advisory lock behind; the transaction is always
rolled back. When the connecting user cannot create roles and no role is named, the query
runs as the connecting user with the same checks (docs/sql.md says what that does not
protect).
"""

from __future__ import annotations

import re
import signal
import sqlite3
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from ledger.errors import LedgerError
from ledger.index import db as dbmod

from ledger.sqlviews import DOCUMENTED_VIEWS  # noqa: E402

HINT_VIEWS = f"the documented views ({', '.join(DOCUMENTED_VIEWS)}) are described in docs/sql.md"


DEFAULT_TIMEOUT = 300.0  # seconds; `--timeout 0` lifts the limit
READER_ROLE = "ledger_reader"
READER_COMMENT = "ledger sql: reads the ledger index; created and managed by ledger"
_SQL_LOCK_KEY = 0x4C444753  # advisory lock: one caller at a time sets the reader up and connects
_PROGRESS_STEPS = 10_000  # SQLite VM steps between deadline / Ctrl-C checks (~0.1 ms of work)
# PostgreSQL: what a query may start with, and the command tags it may end with
_READING_TAGS = frozenset({"SELECT", "EXPLAIN", "SHOW"})
_OTHER_COMMANDS = frozenset((
    "ABORT ALTER ANALYZE BEGIN CALL CHECKPOINT CLOSE CLUSTER COMMENT COMMIT COPY CREATE DEALLOCATE "
    "DECLARE DELETE DISCARD DO DROP END EXECUTE FETCH GRANT IMPORT INSERT LISTEN LOAD LOCK MERGE MOVE "
    "NOTIFY PREPARE REASSIGN REFRESH REINDEX RELEASE RESET REVOKE ROLLBACK SAVEPOINT SECURITY SET "
    "START TRUNCATE UNLISTEN UPDATE VACUUM").split())  # refused by name; other words: a syntax error
_HINT_READ = "query the index with SELECT; change run records with ledger's own commands"


class ReadOnlyViolation(LedgerError):
    """A query tried to change something; nothing was changed."""


class SQLError(LedgerError):
    """The database refused the query (its own message)."""


class QueryTimeout(LedgerError):
    """The query ran past its deadline and was stopped."""


_DENY = {
    sqlite3.SQLITE_INSERT: "INSERT", sqlite3.SQLITE_UPDATE: "UPDATE", sqlite3.SQLITE_DELETE: "DELETE",
    sqlite3.SQLITE_CREATE_INDEX: "CREATE INDEX", sqlite3.SQLITE_CREATE_TABLE: "CREATE TABLE",
    sqlite3.SQLITE_CREATE_TEMP_INDEX: "CREATE INDEX", sqlite3.SQLITE_CREATE_TEMP_TABLE: "CREATE TABLE",
    sqlite3.SQLITE_CREATE_TEMP_TRIGGER: "CREATE TRIGGER", sqlite3.SQLITE_CREATE_TEMP_VIEW: "CREATE VIEW",
    sqlite3.SQLITE_CREATE_TRIGGER: "CREATE TRIGGER", sqlite3.SQLITE_CREATE_VIEW: "CREATE VIEW",
    sqlite3.SQLITE_DROP_INDEX: "DROP INDEX", sqlite3.SQLITE_DROP_TABLE: "DROP TABLE",
    sqlite3.SQLITE_DROP_TEMP_INDEX: "DROP INDEX", sqlite3.SQLITE_DROP_TEMP_TABLE: "DROP TABLE",
    sqlite3.SQLITE_DROP_TEMP_TRIGGER: "DROP TRIGGER", sqlite3.SQLITE_DROP_TEMP_VIEW: "DROP VIEW",
    sqlite3.SQLITE_DROP_TRIGGER: "DROP TRIGGER", sqlite3.SQLITE_DROP_VIEW: "DROP VIEW",
    sqlite3.SQLITE_ALTER_TABLE: "ALTER TABLE", sqlite3.SQLITE_REINDEX: "REINDEX", sqlite3.SQLITE_ANALYZE: "ANALYZE",
    sqlite3.SQLITE_ATTACH: "ATTACH (or VACUUM)", sqlite3.SQLITE_DETACH: "DETACH",
    sqlite3.SQLITE_CREATE_VTABLE: "CREATE VIRTUAL TABLE", sqlite3.SQLITE_DROP_VTABLE: "DROP VIRTUAL TABLE",
}
# PRAGMAs that only read. Those taking a table/index name as their argument are allowed
# with it; the others only without a value (a value would set something).
_PRAGMA_WITH_ARG = frozenset({"table_info", "table_xinfo", "index_list", "index_info", "index_xinfo",
                              "foreign_key_list", "table_list", "integrity_check", "quick_check"})
_PRAGMA_READ = frozenset({"application_id", "user_version", "schema_version", "page_count", "page_size",
                          "freelist_count", "encoding", "journal_mode", "compile_options", "collation_list",
                          "database_list", "function_list", "module_list", "pragma_list", "data_version",
                          "foreign_keys", "query_only", "busy_timeout", "auto_vacuum", "synchronous"})


# functions that reach past the query's data: fts3_tokenizer('simple') returns a pointer into
# the process (and with a second argument installs one); load_extension loads code (off in
# Python's build, denied here whatever the build) (issue 32)
_DENY_FUNCTIONS = frozenset({"fts3_tokenizer", "load_extension"})

_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"})
_ROW_WRITES = frozenset({sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE})


_STATEMENTS = frozenset({"ANALYZE", "VACUUM", "REINDEX", "ATTACH", "DETACH"})  # named as written


class _Authorizer:
    """Deny writing actions; remember what was denied (for the message)."""

    def __init__(self, statement: str = "") -> None:
        self.statement = statement  # the query's leading keyword (names the refused statement)
        self.denied: list[str] = []
        self.internal: list[str] = []  # denied on SQLite's own objects (ANALYZE creates sqlite_stat1)
        self.schema_writes: list[str] = []

    @property
    def refused(self) -> str | None:
        if self.statement in _STATEMENTS and (self.denied or self.internal):
            # `VACUUM` reaches the authorizer as ATTACH, `ANALYZE` first as CREATE TABLE
            # sqlite_stat1: name the statement the user wrote
            return self.statement
        return (self.denied or self.internal or self.schema_writes or [None])[0]

    def __call__(self, action: int, arg1: Any, arg2: Any, _db: Any, _trigger: Any) -> int:
        what = _DENY.get(action)
        if action in _ROW_WRITES and str(arg1) in _SCHEMA_TABLES:
            # CREATE/DROP first announce their schema-table row change: let the authorizer
            # reach the specific action (denied below) so the message names it. SQLite itself
            # refuses direct writes to the schema table, and the connection is read-only.
            self.schema_writes.append(what or "writing")
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            name = str(arg2 or "").lower()
            if name not in _DENY_FUNCTIONS:
                return sqlite3.SQLITE_OK
            what = f"the function {name}()"
        if what is None and action == sqlite3.SQLITE_PRAGMA:
            name = str(arg1 or "").lower()
            if name in _PRAGMA_WITH_ARG or (name in _PRAGMA_READ and arg2 is None):
                return sqlite3.SQLITE_OK
            what = f"PRAGMA {name}" + ("" if arg2 is None else f" = {arg2}")
        if what is None:
            return sqlite3.SQLITE_OK
        (self.internal if str(arg1 or "").startswith("sqlite_") else self.denied).append(what)
        return sqlite3.SQLITE_DENY


def _refused(what: str) -> ReadOnlyViolation:
    return ReadOnlyViolation(f"ledger sql is read-only: {what} is not allowed; the database is unchanged",
                             hint=_HINT_READ)


def _timed_out(timeout: float | None) -> QueryTimeout:
    secs = f"{timeout:g}" if timeout else "?"
    return QueryTimeout(f"the query ran longer than {secs} s and was stopped; nothing was changed",
                        hint="narrow it (WHERE, LIMIT, fewer joins), or allow more time with "
                             "`ledger sql --timeout SECONDS` (0: no limit)")


_SPACE_OR_LINE_COMMENT = re.compile(r"\s+|--[^\n]*")
_WORD = re.compile(r"[A-Za-z_]+|\(")


def leading_keyword(sql: str) -> str:
    """The statement's first keyword (upper case), after blanks and comments; `(` for a
    parenthesised query; "" when there is none."""
    m = _WORD.match(sql, _skip_comments(sql))
    return m.group(0).upper() if m else ""


def _skip_comments(sql: str) -> int:
    """Where the statement starts, after blanks and comments."""
    i, n = 0, len(sql)
    while i < n:
        m = _SPACE_OR_LINE_COMMENT.match(sql, i)
        if m and m.end() > i:
            i = m.end()
        elif sql.startswith("/*", i):  # nested, as PostgreSQL reads them
            depth, i = 1, i + 2
            while i < n and depth:
                if sql.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif sql.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        else:
            break
    return i


@contextmanager
def query(url: str, sql: str, *, timeout: float | None = DEFAULT_TIMEOUT,
          role: str | None = None) -> Iterator[tuple[list[str], Iterator[tuple]]]:
    """Run one read-only statement; yields (column names, row iterator).

    `timeout` (seconds, None or 0 for none) bounds the whole query, fetching included:
    QueryTimeout past it. Ctrl-C stops it and raises KeyboardInterrupt. `role`
    (PostgreSQL): the login role to run it as, instead of ledger's own reader role.
    """
    if not sql[_skip_comments(sql):].strip(" \t\r\n;"):
        raise SQLError("the query is empty" + (" (only comments)" if sql.strip() else ""),
                       hint="pass a SELECT, or `-` to read it from stdin")
    if dbmod.is_sqlite(url):
        with _sqlite(url, sql, timeout) as result:
            yield result
    else:
        with _server(url, sql, timeout, role) as result:
            yield result


class _Stop:
    """Why a running SQLite statement must stop (deadline, Ctrl-C), polled by SQLite's
    progress handler: a non-zero answer makes SQLite abandon the statement."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout if timeout else None
        self.why: str | None = None

    def __call__(self) -> int:
        if self.why is None and self.deadline is not None and time.monotonic() > self.deadline:
            self.why = "timeout"
        return 1 if self.why else 0

    def raise_if_stopped(self) -> None:
        if self.why == "interrupt":
            raise KeyboardInterrupt
        if self.why == "timeout":
            raise _timed_out(self.timeout)

    @contextmanager
    def sigint(self) -> Iterator[None]:
        """While SQLite runs, Ctrl-C only sets a flag (a Python exception cannot cross
        SQLite's C code: the sqlite3 module would swallow it in the handler); the progress
        handler then stops the statement and raise_if_stopped raises KeyboardInterrupt."""
        if threading.current_thread() is not threading.main_thread() or \
                signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # e.g. a shell's background job
            yield
            return

        def on_sigint(_signum: int, _frame: Any) -> None:
            self.why = "interrupt"

        old = signal.signal(signal.SIGINT, on_sigint)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, old if old is not None else signal.default_int_handler)
        if self.why == "interrupt":  # came after SQLite's last callback
            raise KeyboardInterrupt


@contextmanager
def _sqlite(url: str, sql: str, timeout: float | None) -> Iterator[tuple[list[str], Iterator[tuple]]]:
    path = dbmod.sqlite_path(url)
    with dbmod.flock(dbmod.file_lock(path), exclusive=False):
        if not path.exists():
            raise SQLError(f"no index at {path}", hint="build it with `ledger index`")
        con = sqlite3.connect(dbmod._ro_uri(path), uri=True, isolation_level=None,
                              timeout=dbmod.BUSY_TIMEOUT_MS / 1000)
        try:
            con.execute("PRAGMA query_only = 1")
            auth = _Authorizer(leading_keyword(sql))
            con.set_authorizer(auth)
            stop = _Stop(timeout)
            con.set_progress_handler(stop, _PROGRESS_STEPS)
            try:
                with stop.sigint():
                    cur = con.execute(sql)
            except sqlite3.Error as exc:
                stop.raise_if_stopped()
                if auth.refused:
                    raise _refused(auth.refused) from None
                if "readonly" in str(exc) or "read-only" in str(exc):
                    raise _refused("writing") from None
                raise SQLError(f"SQL error: {exc}", hint=HINT_VIEWS) from None
            columns = [d[0] for d in cur.description or ()]

            def rows() -> Iterator[tuple]:
                try:
                    while True:
                        with stop.sigint():
                            chunk = cur.fetchmany(1000)
                        if not chunk:
                            return
                        yield from chunk
                except sqlite3.Error as exc:
                    stop.raise_if_stopped()
                    raise SQLError(f"SQL error: {exc}", hint=HINT_VIEWS) from None

            yield columns, rows()
        finally:
            con.close()


@contextmanager
def _server(url: str, sql: str, timeout: float | None,
            role: str | None) -> Iterator[tuple[list[str], Iterator[tuple]]]:
    import psycopg

    from ledger.index import pgconnect

    word = leading_keyword(sql)
    if word in _OTHER_COMMANDS:  # refused before anything reaches the server
        raise _refused(word)
    name, _driver = pgconnect.dialect(url)
    if name != "postgresql":
        raise SQLError(f"ledger sql supports SQLite and PostgreSQL, not {name}")
    params = pgconnect.connect_params(url)
    try:
        own = pgconnect.connect(url)
    except psycopg.Error as exc:
        raise SQLError(f"cannot connect to {dbmod.redact_url(url)}: {exc}") from None
    try:
        own.autocommit = True  # role and grant upkeep commit step by step
        reader, as_role, search_path = _reader(params, own, role)
        try:
            columns, data = _run(reader or own, sql, timeout, as_role, search_path)
        finally:
            if reader is not None:
                reader.close()
        yield columns, iter(data)
    finally:
        own.close()


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _reader(params: dict[str, Any], own: Any, named: str | None) -> tuple[Any, str | None, str | None]:
    """(connection whose session user is the reader role, that role, the owner's search_path),
    or (None, None, None) when the query runs on the owner's connection: the named role is
    the connecting user, or the connecting user may not create roles and named none."""
    import psycopg

    cur = own.cursor()
    cur.execute("SELECT current_user, r.rolsuper OR r.rolcreaterole, "
                "array_to_string(ARRAY(SELECT quote_ident(s) FROM unnest(current_schemas(false)) s), ', ') "
                "FROM pg_roles r WHERE r.rolname = current_user")
    user, may_create, search_path = cur.fetchone()
    role = named or (READER_ROLE if may_create else None)
    if role is None or role == user:
        return None, None, None
    cur.execute("SELECT pg_advisory_lock(%s)", (_SQL_LOCK_KEY,))
    try:
        try:
            if named is None:
                _ensure_reader_role(own)
            _grant_reading(own, role)
        except psycopg.errors.UndefinedObject:
            raise SQLError(f"role {role!r} does not exist",
                           hint="create it as docs/sql.md shows, or leave out --role / LEDGER_SQL_ROLE") from None
        except psycopg.Error as exc:
            raise SQLError(f"cannot prepare role {role} for ledger sql: {_message(exc)}",
                           hint="connect once as the index tables' owner, or grant the role as docs/sql.md shows") from None
        # ledger's reader first without a password (trust, peer: nothing to change on the
        # server), then with a fresh one; again if another database of this server set a
        # newer one meanwhile (the advisory lock is per database, the role per server)
        password = None
        for attempt in range(4):
            try:
                return _connect_as(params, role, password), role, search_path
            except psycopg.OperationalError as exc:
                if named is not None or attempt == 3:
                    raise SQLError(f"cannot connect as role {role} to run the query: {_message(exc)}",
                                   hint="let that role connect (pg_hba.conf; for --role a password in ~/.pgpass), "
                                        "or name another login role with --role NAME (docs/sql.md)") from None
            try:
                password = _new_password(own, role)
            except psycopg.Error as exc:
                raise SQLError(f"cannot set a password for role {role}: {_message(exc)}",
                               hint="name a login role of your own with --role NAME (docs/sql.md)") from None
        raise AssertionError("unreachable")
    finally:
        cur.execute("SELECT pg_advisory_unlock(%s)", (_SQL_LOCK_KEY,))


def _ensure_reader_role(own: Any) -> None:
    """Create ledger's reader role, or check that the existing one is still only that:
    ledger's (by its comment), with no attribute and no membership beyond LOGIN."""
    import psycopg

    cur = own.cursor()
    for _ in range(2):
        cur.execute("SELECT r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication OR r.rolbypassrls "
                    "OR EXISTS (SELECT 1 FROM pg_auth_members m WHERE m.member = r.oid), "
                    "r.rolcanlogin, shobj_description(r.oid, 'pg_authid') "
                    "FROM pg_roles r WHERE r.rolname = %s", (READER_ROLE,))
        row = cur.fetchone()
        if row is not None:
            break
        try:
            with own.transaction():
                cur.execute(f"CREATE ROLE {READER_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT "
                            "NOREPLICATION NOBYPASSRLS")
                cur.execute(f"COMMENT ON ROLE {READER_ROLE} IS '{READER_COMMENT}'")
            return
        except (psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation):
            continue  # created by a concurrent call (roles are shared by the whole server)
    if row is None or row[2] != READER_COMMENT:
        raise SQLError(f"a role named {READER_ROLE} exists that ledger did not create; ledger neither uses nor changes it",
                       hint="name the role to query as with --role NAME or LEDGER_SQL_ROLE (docs/sql.md)")
    if row[0]:
        raise SQLError(f"role {READER_ROLE} was given more than reading (a role attribute or a membership); "
                       "ledger will not run queries as it",
                       hint=f"DROP ROLE {READER_ROLE} (ledger creates it again), or name another role with --role NAME")
    if not row[1]:
        cur.execute(f"ALTER ROLE {READER_ROLE} LOGIN")


def _reading_objects() -> list[str]:
    from ledger.index.reportshape import REPORT_TABLES
    from ledger.index.tablenames import ALL_TABLES
    from ledger.sqlviews import REPORT_VIEWS, VIEWS

    return list(ALL_TABLES + VIEWS + REPORT_TABLES + REPORT_VIEWS)


def _grant_reading(own: Any, role: str) -> None:
    """SELECT on ledger's tables and views (and USAGE on their schema) for `role`, granted
    only where missing: a rebuild or a migration recreates objects without the grants."""
    cur = own.cursor()
    cur.execute("SELECT n.nspname, c.relname, has_table_privilege(%(r)s, c.oid, 'SELECT'), "
                "has_schema_privilege(%(r)s, n.oid, 'USAGE') "
                "FROM unnest(%(names)s::text[]) AS t(name) "
                "JOIN pg_class c ON c.oid = to_regclass(quote_ident(t.name)) "
                "JOIN pg_namespace n ON n.oid = c.relnamespace", {"r": role, "names": _reading_objects()})
    rows = cur.fetchall()
    schemas = sorted({nsp for nsp, _rel, _sel, usage in rows if not usage})
    tables = [(nsp, rel) for nsp, rel, sel, _usage in rows if not sel]
    if not schemas and not tables:
        return
    with own.transaction():
        for nsp in schemas:
            cur.execute(f"GRANT USAGE ON SCHEMA {_ident(nsp)} TO {_ident(role)}")
        for nsp, rel in tables:
            cur.execute(f"GRANT SELECT ON {_ident(nsp)}.{_ident(rel)} TO {_ident(role)}")


def _new_password(own: Any, role: str) -> str:
    """A fresh random password for ledger's reader role, valid for a few minutes; sent as a
    SCRAM/MD5 verifier (never in clear text, which the server's log could keep)."""
    import secrets

    import psycopg

    password = secrets.token_urlsafe(24)
    verifier = own.pgconn.encrypt_password(password.encode(), role.encode(), None).decode()
    cur = own.cursor()
    cur.execute("SELECT (now() + interval '10 minutes')::text")
    until = cur.fetchone()[0]
    for attempt in range(5):
        try:
            cur.execute(f"ALTER ROLE {_ident(role)} PASSWORD '{verifier}' VALID UNTIL '{until}'")
            return password
        except psycopg.errors.InternalError:
            if attempt == 4:  # "tuple concurrently updated": a concurrent call from another database
                raise
            time.sleep(0.05 * (attempt + 1))
    return password


def _connect_as(owner: dict[str, Any], role: str, password: str | None) -> Any:
    """The index's database, same host and options as the owner's URL (`owner`: its connect
    arguments, ledger.index.pgconnect.connect_params), as `role`."""
    import psycopg

    params = {k: v for k, v in owner.items() if k != "password"}
    params["user"] = role
    params.setdefault("connect_timeout", 10)  # the caller holds a lock meanwhile
    if password is not None:
        params["password"] = password
    return psycopg.connect(**params)


def _message(exc: Exception) -> str:
    diag = getattr(exc, "diag", None)
    primary = diag.message_primary if diag is not None else None
    return primary or str(exc).strip()


def _run(raw: Any, sql: str, timeout: float | None, role: str | None,
         search_path: str | None) -> tuple[list[str], list[tuple]]:
    """Run the statement in a READ ONLY transaction that is always rolled back."""
    import psycopg

    raw.autocommit = False
    raw.read_only = True  # every transaction of this session starts READ ONLY
    cur = raw.cursor()
    timer = None
    try:
        if search_path:  # the reader resolves names as the owner does ("$user" differs)
            cur.execute("SELECT set_config('search_path', %s, true)", (search_path,))
        # armed when the statement starts; changing the setting inside it does not disarm it
        cur.execute("SELECT set_config('statement_timeout', %s, true)", (str(int((timeout or 0) * 1000)),))
        cur.execute("SELECT 1")  # take the snapshot: the transaction can no longer be made read-write
        if timeout:  # backstop, should the server's timer not fire
            timer = threading.Timer(timeout + 5, raw.cancel)
            timer.daemon = True
            timer.start()
        cur.execute(sql, prepare=True)
        tag = (cur.statusmessage or "").split(" ", 1)[0].upper()
        columns = [d.name for d in cur.description or ()]
        data = cur.fetchall() if cur.description else []
        if tag not in _READING_TAGS:
            raise _refused(tag or "this statement")
        cur.execute("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory')")
        if cur.fetchone()[0]:
            raise _refused("taking an advisory lock")
        return columns, data
    except psycopg.errors.ReadOnlySqlTransaction as exc:
        m = re.search(r"cannot execute (.+?) in a read-only transaction", _message(exc))
        what = m.group(1) if m else _first_word(sql) or "writing"
        raise _refused("writing from a SELECT (a data-modifying WITH)" if what == "SELECT" else what) from None
    except psycopg.errors.QueryCanceled as exc:
        if "statement timeout" in _message(exc) or (timer is not None and timer.finished.is_set()):
            raise _timed_out(timeout) from None
        raise SQLError(f"SQL error: {_message(exc)}", hint=HINT_VIEWS) from None
    except psycopg.errors.InsufficientPrivilege as exc:
        if role is None:
            raise SQLError(f"SQL error: {_message(exc)}", hint=HINT_VIEWS) from None
        raise ReadOnlyViolation(f"ledger sql is read-only: {_message(exc)} (the query runs as role {role}, "
                                "which may read the index's tables and views and nothing else); the database is unchanged",
                                hint=HINT_VIEWS) from None
    except psycopg.Error as exc:
        msg = _message(exc)
        if "multiple commands" in msg:
            raise SQLError("SQL error: one statement per query", hint="run the statements one by one") from None
        raise SQLError(f"SQL error: {msg}", hint=HINT_VIEWS) from None
    finally:
        if timer is not None:
            timer.cancel()
        try:
            raw.rollback()
            if role is None:  # the owner's connection: no lock may stay (as long as it is open)
                raw.autocommit = True
                raw.execute("SELECT pg_advisory_unlock_all()")
        except psycopg.Error:
            pass


def _first_word(sql: str) -> str:
    words = sql.strip().split(None, 1)
    return words[0].upper() if words else ""


def jsonable(v: Any) -> Any:
    """orjson default: exact numbers stay numbers, bytes become hex."""
    from decimal import Decimal

    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    return str(v)
