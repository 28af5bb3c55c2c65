"""`ledger report` as one library call: index, sync the report facts, query.

    report = build_report(home, db, ReportQuery(kind="daily", ...), notify=print)

1. the index is brought up to date with the home's records (ledger.index.ops.index_homes,
   exactly what `ledger runs` does);
2. report_facts is synced with the index in one short write transaction (only what changed
   is re-read and re-priced, see ledger.report.sync; a few changed runs on SQLite, through the
   driver: ledger.report.quicksync);
3. the report is answered in one read transaction (a consistent snapshot);
4. the records the pass could not read are attached (`Report.unreadable`, the JSON's
   `unreadable_runs`): they are in no row, and never silently gone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # (annotations only: the status line answers without the query module)
    from ledger.report.query import Report, ReportQuery

Notify = Callable[[str], None]


def _quiet(_msg: str) -> None:
    pass


def writing(url: str) -> Any:
    """The index's write transaction for derived data (see ledger.index.ops.writing)."""
    from ledger.index.ops import writing as index_writing

    return index_writing(url)


def sync(url: str, *, full: bool = False, notify: Notify | None = None, groups: bool = True) -> Any:
    """Bring report_facts up to date with the index at `url`; returns SyncStats. `groups`:
    the group tables too, when not built yet (only `report session|skill` reads them)."""
    from ledger.report.sync import sync_facts

    with writing(url) as conn:
        return sync_facts(conn, full=full, notify=notify, groups=groups)


def _synced_small(url: str, groups: bool = True) -> bool:
    """The usual incremental sync (a few changed runs) of an SQLite index through the driver,
    without SQLAlchemy (ledger.report.quicksync, issue 10); False: not done, nothing written."""
    from ledger.index import db as dbmod

    if not dbmod.is_sqlite(url):
        return False
    from ledger.index.rawwrite import NotAtHead
    from ledger.report.quicksync import sync_small

    try:
        return sync_small(url, groups=groups)
    except NotAtHead:  # (sync() opens the index through ledger.index.ops: it creates, migrates or rebuilds it)
        return False


def _say_homes_elsewhere(url: str, homes: list[Path], notify: Notify) -> None:
    """A named home the index holds no row for at its path is said (issue 32: a store whose
    index was built at another mount path reported `0 runs`, only "may be stale"); the row
    holding its id elsewhere is named (the report counts every home of the index)."""
    from ledger.home import home_problem
    from ledger.index import rawread

    with rawread.reading(url) as c:
        for h in homes:
            if home_problem(h) is None and rawread.home_id(c, h) is None:
                notify(rawread.not_here_message(url, h, rawread.home_elsewhere(c, h)))


def bring_up_to_date(url: str, *, resync: bool = False, groups: bool = False, notify: Notify = _quiet,
                     check: bool = False, cheap: bool = False) -> bool:
    """Sync the report's tables with the index at `url` (a read-only index is read as it is,
    with a note). `check`: first ask whether anything is to sync (no SQLAlchemy when not);
    `cheap`: only the small sync through the driver (SQLite; a full one, and on PostgreSQL any
    sync, is left to the next report: a reader such as `ledger runs` does not rebuild the
    report's tables), and say whether the tables are now in step (False: they may be stale)."""
    from ledger.index import db as dbmod

    def current() -> bool:
        from ledger.index.rawread import reading
        from ledger.report.synced import facts_current

        with reading(url) as c:
            return facts_current(c, groups)

    if check and not resync and dbmod.is_sqlite(url) and current():
        return True
    try:
        if cheap:
            return dbmod.is_sqlite(url) and _synced_small(url, groups) and current()
        if resync or not _synced_small(url, groups):
            sync(url, full=resync, notify=notify, groups=groups)
    except Exception as exc:  # noqa: BLE001 - a read-only index is read as it is
        from ledger.index.ops import read_only_failure

        why = read_only_failure(exc)
        if why is None:
            raise
        if not cheap:
            notify(f"ledger: cannot update the report's tables ({why.strip().splitlines()[0]}); they may be stale")
        return False
    return True


def query(url: str, q: ReportQuery) -> Report:
    from ledger.index.ops import reading

    with reading(url) as conn:
        from ledger.report.aggregate import run_report

        return run_report(conn, q)


def build_report(home: str | os.PathLike[str], db: str | None, q: ReportQuery, *, notify: Notify = _quiet,
                 resync: bool = False, named: bool = True) -> Report:
    return build_reports(home, db, [q], notify=notify, resync=resync, named=named)[0]


def build_reports(home: str | os.PathLike[str], db: str | None, queries: list[ReportQuery], *,
                  notify: Notify = _quiet, resync: bool = False, named: bool = True,
                  read_query: Callable[[Any, ReportQuery], Any] | None = None,
                  refresh_only: list[str] | None = None) -> list[Report]:
    """Several reports of one snapshot (`ledger report --html`): one index pass, one sync,
    one read transaction. `resync` rebuilds the report's tables whole (`--resync`). `named`:
    False when the home is the platform's default nobody named (ledger.index.ops.reader_homes).
    `read_query`: what reads the synced snapshot for each query (default run_report; `report
    blocks`: ledger.report.blocks.read_blocks), given the read connection and the query; one
    of its own reads no group table (and the status line loads no report module for it).
    `refresh_only`: the imported logs brought up to date first are these alone (a status
    line's transcript; ledger.sources.archive.refresh), not every one."""
    groups = False
    if read_query is None:
        from ledger.report.aggregate import reads_groups, run_report

        read_query = run_report
        groups = any(reads_groups(q) for q in queries)  # (the group tables are made when first read)
    read = read_query
    reports, skipped = answer(home, db, lambda c: [read(c, q) for q in queries], groups=groups,
                              notify=notify, resync=resync, named=named, refresh_only=refresh_only)
    for report in reports:
        report.unreadable = skipped
    return reports


def answer(home: str | os.PathLike[str], db: str | None, read_with: Callable[[Any], Any], *, groups: bool = False,
           notify: Notify = _quiet, resync: bool = False, named: bool = True,
           refresh_only: list[str] | None = None) -> tuple[Any, list[dict[str, str]]]:
    """`read_with(conn)` (a rawread.Conn) on an index brought up to date with the home and
    report facts synced with the index (`ledger report compare` reads them too); returns its
    answer and the records the pass could not read (they are in no answer, never silently
    gone). `named` as for build_reports."""
    from ledger.index import db as dbmod
    from ledger.index.ops import index_homes, reader_homes

    from ledger.store.layout import index_base

    home_path = Path(os.path.abspath(os.fspath(home)))
    url = dbmod.resolve_url(index_base(home_path), db)
    homes = reader_homes(home_path, url, named, notify)  # a record store (`ledger push`): every home in it
    summary = index_homes(homes, url, notify=notify, stale_ok=True, refresh_only=refresh_only)
    if summary.skipped:
        from ledger.records.model import skipped_warnings

        for line in skipped_warnings(summary.skipped):
            notify(line)
    from ledger.index.ops import read_repairing

    def read() -> Any:
        from ledger.index.rawread import reading

        if homes:
            _say_homes_elsewhere(url, homes, notify)
        if not resync:
            from ledger.report.synced import facts_current

            with reading(url) as c:
                if facts_current(c, groups):  # nothing to sync (the usual case): no SQLAlchemy (issue 10)
                    return read_with(c)
        bring_up_to_date(url, resync=resync, groups=groups, notify=notify)
        with reading(url) as c:
            return read_with(c)

    return read_repairing(homes, url, read, notify), [p.to_dict() for p in summary.skipped]
