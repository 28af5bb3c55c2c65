"""A report's range and filters as conditions on report_facts (`*` wildcards as LIKE
patterns; `--project` matched against the index's projects, ledger.report.projects)."""

from __future__ import annotations

from typing import Sequence

from ledger.index.rawread import Conn
from ledger.report.buckets import ReportError
from ledger.report.factsql import FACTS
from ledger.report.kinds import SLOT_SECONDS
from ledger.report.query import ReportQuery
from ledger.report.sqltext import Sql, _and, _or


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
