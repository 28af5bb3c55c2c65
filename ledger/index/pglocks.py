"""PostgreSQL advisory locks that never block a team (issue 11).

- the *schema lock* (db.PG_LOCK_KEY): shared by every index pass, exclusive for creating,
  migrating or rebuilding the schema;
- a *home lock* (HOME_NS, home_id): one pass per home at a time, so different homes index
  in parallel;
- *copy locks* (COPY_NS, hashtext(run_id)), per transaction: a run written from two homes at
  once is checked for copies one home after the other (ledger.index.copies).

Waits are polls of pg_try_advisory_lock* bounded by a timeout (a server backend is never
left waiting on a dead or stalled client), and the message names who holds the lock (every
ledger connection sets application_name).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from ledger.index.db import IndexError_
from ledger.index.dbapi import Conn, wrap

HOME_NS = 0x4C444848  # "LDHH"
COPY_NS = 0x4C444350  # "LDCP"
DEFAULT_TIMEOUT = 30.0  # seconds, `ledger index`
READER_TIMEOUT = 5.0  # seconds, a reader's pass (it answers from the index as it is)
POLL = 0.1


class LockTimeout(IndexError_):
    """A lock was not granted within the timeout; the message names its holder."""


def _holder(conn: Any, key: tuple[int, ...], xact: bool = False) -> str:
    if len(key) == 1:
        k = key[0]
        where = f"l.classid = {(k >> 32) & 0xFFFFFFFF} AND l.objid = {k & 0xFFFFFFFF} AND l.objsubid = 1"
    else:
        where = f"l.classid = {key[0]} AND l.objid = {key[1]} AND l.objsubid = 2"
    try:
        row = wrap(conn).one(
            "SELECT a.application_name, a.client_addr::text, a.state, "
            "extract(epoch FROM now() - a.state_change)::bigint, a.pid "
            f"FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' "
            f"AND l.granted AND {where} LIMIT 1")
    except Exception:  # noqa: BLE001 - naming the holder is a courtesy; pg_stat_activity may be hidden
        return "another ledger process"
    finally:
        if not xact:
            _session(conn).commit()
    if row is None:
        return "another ledger process"
    app, addr, state, secs, pid = row
    who = f"{app!r} (server process {pid}" if app else f"server process {pid} (unnamed"
    return f"{who}, from {addr or 'a local socket'}, {state or 'unknown state'} for {secs} s)"


@contextmanager
def held(conn: Any, key: tuple[int, ...], what: str, timeout: float, notify: Callable[[str], None],
         shared: bool = False, xact: bool = False) -> Iterator[None]:
    """Hold an advisory lock on `key` (one bigint or two ints) while the block runs: a session
    lock, or with `xact` one of the caller's open transaction (released at its end)."""
    args = ", ".join(str(int(k)) for k in key)
    shared_ = "_shared" if shared else ""
    try_lock = f"pg_try_advisory{'_xact' if xact else ''}_lock{shared_}"
    deadline = time.monotonic() + max(0.0, timeout)
    told = False
    while True:
        got = wrap(conn).scalar(f"SELECT {try_lock}({args})")
        if not xact:
            _session(conn).commit()
        if got:
            break
        if time.monotonic() >= deadline:
            raise LockTimeout(f"{what} is locked by {_holder(conn, key, xact)}; gave up after {timeout:g} s",
                              hint="run the command again once it is done, or raise --lock-timeout; a holder "
                                   "that stopped (a laptop asleep) keeps it until its connection ends: an admin "
                                   "can end it with SELECT pg_terminate_backend(PID)")
        if not told:
            notify(f"ledger: waiting up to {timeout:g} s for {what}, held by {_holder(conn, key, xact)}")
            told = True
        time.sleep(POLL)
    if xact:
        yield
        return
    try:
        yield
    finally:
        _session(conn).rollback()
        wrap(conn).scalar(f"SELECT pg_advisory_unlock{shared_}({args})")
        _session(conn).commit()


def lock_copies(conn: Any, run_ids: list[str], timeout: float = DEFAULT_TIMEOUT) -> None:
    """In the caller's transaction: the copy locks of these run ids (sorted: no deadlock),
    released at commit. Bounded by lock_timeout."""
    if not run_ids:
        return
    c = wrap(conn)
    c.execute(f"SET LOCAL lock_timeout = '{int(timeout * 1000)}ms'")
    c.rows(f"SELECT pg_advisory_xact_lock({COPY_NS}, hashtext(x)) FROM unnest(CAST(? AS text[])) AS x ORDER BY x",
           (sorted(run_ids),))


def _session(conn: Any) -> Any:
    """What commits or rolls back the lock's connection (an SQLAlchemy one, or the driver's
    under a Conn): a no-op outside a transaction on both."""
    return conn.raw if isinstance(conn, Conn) else conn
