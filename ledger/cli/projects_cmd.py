"""`ledger report project`: cost and usage per project (ledger.report.projects), printed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ledger.cli.common import err, print_json, print_table, usage_error

FIELDS = ("project", "runs", "sessions", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
          "total_tokens", "cost_usd", "cost_usd_known", "cost_basis", "last_activity")


class _Doc(dict):  # (build_reports attaches the unreadable records to what it returns)
    unreadable: list = []


def _money(r: dict[str, Any]) -> str:
    if r["cost_usd"] is not None:
        return f"${r['cost_usd']:,.2f}"
    return "?" if r["cost_usd_known"] is None else f">=${r['cost_usd_known']:,.2f}"


def projects(*, home: Path | None, db: str | None, json_: bool, csv_: bool, tz: str | None, resync: bool,
             project: list[str] | None = None) -> None:
    from ledger.home import home_named, resolve_home
    from ledger.report.query import ReportQuery
    from ledger.report.buckets import ReportError, resolve_zone
    from ledger.report.projects import read_projects
    from ledger.report.service import build_reports

    try:
        zone, _name = resolve_zone(tz, warn=err, fixed_utc=True)
    except ReportError as exc:
        raise usage_error(exc.message, hint=exc.hint) from None
    doc = build_reports(resolve_home(home), db, [ReportQuery()], notify=err, resync=resync, named=home_named(home),
                        read_query=lambda c, _q: _Doc(read_projects(c, zone, project)))[0]
    out = dict(doc)
    if doc.unreadable:
        out["unreadable_runs"] = doc.unreadable
        err(f"ledger: {len(doc.unreadable)} run record(s) could not be read and are in no row (`ledger verify`)")
    if project and not out["rows"]:
        from ledger.records.project import no_project_hint

        err(no_project_hint(project))
    if json_:
        print_json(out)
        return
    if csv_:
        import csv

        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(FIELDS)
        for r in out["rows"]:
            w.writerow([r[f] for f in FIELDS])
        return
    rows = [[r["project"] or "(none)", str(r["runs"]), str(r["sessions"]), f"{r['total_tokens']:,}", _money(r),
             (r["last_activity"] or "")[:16].replace("T", " ")] for r in out["rows"]]
    if not rows:
        print("No runs in the index.")
        return
    print_table(rows, ["Project", "Runs", "Sessions", "Tokens", "Cost", "Last active (UTC)"], title="Projects",
                drop_first=(5, 2), whole=[False, True, True, True, True, True])  # (formatted numbers: never cut)
