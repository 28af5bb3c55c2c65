"""Report queries: aggregate `report_facts` in SQL, regroup time buckets in Python.

One implementation for SQLite and PostgreSQL: the SQL is plain GROUP BY with sums and
counts. Time kinds group by the 15-minute UTC slot (the clustering key of report_facts, so
SQLite streams the groups without sorting) and `buckets` maps each slot to its local day,
week or month; every aggregate is a sum, count, min or max, so slots merge exactly.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import date, datetime, timezone, tzinfo
from typing import Any, Iterable, Sequence

import sqlalchemy as sa

from ledger.index.models import RunSubject
from ledger.report.buckets import PERIODS, Buckets, ReportError, epoch, make_buckets, utc_range
from ledger.report.costs import COST_MODES, group_basis
from ledger.report.models import ESTIMATED, REPORTED, SLOT_SECONDS, ReportFact

KINDS = ("daily", "weekly", "monthly", "run", "session", "model", "harness", "skill", "subject", "repo", "host")
EVALUATION_KINDS = ("subject", "skill")
OUTCOMES = ("completed", "failed", "interrupted", "abandoned", "running", "unknown")
FILTERS = ("harness", "model", "skill", "subject", "repo", "host", "outcome")
TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
# total_tokens = input + output + cache read + cache write (output already includes reasoning)
TOTAL_PARTS = TOKENS[:4]
COST_DIGITS = 10

facts_t = ReportFact.__table__
subjects_t = RunSubject.__table__
_KEY_COLUMNS = {"run": "run_id", "session": "session", "model": "run_model", "harness": "harness", "skill": "skill",
                "repo": "repo", "host": "host"}


@dataclass
class ReportQuery:
    kind: str = "daily"
    zone: tzinfo = timezone.utc
    zone_name: str = "UTC"
    since: date | None = None
    until: date | None = None
    week_start: str = "monday"
    filters: dict[str, list[str]] = field(default_factory=dict)
    breakdown: bool = False
    order: str | None = None  # asc | desc | None (the kind's default)
    limit: int | None = None
    cost: str = "auto"
    evaluation: bool | None = None  # None: on for subject / skill

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ReportError(f"unknown report {self.kind!r}; expected one of {', '.join(KINDS)}")
        if self.cost not in COST_MODES:
            raise ReportError(f"unknown --cost {self.cost!r}; expected one of {', '.join(COST_MODES)}")
        if self.order not in (None, "asc", "desc"):
            raise ReportError(f"unknown --order {self.order!r}; expected asc or desc")
        if self.limit is not None and self.limit < 0:
            raise ReportError("--limit must be 0 or more")
        for name, values in self.filters.items():
            if name not in FILTERS:
                raise ReportError(f"unknown filter {name!r}")
            if name == "outcome":
                bad = [v for v in values if v not in OUTCOMES]
                if bad:
                    raise ReportError(f"unknown --outcome {bad[0]!r}; expected one of {', '.join(OUTCOMES)}")
        if self.evaluation is None:
            self.evaluation = self.kind in EVALUATION_KINDS

    @property
    def is_time(self) -> bool:
        return self.kind in PERIODS


# --------------------------------------------------------------------------------------
# accumulators (every field merges by +, min or max)

# run-level positions in Agg.v
RUNS, IN, OUT, CR, CW, RS, COST, COST_N, BMIN, BMAX, FAILED, INTR, ABAND, UNVER, GAPS, NO_USAGE = range(16)
N_RUN = 16
# breakdown (per-model) positions in ModelAgg.v
M_ROWS, M_IN, M_OUT, M_CR, M_CW, M_RS, M_COST, M_COST_N, M_BMIN, M_BMAX = range(10)
N_MODEL = 10
assert (BMIN, BMAX) == (M_BMIN, M_BMAX) == (8, 9)


def _merge(dst: list, src: Sequence, start: int, n: int) -> None:
    """dst[i] (+)= src[start + i]: sums, except min at 8 and max at 9; None is unknown."""
    for i in range(n):
        x = src[start + i]
        if x is None:
            continue
        cur = dst[i]
        if cur is None:
            dst[i] = x
        elif i == 8:
            if x < cur:
                dst[i] = x
        elif i == 9:
            if x > cur:
                dst[i] = x
        else:
            dst[i] = cur + x


def _num(v: Any) -> Any:
    """PostgreSQL sums BIGINT into NUMERIC: bring Decimals back to int / float."""
    if v is None or isinstance(v, (int, float)):
        return v
    from decimal import Decimal

    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    return v


class Agg:
    """The mergeable aggregate of a group (and of its models with --breakdown)."""

    __slots__ = ("v", "models", "costs", "durations")

    def __init__(self) -> None:
        self.v: list[Any] = [None] * N_RUN
        self.models: dict[str | None, list[Any]] = {}
        self.costs: list[float] = []
        self.durations: list[int] = []

    def add(self, row: Sequence[Any], start: int = 0) -> None:
        _merge(self.v, row, start, N_RUN)

    def add_model(self, model: str | None, row: Sequence[Any], start: int = 0) -> None:
        cur = self.models.get(model)
        if cur is None:
            cur = self.models[model] = [None] * N_MODEL
        _merge(cur, row, start, N_MODEL)

    def merge(self, other: "Agg") -> None:
        _merge(self.v, other.v, 0, N_RUN)
        for m, vals in other.models.items():
            self.add_model(m, vals)


def _cost_fields(runs: int, cost: float | None, known: int, bmin: int | None, bmax: int | None) -> dict[str, Any]:
    basis = group_basis(runs, known, bmin, bmax)
    known_sum = round(cost, COST_DIGITS) if cost is not None and known else None
    return {
        "cost_usd": known_sum if basis in ("reported", "estimated", "mixed") else None,
        "cost_basis": basis,
        "cost_usd_known": known_sum,
        "unmeasured_cost_runs": runs - known,
    }


def _tokens(values: Sequence[Any], first: int) -> dict[str, Any]:
    out = {name: values[first + i] for i, name in enumerate(TOKENS)}
    parts = [out[n] for n in TOTAL_PARTS if out[n] is not None]
    out["total_tokens"] = sum(parts) if parts else None
    return out


def row_dict(key: Any, agg: Agg, q: ReportQuery) -> dict[str, Any]:
    v = [_num(x) for x in agg.v]
    runs = v[RUNS] or 0
    d: dict[str, Any] = {"key": key, "runs": runs}
    d.update(_tokens(v, IN))
    d["unmeasured_usage_runs"] = v[NO_USAGE] or 0
    d.update(_cost_fields(runs, v[COST], v[COST_N] or 0, v[BMIN], v[BMAX]))
    d.update({"failed": v[FAILED] or 0, "interrupted": v[INTR] or 0, "abandoned": v[ABAND] or 0,
              "unverified": v[UNVER] or 0, "evidence_gaps": v[GAPS] or 0})
    if q.evaluation:
        d["median_cost_usd"] = round(statistics.median(agg.costs), COST_DIGITS) if agg.costs else None
        d["median_duration_ms"] = int(statistics.median(agg.durations)) if agg.durations else None
    if q.breakdown:
        models = []
        for m, mv in agg.models.items():
            mv = [_num(x) for x in mv]
            rows = mv[M_ROWS] or 0
            md: dict[str, Any] = {"model": m, "runs": rows}
            md.update(_tokens(mv, M_IN))
            md.update(_cost_fields(rows, mv[M_COST], mv[M_COST_N] or 0, mv[M_BMIN], mv[M_BMAX]))
            models.append(md)
        models.sort(key=lambda x: (-(x["cost_usd_known"] or 0), -(x["total_tokens"] or 0), x["model"] or ""))
        d["models"] = models
    return d


# --------------------------------------------------------------------------------------
# SQL


def _cost_columns(q: ReportQuery) -> tuple[Any, Any, Any | None]:
    """(run-level cost column, per-model cost column, basis code column or None)."""
    f = facts_t.c
    if q.cost == "reported":
        return f.run_cost_reported, f.cost_reported, None
    if q.cost == "estimated":
        return f.run_cost_estimated, f.cost_estimated, None
    return f.run_cost_auto, f.cost_auto, f.basis_auto


def _run_aggregates(q: ReportQuery) -> list[Any]:
    f = facts_t.c
    run_cost, _, _ = _cost_columns(q)
    if q.cost == "auto":
        bmin, bmax = sa.func.min(f.run_basis_auto), sa.func.max(f.run_basis_auto)
    else:
        code = REPORTED if q.cost == "reported" else ESTIMATED
        bmin = bmax = sa.literal(code)
    return [sa.func.sum(f.first), *(sa.func.sum(f[t]) for t in TOKENS), sa.func.sum(run_cost),
            sa.func.count(run_cost), bmin, bmax, sa.func.sum(f.failed), sa.func.sum(f.interrupted),
            sa.func.sum(f.abandoned), sa.func.sum(f.unverified), sa.func.sum(f.evidence_gaps),
            sa.func.sum(f.no_usage)]


def _model_aggregates(q: ReportQuery) -> list[Any]:
    f = facts_t.c
    _, cost, basis = _cost_columns(q)
    if basis is not None:
        bmin, bmax = sa.func.min(basis), sa.func.max(basis)
    else:
        code = REPORTED if q.cost == "reported" else ESTIMATED
        bmin = bmax = sa.literal(code)
    return [sa.func.count(), *(sa.func.sum(f[t]) for t in TOKENS), sa.func.sum(cost), sa.func.count(cost),
            bmin, bmax]


def _match(col: Any, values: Sequence[str]) -> Any:
    """Exact values, or shell-style `*` wildcards (e.g. `claude-*`)."""
    exact = [v for v in values if "*" not in v]
    conds = []
    if exact:
        conds.append(col.in_(exact))
    for v in values:
        if "*" in v:
            pat = v.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_").replace("*", "%")
            conds.append(col.like(pat, escape="\\"))
    return sa.or_(*conds)


def _models_match(values: Sequence[str]) -> Any:
    f = facts_t.c
    conds = []
    for v in values:
        pat = v.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_").replace("*", "%")
        conds.append(f.models.like(f"%|{pat}|%", escape="\\"))
    return sa.or_(*conds)


def time_bounds(q: ReportQuery) -> tuple[int | None, int | None]:
    """[start, end) of the report in UTC epoch seconds (None: open)."""
    start, end = utc_range(q.since, q.until, q.zone)
    return (epoch(start) if start else None, epoch(end) if end else None)


def _where(q: ReportQuery) -> list[Any]:
    f = facts_t.c
    conds: list[Any] = []
    start, end = time_bounds(q)
    for bound, op in ((start, "ge"), (end, "lt")):
        if bound is None:
            continue
        if bound % SLOT_SECONDS == 0:  # on a slot boundary: a range on the clustering key
            conds.append(f.slot >= bound // SLOT_SECONDS if op == "ge" else f.slot < bound // SLOT_SECONDS)
        else:
            conds.append(f.created_s >= bound if op == "ge" else f.created_s < bound)
    flt = q.filters
    for name, col in (("harness", f.harness), ("skill", f.skill), ("repo", f.repo), ("host", f.host),
                      ("outcome", f.outcome)):
        if flt.get(name):
            conds.append(_match(col, flt[name]))
    if flt.get("model"):
        conds.append(_models_match(flt["model"]))
    if flt.get("subject"):
        s = subjects_t.c
        conds.append(sa.exists().where(s.home_id == f.home_id, s.run_id == f.run_id,
                                       _match(s.selector, flt["subject"])))
    return conds


@dataclass
class Report:
    query: ReportQuery
    rows: list[dict[str, Any]]
    totals: dict[str, Any]
    pricing: dict[str, Any]
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        q = self.query
        return {
            "report": q.kind,
            "query": {
                "tz": q.zone_name, "since": q.since.isoformat() if q.since else None,
                "until": q.until.isoformat() if q.until else None,
                "week_start": q.week_start if q.kind == "weekly" else None,
                "filters": {k: v for k, v in sorted(q.filters.items()) if v}, "cost": q.cost,
                "breakdown": q.breakdown, "order": resolved_order(q), "limit": q.limit,
            },
            "rows": self.rows, "totals": self.totals, "pricing": self.pricing,
        }


def resolved_order(q: ReportQuery) -> str:
    return q.order or ("asc" if q.is_time else "desc")


def _key_column(q: ReportQuery, slot_size: int) -> Any:
    f = facts_t.c
    if q.is_time:
        return f.slot if slot_size == SLOT_SECONDS else f.created_s / slot_size
    if q.kind == "subject":
        return subjects_t.c.selector
    return f[_KEY_COLUMNS[q.kind]]


def _slot_size(q: ReportQuery, conn: Any, conds: list[Any]) -> tuple[int, Buckets | None]:
    """The SQL grouping slot for a time report, and the buckets covering its data.

    The 15-minute slot (the clustering key) whenever every bucket boundary falls on one;
    else (a historical offset in seconds) the largest slot that divides them all."""
    f = facts_t.c
    lo, hi = conn.execute(sa.select(sa.func.min(f.slot), sa.func.max(f.slot)).where(*conds)).one()
    if lo is None:
        return SLOT_SECONDS, None
    first = datetime.fromtimestamp(int(lo) * SLOT_SECONDS, timezone.utc)
    last = datetime.fromtimestamp((int(hi) + 1) * SLOT_SECONDS - 1, timezone.utc)
    buckets = make_buckets(first, last, q.zone, q.kind, q.week_start)
    return (SLOT_SECONDS if buckets.slot >= SLOT_SECONDS else buckets.slot), buckets


def _top_runs(q: ReportQuery, conds: list[Any]) -> Any:
    """`report run --limit N`: the N runs to show, chosen in SQL (same order as _sort_rows)."""
    f = facts_t.c
    run_cost, _, _ = _cost_columns(q)
    desc = resolved_order(q) == "desc"
    tokens = sa.func.coalesce(f.run_total_tokens, -1)
    order = [run_cost.is_(None), run_cost.desc() if desc else run_cost.asc(),
             tokens.desc() if desc else tokens.asc(), f.run_id.desc() if desc else f.run_id.asc()]
    return sa.select(f.home_id, f.run_id).where(f.first == 1, *conds).order_by(*order).limit(q.limit)


def run_report(conn: Any, q: ReportQuery) -> Report:
    """Answer `q` from report_facts on `conn` (which sees a synced index)."""
    import time

    t0 = time.perf_counter()
    f = facts_t.c
    conds = _where(q)
    buckets: Buckets | None = None
    slot_size = SLOT_SECONDS
    if q.is_time:
        slot_size, buckets = _slot_size(q, conn, conds)
        if buckets is None:
            return _finish(q, {}, Agg(), conn, conds, t0)
    key = _key_column(q, slot_size)
    aggs = _run_aggregates(q)
    src: Any = facts_t
    if q.kind == "subject":
        s = subjects_t.c
        src = facts_t.outerjoin(subjects_t, sa.and_(s.home_id == f.home_id, s.run_id == f.run_id))
    group_conds = list(conds)
    separate_totals = q.kind == "subject"  # a run with several subjects is in several groups
    extra: list[Any] = []
    group_by: list[Any] = [key]
    if q.kind == "run":
        extra = [sa.func.max(f.created_s), sa.func.max(f.harness), sa.func.max(f.run_model),
                 sa.func.max(f.outcome), sa.func.max(f.duration_ms)]
        group_by = [f.home_id, f.run_id]
        if q.limit is not None:
            group_conds.append(sa.tuple_(f.home_id, f.run_id).in_(_top_runs(q, conds)))
            separate_totals = True
    cols: list[Any] = [key]
    if q.breakdown:
        cols.append(f.model)
        group_by.append(f.model)
    cols += aggs
    if q.breakdown:
        cols += _model_aggregates(q)
    cols += extra
    stmt = sa.select(*cols).select_from(src).where(*group_conds).group_by(*group_by)
    groups: dict[Any, Agg] = {}
    info: dict[Any, list[Any]] = {}
    base = 2 if q.breakdown else 1
    mbase = base + N_RUN
    n_extra = len(extra)
    if q.is_time:
        assert buckets is not None
        label_of = buckets.label_of_epoch
        labels: dict[int, Any] = {}
        for row in conn.execute(stmt).fetchall():
            slot = row[0]
            k = labels.get(slot)
            if k is None:
                k = labels[slot] = label_of(int(slot) * slot_size)
            agg = groups.get(k)
            if agg is None:
                agg = groups[k] = Agg()
            agg.add(row, base)
            if q.breakdown:
                agg.add_model(row[1], row, mbase)
    else:
        for row in conn.execute(stmt).fetchall():
            k = row[0]
            agg = groups.get(k)
            if agg is None:
                agg = groups[k] = Agg()
            agg.add(row, base)
            if q.breakdown:
                agg.add_model(row[1], row, mbase)
            if n_extra:
                info[k] = list(row[-n_extra:])
    if q.evaluation:
        _medians(conn, q, conds, groups)
    totals = Agg()
    if separate_totals:
        totals.add(conn.execute(sa.select(*aggs).select_from(facts_t).where(*conds)).one())
    else:
        for agg in groups.values():
            totals.merge(agg)
    if q.evaluation:
        _medians(conn, q, conds, {None: totals}, totals_only=True)
    return _finish(q, groups, totals, conn, conds, t0, info)


def _medians(conn: Any, q: ReportQuery, conds: list[Any], groups: dict[Any, Agg], totals_only: bool = False) -> None:
    f = facts_t.c
    run_cost, _, _ = _cost_columns(q)
    if totals_only:
        stmt = sa.select(sa.literal(None), run_cost, f.duration_ms).where(f.first == 1, *conds)
    elif q.kind == "subject":
        s = subjects_t.c
        stmt = (sa.select(s.selector, run_cost, f.duration_ms)
                .select_from(facts_t.outerjoin(subjects_t, sa.and_(s.home_id == f.home_id, s.run_id == f.run_id)))
                .where(f.first == 1, *conds))
    else:
        stmt = sa.select(_key_column(q, SLOT_SECONDS), run_cost, f.duration_ms).where(f.first == 1, *conds)
    for k, cost, dur in conn.execute(stmt):
        agg = groups.get(k)
        if agg is None:
            continue
        if cost is not None:
            agg.costs.append(float(cost))
        if dur is not None:
            agg.durations.append(int(dur))


def _sort_rows(q: ReportQuery, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Time reports by bucket; others by known cost, then tokens, runs, key. Unknown costs last."""
    desc = resolved_order(q) == "desc"
    if q.is_time:
        return sorted(rows, key=lambda d: d["key"] or "", reverse=desc)

    def by(d: dict[str, Any]) -> tuple:
        return (d["cost_usd_known"] or 0.0, d["total_tokens"] if d["total_tokens"] is not None else -1,
                d["runs"], "" if d["key"] is None else str(d["key"]))

    known = sorted((d for d in rows if d["cost_usd_known"] is not None), key=by, reverse=desc)
    unknown = sorted((d for d in rows if d["cost_usd_known"] is None), key=by, reverse=desc)
    return known + unknown


def _finish(q: ReportQuery, groups: dict[Any, Agg], totals: Agg, conn: Any, conds: list[Any], t0: float,
            info: dict[Any, list[Any]] | None = None) -> Report:
    import time

    rows = [row_dict(k, agg, q) for k, agg in groups.items()]
    if q.kind == "run" and info:
        for d in rows:
            created_s, harness, model, outcome, duration = info[d["key"]]
            d["started"] = datetime.fromtimestamp(int(created_s), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            d.update({"harness": harness, "model": model, "outcome": outcome, "duration_ms": _num(duration)})
    rows = _sort_rows(q, rows)
    if q.limit is not None:
        rows = rows[:q.limit]
    tot = row_dict("total", totals, q)
    tot.pop("key")
    pricing = _pricing(conn, q, conds)
    return Report(query=q, rows=rows, totals=tot, pricing=pricing, seconds=time.perf_counter() - t0)


def _pricing(conn: Any, q: ReportQuery, conds: list[Any]) -> dict[str, Any]:
    """The price data version and every reason a figure of this report is unknown."""
    from ledger.pricing import price_data_version

    f = facts_t.c
    _, cost, _ = _cost_columns(q)
    unknown: list[dict[str, Any]] = []
    if q.cost != "reported":
        stmt = (sa.select(f.model, f.unpriced, sa.func.count(sa.distinct(f.run_id)))
                .where(f.unpriced.is_not(None), cost.is_(None), *conds).group_by(f.model, f.unpriced)
                .order_by(f.model, f.unpriced))
        for model, reason, n in conn.execute(stmt):
            unknown.append({"model": model, "reason": reason, "runs": int(n)})
    else:
        n = conn.execute(sa.select(sa.func.count(sa.distinct(f.run_id))).where(cost.is_(None), *conds)).scalar_one()
        if n:
            unknown.append({"model": None, "reason": "no provider-reported cost", "runs": int(n)})
    return {"cost": q.cost, "price_data": price_data_version(), "unpriced": unknown}
