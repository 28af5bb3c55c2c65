"""Sources of evidence: what the indexer projects into the index.

A source discovers what changed in a home since its cursors and folds each changed item
(new bytes only, from the cursor's position) into rows plus the item's new cursor, which the
indexer commits in the same transaction. Run records (`runs/<xx>/run_*/`) are the first
source; each client's archived session logs (`sources/<client>/...`, DESIGN §4b,
logsource.py) are the others (sourcelist.py names them all, in pass order).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Protocol

from ledger.index.dbapi import wrap
from ledger.index.project import OUT_TABLES, Folded, damaged_cursor, fold_record
from ledger.index.scan import RunScan, Work, delete_runs
from ledger.index.work import PassContext  # noqa: F401 - (re-exported: the sources' interface)
from ledger.index.work import prev_cursors
from ledger.records.model import ScanProblem

# (The tables are named, their columns are project.EXPECTED_COLS: tests/test_tabledefs.py
# checks those against the models.)


class Discovery(Protocol):
    """One home's pass of a source."""

    def __iter__(self) -> Iterator[Work]:
        """The items that changed since their cursors (cursor None: new), as found."""

    def folded(self, batch: list[Work]) -> None:
        """A batch of items (and their cursors) was written."""

    def settle(self) -> bool:
        """After the last batch: write what changed besides the items; whether anything did."""

    def write_state(self, insert_rows: Callable[[str, list[dict[str, Any]]], None]) -> None:
        """In the pass's closing transaction: the source's own bookkeeping rows."""


class Source(Protocol):
    name: str  # stable: never renamed (it may key cursors and settings)
    tables: tuple[str, ...]  # the names of the tables it writes, keyed by (home_id, key); its cursor table last
    key: str  # the item id column of those tables

    def discover(self, ctx: PassContext) -> Discovery: ...

    # A module-level function (the workers get it pickled by name): fold(home_id, item, previous
    # cursor row or None, now, encode, out=None) -> Folded (rows + the new cursor row).
    fold: Callable[..., Folded]

    def previous(self, conn: Any, home_id: int, keys: list[str]) -> dict[str, Any]:
        """The cursor rows of these known items, by key (what `fold` gets as the previous one;
        picklable: the workers get them)."""

    def damaged(self, home_id: int, item: Work, now: Any, encode: bool, problem: ScanProblem,
                prev: Any) -> tuple:
        """The cursor row of an item that could not be read."""

    def delete(self, conn: Any, home_id: int, keys: list[str], with_cursors: bool) -> None:
        """Delete the rows (and cursors) of these items."""


class RunRecordsSource:
    """Run records written by `ledger run`: `runs/<xx>/run_*/` (scan.py, project.py)."""

    name = "runs"
    tables = OUT_TABLES
    key = "run_id"
    fold = staticmethod(fold_record)
    damaged = staticmethod(damaged_cursor)
    delete = staticmethod(delete_runs)

    def discover(self, ctx: PassContext) -> RunScan:
        return RunScan(ctx)

    @staticmethod
    def previous(conn: Any, home_id: int, keys: list[str]) -> dict[str, Any]:
        return prev_cursors(wrap(conn).rows, home_id, keys)
