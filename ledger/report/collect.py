"""The groups of a report read from the table that answers it: report_slots and
report_days (time, `model` / `harness` reports), the model that served each response
(`report model`), else report_facts itself."""

from __future__ import annotations

from typing import Any

from ledger.index.rawread import Conn
from ledger.report.accumulate import BMAX, BMIN, COST, COST_N, IN, PART, RS, RUNS, TOKENS, _num
from ledger.report.factsql import (
    DAYS, FACTS, SLOTS, _basis_literal, _Collector, _facts_stmt, _model_aggregates, _none_if_empty, _rows,
    _run_aggregates, _run_extra, _select, _time_buckets, keys_in,
)
from ledger.report.filters import _filter_conds, _match, _time_conds
from ledger.report.kinds import SLOT_SECONDS
from ledger.report.query import ReportQuery
from ledger.report.schema import START_KEY
from ledger.report.sqltext import Sql
from ledger.report.subjects import _add_more_subjects
from ledger.report.top import _collect_top, _top_run_keys


def _collect_slots(c: Conn, q: ReportQuery, start: int | None, end: int | None) -> _Collector | None:
    """Time reports without filters: report_slots (one row per 15-minute slot and model),
    grouped in SQL by the largest multiple of the slot that every bucket boundary is on
    (a UTC day, an hour, half an hour...), then mapped to the buckets."""
    t = SLOTS
    conds = []
    if start is not None:
        conds.append(Sql(f"{t}.slot >= ?", (-(-start // SLOT_SECONDS),)))
    if end is not None:
        conds.append(Sql(f"{t}.slot < ?", (-(-end // SLOT_SECONDS),)))
    slot_size, buckets = _time_buckets(q, c, t, conds)
    if buckets is None:
        return None
    if slot_size != SLOT_SECONDS or any(b is not None and b % SLOT_SECONDS for b in (start, end)):
        return _collect_facts(c, q, _time_conds(start, end))  # a zone off the 15-minute grid
    k = buckets.slot // SLOT_SECONDS
    group = f"{t}.slot / {int(k)}" if k > 1 else f"{t}.slot"
    if buckets.slot % 86400 == 0 and all(b is None or b % 86400 == 0 for b in (start, end)):
        # buckets of whole UTC days (a UTC zone, or one whose days start at 00:00 UTC):
        # report_days has ~1/15 of report_slots' rows for the same sums
        t = DAYS
        days = buckets.slot // 86400
        group = f"{t}.day / {int(days)}" if days > 1 else f"{t}.day"
        conds = [Sql(f"{t}.day {op} ?", (b // 86400,)) for b, op in ((start, ">="), (end, "<")) if b is not None]
    cols = [group]
    groups = [group]
    if q.breakdown:
        cols.append(f"{t}.model_key")
        groups.append(f"{t}.model_key")
    cols += _run_aggregates(q, t)
    if q.breakdown:
        cols += _model_aggregates(q, t)
    width = k * SLOT_SECONDS
    label_of = buckets.label_of_epoch
    col = _Collector(q)
    col.add(_rows(c, _select(cols, t, conds, groups)), lambda g: label_of(int(g) * width), _none_if_empty)
    return col


def _collect_served(c: Conn, q: ReportQuery, conds: list[Sql]) -> _Collector:
    """`report model`: usage grouped by the model that served it (issue 25). A run that used
    two models is in both rows, each with that model's tokens and cost; its run-level figures
    (outcome, gaps, no usage) in each (the totals count it once). Per (model, run) first, from
    its fact rows (an imported session has one per slot), then per model; a model's cost in a
    run is known when every one of its rows' is."""
    f = FACTS
    cost, part = f"{f}.cost_{q.cost}", f"{f}.cost_{q.cost}_partial"
    if q.cost == "auto":
        bases = f"min({f}.basis_auto) AS bmin, max({f}.basis_auto) AS bmax"
    else:
        bases = f"{_basis_literal(q)} AS bmin, {_basis_literal(q)} AS bmax"
    inner = _select(
        [f"{f}.model_key AS model", f"{f}.home_id AS home_id", f"{f}.run_id AS run_id",
         *(f"sum({f}.{n}) AS {n}" for n in TOKENS),
         f"CASE WHEN count({cost}) = count(*) THEN sum({cost}) END AS known",
         f"CASE WHEN count({cost}) < count(*) AND (count({cost}) > 0 OR count({part}) > 0) "
         f"THEN coalesce(sum({cost}), 0) + coalesce(sum({part}), 0) END AS part", bases],
        f, [*conds, Sql(f"{f}.model_key <> ?", (START_KEY,))], [f"{f}.model_key", f"{f}.home_id", f"{f}.run_id"])
    r = "served_run"
    cols = ["m.model", "count(*)", *(f"sum(m.{n})" for n in TOKENS), "sum(m.known)", "count(m.known)",
            "min(m.bmin)", "max(m.bmax)", *(f"sum({r}.{n})" for n in ("failed", "interrupted", "abandoned",
                                                                        "unverified", "evidence_gaps", "no_usage")),
            "sum(m.part)", f"sum({r}.piece)"]
    stmt = Sql(f"SELECT {', '.join(cols)} FROM ({inner.text}) AS m JOIN {f} AS {r} ON {r}.home_id = m.home_id "
               f"AND {r}.run_id = m.run_id AND {r}.first = 1 GROUP BY m.model", inner.params)
    col = _Collector(_Served(q))  # type: ignore[arg-type]
    rows = [(_none_if_empty(r[0]), *r[1:]) for r in _rows(c, stmt)]
    col.add(rows)
    col.q = q
    if q.breakdown:  # (a row holds one model: its breakdown is itself)
        for row in rows:
            v = [_num(x) for x in row[1:]]
            col.groups[row[0]].add_model(row[0], [v[RUNS], *v[IN:RS + 1], v[COST], v[COST_N], v[BMIN], v[BMAX],
                                                  v[PART]])
    return col


class _Served:
    """(The query as _Collector reads it for report model's rows: no --breakdown columns.)"""

    def __init__(self, q: ReportQuery) -> None:
        self.breakdown = False
        self.evaluation = False


def _collect_days(c: Conn, q: ReportQuery, start: int | None, end: int | None) -> _Collector:
    """`model` / `harness` reports: report_days for the whole UTC days of the range, the
    facts for the partial days at its ends."""
    t = DAYS
    col = _Collector(q)
    filters = _filter_conds(q, c)
    day_lo = None if start is None else -(-start // 86400)
    day_hi = None if end is None else end // 86400
    if day_lo is not None and day_hi is not None and day_lo >= day_hi:
        col.add(_rows(c, _facts_stmt(q, _time_conds(start, end) + filters)))
        return col
    conds = []
    if day_lo is not None:
        conds.append(Sql(f"{t}.day >= ?", (day_lo,)))
    if day_hi is not None:
        conds.append(Sql(f"{t}.day < ?", (day_hi,)))
    flt = q.filters
    if flt.get("harness"):
        conds.append(_match(f"{t}.harness", flt["harness"]))
    if flt.get("outcome"):
        conds.append(_match(f"{t}.outcome", flt["outcome"]))
    key = f"{t}.run_model_key" if q.kind == "model" else f"{t}.harness"
    cols = [key]
    group = [key]
    if q.breakdown:
        cols.append(f"{t}.model_key")
        group.append(f"{t}.model_key")
    cols += _run_aggregates(q, t)
    if q.breakdown:
        cols += _model_aggregates(q, t)
    col.add(_rows(c, _select(cols, t, conds, group)), _none_if_empty if q.kind == "model" else None, _none_if_empty)
    for lo, hi in ((start, None if day_lo is None else day_lo * 86400), (None if day_hi is None else day_hi * 86400, end)):
        if lo is not None and hi is not None and lo < hi:
            col.add(_rows(c, _facts_stmt(q, _time_conds(lo, hi) + filters)))
    return col


def _collect_facts(c: Conn, q: ReportQuery, conds: list[Sql], fast: bool = True) -> _Collector | None:
    col = _Collector(q, n_extra=len(_run_extra()) if q.kind == "run" else 0)
    if q.kind == "run" and q.limit is not None:
        # the top N runs first (one ordered scan of the first rows), then only their rows
        keys = _top_run_keys(c, q, conds, fast)
        if keys:
            col.add(_rows(c, _facts_stmt(q, [keys_in(keys)])))
        return col
    if not q.is_time:
        if q.limit is not None:  # the first groups only, chosen in SQL
            return _collect_top(c, q, conds)
        col.add(_rows(c, _facts_stmt(q, conds)))
        if q.kind == "subject":
            _add_more_subjects(c, q, conds, col)
        return col
    slot_size, buckets = _time_buckets(q, c, FACTS, conds)
    if buckets is None:
        return None
    labels: dict[int, Any] = {}
    label_of = buckets.label_of_epoch

    def key_of(slot: int) -> Any:
        k = labels.get(slot)
        if k is None:
            k = labels[slot] = label_of(int(slot) * slot_size)
        return k

    col.add(_rows(c, _facts_stmt(q, conds, slot_size)), key_of)
    return col
