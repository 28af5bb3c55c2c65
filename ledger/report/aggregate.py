"""Report queries: aggregate in SQL, regroup time buckets in Python.

One implementation for SQLite and PostgreSQL: plain GROUP BY with sums, counts, min and
max, so partial aggregates merge exactly. Each report reads the smallest table that can
answer it (`_source`): `report_slots` (time reports without filters), `report_days`
(`model` / `harness`, plus the facts of partial days at the ends of the range), else
`report_facts`. Time reports group by the 15-minute UTC slot (the clustering key) and
`buckets` maps each slot to its local day, week or month. A group-by report with `--limit`
ranks its groups in SQL and reads only those it can show (`_collect_top`); the evaluation
view's verdict counts are SQL sums, its medians one narrow read of the runs' two figures.

The SQL is written out (`Sql`: text with `?` placeholders and its parameters) and run through
the database driver (ledger.index.rawread): answering from an index that is already up to
date loads no SQLAlchemy (issue 10).
"""

from __future__ import annotations

from datetime import date, datetime, timezone, tzinfo
from typing import Any, Iterable, Sequence

from ledger.index.rawread import Conn, wrap
from ledger.plainclass import FrozenPlain, Plain
from ledger.report.buckets import PERIODS, Buckets, ReportError, bound_text, epoch, make_buckets, utc_range
from ledger.report.costs import COST_MODES, group_basis, whole_cost_sql
from ledger.report.schema import START_KEY
from ledger.report.sqltext import Sql, _and, _key_in, _or
from ledger.report.kinds import (
    ESTIMATED, EVALUATION_KINDS, FILTERS, KINDS, OUTCOMES, REPORTED, SLOT_SECONDS, TOKEN_COLUMNS, VERDICT_FACTS,
    known_outcome,
)

TOKENS = TOKEN_COLUMNS
# total_tokens = input + output + cache read + cache write (output already includes reasoning)
TOTAL_PARTS = TOKENS[:4]
COST_DIGITS = 10
RATE_DIGITS = 6

FACTS, SLOTS, DAYS, GROUPS = "report_facts", "report_slots", "report_days", "report_groups"
# report_groups' kinds, and those whose runs' figures it keeps sorted (ledger.index.report_tables
# GROUP_KINDS, ledger.report.sync.VALUE_KINDS: tests/test_report_groups.py checks they agree)
GROUP_KINDS = ("session", "skill")
VALUE_KINDS = ("skill",)
_KEY_COLUMNS = {"run": "run_id", "session": "session", "subject": "subject", "model": "run_model", "harness": "harness", "skill": "skill",
                "repo": "repo", "host": "host", "home": "home_id"}


class ReportQuery(Plain):
    """What to report (a dataclass, written out: ledger.plainclass)."""

    __slots__ = ("kind", "zone", "zone_name", "since", "until", "week_start", "filters", "breakdown", "order",
                 "limit", "cost", "evaluation")

    def __init__(self, kind: str = "daily", zone: tzinfo = timezone.utc, zone_name: str = "UTC",
                 since: date | None = None, until: date | None = None,  # a day, or an instant (a datetime)
                 week_start: str = "monday",
                 filters: dict[str, list[str]] | None = None, breakdown: bool = False,
                 order: str | None = None,  # asc | desc | None (the kind's default)
                 limit: int | None = None, cost: str = "auto",
                 evaluation: bool | None = None,  # None: on for subject / skill
                 ) -> None:
        self.kind = kind
        self.zone = zone
        self.zone_name = zone_name
        self.since = since
        self.until = until
        self.week_start = week_start
        self.filters = {} if filters is None else filters
        self.breakdown = breakdown
        self.order = order
        self.limit = limit
        self.cost = cost
        self.evaluation = evaluation
        self.__post_init__()

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
                bad = [v for v in values if not known_outcome(v)]
                if bad:
                    raise ReportError(f"unknown --outcome {bad[0]!r}; expected one of {', '.join(OUTCOMES)}")
        if self.evaluation is None:
            self.evaluation = self.kind in EVALUATION_KINDS

    @property
    def is_time(self) -> bool:
        return self.kind in PERIODS


# --------------------------------------------------------------------------------------
# accumulators (every field merges by +, min or max)

# The vectors a group accumulates: (field, how two groups merge), in the order the SQL
# selects them (see _run_vector / _model_vector). Positions are derived from these lists.
# cost: sum of fully known costs, cost_n: how many; cost_partial: sum of the known parts of
# the costs that are not fully known; basis_min/max: the cost basis codes seen.
RUN_VECTOR = (("runs", "sum"), ("input_tokens", "sum"), ("output_tokens", "sum"), ("cache_read_tokens", "sum"),
              ("cache_write_tokens", "sum"), ("reasoning_tokens", "sum"), ("cost", "sum"), ("cost_n", "sum"),
              ("basis_min", "min"), ("basis_max", "max"), ("failed", "sum"), ("interrupted", "sum"),
              ("abandoned", "sum"), ("unverified", "sum"), ("evidence_gaps", "sum"), ("no_usage", "sum"),
              ("cost_partial", "sum"), ("pieces", "sum"))
MODEL_VECTOR = (("rows", "sum"), ("input_tokens", "sum"), ("output_tokens", "sum"), ("cache_read_tokens", "sum"),
                ("cache_write_tokens", "sum"), ("reasoning_tokens", "sum"), ("cost", "sum"), ("cost_n", "sum"),
                ("basis_min", "min"), ("basis_max", "max"), ("cost_partial", "sum"))
_RUN_POS = {name: i for i, (name, _) in enumerate(RUN_VECTOR)}
_MODEL_POS = {name: i for i, (name, _) in enumerate(MODEL_VECTOR)}
_RUN_OPS = tuple(op for _, op in RUN_VECTOR)
_MODEL_OPS = tuple(op for _, op in MODEL_VECTOR)
N_RUN, N_MODEL = len(RUN_VECTOR), len(MODEL_VECTOR)
# run-level positions in Agg.v
(RUNS, IN, OUT, CR, CW, RS, COST, COST_N, BMIN, BMAX, FAILED, INTR, ABAND, UNVER, GAPS, NO_USAGE, PART, PIECES) = (
    _RUN_POS[n] for n in ("runs", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                          "reasoning_tokens", "cost", "cost_n", "basis_min", "basis_max", "failed", "interrupted",
                          "abandoned", "unverified", "evidence_gaps", "no_usage", "cost_partial", "pieces"))
# per-model positions in Agg.models[model]
(M_ROWS, M_IN, M_OUT, M_CR, M_CW, M_RS, M_COST, M_COST_N, M_BMIN, M_BMAX, M_PART) = (
    _MODEL_POS[n] for n in ("rows", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                            "reasoning_tokens", "cost", "cost_n", "basis_min", "basis_max", "cost_partial"))


def _merge(dst: list, src: Sequence, start: int, ops: tuple[str, ...]) -> None:
    """dst[i] (op)= src[start + i] with each field's merge (sum, min or max); None is unknown."""
    for i, op in enumerate(ops):
        x = src[start + i]
        if x is None:
            continue
        cur = dst[i]
        if cur is None:
            dst[i] = x
        elif op == "sum":
            dst[i] = cur + x
        elif op == "min":
            if x < cur:
                dst[i] = x
        elif x > cur:  # max
            dst[i] = x


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

    __slots__ = ("v", "models", "medians", "verdicts")

    def __init__(self) -> None:
        self.v: list[Any] = [None] * N_RUN
        self.models: dict[str | None, list[Any]] = {}
        self.medians: list[Any] = [None, None]  # of the runs' known costs, of their durations (_medians)
        self.verdicts: list[int] = [0] * len(VERDICT_FACTS)  # the evaluation view's (sums in SQL)

    def add(self, row: Sequence[Any], start: int = 0) -> None:
        _merge(self.v, row, start, _RUN_OPS)

    def add_model(self, model: str | None, row: Sequence[Any], start: int = 0) -> None:
        cur = self.models.get(model)
        if cur is None:
            cur = self.models[model] = [None] * N_MODEL
        _merge(cur, row, start, _MODEL_OPS)

    def add_verdicts(self, row: Sequence[Any], start: int) -> None:
        self.verdicts = [a + int(_num(row[start + i]) or 0) for i, a in enumerate(self.verdicts)]

    def merge(self, other: "Agg") -> None:
        _merge(self.v, other.v, 0, _RUN_OPS)
        for m, vals in other.models.items():
            self.add_model(m, vals)
        self.verdicts = [a + b for a, b in zip(self.verdicts, other.verdicts)]


NOT_APPLICABLE = "not_applicable"  # the basis of a group of plain commands only


def _cost_fields(runs: int, cost: float | None, known: int, bmin: int | None, bmax: int | None,
                 part: float | None = None) -> dict[str, Any]:
    """cost_usd / cost_basis / cost_usd_known / unmeasured_cost_runs of a group: the known
    sum counts the fully known runs and the known part of the others (money never goes
    missing), but only a group whose every run is fully known has a cost_usd."""
    basis = group_basis(runs, known, bmin, bmax, partly_known=part is not None)
    pieces = [v for v in ((cost if known else None), part) if v is not None]
    known_sum = round(sum(pieces), COST_DIGITS) if pieces else None
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
    # costs are known or not per piece: a run record is one, an imported session one per slot
    # it spent in (a day holding only its later part has pieces but no run)
    d.update(_cost_fields(v[PIECES] or 0, v[COST], v[COST_N] or 0, v[BMIN], v[BMAX], v[PART]))
    if runs and not v[PIECES]:  # only plain commands: no cost can exist (docs/report.md)
        d["cost_basis"] = NOT_APPLICABLE
    d.update({"failed": v[FAILED] or 0, "interrupted": v[INTR] or 0, "abandoned": v[ABAND] or 0,
              "unverified": v[UNVER] or 0, "evidence_gaps": v[GAPS] or 0})
    if q.evaluation:
        cost, duration = agg.medians
        d["median_cost_usd"] = None if cost is None else round(cost, COST_DIGITS)
        d["median_duration_ms"] = None if duration is None else int(duration)
        d.update(_verdict_fields(agg.verdicts))
    if q.breakdown:
        models = []
        for m, mv in agg.models.items():
            if m == START_KEY:  # (a session's start row: no model spent there)
                continue
            mv = [_num(x) for x in mv]
            rows = mv[M_ROWS] or 0
            md: dict[str, Any] = {"model": m, "runs": rows}
            md.update(_tokens(mv, M_IN))
            md.update(_cost_fields(rows, mv[M_COST], mv[M_COST_N] or 0, mv[M_BMIN], mv[M_BMAX], mv[M_PART]))
            models.append(md)
        models.sort(key=lambda x: (-(x["cost_usd_known"] or 0), -(x["total_tokens"] or 0), x["model"] or ""))
        d["models"] = models
    return d


# --------------------------------------------------------------------------------------
# SQL: the same two aggregate vectors (run-level, per-model) over report_facts or a rollup


def _select(cols: Sequence[str], table: str, conds: Sequence[Sql] = (), group: Sequence[str] = (),
            tail: str = "") -> Sql:
    """SELECT cols FROM table [WHERE conds] [GROUP BY group] [tail]."""
    where = _and(conds) if conds else Sql("")
    return Sql(f"SELECT {', '.join(cols)} FROM {table}" + (f" WHERE {where.text}" if conds else "")
               + (f" GROUP BY {', '.join(group)}" if group else "") + tail, where.params)


def _rows(c: Conn, stmt: Sql) -> list[tuple]:
    return c.rows(stmt.text, stmt.params)


def _basis_literal(q: ReportQuery) -> str:
    return str(REPORTED if q.cost == "reported" else ESTIMATED)


def _run_aggregates(q: ReportQuery, t: str | None = None) -> list[str]:
    """The run-level vector (RUNS .. NO_USAGE) over report_facts, or over rollup table `t`."""
    flags = ("failed", "interrupted", "abandoned", "unverified", "evidence_gaps", "no_usage")
    if t is None:
        f = FACTS
        cost = f"{f}.run_cost_{q.cost}"
        basis = [f"min({f}.run_basis_auto)", f"max({f}.run_basis_auto)"]
        head = [f"sum({f}.first)", *(f"sum({f}.{n})" for n in TOKENS), f"sum({cost})", f"count({cost})"]
        tail = [f"sum({f}.{n})" for n in flags] + [f"sum({f}.run_cost_{q.cost}_partial)", f"sum({f}.piece)"]
    else:
        basis = [f"min({t}.run_basis_min)", f"max({t}.run_basis_max)"]
        head = [f"sum({t}.runs)", *(f"sum({t}.{n})" for n in TOKENS), f"sum({t}.run_cost_{q.cost})",
                f"sum({t}.run_cost_{q.cost}_n)"]
        tail = [f"sum({t}.{n})" for n in flags] + [f"sum({t}.run_cost_{q.cost}_partial)", f"sum({t}.pieces)"]
    if q.cost != "auto":
        basis = [_basis_literal(q), _basis_literal(q)]
    return head + basis + tail


def _model_aggregates(q: ReportQuery, t: str | None = None) -> list[str]:
    """The per-model vector (M_ROWS .. M_BMAX) over report_facts, or over rollup table `t`."""
    if t is None:
        f = FACTS
        cost = f"{f}.cost_{q.cost}"
        out = ["count(*)", *(f"sum({f}.{n})" for n in TOKENS), f"sum({cost})", f"count({cost})",
               f"min({f}.basis_auto)", f"max({f}.basis_auto)"]
    else:
        out = [f"sum({t}.model_rows)", *(f"sum({t}.{n})" for n in TOKENS), f"sum({t}.cost_{q.cost})",
               f"sum({t}.cost_{q.cost}_n)", f"min({t}.basis_min)", f"max({t}.basis_max)"]
    if q.cost != "auto":
        out[-2:] = [_basis_literal(q), _basis_literal(q)]
    return out + [f"sum({t or FACTS}.cost_{q.cost}_partial)"]


def _cost_columns(q: ReportQuery) -> tuple[str, str]:
    """(run-level cost column, per-model cost column) of report_facts for the cost mode."""
    return f"{FACTS}.run_cost_{q.cost}", f"{FACTS}.cost_{q.cost}"


def _like(v: str) -> str:
    """A `*` wildcard as a LIKE pattern (escape: backslash)."""
    return v.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_").replace("*", "%")


def _match(col: str, values: Sequence[str]) -> Sql:
    """Exact values, or shell-style `*` wildcards (e.g. `claude-*`)."""
    exact = [v for v in values if "*" not in v]
    conds = []
    if exact:
        conds.append(Sql(f"{col} IN ({', '.join('?' * len(exact))})", tuple(exact)))
    for v in values:
        if "*" in v:
            conds.append(Sql(f"{col} LIKE ? ESCAPE '\\'", (_like(v),)))
    return _or(conds)


def _models_match(values: Sequence[str]) -> Sql:
    return _or([Sql(f"{FACTS}.models LIKE ? ESCAPE '\\'", (f"%|{_like(v)}|%",)) for v in values])


def time_bounds(q: ReportQuery) -> tuple[int | None, int | None]:
    """[start, end) of the report in UTC epoch seconds (None: open)."""
    start, end = utc_range(q.since, q.until, q.zone)
    return (epoch(start) if start else None, epoch(end) if end else None)


def _time_conds(start: int | None, end: int | None) -> list[Sql]:
    """report_facts rows created in [start, end) (epoch seconds; None: open)."""
    conds: list[Sql] = []
    for bound, op in ((start, ">="), (end, "<")):
        if bound is None:
            continue
        if bound % SLOT_SECONDS == 0:  # on a slot boundary: a range on the clustering key
            conds.append(Sql(f"{FACTS}.slot {op} ?", (bound // SLOT_SECONDS,)))
        else:
            conds.append(Sql(f"{FACTS}.created_s {op} ?", (bound,)))
    return conds


def _filter_conds(q: ReportQuery, c: Conn | None = None) -> list[Sql]:
    """The filters as conditions on report_facts (`--project` needs `c`: its patterns are
    matched against the index's projects first, ledger.report.projects.project_filter)."""
    f = FACTS
    conds: list[Sql] = []
    flt = q.filters
    if flt.get("project"):
        if c is None:
            raise ReportError("--project needs the index to read its projects")
        from ledger.report.projects import project_filter

        conds.append(project_filter(c, flt["project"]))
    for name in ("harness", "skill", "repo", "host", "outcome", "source"):
        if flt.get(name):
            conds.append(_match(f"{f}.{name}", flt[name]))
    if flt.get("model"):
        conds.append(_models_match(flt["model"]))
    if flt.get("home_id"):  # (issue 11: every location of a home carries its id)
        ids = _match("homes.uid", flt["home_id"])
        conds.append(Sql(f"{f}.home_id IN (SELECT homes.home_id FROM homes WHERE {ids.text})", ids.params))
    if flt.get("subject"):  # the first subject is on the row; look further only for runs with more
        more = _match("more_subjects.selector", flt["subject"])
        exists = Sql("EXISTS (SELECT * FROM subjects AS more_subjects WHERE more_subjects.home_id = "
                     f"{f}.home_id AND more_subjects.run_id = {f}.run_id AND more_subjects.position >= 1 AND "
                     f"({more.text}))", more.params)
        conds.append(_or([_match(f"{f}.subject", flt["subject"]), _and([Sql(f"{f}.subjects_n > 1"), exists])]))
    return conds


def keys_in(keys: Iterable[tuple[int, str]], table: str = FACTS) -> Sql:
    """(home_id, run_id) IN keys, written so both SQLite and PostgreSQL search the key index
    (SQLite scans the table for a row-value IN list)."""
    by_home: dict[int, list[str]] = {}
    for h, rid in keys:
        by_home.setdefault(h, []).append(rid)
    return _or([Sql(f"{table}.home_id = ? AND {table}.run_id IN ({', '.join('?' * len(rids))})", (h, *rids))
                for h, rids in sorted(by_home.items())])


class Report(Plain):
    """A report's rows and totals (a dataclass, written out: ledger.plainclass)."""

    __slots__ = ("query", "rows", "totals", "pricing", "seconds", "unreadable")

    def __init__(self, query: ReportQuery, rows: list[dict[str, Any]], totals: dict[str, Any],
                 pricing: dict[str, Any], seconds: float = 0.0,
                 unreadable: list[dict[str, str]] | None = None) -> None:
        self.query = query
        self.rows = rows
        self.totals = totals
        self.pricing = pricing
        self.seconds = seconds
        # records the index pass could not read ({path, reason}): in no row, but never silently gone
        self.unreadable: list[dict[str, str]] = [] if unreadable is None else unreadable

    def to_dict(self) -> dict[str, Any]:
        q = self.query
        return {
            "report": q.kind,
            "query": {
                "tz": q.zone_name, "since": bound_text(q.since) if q.since else None,
                "until": bound_text(q.until) if q.until else None,
                "week_start": q.week_start if q.kind == "weekly" else None,
                "filters": {k: v for k, v in sorted(q.filters.items()) if v}, "cost": q.cost,
                "breakdown": q.breakdown, "order": resolved_order(q), "limit": q.limit,
            },
            "rows": self.rows, "totals": self.totals, "pricing": self.pricing,
            "unreadable_runs": len(self.unreadable), "unreadable": self.unreadable,
        }


def resolved_order(q: ReportQuery) -> str:
    return q.order or ("asc" if q.is_time else "desc")


def _key_column(q: ReportQuery, slot_size: int) -> str:
    if q.is_time:
        return f"{FACTS}.slot" if slot_size == SLOT_SECONDS else f"{FACTS}.created_s / {int(slot_size)}"
    return f"{FACTS}.{_KEY_COLUMNS[q.kind]}"


def _time_buckets(q: ReportQuery, c: Conn, table: str, conds: list[Sql]) -> tuple[int, Buckets | None]:
    """The buckets covering the report's data and the SQL slot size to group by: the
    15-minute slot whenever every bucket boundary falls on one, else (a historical offset
    in seconds) the largest slot that divides them all."""
    # (two statements: SQLite answers a lone min() or max() from the key's ends, both at once
    # by scanning every key)
    (lo,), (hi,) = (_rows(c, _select([f"{fn}({table}.slot)"], table, conds))[0] for fn in ("min", "max"))
    if lo is None:
        return SLOT_SECONDS, None
    first = datetime.fromtimestamp(int(lo) * SLOT_SECONDS, timezone.utc)
    last = datetime.fromtimestamp((int(hi) + 1) * SLOT_SECONDS - 1, timezone.utc)
    buckets = make_buckets(first, last, q.zone, q.kind, q.week_start)
    return (SLOT_SECONDS if buckets.slot >= SLOT_SECONDS else buckets.slot), buckets


def _run_rank(q: ReportQuery) -> tuple[str, str]:
    """(known cost, tokens) of a run over its fact rows (GROUP BY run): the sum of its pieces'
    known figures (an imported session has one per slot it spent in; ledger.report.facts),
    NULL when nothing is known, what _sort_rows ranks by; its tokens are on its first row."""
    f = FACTS
    cost, part = f"{f}.run_cost_{q.cost}", f"{f}.run_cost_{q.cost}_partial"
    known = (f"CASE WHEN count({cost}) = 0 AND count({part}) = 0 THEN NULL "
             f"ELSE coalesce(sum({cost}), 0) + coalesce(sum({part}), 0) END")
    return known, f"coalesce(max({f}.run_total_tokens), -1)"


def _top_runs(q: ReportQuery, conds: list[Sql]) -> Sql:
    """`report run --limit N`: the N runs to show, chosen in SQL (same order as _sort_rows),
    each ranked by its whole cost (every piece of it that matches)."""
    f = FACTS
    known, tokens = _run_rank(q)
    way = " DESC" if resolved_order(q) == "desc" else " ASC"
    order = [f"{known} IS NULL", known + way, tokens + way, f"{f}.run_id" + way]
    return _select([f"{f}.home_id", f"{f}.run_id"], f, conds, [f"{f}.home_id", f"{f}.run_id"],
                   tail=f" ORDER BY {', '.join(order)} LIMIT {min(int(q.limit or 0), 2**63 - 1)}")  # SQL integers end there


def _top_run_bound(c: Conn, q: ReportQuery, conds: list[Sql]) -> float | None:
    """`report run --limit N` (cost auto, no filter, most expensive first): the N-th largest
    known cost of the runs' first rows, read from the indexes on the run costs (the fully
    known ones, and the known parts of the others) in their order; None (every run is
    ranked) otherwise. A run's first row holds its whole cost unless it is an imported
    session (one piece per slot: its whole cost is at least its first piece's), so no run
    whose first row is below the bound can be among the first N but a session."""
    n = int(q.limit or 0)
    if conds or q.cost != "auto" or not 0 < n <= 10_000 or resolved_order(q) != "desc":
        return None
    f = FACTS
    by_run: dict[tuple[int, str], float] = {}
    # (a run's known part is set only when its cost is not: the partial walk needs no test
    # of the cost, which would make SQLite read that index instead; the cost wins anyway)
    for col in (f"{f}.run_cost_auto_partial", f"{f}.run_cost_auto"):
        by_run.update(((h, rid), v) for h, rid, v in _rows(c, Sql(
            f"SELECT {f}.home_id, {f}.run_id, {col} FROM {f} WHERE {f}.first = 1 AND {col} IS NOT NULL "
            f"ORDER BY {col} DESC LIMIT {n}")))
    known = sorted(by_run.values(), reverse=True)
    if len(known) < n:  # fewer known costs than places: the unknown ones are ranked too
        return None
    return known[n - 1]


def _top_run_keys(c: Conn, q: ReportQuery, conds: list[Sql], fast: bool) -> list[tuple[int, str]]:
    """The runs `report run --limit N` shows. Fast (cost auto, no filter): the runs whose
    first row's known cost passes _top_run_bound (each side has its index), and every imported
    session summed whole, ranked here as _sort_rows ranks them; else ranked in SQL."""
    bound = _top_run_bound(c, q, conds) if fast else None
    if bound is None:
        return [tuple(k) for k in _rows(c, _top_runs(q, conds))]
    f = FACTS
    ranked: dict[tuple[int, str], tuple[Any, Any]] = {}
    for h, rid, cost, part, tokens in _rows(c, Sql(
            f"SELECT {f}.home_id, {f}.run_id, {f}.run_cost_auto, {f}.run_cost_auto_partial, {f}.run_total_tokens "
            f"FROM {f} WHERE {f}.first = 1 AND ({f}.run_cost_auto >= ? OR {f}.run_cost_auto_partial >= ?)",
            (bound, bound))):
        ranked[(h, rid)] = (cost if cost is not None else part, tokens)
    if _rows(c, Sql("SELECT 1 FROM log_sessions LIMIT 1")):
        known, tokens = _run_rank(q)
        for h, rid, k, t in _rows(c, Sql(
                f"SELECT {f}.home_id, {f}.run_id, {known}, max({f}.run_total_tokens) FROM log_sessions AS ranked "
                f"CROSS JOIN {f} WHERE ranked.linked_run_id IS NULL AND {f}.home_id = ranked.home_id AND "
                f"{f}.run_id = ranked.row_id GROUP BY {f}.home_id, {f}.run_id")):
            ranked[(h, rid)] = (k, t)

    def by(item: tuple[tuple[int, str], tuple[Any, Any]]) -> tuple:
        (h, rid), (k, t) = item
        return (k is not None, round(_num(k), COST_DIGITS) if k is not None else 0.0,
                _num(t) if t is not None else -1, rid)

    return [key for key, _ in sorted(ranked.items(), key=by, reverse=True)[:int(q.limit or 0)]]


def _group_key() -> str:
    return f"CASE WHEN {GROUPS}.gnull = 1 THEN NULL ELSE {GROUPS}.gkey END"


def _group_rank_bound(c: Conn, q: ReportQuery) -> Sql | None:
    """`report session|skill --limit N` (cost auto): the groups' known costs are kept in
    report_groups.rank_auto with an index, so the N-th is found by walking N entries; the
    groups at or past it (less a slack twice _ranked's) are the only ones ranked. None when
    fewer than N groups have a known cost (the unknown ones are ranked too)."""
    n = int(q.limit or 0)
    if q.cost != "auto" or not 0 < n <= 10_000:
        return None
    g = GROUPS
    way = " DESC" if resolved_order(q) == "desc" else " ASC"
    found = _rows(c, Sql(f"SELECT {g}.rank_auto FROM {g} WHERE {g}.kind = ? AND {g}.rank_auto IS NOT NULL "
                         f"ORDER BY {g}.rank_auto{way} LIMIT 1 OFFSET {n - 1}", (q.kind,)))
    if not found:
        return None
    b = float(found[0][0])
    slack = 2 * (_SLACK_ABS + abs(b) * _SLACK_REL)
    return Sql(f"{g}.rank_auto >= ?", (b - slack,)) if way == " DESC" else Sql(f"{g}.rank_auto <= ?", (b + slack,))


def _group_rank_stmt(q: ReportQuery) -> Sql:
    """[key, the _RANK_FIELDS] of every group of q.kind in report_groups (one row each)."""
    g = GROUPS
    cols = {COST: f"run_cost_{q.cost}", PART: f"run_cost_{q.cost}_partial", IN: "input_tokens", OUT: "output_tokens",
            CR: "cache_read_tokens", CW: "cache_write_tokens", RUNS: "runs"}
    return _select([_group_key(), *(f"{g}.{cols[i]}" for i in _RANK_FIELDS)], g, [Sql(f"{g}.kind = ?", (q.kind,))])


def _collect_groups(c: Conn, q: ReportQuery) -> _Collector:
    """`report session|skill` without filters, range or --breakdown: report_groups holds
    each group's measures whole (the sync recomputes the groups a change touched), and for
    the evaluation view its runs' costs and durations sorted: the medians are read, not
    computed. With --limit the groups are ranked as _collect_top ranks them, from one row
    per group instead of every fact."""
    g = GROUPS
    col = _Collector(q)
    kind = Sql(f"{g}.kind = ?", (q.kind,))
    conds = [kind]
    if q.limit is not None:
        inner = _group_rank_stmt(q)
        bound = _group_rank_bound(c, q)
        if bound is not None:  # only the groups whose cost is near the N-th's or past it
            inner = Sql(inner.text + f" AND {bound.text}", inner.params + bound.params)
        ranked = _rows(c, _ranked(q, inner, totals=False))
        keys = [row[1] for row in ranked if row[0] == 0]
        named = [k for k in keys if k is not None]
        which = ([Sql(f"{g}.gnull = 0 AND {_key_in(f'{g}.gkey', named).text}", tuple(named))] if named else [])
        which += [Sql(f"{g}.gnull = 1")] if None in keys else []
        conds.append(_or(which) if which else Sql("1 = 0"))
        totals = col.totals = Agg()
        start, end = time_bounds(q)
        totals.add(_rows(c, _totals_stmt(q, start, end, []))[0])
        # the groups' costs summed in their order: what merging every group gives (no --limit)
        # (read in key order: `gnull IN` keeps SQLite on the primary key, not the rank index)
        cost, part = _rows(c, _select([f"sum({g}.run_cost_{q.cost})", f"sum({g}.run_cost_{q.cost}_partial)"], g,
                                      [kind, Sql(f"{g}.gnull IN (0, 1)")]))[0]
        totals.v[COST], totals.v[PART] = _num(cost), _num(part)
        if q.evaluation:
            totals.add_verdicts(_rows(c, _select([f"sum({g}.{n})" for n in VERDICT_FACTS], g, [kind]))[0], 0)
    verdicts = [f"sum({g}.{n})" for n in VERDICT_FACTS] if q.evaluation else []
    col.add(_rows(c, _select([_group_key(), *_run_aggregates(q, g), *verdicts], g, conds,
                             [f"{g}.gnull", f"{g}.gkey"])))
    if q.evaluation:
        _group_medians(c, q, col, conds)
    return col


def _group_medians(c: Conn, q: ReportQuery, col: _Collector, conds: list[Sql]) -> None:
    """The medians of the groups read, and of every run (the totals: each run is in exactly
    one group), from report_groups' sorted figures (see _medians for the rule)."""
    import array
    import sys

    g = GROUPS
    figures: list[tuple[Any, Any, Any]] = []
    for key, costs, durations in _rows(c, _select([_group_key(), f"{g}.values_cost_{q.cost}", f"{g}.values_duration_ms"],
                                                  g, [Sql(f"{g}.kind = ?", (q.kind,))])):
        a, b = array.array("d"), array.array("q")
        a.frombytes(costs or b"")
        b.frombytes(durations or b"")
        if sys.byteorder != "little":  # pragma: no cover - (stored little-endian)
            a.byteswap()
            b.byteswap()
        figures.append((key, a, b))
    for key, a, b in figures:
        agg = col.groups.get(key)
        if agg is not None:
            agg.medians = [_middle(a), _middle(b)]
    col.total_medians = [_merged_middle([a for _, a, _ in figures]), _merged_middle([b for _, _, b in figures])]
    col.medians_done = True


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


def reads_groups(q: ReportQuery) -> bool:
    """Whether `q` is answered from report_groups (built by the first sync that serves such a
    report: ledger.report.facts.GROUPS_DEFERRED)."""
    return _source(q) == "groups"


def _groups_built(c: Conn) -> bool:
    """report_groups is built (a read-only index may hold it deferred: the facts answer)."""
    from ledger.report.synced import GROUP_RULES

    return _rows(c, Sql("SELECT value FROM report_state WHERE key = 'group_rules'")) == [(GROUP_RULES,)]


def _source(q: ReportQuery) -> str:
    """Which table answers `q`: a rollup when its dimensions cover the query, else the facts."""
    used = {k for k, v in q.filters.items() if v}
    if q.is_time and not used:
        return "slots"
    if q.kind == "model":
        return "served"
    if q.kind == "harness" and used <= {"harness", "outcome"}:
        return "days"
    if (q.kind in GROUP_KINDS and not used and q.since is None and q.until is None and not q.breakdown
            and (not q.evaluation or q.kind in VALUE_KINDS)):
        return "groups"
    return "facts"


class _Collector:
    """Merges result rows [key, (model), run vector, (model vector), (verdicts), extra...]
    into groups (the verdict sums with the evaluation view, see _facts_stmt)."""

    def __init__(self, q: ReportQuery, n_extra: int = 0) -> None:
        self.q = q
        self.groups: dict[Any, Agg] = {}
        self.info: dict[Any, list[Any]] = {}
        self.base = 2 if q.breakdown else 1
        self.n_extra = n_extra
        self.vbase = self.base + N_RUN + (N_MODEL if q.breakdown else 0)
        self.totals: Agg | None = None  # set when the groups' statement also summed the totals
        self.medians_done = False  # the groups' medians are set, the totals' in total_medians (report_groups)
        self.total_medians: list[Any] = [None, None]

    def add(self, rows: Iterable[Sequence[Any]], key_of: Any = None, model_of: Any = None) -> None:
        groups, base, mbase, breakdown = self.groups, self.base, self.base + N_RUN, self.q.breakdown
        verdicts, vbase = self.q.evaluation, self.vbase
        for row in rows:
            k = row[0] if key_of is None else key_of(row[0])
            agg = groups.get(k)
            if agg is None:
                agg = groups[k] = Agg()
            agg.add(row, base)
            if breakdown:
                agg.add_model(_none_if_empty(row[1]) if model_of is None else model_of(row[1]), row, mbase)
            if verdicts:
                agg.add_verdicts(row, vbase)
            if self.n_extra:
                extra, seen = list(row[-self.n_extra:]), self.info.get(k)
                if seen is not None:  # (--breakdown: a run's rows per model; its fields are on the first)
                    extra = [min(a, b) if i == 0 and a is not None and b is not None else (a if a is not None else b)
                             for i, (a, b) in enumerate(zip(seen, extra))]
                self.info[k] = extra


def _none_if_empty(v: Any) -> Any:
    return None if v == "" else v


def run_report(conn: Any, q: ReportQuery, source: str | None = None) -> Report:
    """Answer `q` from report_facts (or its rollups) on `conn` (a rawread.Conn, or a driver or
    SQLAlchemy connection), which sees a synced index. `source` forces "facts" (tests prove
    every rollup answers exactly like the facts)."""
    import time

    t0 = time.perf_counter()
    c = wrap(conn)
    start, end = time_bounds(q)
    conds = _time_conds(start, end) + _filter_conds(q, c)
    forced = source is not None  # (the facts as they are: no rollup, no index walk)
    source = source or _source(q)
    if q.kind == "task":  # runs grouped into tasks (ledger.report.tasks)
        from ledger.report.tasks import collect_tasks

        col = collect_tasks(c, q, conds)
    elif source == "slots":
        col = _collect_slots(c, q, start, end)
    elif q.kind == "model":  # (one way to answer it: by the model that served each response)
        col = _collect_served(c, q, conds)
    elif source == "days":
        col = _collect_days(c, q, start, end)
    elif source == "groups" and (forced or _groups_built(c)):
        col = _collect_groups(c, q)
    else:
        col = _collect_facts(c, q, conds, fast=not forced)
    if col is None:  # a time report without data
        return _finish(q, {}, Agg(), c, conds, t0)
    groups = col.groups
    totals = Agg()
    if col.totals is not None:
        totals = col.totals
    elif q.kind in ("subject", "model") or (q.kind == "run" and q.limit is not None):
        # a run with several subjects (models) is in several groups; --limit leaves runs out
        totals.add(_rows(c, _totals_stmt(q, start, end, conds))[0])
        if q.kind == "model" and q.breakdown:
            for agg in groups.values():
                for m, mv in agg.models.items():
                    totals.add_model(m, mv)
        elif q.breakdown:  # the totals' models (every matching run's, each once)
            _totals_models(c, q, conds, totals)
        if q.evaluation:  # (report_slots has no verdicts)
            totals.add_verdicts(_rows(c, _select(_verdict_aggregates(), FACTS, conds))[0], 0)
    else:
        for agg in groups.values():
            totals.merge(agg)
    if q.evaluation and col.medians_done:
        totals.medians = col.total_medians
    elif q.evaluation:
        _medians(c, q, conds, groups, totals)
    _count_runs(c, q, conds, groups, totals)
    return _finish(q, groups, totals, c, conds, t0, col.info)


def run_rows(conn: Any, home_id: int, run_ids: Sequence[str], cost: str = "auto") -> dict[str, dict[str, Any]]:
    """The `report run` rows of these runs of one home (run_id -> row), as `ledger report run`
    computes them: `ledger runs` / `show` print the same figures (one definition of a run's
    cost, basis, tokens, start and duration). A run not in report_facts has no row."""
    c = wrap(conn)
    q = ReportQuery(kind="run", cost=cost)
    out: dict[str, dict[str, Any]] = {}
    ids = list(run_ids)
    for i in range(0, len(ids), 500):
        which = [keys_in([(home_id, rid) for rid in ids[i:i + 500]])]
        col = _Collector(q, n_extra=len(_run_extra()))
        col.add(_rows(c, _facts_stmt(q, which)))
        _count_runs(c, q, which, col.groups, Agg())
        for rid, agg in col.groups.items():
            d = row_dict(rid, agg, q)
            _run_fields(d, col.info[rid])
            out[rid] = d
    return out


# --------------------------------------------------------------------------------------
# runs, not pieces: an imported session is stored as one piece per 15-minute slot it spent
# in (ledger.report.facts); the sums over pieces are the run's, but a count of pieces is not
# a count of runs. `_count_runs` turns the piece counts of every group (and of the totals)
# into run counts: how many runs bear a cost, how many of them are not fully known, and per
# model (--breakdown) how many runs used it and how many of those have its cost unknown.

def _count_runs(c: Conn, q: ReportQuery, conds: list[Sql], groups: dict[Any, Agg], totals: Agg) -> None:
    """Piece counts -> run counts, in place. Only imported sessions have more than one piece
    (a run record has one slot), so only their fact rows are read (none: nothing to do)."""
    if not groups or not _rows(c, Sql("SELECT 1 FROM log_sessions LIMIT 1")):
        return
    f = FACTS
    run_cost, model_cost = _cost_columns(q)
    key = "NULL" if q.kind == "task" else (f"{f}.created_s" if q.is_time else _key_column(q, SLOT_SECONDS))
    cols = [key, f"{f}.model_key", f"{f}.home_id", f"{f}.run_id", f"{f}.piece",
            f"CASE WHEN {f}.piece = 1 AND {run_cost} IS NULL THEN 1 ELSE 0 END",
            f"CASE WHEN {model_cost} IS NULL THEN 1 ELSE 0 END"]
    source = (f"log_sessions AS counted CROSS JOIN {f}")  # (SQLite keeps the order: the facts' run index)
    on = Sql(f"counted.linked_run_id IS NULL AND {f}.home_id = counted.home_id AND {f}.run_id = counted.row_id")
    rows = _rows(c, _select(cols, source, [on, *conds]))
    if not rows:
        return
    key_of: Any = None
    if q.is_time:
        lo, hi = min(int(r[0]) for r in rows), max(int(r[0]) for r in rows)
        buckets = make_buckets(datetime.fromtimestamp(lo, timezone.utc), datetime.fromtimestamp(hi, timezone.utc),
                               q.zone, q.kind, q.week_start)
        key_of = buckets.label_of_epoch
    elif q.kind == "task":
        from ledger.report.tasks import task_keys

        keys = task_keys(c)
    elif q.kind == "model":
        key_of = _none_if_empty
    # per group (None: the totals): [pieces, unknown pieces, runs with a piece, runs with an
    # unknown one], and per model [rows, unknown rows, runs, runs with an unknown row]
    seen: dict[Any, list[Any]] = {}
    for k, model, home, rid, piece, unknown_piece, unknown_row in rows:
        model = _none_if_empty(model)
        if q.kind == "task":
            k = keys.get((home, rid), rid)
        elif key_of is not None:
            k = key_of(int(k) if q.is_time else k)
        run = (home, rid)
        for g in ((k, True), (None, False)):
            acc = seen.get(g)
            if acc is None:
                acc = seen[g] = [0, 0, set(), set(), {}]
            acc[0] += piece
            acc[1] += unknown_piece
            if piece:
                acc[2].add(run)
            if unknown_piece:
                acc[3].add(run)
            m = acc[4].get(model)
            if m is None:
                m = acc[4][model] = [0, 0, set(), set()]
            m[0] += 1
            m[1] += unknown_row
            m[2].add(run)
            if unknown_row:
                m[3].add(run)
    for (k, grouped), acc in seen.items():
        if grouped and q.kind == "model":
            continue  # (_collect_served counts runs, not pieces)
        agg = groups.get(k) if grouped else totals
        if agg is not None:
            _recount(agg, acc)


def _recount(agg: Agg, acc: list[Any]) -> None:
    """One group's counts of pieces replaced by counts of runs (see _count_runs)."""
    v = agg.v
    pieces, unknown = _num(v[PIECES]) or 0, (_num(v[PIECES]) or 0) - (_num(v[COST_N]) or 0)
    runs = pieces - acc[0] + len(acc[2])
    unmeasured = unknown - acc[1] + len(acc[3])
    v[PIECES], v[COST_N] = runs, runs - unmeasured
    if runs - unmeasured == 0 and v[COST] is not None:  # no run fully known: every known figure is a part
        v[PART] = _num(v[COST]) + (_num(v[PART]) or 0)
        v[COST] = None
    for model, (rows, unknown_rows, used, unknown_runs) in acc[4].items():
        mv = agg.models.get(model)
        if mv is None:
            continue
        n, bad = _num(mv[M_ROWS]) or 0, (_num(mv[M_ROWS]) or 0) - (_num(mv[M_COST_N]) or 0)
        n2 = n - rows + len(used)
        bad2 = bad - unknown_rows + len(unknown_runs)
        mv[M_ROWS], mv[M_COST_N] = n2, n2 - bad2
        if n2 - bad2 == 0 and mv[M_COST] is not None:
            mv[M_PART] = _num(mv[M_COST]) + (_num(mv[M_PART]) or 0)
            mv[M_COST] = None


def _totals_stmt(q: ReportQuery, start: int | None, end: int | None, conds: list[Sql]) -> Sql:
    """Every matching run once: from report_slots when nothing but time filters the runs."""
    if not any(q.filters.values()) and all(b is None or b % 86400 == 0 for b in (start, end)):
        t = DAYS  # (whole UTC days: fewer rows than report_slots)
        tconds = [Sql(f"{t}.day {op} ?", (b // 86400,)) for b, op in ((start, ">="), (end, "<")) if b is not None]
        return _select(_run_aggregates(q, t), t, tconds)
    if not any(q.filters.values()) and all(b is None or b % SLOT_SECONDS == 0 for b in (start, end)):
        t = SLOTS
        tconds = [] if start is None else [Sql(f"{t}.slot >= ?", (start // SLOT_SECONDS,))]
        tconds += [] if end is None else [Sql(f"{t}.slot < ?", (end // SLOT_SECONDS,))]
        return _select(_run_aggregates(q, t), t, tconds)
    return _select(_run_aggregates(q), FACTS, conds)


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


def _facts_stmt(q: ReportQuery, conds: list[Sql], slot_size: int = SLOT_SECONDS, per_run: bool = False) -> Sql:
    """[key, (model), run vector, (model vector), extras] over report_facts, GROUP BY key.

    `report run` groups by run and adds the run's own fields; `per_run` groups by run with
    the key home_id and the run_id last (to attribute runs to their further subjects)."""
    f = FACTS
    key = f"{f}.home_id" if per_run else _key_column(q, slot_size)
    group = [f"{f}.home_id", f"{f}.run_id"] if per_run or q.kind == "run" else [key]
    cols = [key]
    if q.breakdown:  # (by model_key: a session's start row, START_KEY, is no model's)
        cols.append(f"{f}.model_key")
        group.append(f"{f}.model_key")
    cols += _run_aggregates(q)
    if q.breakdown:
        cols += _model_aggregates(q)
    if q.evaluation:
        cols += _verdict_aggregates()
    if q.kind == "run":
        cols += _run_extra()
    if per_run:
        cols.append(f"{f}.run_id")
    return _select(cols, f, conds, group)


def _verdict_aggregates() -> list[str]:
    """The evaluation view's verdict counts: run-level, 0 on a run's other rows, so the sums
    over any rows count each run once."""
    return [f"sum({FACTS}.{n})" for n in VERDICT_FACTS]


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


def _run_extra() -> list[str]:
    f = FACTS
    return [f"min({f}.created_s)", f"max({f}.harness)", f"max({f}.run_model)", f"max({f}.outcome)",
            f"max({f}.duration_ms)"]


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


# --------------------------------------------------------------------------------------
# `--limit` on a group-by report: the first groups chosen in SQL

# How far a group's known cost may be below the last shown group's (above, ascending) and
# still be read: _sort_rows compares costs rounded to COST_DIGITS, and a group summed from
# per-model rows (--breakdown) or per-run rows (further subjects) may differ from the SQL sum
# in its last bits. Every group that can be among the first is read; _sort_rows decides.
_SLACK_ABS, _SLACK_REL = 1e-9, 1e-9
_MAX_CANDIDATES = 10_000  # more ties than this: every group is read (no IN list)
# the ranking statement's columns after the key: what _sort_rows orders by
_RANK_FIELDS = (COST, PART, IN, OUT, CR, CW, RUNS)


def _collect_top(c: Conn, q: ReportQuery, conds: list[Sql]) -> _Collector:
    """`report KIND --limit N` (a group-by report other than run and task): the groups that
    can be among the first N are chosen in SQL, from the few sums _sort_rows orders by (a
    narrow GROUP BY: SQLite sorts every row it groups, and the width of the rows is most of
    that cost), then only their rows are read as without --limit.

    The totals: the costs are the groups' cost sums summed in the groups' order, what
    merging every group gives to the last bit (with --breakdown a group is merged from its
    models' sums, which may differ in the last bits at a million runs); every other field
    is an integer, from the totals statement. A run with several subjects is in several
    groups: by subject the totals are the totals statement's, as without --limit."""
    col = _Collector(q)
    ranked = _rows(c, _ranked(q, _rank_stmt(q, conds), totals=q.kind != "subject"))
    keys = [row[1] for row in ranked if row[0] == 0]
    restrict = [] if len(keys) > _MAX_CANDIDATES else [_key_in(_key_column(q, SLOT_SECONDS), keys)]
    col.add(_rows(c, _facts_stmt(q, [*conds, *restrict])))
    if q.kind == "subject":
        _add_more_subjects(c, q, conds, col, only=set(keys) if restrict else None)
        return col
    start, end = time_bounds(q)
    totals = col.totals = Agg()
    totals.add(_rows(c, _totals_stmt(q, start, end, conds))[0])
    total = next(row for row in ranked if row[0] == 1)
    totals.v[COST], totals.v[PART] = _num(total[2]), _num(total[3])
    if q.evaluation:
        totals.add_verdicts(_rows(c, _select(_verdict_aggregates(), FACTS, conds))[0], 0)
    if q.breakdown:  # the totals' models
        _totals_models(c, q, conds, totals)
    return col


def _totals_models(c: Conn, q: ReportQuery, conds: list[Sql], totals: Agg) -> None:
    """The totals' per-model vectors (--breakdown) over the matching facts."""
    f = FACTS
    for row in _rows(c, _select([f"{f}.model_key", *_model_aggregates(q)], f, conds, [f"{f}.model_key"])):
        totals.add_model(_none_if_empty(row[0]), row, 1)


def _rank_stmt(q: ReportQuery, conds: list[Sql]) -> Sql:
    """[key, the _RANK_FIELDS sums] per group, over the facts that match. By subject a run
    counts under each of its subjects: the first (on the facts row) and the further ones."""
    f = FACTS
    run = _run_aggregates(q)
    sums = [run[i] for i in _RANK_FIELDS]
    if q.kind != "subject":
        key = _key_column(q, SLOT_SECONDS)
        return _select([key, *sums], f, conds, [key])
    where = _and(conds) if conds else Sql("1 = 1")
    used = ", ".join(f"{f}.{name}" for name in (f"run_cost_{q.cost}", f"run_cost_{q.cost}_partial", *TOTAL_PARTS,
                                                  "first"))
    source = (f"(SELECT {f}.subject AS group_key, {used} FROM {f} WHERE {where.text} UNION ALL "
              f"SELECT further.selector, {used} FROM {_FURTHER} WHERE {_FURTHER_ON} AND {where.text}) AS {f}")
    stmt = _select([f"{f}.group_key", *sums], source, group=[f"{f}.group_key"])
    return Sql(stmt.text, where.params + where.params)


# A run's further subjects joined to its facts, read from the few `subjects` rows past the
# first (CROSS JOIN: SQLite keeps this order; it would otherwise scan every fact for them)
_FURTHER = f"subjects AS further CROSS JOIN {FACTS}"
_FURTHER_ON = (f"further.position >= 1 AND {FACTS}.home_id = further.home_id AND {FACTS}.run_id = further.run_id")


def _ranked(q: ReportQuery, inner: Sql, *, totals: bool) -> Sql:
    """The groups of `inner` (_rank_stmt) that can be among the first q.limit of _sort_rows,
    tagged 0, and (`totals`) one row tagged 1: the sums of the groups' sums, in their order.

    The rank is the sort's: known cost (unknown last), then tokens, then runs, each in the
    report's order. The group at place N is the bound: every group whose cost is within the
    slack of the bound's is read (rounding may tie them), or, when the bound's cost is
    unknown, every known group and every unknown one with (tokens, runs) up to the bound's.
    Keys are not compared in SQL (collations differ): _sort_rows breaks those ties."""
    cols = [f"c{i}" for i in range(1 + len(_RANK_FIELDS))]
    cost, part, t_in, t_out, t_cr, t_cw, runs = (f"g.{x}" for x in cols[1:])
    known = f"CASE WHEN {cost} IS NULL AND {part} IS NULL THEN NULL ELSE coalesce({cost}, 0) + coalesce({part}, 0) END"
    toks = (t_in, t_out, t_cr, t_cw)
    tokens = (f"CASE WHEN {' AND '.join(t + ' IS NULL' for t in toks)} THEN -1 "
              f"ELSE {' + '.join(f'coalesce({t}, 0)' for t in toks)} END")
    desc = resolved_order(q) == "desc"
    way, ge, gt, sign = (" DESC", ">=", ">", "-") if desc else (" ASC", "<=", "<", "+")
    n = int(q.limit or 0)
    out = [f"WITH g({', '.join(cols)}) AS ({inner.text}), "
           f"r AS (SELECT g.c0 AS k, {known} AS kk, {tokens} AS kt, coalesce({runs}, 0) AS kr FROM g)"]
    if n > 0:
        out.append(f", b AS (SELECT r.kk AS bk, r.kt AS bt, r.kr AS br FROM r ORDER BY r.kk IS NULL, r.kk{way}, "
                   f"r.kt{way}, r.kr{way} LIMIT 1 OFFSET {min(n, 2**62) - 1}) "
                   "SELECT 0, r.k, NULL, NULL FROM r LEFT JOIN b ON 1 = 1 WHERE b.br IS NULL "
                   f"OR (b.bk IS NOT NULL AND r.kk {ge} b.bk {sign} ({_SLACK_ABS!r} + abs(b.bk) * {_SLACK_REL!r})) "
                   f"OR (b.bk IS NULL AND (r.kk IS NOT NULL OR r.kt {gt} b.bt OR (r.kt = b.bt AND r.kr {ge} b.br)))")
    else:
        out.append(" SELECT 0, r.k, NULL, NULL FROM r WHERE 1 = 0")
    if totals:
        out.append(f" UNION ALL SELECT 1, NULL, sum({cost}), sum({part}) FROM g")
    return Sql("".join(out), inner.params)


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


def _rate(n: int, of: int) -> float | None:
    return round(n / of, RATE_DIGITS) if of else None


def _verdict_fields(c: Sequence[int]) -> dict[str, Any]:
    """ok rate (of the runs with a verdict), skill-invoked rate (of the runs expecting a skill),
    tool error rate (error + semantic-error results of all tool uses); None when nothing to rate."""
    judged, ok, expected, invoked, calls, errors = c
    return {"judged_runs": judged, "ok_runs": ok, "ok_rate": _rate(ok, judged),
            "skill_expected_runs": expected, "skill_invoked_runs": invoked,
            "skill_invoked_rate": _rate(invoked, expected),
            "tool_calls": calls, "tool_errors": errors, "tool_error_rate": _rate(errors, calls)}


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


def _finish(q: ReportQuery, groups: dict[Any, Agg], totals: Agg, conn: Conn, conds: list[Sql], t0: float,
            info: dict[Any, list[Any]] | None = None) -> Report:
    import time

    rows = [row_dict(k, agg, q) for k, agg in groups.items()]
    if q.kind == "run" and info:
        for d in rows:
            _run_fields(d, info[d["key"]])
    if q.kind == "task" and info:
        for d in rows:
            d.update(info[d["key"]])
    if q.kind == "home":
        _home_labels(conn, rows)
    rows = _sort_rows(q, rows)
    if q.limit is not None:
        rows = rows[:q.limit]
    if q.kind == "session" and rows:  # (issue 29: which project, and when last active)
        from ledger.report.projects import session_fields

        found = session_fields(conn, [d["key"] for d in rows], conds)
        for d in rows:
            d["project"], d["last_activity"] = found.get(d["key"], (None, None))
    tot = row_dict("total", totals, q)
    tot.pop("key")
    if q.kind == "task" and info is not None:  # the tool counts of every task (the rows', --limit or not)
        tot["tool_calls"] = sum(t.get("tool_calls") or 0 for t in info.values())
        tot["tool_errors"] = sum(t.get("tool_errors") or 0 for t in info.values())
    pricing = _pricing(conn, q, conds, tot)
    return Report(query=q, rows=rows, totals=tot, pricing=pricing, seconds=time.perf_counter() - t0)


def _run_fields(d: dict[str, Any], info: Sequence[Any]) -> None:
    """A `report run` row's own fields (_run_extra): start, harness, model, outcome, duration."""
    created_s, harness, model, outcome, duration = info
    d["started"] = datetime.fromtimestamp(int(created_s), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    d.update({"harness": harness, "model": model, "outcome": outcome, "duration_ms": _num(duration)})


def _home_labels(c: Conn, rows: list[dict[str, Any]]) -> None:
    """`report home`: each row's key is the home's path; its id and machine ride along (two
    machines may hold a home at the same path, issue 11)."""
    homes = {int(h): (path, uid, machine) for h, path, uid, machine in
             _rows(c, Sql("SELECT homes.home_id, homes.path, homes.uid, homes.machine FROM homes"))}
    for d in rows:
        path, uid, machine = homes.get(int(d["key"]), (None, None, None))
        d["key"] = path
        d["home_id"] = uid
        d["machine"] = machine


def _pricing(c: Conn, q: ReportQuery, conds: list[Sql], totals: dict[str, Any]) -> dict[str, Any]:
    """The price data version and every reason a cost of this report is unknown."""
    from ledger.pricing import price_data_version

    f = FACTS
    _, cost = _cost_columns(q)
    unknown: list[dict[str, Any]] = []
    if q.cost != "reported":
        stmt = _select([f"{f}.model", f"{f}.unpriced", f"count(DISTINCT {f}.run_id)"], f,
                       [Sql(f"{f}.unpriced IS NOT NULL"), Sql(f"{cost} IS NULL"), *conds],
                       [f"{f}.model", f"{f}.unpriced"], f" ORDER BY {f}.model, {f}.unpriced")
        for model, reason, n in _rows(c, stmt):
            unknown.append({"model": model, "reason": reason, "runs": int(n)})
        if totals["unmeasured_usage_runs"]:
            unknown.append({"model": None, "reason": "no usage reported", "runs": totals["unmeasured_usage_runs"]})
    else:
        (n,) = _rows(c, _select([f"count(DISTINCT {f}.run_id)"], f, [
            Sql(f"{cost} IS NULL"), Sql(f"coalesce({f}.harness, ?) != ?", ("", "command")), *conds]))[0]
        if n:
            unknown.append({"model": None, "reason": "no provider-reported cost (for all or part of the usage)",
                            "runs": int(n)})
    return {"cost": q.cost, "price_data": price_data_version(), "unpriced": unknown}
