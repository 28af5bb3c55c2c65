"""`ledger report project`: cost and usage per project (issue 29), from the report facts.

A run's project is its git worktree's top level where the record names one (`ledger run`
writes it), else its working directory (`cwd`; an imported Claude / Codex session's is the
directory the client ran in, the Claude projects dir a transcript is filed under): the rule
of ledger.records.project, which `--project GLOB` matches (here, on every report and on
`ledger runs`). Every
harness, records and imported sessions alike, counted once as in every report (the facts).
Per project: runs (records) and sessions (imported), the four token counters, cost and basis,
last activity (the end of its last 15-minute slot with usage or its last run's start), and
per day in the report's zone (`days`, like ccusage's `daily --instances`).
"""

from __future__ import annotations

from datetime import datetime, timezone, tzinfo
from typing import Any

from ledger.records.project import matching, project_matches, project_sql
from ledger.report.costs import pieces_cost
from ledger.report.kinds import SLOT_SECONDS

TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def active_until(slot: int, tokens: tuple) -> int:
    """A fact row's last activity: the end of its 15-minute slot when it holds usage, else
    nothing (its run's start, created_s, counts instead). A project's and a session's
    `last_activity` is the latest over its rows (active_until_sql is the same in SQL)."""
    return (slot + 1) * SLOT_SECONDS if any(tokens) else 0


def active_until_sql(f: str = "report_facts") -> str:
    tokens = " OR ".join(f"{f}.{n} <> 0" for n in TOKENS)
    return f"max(CASE WHEN {tokens} THEN ({f}.slot + 1) * {SLOT_SECONDS} END)"


def iso(s: float) -> str:
    return datetime.fromtimestamp(s, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Group:
    def __init__(self) -> None:
        self.runs: set = set()
        self.sessions: set = set()
        self.tokens = [0, 0, 0, 0]
        self.pieces: list[tuple] = []
        self.last = 0

    def add(self, row: tuple) -> None:
        _proj, home_id, run_id, source, slot, piece, created_s, inp, outp, cr, cw, cost, part, basis = row
        (self.runs if source == "record" else self.sessions).add((home_id, run_id))
        for i, v in enumerate((inp, outp, cr, cw)):
            self.tokens[i] += v or 0
        if piece:
            self.pieces.append((cost, part, basis))
        self.last = max(self.last, created_s or 0, active_until(slot, (inp, outp, cr, cw)))

    def figures(self) -> dict[str, Any]:
        return {"runs": len(self.runs), "sessions": len(self.sessions), **dict(zip(TOKENS, self.tokens)),
                "total_tokens": sum(self.tokens), **pieces_cost(self.pieces)}


def read_projects(c: Any, zone: tzinfo = timezone.utc, patterns: list[str] | None = None) -> dict[str, Any]:
    """The project report of a synced index (ledger.report.service.build_reports' `answer`);
    `patterns`: only the projects they match (`--project`)."""
    from ledger.index.rawread import wrap

    rows = wrap(c).rows(
        f"SELECT {project_sql('r')}, f.home_id, f.run_id, f.source, f.slot, f.piece, f.created_s, "
        "f.input_tokens, f.output_tokens, f.cache_read_tokens, f.cache_write_tokens, "
        "f.run_cost_auto, f.run_cost_auto_partial, f.run_basis_auto "
        "FROM report_facts f JOIN runs r ON r.home_id = f.home_id AND r.run_id = f.run_id")
    projects: dict[str | None, _Group] = {}
    days: dict[tuple[str | None, str], _Group] = {}
    for row in rows:
        if patterns and not project_matches(row[0], patterns):
            continue
        projects.setdefault(row[0], _Group()).add(row)
        day = datetime.fromtimestamp(row[4] * SLOT_SECONDS, zone).strftime("%Y-%m-%d")
        days.setdefault((row[0], day), _Group()).add(row)
    out = []
    for proj, g in projects.items():
        out.append({"project": proj, **g.figures(), "last_activity": iso(g.last) if g.last else None,
                    "days": [{"day": d, **days[(p, d)].figures()} for (p, d) in sorted(days) if p == proj]})
    out.sort(key=lambda r: (-(r["cost_usd_known"] or 0), -r["total_tokens"], r["project"] or ""))
    return {"report": "project", "rows": out}



def matching_projects(c: Any, patterns: list[str]) -> tuple[list[str], int]:
    """The index's projects that `--project` patterns match (each once), and how many
    projects the index has."""
    from ledger.index.rawread import wrap

    every = [p for (p,) in wrap(c).rows(f"SELECT DISTINCT {project_sql('runs')} FROM runs") if p is not None]
    return matching(every, patterns), len(every)


def project_filter(c: Any, patterns: list[str]) -> Any:
    """`--project` as a condition on report_facts (ledger.report.sqltext.Sql): the runs whose
    project the patterns match, found first (the match is fnmatch's, not SQL's)."""
    from ledger.report.sqltext import Sql

    found, every = matching_projects(c, patterns)
    if not found:
        return Sql("1 = 0")
    runs = ("EXISTS (SELECT 1 FROM runs AS project_runs WHERE project_runs.home_id = report_facts.home_id "
            f"AND project_runs.run_id = report_facts.run_id AND {project_sql('project_runs')} ")
    if len(found) == every:  # (`--project '*'`: every run with a project, without a long IN list)
        return Sql(runs + "IS NOT NULL)")
    return Sql(runs + f"IN ({', '.join('?' * len(found))}))", tuple(found))


def project_runs(c: Any, patterns: list[str]) -> set[tuple[int, str]]:
    """(home_id, run_id) of the runs whose project the patterns match (`report blocks`)."""
    from ledger.index.rawread import wrap

    keep: dict[str | None, bool] = {}
    out = set()
    for home_id, run_id, proj in wrap(c).rows(f"SELECT home_id, run_id, {project_sql('runs')} FROM runs"):
        ok = keep.get(proj)
        if ok is None:
            ok = keep[proj] = project_matches(proj, patterns)
        if ok:
            out.add((home_id, run_id))
    return out


def session_fields(c: Any, keys: list[Any], conds: list[Any]) -> dict[Any, tuple[str | None, str | None]]:
    """`report session` rows: session -> (project, last_activity) over the report's fact rows
    of the session (`conds`: the report's range and filters). A session in several projects
    (resumed elsewhere) is in its latest one's."""
    from ledger.index.rawread import wrap
    from ledger.report.sqltext import Sql, _and, _key_in

    c = wrap(c)
    f = "report_facts"
    best: dict[Any, tuple[int, str, str | None]] = {}
    for i in range(0, len(keys), 500):
        where = _and([_key_in(f"{f}.session", keys[i:i + 500]), *conds])
        for session, proj, created, until in c.rows(
                f"SELECT {f}.session, {project_sql('session_runs')}, max({f}.created_s), {active_until_sql(f)} "
                f"FROM {f} JOIN runs AS session_runs ON session_runs.home_id = {f}.home_id AND "
                f"session_runs.run_id = {f}.run_id WHERE {where.text} GROUP BY {f}.session, "
                f"{project_sql('session_runs')}", where.params):
            last = max(int(created or 0), int(until or 0))
            cand = (last, proj or "", proj)
            if session not in best or cand[:2] > best[session][:2]:
                best[session] = cand
    return {k: (proj, iso(last) if last else None) for k, (last, _name, proj) in best.items()}
