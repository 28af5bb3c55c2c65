"""What a push did (PushSummary), and the error of a push with conflicts."""

from __future__ import annotations

import os
from typing import Any, Callable

from ledger.errors import LedgerError
from ledger.plainclass import Plain
from ledger.store.layout import HOMES_DIR

CONFLICT_HINT = ("the store keeps what it received first and nothing was overwritten: compare the two copies "
                 "(`cmp HOME/PATH STORE/homes/ID/PATH`) and check the home with `ledger verify`")

Progress = Callable[[int, int], None]


class PushSummary(Plain):
    """What a push did (a dataclass, written out: ledger.plainclass)."""

    __slots__ = ("home", "home_id", "dest", "copied", "extended", "replaced", "unchanged", "waiting", "bytes", "runs",
                 "conflicts", "skipped", "seconds")

    def __init__(self, home: str, home_id: str, dest: str, copied: int = 0, extended: int = 0, replaced: int = 0,
                 unchanged: int = 0, waiting: int = 0, bytes: int = 0, runs: int = 0,
                 conflicts: list[dict[str, str]] | None = None, skipped: list[dict[str, str]] | None = None,
                 seconds: float = 0.0) -> None:
        self.home = home
        self.home_id = home_id
        self.dest = dest
        self.copied = copied
        self.extended = extended
        self.replaced = replaced
        self.unchanged = unchanged
        self.waiting = waiting  # files held back until they are complete (see ledger.store)
        self.bytes = bytes
        self.runs = runs
        self.conflicts: list[dict[str, str]] = [] if conflicts is None else conflicts
        self.skipped: list[dict[str, str]] = [] if skipped is None else skipped
        self.seconds = seconds

    def to_dict(self) -> dict[str, Any]:
        return {"home_id": self.home_id, "home": self.home, "dest": self.dest, "copied": self.copied,
                "extended": self.extended, "replaced": self.replaced, "unchanged": self.unchanged,
                "waiting": self.waiting, "bytes": self.bytes, "runs": self.runs, "conflicts": self.conflicts,
                "skipped": self.skipped, "seconds": round(self.seconds, 3)}

    def line(self) -> str:
        parts = [f"{self.copied:,} copied", f"{self.extended:,} extended"]
        if self.replaced:
            parts.append(f"{self.replaced:,} replaced")
        parts.append(f"{self.unchanged:,} unchanged")
        if self.waiting:
            parts.append(f"{self.waiting:,} waiting")
        parts.append(f"{len(self.conflicts):,} conflict" + ("" if len(self.conflicts) == 1 else "s"))
        if self.skipped:
            parts.append(f"{len(self.skipped):,} skipped")
        return (f"pushed home {self.home_id} ({self.runs:,} runs, {_size(self.bytes)} written) to {self.dest}: "
                + ", ".join(parts) + f" in {self.seconds:.1f} s")


_DAMAGE = {"the store's copy cannot be opened": "unreadable", "the store's copy is not a regular file": "not a regular file",
           "the store's copy changed after it was pushed": "changed in the store after it was pushed"}


def conflict_error(summary: PushSummary) -> LedgerError:
    """The error of a push with conflicts: the home's changed files, and the store's damaged
    copies named with the store's path and what is wrong with them."""
    home = [c for c in summary.conflicts if c.get("side") == "home"]
    store = [c for c in summary.conflicts if c.get("side") != "home"]
    parts, hints = [], []
    if home:
        n = len(home)
        parts.append(f"{n} file{'' if n == 1 else 's'} of the home differ{'s' if n == 1 else ''} from the store's copies")
        hints.append(CONFLICT_HINT)
    if store:
        where = os.path.join(summary.dest, HOMES_DIR, summary.home_id)
        n = len(store)
        kinds = sorted({"a symlink" if "symlink" in c["reason"] else
                        _DAMAGE.get(c["reason"].split(" (")[0], "changed in the store") for c in store})
        parts.append(f"the record store {where} is damaged: {n} of its copies {'is' if n == 1 else 'are'} "
                     f"not what was pushed ({', '.join(kinds)}; each listed above)")
        hints.append(f"restore {where} from a backup, or move it aside and push again")
    return LedgerError("; ".join(parts) + "; nothing was overwritten", hint="; ".join(hints))


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)  # pragma: no cover

