"""The report's incremental sync of a few changed runs on SQLite, without SQLAlchemy (issue 10).

After one new run, `ledger report` syncs the report's tables with the index: a handful of rows
written. `sync_small(url)` does what ledger.report.sync.sync_facts (not `full`) does in that
usual case, with sync_facts' own steps, on a connection of the sqlite3 driver opened without
SQLAlchemy's engine (ledger.index.rawwrite):

1. the same preconditions: the change log's triggers on `runs`, report_state's price version,
   fact rules, group rules and run count (anything else is a full rebuild: sync_facts');
2. the runs of the change log (report_changes, taken whole: the write lock is held) and the
   runs the facts hold as running whose row changed, their facts rebuilt (sync._rebuild: a
   (run, model) row re-priced only when its usage fingerprint changed);
3. the count check (a mismatch needs sync_facts' reconcile), the rollups of the touched
   slots and days, the touched report_groups groups and report_group_days cells
   (ledger.report.rollups: their sorted figures updated by the runs' old and new values),
   report_state.

Only the change log is taken its own way (whole, under the write lock, with a cap). Whenever
the case is not simple (a precondition fails, more than SMALL runs changed, a reconcile is
needed, a group's figures do not add up) nothing is written (the transaction rolls back) and
it returns False, with the reason: the caller takes sync_facts. tests/test_quicksync.py holds
the tables it writes to sync_facts', row for row, value and type.
"""

from __future__ import annotations

from typing import Any

from ledger.index.dbapi import Conn, wrap
from ledger.report import facts as F
from ledger.report import sync as S
from ledger.report.rollups import Undone, refresh_groups, refresh_rollups
from ledger.report.schema import FACT_RULES, GROUP_RULES, GROUPS_DEFERRED

SMALL = 500  # changed runs at most (more: sync_facts, whose statements then cost little)
LOG_ROWS = 4 * SMALL  # change-log rows read at most (a run rewritten several times logs several)


class Declined(Exception):
    """Not a case for the small sync: rolled back, the caller runs sync_facts."""


def sync_small(url: str, *, estimator: F.Estimator | None = None, price_version: str | None = None,
               limit: int = SMALL, groups: bool = True, why: list[str] | None = None) -> bool:
    """Sync the report's tables of the SQLite index at `url` as sync_facts would (not `full`)
    when only a few runs changed; True when done (committed), False when declined (nothing
    written; `why`, when given, gets the reason). Raises ledger.index.rawwrite.NotAtHead when the schema is not at head, and
    what the driver raises (a read-only index, a busy one)."""
    from ledger.index.rawwrite import raw_writing

    pv = price_version or F._price_version()
    builder = F.FactBuilder(pv, estimator or F._default_estimator(), F.SyncStats())
    try:
        with raw_writing(url) as con:
            _sync(wrap(con), builder, limit, groups)
    except Declined as exc:
        if why is not None:
            why.append(str(exc))
        return False
    return True


def _sync(c: Conn, b: F.FactBuilder, limit: int, groups: bool = True) -> None:
    state = S._get_state(c)
    fact_runs = state.get("fact_runs")
    if (not S.has_change_triggers(c) or state.get("price_version") != b.price_version or fact_runs is None
            or state.get("fact_rules") != FACT_RULES):
        raise Declined("a full rebuild")
    group_state = state.get("group_rules")
    # the group tables kept up to date, or not built and not needed yet (sync_facts's rule)
    if not (group_state == GROUP_RULES or (group_state == GROUPS_DEFERRED and not groups)):
        raise Declined("the group tables to build")
    try:
        runs_before = int(fact_runs)
    except ValueError:
        raise Declined("fact_runs unreadable") from None
    touched: set[int] = set()
    keys = _take_log(c, limit)
    S._rebuild(c, b, keys, touched)
    running = _running_changed(c)
    if len(keys) + len(running) > limit:
        raise Declined("too many changed runs")
    S._rebuild(c, b, running, touched)
    fact_runs = str(runs_before + b.stats.fact_runs_delta)
    if S._count_runs(c) != int(fact_runs):
        raise Declined("the facts need a reconcile")
    if touched:
        refresh_rollups(c, touched)
    if b.groups and group_state == GROUP_RULES:
        try:
            refresh_groups(c, b.groups, b.cells, b.deltas, strict=True)
        except Undone as exc:  # (sync_facts reads the figures again from the facts)
            raise Declined(str(exc)) from None
    new_state = {"price_version": b.price_version, "fact_runs": fact_runs, "fact_rules": FACT_RULES,
                 "group_rules": group_state}
    if {k: state.get(k) for k in new_state} != new_state:
        S._set_state(c, new_state)


def _take_log(c: Conn, limit: int) -> list[tuple[int, str]]:
    """The change log's runs, the log emptied (sync._logged: under the write lock every row
    there is committed and none can be added before this transaction ends)."""
    rows = c.rows("SELECT home_id, run_id FROM report_changes LIMIT ?", (LOG_ROWS + 1,))
    if not rows:
        return []
    keys = sorted(set(rows))
    if len(rows) > LOG_ROWS or len(keys) > limit:
        raise Declined("too many changed runs")
    c.execute("DELETE FROM report_changes")
    return keys


def _running_changed(con: Any) -> list[tuple[int, str]]:
    """sync._running_changed: runs the facts hold as running whose row differs."""
    return S._running_changed(wrap(con))[0]
