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
    d = _with_cost(s).to_dict()
    d["cwd"] = s.cwd
    d["path"] = s.path
    d["provider_session_id"] = s.provider_session_id
    d["final_answer"] = s.final_answer
    d["api_retries"] = s.api_retries
    d["skill_invoked"] = s.skill_invoked
    d["tool_uses"] = dict(sorted(s.tool_uses.items()))
    d["tool_results"] = {name: tool_results(n, s.tool_status.get(name)) for name, n in sorted(s.tool_uses.items())}
    d["attempts"] = s.attempts
    d["children"] = list(s.children)
    d["streams"] = [
        {"stream_id": st.stream_id, "provider": st.provider, "model": st.model,
         "attempt_key": st.attempt_key, "turn_key": st.turn_key, "observations": st.observations,
         "final_receipt": st.final_receipt, "counters": st.counters, "cost_usd": st.cost_usd}
        for st in s.streams
    ]
    return d


COST_DIGITS = 10  # as the reports round money (ledger.report.accumulate)


def record_cost(s: RunSnapshot) -> dict[str, Any]:
    """A run record's cost under `auto`, read from the record alone (the records path): the
    figures `ledger report run` has for it (the index path reads them from the report,
    ledger.report.aggregate.run_rows; the tests hold both to each other)."""
    return auto_cost([(st.final_receipt, st.cost_usd, st.provider, st.model, st.counters, None) for st in s.streams],
                     s.harness)


def auto_cost(streams: list[tuple], harness: str | None) -> dict[str, Any]:
    """{cost_usd, cost_basis, cost_usd_known} of a run's streams (final receipt, cost,
    provider, model, counters, estimate priced per response or None) by the report's rule:
    each stream's receipt cost, else its estimate (ledger.records.costbasis); all known: the
    sum and the bases combined; some: `partial` with the known part; none: `unknown`; a plain
    command without usage: `not_applicable`. Money rounded as the reports round it."""
    from ledger.records.costbasis import ESTIMATED, REPORTED, combine_bases, receipt_cost

    if not streams:
        basis = "not_applicable" if harness == "command" else "unknown"
        return {"cost_usd": None, "cost_basis": basis, "cost_usd_known": None}
    figures: list[tuple[float | None, str]] = []
    for final, cost, provider, model, counters, est in streams:
        r = receipt_cost(bool(final), cost)
        if r is not None:
            figures.append((r, REPORTED))
            continue
        if est is None:
            from ledger.pricing import estimate_cost

            est = estimate_cost(provider, model, {k: v for k, v in (counters or {}).items() if v is not None})[0]
        figures.append((est, ESTIMATED))
    known = [f for f in figures if f[0] is not None]
    total = round(sum(v for v, _ in known), COST_DIGITS) if known else None
    if len(known) == len(figures):
        return {"cost_usd": total, "cost_basis": combine_bases(b for _, b in known), "cost_usd_known": total}
    return {"cost_usd": None, "cost_basis": "partial" if known else "unknown", "cost_usd_known": total}


def _with_cost(s: RunSnapshot) -> RunSnapshot:
    if s.cost is None and s.state != "unreadable":
        s.cost = record_cost(s)
    return s


def indexed_costs(conn: Any, home_id: int, snaps: list[RunSnapshot], current: bool = True) -> None:
    """Each snapshot's cost as `ledger report run` has it: from the report's tables when they
    hold the run, else (not synced yet: a read-only index, or a sync that would load more
    than `ledger runs` should) by the same rule from the run's usage streams in the index."""
    from ledger.index.rawread import boolean, wrap
    from ledger.records.model import ALL_INT_COUNTERS
    from ledger.report.aggregate import run_rows

    c = wrap(conn)
    rows = run_rows(c, home_id, [s.id for s in snaps if s.state != "unreadable"]) if current else {}
    missing = [s for s in snaps if s.state != "unreadable" and s.id not in rows]
    streams: dict[str, list[tuple]] = {}
    cols = ("run_id", "final_receipt", "cost_usd", "provider", "model", "est_cost_usd", *ALL_INT_COUNTERS)
    ids = [s.id for s in missing]
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        for v in c.rows(f"SELECT {', '.join(cols)} FROM usage_streams WHERE home_id = ? AND run_id IN "
                        f"({c.marks(len(chunk))})", (home_id, *chunk)):
            counters = dict(zip(ALL_INT_COUNTERS, v[6:]))
            streams.setdefault(v[0], []).append((boolean(v[1]), v[2], v[3], v[4], counters, v[5]))
    for s in snaps:
        d = rows.get(s.id)
        if d is not None:
            s.cost = {"cost_usd": d["cost_usd"], "cost_basis": d["cost_basis"], "cost_usd_known": d["cost_usd_known"]}
        elif s.state != "unreadable":
            s.cost = auto_cost(streams.get(s.id, []), s.harness)


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
            snaps.append(_with_cost(item))
    return snaps, problems


def _index(home: Path, db: str | None, notify: Any, named: bool = True) -> tuple[str, list[Path], bool]:
    """Bring the index up to date with the home (quickly: only what changed); its URL, the
    homes brought up to date (none: the default home nobody named, ops.reader_homes), and
    whether the report's tables are in step with it."""
    from ledger.index import db as dbmod
    from ledger.index.ops import index_homes, reader_homes

    from ledger.store.layout import index_base

    url = dbmod.resolve_url(index_base(home), db)  # (a record store: every home in it)
    homes = reader_homes(home, url, named, notify)
    summary = index_homes(homes, url, notify=notify, stale_ok=True)
    if summary.skipped:
        from ledger.records.model import skipped_warnings

        for line in skipped_warnings(summary.skipped):
            notify(line)
    from ledger.report.service import bring_up_to_date

    # the costs `runs` / `show` print are the report's: its tables brought up to date when
    # that is cheap (nothing to do, or a few runs through the driver); else views.indexed_costs
    current = bring_up_to_date(url, check=True, notify=notify, cheap=True)
    return url, homes, current


def _home_row(conn: Any, url: str, home: Path, notify: Any) -> int | None:
    """The index's row of `home` (rawread.home_id); one holding its id at another path when
    there is none at its own, saying so (issue 32: a store indexed at another mount path)."""
    from ledger.index import rawread
    from ledger.home import home_problem

    hid = rawread.home_id(conn, home)
    if hid is None and home_problem(home) is None:
        elsewhere = rawread.home_elsewhere(conn, home)
        notify(rawread.not_here_message(url, home, elsewhere))
        if elsewhere is not None:
            hid = elsewhere[0]
    return hid


def indexed_runs(home: Path, db: str | None, all_: bool, notify: Any,
                 now: datetime | None = None) -> list[RunSnapshot]:
    """`ledger runs` through the index: auto-index the home, then select from the database.

    Same selection and order as `select_runs()` over the records, same JSON.
    """
    return indexed_selection(home, db, all_, notify, now).runs


def indexed_selection(home: Path, db: str | None, all_: bool, notify: Any, now: datetime | None = None,
                      filters: Any = None, named: bool = True) -> Any:
    """`indexed_runs` with filters (ledger.records.selection.RunFilter); a Selection."""
    from ledger.index import ops, queries, rawread
    from ledger.records.selection import count_all, pushed_limit, select, window_cutoff
    from ledger.store.layout import single_home

    store, home = home, single_home(home, "runs")
    url, homes, current = _index(store, db, notify, named)
    # the database returns the default window's candidates; a --since / --until range needs them all
    wide = all_ or (filters is not None and (filters.ranged or filters.since is not None or filters.until is not None))
    now = now or datetime.now(timezone.utc)  # (one window: the database's and the rule's)
    top = pushed_limit(all_, filters)

    def read() -> Any:
        # the rule picks among light candidates; only the runs it shows become full snapshots
        with rawread.reading(url) as conn:  # (the driver: no SQLAlchemy, issue 10)
            hid = _home_row(conn, url, home, notify)
            if top is None:
                sel = select(queries.list_candidates(conn, hid, wide, now), all_, now, filters)
            else:  # only the window and the limit apply: the database returns the newest runs
                cands, size = queries.newest_candidates(conn, hid, top, window_cutoff(now))
                sel = select(cands, all_, now, filters, size)
            if hid is not None:
                sel.runs = queries.snapshots_of(conn, hid, sel.runs)
                indexed_costs(conn, hid, sel.runs, current)
            if not sel.runs and not wide:  # an empty window: say whether older runs exist
                sel.in_all = (queries.count_runs(conn, hid) if top is not None  # (no filter: every run counts)
                              else count_all(queries.list_candidates(conn, hid, True, now), filters))
            return sel

    return ops.read_repairing(homes, url, read, notify)


def indexed_run(home: Path, db: str | None, selector: str, notify: Any, named: bool = True) -> RunSnapshot:
    """`ledger show` through the index (the selector resolves by the records' prefix rules)."""
    from ledger.index import ops, queries, rawread
    from ledger.store.layout import single_home

    store, home = home, single_home(home, "show")
    url, homes, current = _index(store, db, lambda msg: None if msg.startswith("warning: skipped") else notify(msg),
                                 named)

    def read() -> RunSnapshot:
        with rawread.reading(url) as conn:
            hid = _home_row(conn, url, home, notify)
            snap = queries.get_run(conn, hid, selector)
            indexed_costs(conn, hid, [snap], current)
            snap.children = queries.children_of(conn, hid, snap.id)
            return snap

    return ops.read_repairing(homes, url, read, notify)
