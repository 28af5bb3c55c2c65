"""The evaluation view's medians (of the runs' known costs and of their durations), per
group and overall: read from the facts and sorted here, or taken from sorted sequences
without merging them (report_groups keeps its runs' figures sorted)."""

from __future__ import annotations

from typing import Any

from ledger.index.rawread import Conn
from ledger.report.accumulate import Agg
from ledger.report.costs import whole_cost_sql
from ledger.report.factsql import FACTS, _cost_columns, _key_column, _rows, _select
from ledger.report.kinds import SLOT_SECONDS
from ledger.report.query import ReportQuery
from ledger.report.sqltext import Sql
from ledger.report.subjects import _FURTHER, _FURTHER_ON


def _medians(c: Conn, q: ReportQuery, conds: list[Sql], groups: dict[Any, Agg], totals: Agg) -> None:
    """Per group and overall: the medians of the runs' known costs and of their durations
    (statistics.median's rule: the mean of the two middle values of an even count).

    A median does not merge, so every run's two figures are read, in one narrow read, and
    sorted here: at a million runs SQLite's window functions (row_number per group) took
    2.5 s of CPU for the costs alone, this read and sort about 2 s for both figures and the
    totals. A run with further subjects counts in their groups too, once in the totals.
    A run's cost is its whole cost over its pieces among the report's rows
    (costs.whole_cost_sql), its duration its first row's (as report_groups' figures)."""
    f = FACTS
    run_cost, _ = _cost_columns(q)
    cols = [whole_cost_sql(run_cost, f"{f}.piece"), f"max({f}.duration_ms)"]
    have = [Sql(f"({f}.first = 1 OR {f}.piece = 1)"), *conds]
    run = [f"{f}.home_id", f"{f}.run_id"]
    per_group: dict[Any, tuple[list[Any], list[Any]]] = {}

    def collect(rows: list[tuple]) -> None:
        for k, cost, duration in rows:
            values = per_group.get(k)
            if values is None:
                values = per_group[k] = ([], [])
            if cost is not None:
                values[0].append(cost)
            if duration is not None:
                values[1].append(duration)

    key = _key_column(q, SLOT_SECONDS)
    collect(_rows(c, _select([key, *cols], f, have, [*run, key])))
    for values in per_group.values():
        values[0].sort()
        values[1].sort()
    # every run once: the groups so far (by subject: its first), before further subjects
    # (sorted runs, which the sort merges)
    for pos in (0, 1):
        everyone = [x for values in per_group.values() for x in values[pos]]
        everyone.sort()
        totals.medians[pos] = _middle(everyone)
    del everyone
    if q.kind == "subject":
        collect(_rows(c, _select(["further.selector", *cols], _FURTHER, [Sql(_FURTHER_ON), *have],
                                 [*run, "further.position", "further.selector"])))
        for values in per_group.values():
            values[0].sort()
            values[1].sort()
    for k, values in per_group.items():
        agg = groups.get(k)
        if agg is not None:
            agg.medians = [_middle(values[0]), _middle(values[1])]


def _middle(values: list[Any]) -> Any:
    """The median of sorted values (None: none)."""
    n = len(values)
    if not n:
        return None
    h = n // 2
    return values[h] if n % 2 else (values[h - 1] + values[h]) / 2


def _merged_middle(sorted_lists: list[Any]) -> Any:
    """_middle of the union of sorted sequences, without merging them."""
    lists = [s for s in sorted_lists if len(s)]
    n = sum(len(s) for s in lists)
    if not n:
        return None
    h = n // 2
    return _kth(lists, h) if n % 2 else (_kth(lists, h - 1) + _kth(lists, h)) / 2


def _kth(lists: list[Any], k: int) -> Any:
    """The k-th smallest value (from 0) of the union of sorted sequences: for each sequence,
    a binary search for its first value that has more than k values at or below it (over all
    sequences); the smallest of those is the answer."""
    from bisect import bisect_right

    def at_or_below(v: Any) -> int:
        return sum(bisect_right(s, v) for s in lists)

    best = None
    for s in lists:
        lo, hi = 0, len(s)
        while lo < hi:
            mid = (lo + hi) // 2
            if at_or_below(s[mid]) > k:
                hi = mid
            else:
                lo = mid + 1
        if lo < len(s) and (best is None or s[lo] < best):
            best = s[lo]
    return best
