"""What a database error is, whether the driver raised it (sqlite3.Error, psycopg.Error: the
one connection type, ledger.index.dbapi) or SQLAlchemy wrapped it (callers that still run
Core): one rule for both, without importing SQLAlchemy (issue 27). The messages themselves
are read by ledger.index.db.is_corruption / is_page_damage and ledger.errors.storage_problem.
"""

from __future__ import annotations

import sqlite3


def _classes(exc: BaseException) -> list[tuple[str, str]]:
    return [(k.__module__, k.__name__) for k in type(exc).__mro__]


def _wrapped(exc: BaseException) -> bool:
    """SQLAlchemy's DBAPIError (or a subclass): the driver's error is its `.orig`."""
    return ("sqlalchemy.exc", "DBAPIError") in _classes(exc)


def _from_driver(exc: BaseException) -> bool:
    """An error of sqlite3 or of psycopg (told by its module: psycopg is not imported here)."""
    return isinstance(exc, sqlite3.Error) or any(
        m == "psycopg" or m.startswith("psycopg.") for m, _n in _classes(exc))


def is_db_error(exc: BaseException) -> bool:
    """Whether the database (through its driver) raised `exc`: what SQLAlchemy's DBAPIError
    stood for."""
    return _wrapped(exc) or _from_driver(exc)


def driver_error(exc: BaseException) -> BaseException | None:
    """The driver's own exception behind `exc` (itself, or a wrapper's `.orig`), else None."""
    if _wrapped(exc):
        return getattr(exc, "orig", None) or exc
    return exc if _from_driver(exc) else None


def connection_lost(exc: BaseException) -> bool:
    """Whether a server database error means the connection is gone (unreachable, reset,
    backend terminated) rather than a statement refused: the DB-API's OperationalError or
    InterfaceError, by the driver or by SQLAlchemy's wrapper, or a wrapper that invalidated
    its connection (SQLAlchemy saw the driver's connection closed or broken)."""
    if not is_db_error(exc):
        return False
    if getattr(exc, "connection_invalidated", False):
        return True
    return any(n in ("OperationalError", "InterfaceError") for _m, n in _classes(exc))
