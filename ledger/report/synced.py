"""Is `report_facts` in step with the index? Answered without SQLAlchemy (issue 10).

A report first syncs its tables with the index (ledger.report.sync, a write transaction). When
the index did not change since the last sync, that sync finds nothing to do; loading it costs
more than the report itself. `facts_current()` makes the sync's own decisions (sync_facts)
with a few reads through the driver; whenever it says True, a sync would write nothing
(tests/test_report_raw.py holds it to that). Anything else, or any doubt: False, and the
caller syncs as before.
"""

from __future__ import annotations

from typing import Any

# the sync's rule versions and change-log triggers, from their one home (no imports: the warm path)
from ledger.index.reportshape import CHANGE_TRIGGERS, FACT_RULES, GROUP_RULES, GROUPS_DEFERRED


def facts_current(c: Any, groups: bool = True) -> bool:
    """True when sync_facts (not `full`, `groups` as given) would change nothing; `c` is a
    rawread.Conn (SQLite)."""
    from ledger.pricing import price_data_version

    if c.dialect != "sqlite":
        return False
    (triggers,) = c.one("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'runs' "
                        f"AND name IN ({c.marks(len(CHANGE_TRIGGERS))})", CHANGE_TRIGGERS)
    if triggers != len(CHANGE_TRIGGERS):  # (a sync without its change log rebuilds everything)
        return False
    state = dict(c.rows("SELECT key, value FROM report_state"))
    fact_runs = state.get("fact_runs")
    if (state.get("price_version") != price_data_version() or fact_runs is None
            or state.get("fact_rules") != FACT_RULES
            or not (state.get("group_rules") == GROUP_RULES or (state.get("group_rules") == GROUPS_DEFERRED
                                                                  and not groups))):
        return False
    if c.one("SELECT 1 FROM report_changes LIMIT 1") is not None:  # runs written since the last sync
        return False
    # a run the facts hold as running whose row changed (running -> abandoned in place)
    if c.one("SELECT 1 FROM report_facts AS f LEFT OUTER JOIN runs AS r ON r.home_id = f.home_id AND "
             "r.run_id = f.run_id WHERE f.settled = 0 AND f.first = 1 AND f.state != 'abandoned' AND "
             "(r.run_id IS NULL OR f.indexed_at != r.indexed_at OR f.state != r.state OR "
             "CAST(r.settled AS INTEGER) != f.settled) LIMIT 1") is not None:
        return False
    (runs,) = c.one("SELECT count(*) FROM runs")
    try:
        return runs == int(fact_runs)
    except ValueError:
        return False
