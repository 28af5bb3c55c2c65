"""`ledger report blocks`: Claude's 5-hour billing windows (ledger.report.blocks), printed.

Thin layer: the index is brought up to date and the report facts synced exactly as every
report does (ledger.report.service.build_reports), then the blocks are read from the facts.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ledger.cli.common import err, print_json, print_table, usage_error


def _money(v: Any) -> str:
    return "?" if v is None else f"${v:,.2f}"


def _tokens(n: int) -> str:
    return f"{n:,}"


def blocks(*, home: Path | None, db: str | None, json_: bool, csv_: bool, active: bool, recent: bool,
           token_limit: str | None, session_length: float, resync: bool) -> None:
    from ledger.home import home_named, resolve_home
    from ledger.report.aggregate import ReportQuery
    from ledger.report.blocks import BlocksError, parse_limit, read_blocks, session_seconds
    from ledger.report.service import build_reports

    try:
        session_seconds(session_length)
        limit = parse_limit(token_limit)
    except BlocksError as exc:
        raise usage_error(str(exc), param_hint="--token-limit" if token_limit and "tokens" in str(exc)
                          else "--session-length") from None
    opts = {"session_hours": session_length, "active": active, "recent": recent, "token_limit": limit}

    class _Doc(dict):  # (build_reports attaches the unreadable records to what it returns)
        unreadable: list = []

    def answer(c: Any, q: Any) -> _Doc:
        return _Doc(read_blocks(c, q, **opts))

    doc = build_reports(resolve_home(home), db, [ReportQuery()], notify=err, resync=resync,
                        named=home_named(home), read_query=answer)[0]
    unreadable = doc.unreadable
    out = dict(doc)
    if unreadable:
        out["unreadable_runs"] = unreadable
        err(f"ledger: {len(unreadable)} run record(s) could not be read and are in no block (`ledger verify`)")
    if json_:
        print_json(out)
        return
    if csv_:
        from ledger.report.blocks import to_csv

        sys.stdout.write(to_csv(out))
        return
    rows = []
    for b in out["blocks"]:
        start = b["start"][:16].replace("T", " ")
        if b["is_gap"]:
            rows.append([start, "(gap to " + b["end"][11:16] + ")", "", "", "", ""])
            continue
        status = "ACTIVE" if b["is_active"] else ""
        pct = f"{b['token_limit']['percent_used']:.1f}%" if "token_limit" in b else ""
        cost = _money(b["cost_usd"]) if b["cost_usd"] is not None else (
            "?" if b["cost_usd_known"] is None else f">={_money(b['cost_usd_known'])}")
        rows.append([start, status, str(b["entries"]), _tokens(b["total_tokens"]), pct, cost])
    if not rows:
        print("No active block." if active else "No Claude usage in the index.")
        return
    print_table(rows, ["Block start (UTC)", "Status", "Entries", "Tokens", "%", "Cost"],
                title=f"{out['session_length_hours']:g}-hour blocks ({out['harness']})",
                whole=[True, False, True, True, True, True])  # (formatted numbers and the start: never cut)
    for b in out["blocks"]:
        if b["is_active"] and b["burn_rate"]:
            r, p = b["burn_rate"], b["projection"]
            rate = _money(r["cost_usd_per_hour"])
            print(f"Active block: {_tokens(round(r['tokens_per_hour']))} tokens/h, {rate}/h ({b['cost_basis']}); "
                  f"projected {_tokens(p['total_tokens'])} tokens, {_money(p['cost_usd'])} by {b['end'][11:16]} UTC "
                  f"({round(p['remaining_minutes'])} min left)")
