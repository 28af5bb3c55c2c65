"""Typed errors. Every LedgerError carries a hint naming the command that fixes it."""

from __future__ import annotations


class LedgerError(Exception):
    """A failure the user can act on: the CLI prints `Error: <message>` and the hint, exit 1."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.message


class RecordError(LedgerError):
    """One run record cannot be read (bad manifest, malformed line, identity mismatch...)."""

    def __init__(self, path: str, reason: str, hint: str | None = None) -> None:
        super().__init__(f"{path}: {reason}", hint or "run `ledger verify` to list damaged records")
        self.path = str(path)
        self.reason = reason


class RunNotFound(LedgerError):
    pass


class AmbiguousRun(LedgerError):
    pass


class SettlementConflict(LedgerError):
    """terminal.json already holds a different outcome; it is write-once."""



class StorageError(LedgerError):
    """The disk said no: full (ENOSPC, EDQUOT, SQLite's "database or disk is full") or
    read-only (EROFS). Nothing recorded is lost: records are written whole or not at all."""


FULL = "no space left on the disk"
# SQLite's codes for "no room": SQLITE_FULL, and SQLITE_IOERR_SHMSIZE (its -shm cannot grow:
# "disk I/O error" on a full disk)
SQLITE_FULL_CODES = frozenset({13, 4874})
READ_ONLY = "a read-only file system"


def storage_problem(exc: BaseException) -> str | None:
    """FULL or READ_ONLY when `exc` (an OSError, or a database error wrapping SQLite's) says
    the disk is full or cannot be written, else None. One rule for every command."""
    import errno

    if isinstance(exc, OSError) and exc.errno is not None:
        if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            return FULL
        if exc.errno == errno.EROFS:
            return READ_ONLY
        return None
    orig = getattr(exc, "orig", None) or exc
    if getattr(orig, "sqlite_errorcode", None) in SQLITE_FULL_CODES:
        return FULL
    low = str(orig).lower()
    if "database or disk is full" in low or "no space left on device" in low:
        return FULL
    if "read-only file system" in low:
        return READ_ONLY
    return None


def storage_error(exc: BaseException) -> StorageError | None:
    """The typed error for a failure storage_problem() recognizes (the CLI maps every
    command's through this, ledger.cli.common.handle_errors), else None."""
    what = storage_problem(exc)
    if what is None:
        return None
    where = getattr(exc, "filename", None)
    at = f" ({where})" if where else ""
    if what == FULL:
        return StorageError(f"cannot write: {what}{at}",
                            hint="free some space (`df -h` shows where) and run the command again; what was "
                                 "recorded before is kept whole, and the index is rebuilt from the records if need be")
    return StorageError(f"cannot write: {what}{at}",
                        hint="mount it read-write, or point the command at a place you may write "
                             "(--home, --db, --to)")
