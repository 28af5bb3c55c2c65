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

