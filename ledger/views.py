"""What `ledger runs` / `ledger show` answer, as library calls (the CLI only formats).

Both read the index (`indexed_runs`, `indexed_run`), which is brought up to date with the
records first; `scan_records` is the records path they must agree with byte for byte.

The selection rule of `ledger runs` without --all lives in ledger.records.selection.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable

from ledger.records.model import RunSnapshot, ScanProblem
from ledger.records.selection import RECENT_DAYS, RECENT_LIMIT, select_runs  # noqa: F401 - the rule's one home

def tool_results(uses: int, status: list[int] | None) -> dict[str, int]:
    """One tool's results per status; `unknown`: uses without a result (ledger.records.verdict)."""
    ok, err, sem = status or (0, 0, 0)
    return {"ok": ok, "error": err, "semantic-error": sem, "unknown": max(0, uses - ok - err - sem)}


def snapshot_detail(s: RunSnapshot) -> dict[str, Any]:
    """The `ledger show --json` document: the snapshot plus its evidence details."""
    d = s.to_dict()
    d["cwd"] = s.cwd
    d["path"] = s.path
    d["provider_session_id"] = s.provider_session_id
    d["final_answer"] = s.final_answer
    d["api_retries"] = s.api_retries
    d["skill_invoked"] = s.skill_invoked
    d["tool_uses"] = dict(sorted(s.tool_uses.items()))
    d["tool_results"] = {name: tool_results(n, s.tool_status.get(name)) for name, n in sorted(s.tool_uses.items())}
    d["attempts"] = s.attempts
    d["streams"] = [
        {"stream_id": st.stream_id, "provider": st.provider, "model": st.model,
         "attempt_key": st.attempt_key, "turn_key": st.turn_key, "observations": st.observations,
         "final_receipt": st.final_receipt, "counters": st.counters, "cost_usd": st.cost_usd}
        for st in s.streams
    ]
    return d


def scan_records(home: Path) -> tuple[list[RunSnapshot], list[ScanProblem]]:
    """Every run of the home read from its record, and the problems. A record that cannot be
    read is in both: a problem, and a snapshot with state `unreadable` (as the index lists it)."""
    from ledger.records.reader import scan_named, unreadable_snapshot

    snaps: list[RunSnapshot] = []
    problems: list[ScanProblem] = []
    for name, item in scan_named(home):
        if isinstance(item, ScanProblem):
            problems.append(item)
            if name is not None:
                snaps.append(unreadable_snapshot(name, item.path))
        else:
            snaps.append(item)
    return snaps, problems


def _index(home: Path, db: str | None, notify: Any) -> str:
    """Bring the index up to date with the home (quickly: only what changed) and return its URL."""
    from ledger.index import db as dbmod
    from ledger.index.ops import index_homes

    from ledger.store import expand_homes, index_base

    url = dbmod.resolve_url(index_base(home), db)  # (a record store: every home in it)
    summary = index_homes(expand_homes([home]), url, notify=notify, stale_ok=True)
    if summary.skipped:
        from ledger.records.model import skipped_warnings

        for line in skipped_warnings(summary.skipped):
            notify(line)
    return url


def indexed_runs(home: Path, db: str | None, all_: bool, notify: Any,
                 now: datetime | None = None) -> list[RunSnapshot]:
    """`ledger runs` through the index: auto-index the home, then select from the database.

    Same selection and order as `select_runs()` over the records, same JSON.
    """
    return indexed_selection(home, db, all_, notify, now).runs


def indexed_selection(home: Path, db: str | None, all_: bool, notify: Any, now: datetime | None = None,
                      filters: Any = None) -> Any:
    """`indexed_runs` with filters (ledger.records.selection.RunFilter); a Selection."""
    from ledger.index import ops, queries, rawread
    from ledger.records.selection import select
    from ledger.store import expand_homes, single_home

    store, home = home, single_home(home, "runs")
    url = _index(store, db, notify)
    # the database returns the default window's candidates; a --since / --until range needs them all
    wide = all_ or (filters is not None and (filters.ranged or filters.since is not None or filters.until is not None))

    def read() -> Any:
        # the rule picks among light candidates; only the runs it shows become full snapshots
        with rawread.reading(url) as conn:  # (the driver: no SQLAlchemy, issue 10)
            hid = rawread.home_id(conn, home)
            sel = select(queries.list_candidates(conn, hid, wide, now), all_, now, filters)
            if hid is not None:
                sel.runs = queries.snapshots_of(conn, hid, sel.runs)
            return sel

    return ops.read_repairing(expand_homes([store]), url, read, notify)


def indexed_run(home: Path, db: str | None, selector: str, notify: Any) -> RunSnapshot:
    """`ledger show` through the index (the selector resolves by the records' prefix rules)."""
    from ledger.index import ops, queries, rawread
    from ledger.store import expand_homes, single_home

    store, home = home, single_home(home, "show")
    url = _index(store, db, lambda msg: None if msg.startswith("warning: skipped") else notify(msg))

    def read() -> RunSnapshot:
        with rawread.reading(url) as conn:
            return queries.get_run(conn, rawread.home_id(conn, home), selector)

    return ops.read_repairing(expand_homes([store]), url, read, notify)
