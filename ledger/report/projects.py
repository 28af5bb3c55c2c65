"""`ledger report project`: cost and usage per project (issue 29), from the report facts.

A run's project is its git worktree's top level where the record names one (`ledger run`
writes it), else its working directory (`cwd`; an imported Claude / Codex session's is the
directory the client ran in, the Claude projects dir a transcript is filed under). Every
harness, records and imported sessions alike, counted once as in every report (the facts).
Per project: runs (records) and sessions (imported), the four token counters, cost and basis,
last activity (the end of its last 15-minute slot with usage or its last run's start), and
per day in the report's zone (`days`, like ccusage's `daily --instances`).
"""

from __future__ import annotations

from datetime import datetime, timezone, tzinfo
from typing import Any

from ledger.report.costs import pieces_cost
from ledger.report.kinds import SLOT_SECONDS

TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def _iso(s: float) -> str:
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
        self.last = max(self.last, created_s or 0, (slot + 1) * SLOT_SECONDS if any((inp, outp, cr, cw)) else 0)

    def figures(self) -> dict[str, Any]:
        return {"runs": len(self.runs), "sessions": len(self.sessions), **dict(zip(TOKENS, self.tokens)),
                "total_tokens": sum(self.tokens), **pieces_cost(self.pieces)}


def read_projects(c: Any, zone: tzinfo = timezone.utc) -> dict[str, Any]:
    """The project report of a synced index (ledger.report.service.build_reports' `answer`)."""
    from ledger.index.rawread import wrap

    rows = wrap(c).rows(
        "SELECT COALESCE(r.worktree, r.cwd), f.home_id, f.run_id, f.source, f.slot, f.piece, f.created_s, "
        "f.input_tokens, f.output_tokens, f.cache_read_tokens, f.cache_write_tokens, "
        "f.run_cost_auto, f.run_cost_auto_partial, f.run_basis_auto "
        "FROM report_facts f JOIN runs r ON r.home_id = f.home_id AND r.run_id = f.run_id")
    projects: dict[str | None, _Group] = {}
    days: dict[tuple[str | None, str], _Group] = {}
    for row in rows:
        projects.setdefault(row[0], _Group()).add(row)
        day = datetime.fromtimestamp(row[4] * SLOT_SECONDS, zone).strftime("%Y-%m-%d")
        days.setdefault((row[0], day), _Group()).add(row)
    out = []
    for proj, g in projects.items():
        out.append({"project": proj, **g.figures(), "last_activity": _iso(g.last) if g.last else None,
                    "days": [{"day": d, **days[(p, d)].figures()} for (p, d) in sorted(days) if p == proj]})
    out.sort(key=lambda r: (-(r["cost_usd_known"] or 0), -r["total_tokens"], r["project"] or ""))
    return {"report": "project", "rows": out}

