"""The SQL a report reads report_facts and its rollups with: the statement builders
(`_select`, the run-level and per-model aggregate columns, `_facts_stmt`: one group per key,
`_totals_stmt`), the group key and time buckets, and `_Collector`, which merges the rows
those statements return into groups. The SQL is written out (ledger.report.sqltext.Sql)
and run through the database driver (ledger.index.rawread)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable, Sequence

from ledger.index.rawread import Conn
from ledger.report.accumulate import N_MODEL, N_RUN, TOKENS, Agg
from ledger.report.buckets import Buckets, make_buckets
from ledger.report.kinds import ESTIMATED, REPORTED, SLOT_SECONDS, VERDICT_FACTS
from ledger.report.query import ReportQuery
from ledger.report.sqltext import Sql, _and, _or


FACTS, SLOTS, DAYS, GROUPS = "report_facts", "report_slots", "report_days", "report_groups"


_KEY_COLUMNS = {"run": "run_id", "session": "session", "subject": "subject", "model": "run_model", "harness": "harness", "skill": "skill",
                "repo": "repo", "host": "host", "home": "home_id"}


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


def keys_in(keys: Iterable[tuple[int, str]], table: str = FACTS) -> Sql:
    """(home_id, run_id) IN keys, written so both SQLite and PostgreSQL search the key index
    (SQLite scans the table for a row-value IN list)."""
    by_home: dict[int, list[str]] = {}
    for h, rid in keys:
        by_home.setdefault(h, []).append(rid)
    return _or([Sql(f"{table}.home_id = ? AND {table}.run_id IN ({', '.join('?' * len(rids))})", (h, *rids))
                for h, rids in sorted(by_home.items())])


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


def _run_extra() -> list[str]:
    f = FACTS
    return [f"min({f}.created_s)", f"max({f}.harness)", f"max({f}.run_model)", f"max({f}.outcome)",
            f"max({f}.duration_ms)"]


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
