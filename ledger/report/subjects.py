"""A run's further subjects (report_facts holds its first): a run with several counts in
each of their groups of `report subject`."""

from __future__ import annotations

from typing import Any

from ledger.index.rawread import Conn
from ledger.report.factsql import FACTS, _Collector, _facts_stmt, _rows, keys_in
from ledger.report.query import ReportQuery
from ledger.report.sqltext import Sql


# A run's further subjects joined to its facts, read from the few `subjects` rows past the
# first (CROSS JOIN: SQLite keeps this order; it would otherwise scan every fact for them)
_FURTHER = f"subjects AS further CROSS JOIN {FACTS}"
_FURTHER_ON = (f"further.position >= 1 AND {FACTS}.home_id = further.home_id AND {FACTS}.run_id = further.run_id")


def _more_subjects(c: Conn) -> dict[tuple[int, str], list[str]]:
    """The second, third... subjects of runs (report_facts holds each run's first)."""
    out: dict[tuple[int, str], list[str]] = {}
    for h, rid, sel in c.rows("SELECT subjects.home_id, subjects.run_id, subjects.selector FROM subjects "
                              "WHERE subjects.position >= 1"):
        out.setdefault((h, rid), []).append(sel)
    return out


def _add_more_subjects(c: Conn, q: ReportQuery, conds: list[Sql], col: _Collector,
                       only: set[Any] | None = None) -> None:
    """A run with several subjects counts in each of their rows (`only`: in these groups)."""
    more = _more_subjects(c)
    if only is not None:
        more = {k: kept for k, sels in more.items() if (kept := [s for s in sels if s in only])}
    keys = sorted(more)
    for i in range(0, len(keys), 1000):
        chunk = keys[i:i + 1000]
        for row in _rows(c, _facts_stmt(q, [keys_in(chunk), *conds], per_run=True)):
            run_key = (row[0], row[-1])
            col.add([(sel,) + tuple(row[1:-1]) for sel in more[run_key]])
