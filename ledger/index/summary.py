"""The summary of an index pass, one class for every pass that makes one (no SQLAlchemy:
the warm path prints it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ledger.plainclass import Plain

if TYPE_CHECKING:
    from ledger.records.model import ScanProblem


class IndexSummary(Plain):
    """What one `ledger index` did (printed as one line, or as JSON with --json): the full
    pass's (ledger.index.indexer), the small pass's and the freshness check's (ledger.index
    .quickpass, .fresh) alike. `absent`: homes named but not here (kept as they are, issue
    11); `copies`: runs already counted from another home (same run id and manifest);
    `sessions_new` / `sessions_updated`: imported sessions (ledger.index.logsource) written for
    the first time / again (their logs grew). A dataclass, written out (ledger.plainclass: no
    dataclasses import on the warm path)."""

    __slots__ = ("db", "homes", "new", "updated", "unchanged", "removed", "rewritten", "records_read", "skipped",
                 "rebuilt", "seconds", "absent", "copies", "sessions_new", "sessions_updated")

    def __init__(self, db: str = "", homes: list[str] | None = None, new: int = 0, updated: int = 0,
                 unchanged: int = 0, removed: int = 0, rewritten: int = 0, records_read: int = 0,
                 skipped: list[ScanProblem] | None = None, rebuilt: bool = False, seconds: float = 0.0,
                 absent: list[str] | None = None, copies: int = 0, sessions_new: int = 0,
                 sessions_updated: int = 0) -> None:
        self.db = db
        self.homes: list[str] = [] if homes is None else homes
        self.new = new
        self.updated = updated
        self.unchanged = unchanged
        self.removed = removed
        self.rewritten = rewritten
        self.records_read = records_read
        self.skipped: list[ScanProblem] = [] if skipped is None else skipped
        self.rebuilt = rebuilt
        self.seconds = seconds
        self.absent: list[str] = [] if absent is None else absent
        self.copies = copies
        self.sessions_new = sessions_new
        self.sessions_updated = sessions_updated

    def to_dict(self) -> dict[str, Any]:
        return {
            "db": self.db, "homes": self.homes, "new": self.new, "updated": self.updated,
            "unchanged": self.unchanged, "removed": self.removed, "rewritten": self.rewritten,
            "records_read": self.records_read,
            "skipped": [p.to_dict() for p in self.skipped], "rebuilt": self.rebuilt,
            "seconds": round(self.seconds, 3), "absent": self.absent, "copies": self.copies,
            "sessions_new": self.sessions_new, "sessions_updated": self.sessions_updated,
        }

    def line(self) -> str:
        return summary_line(self)


def summary_line(s: Any) -> str:
    """`ledger index`'s one line: the run records, then the
    imported sessions (re)indexed by the pass, when there were any."""
    skipped = f"{len(s.skipped)} skipped (damaged)" if s.skipped else "0 skipped"
    extra = f", {s.removed} removed" if s.removed else ""
    extra += f", {s.rewritten} rewritten" if s.rewritten else ""
    extra += f", {s.copies} copies of runs counted from another home" if s.copies else ""
    extra += f", {len(s.absent)} home(s) not here (kept)" if s.absent else ""
    if s.sessions_new or s.sessions_updated:
        extra += f"; imported sessions: {s.sessions_new:,} new, {s.sessions_updated:,} updated"
    return (f"indexed: {s.new} new, {s.updated} updated, {s.unchanged} unchanged, "
            f"{skipped}{extra} in {s.seconds:.2f}s" + (" (rebuilt)" if s.rebuilt else ""))
