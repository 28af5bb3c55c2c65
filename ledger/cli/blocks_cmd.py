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


LABELS = {"five_hour": "5h", "seven_day": "7d"}  # (the status line's words for the windows)


def _pct(v: float) -> str:
    return f"{v:g}%"


def _limits(limits: dict[str, Any] | None) -> str:
    """The table's cell: the official five-hour limit's most use in the block (`43%`; every
    window with its reset: the note under the table, --json); empty without samples."""
    w = (limits or {}).get("five_hour")
    return "" if w is None else _pct(w["max_used_percentage"])


def _hint(out: dict[str, Any], project: list[str] | None) -> None:
    if project and not any(not b["is_gap"] for b in out["blocks"]):
        from ledger.records.project import no_project_hint

        err(no_project_hint(project))


def blocks(*, home: Path | None, db: str | None, json_: bool, csv_: bool, active: bool, recent: bool,
           token_limit: str | None, session_length: float, resync: bool, project: list[str] | None = None) -> None:
    from ledger.home import home_named, resolve_home
    from ledger.report.query import ReportQuery
    from ledger.report.blocks import BlocksError, parse_limit, read_blocks, session_seconds
    from ledger.report.service import build_reports

    try:
        session_seconds(session_length)
        limit = parse_limit(token_limit)
    except BlocksError as exc:
        raise usage_error(str(exc), param_hint="--token-limit" if token_limit and "tokens" in str(exc)
                          else "--session-length") from None
    from ledger.report.statusline import read_samples

    home_path = resolve_home(home)
    opts = {"session_hours": session_length, "active": active, "recent": recent, "token_limit": limit,
            "project": project, "samples": read_samples(home_path)}

    class _Doc(dict):  # (build_reports attaches the unreadable records to what it returns)
        unreadable: list = []

    def answer(c: Any, q: Any) -> _Doc:
        return _Doc(read_blocks(c, q, **opts))

    doc = build_reports(home_path, db, [ReportQuery()], notify=err, resync=resync,
                        named=home_named(home), read_query=answer)[0]
    unreadable = doc.unreadable
    out = dict(doc)
    if unreadable:
        out["unreadable_runs"] = unreadable
        err(f"ledger: {len(unreadable)} run record(s) could not be read and are in no block (`ledger verify`)")
    if json_:
        print_json(out)
        _hint(out, project)
        return
    if csv_:
        from ledger.report.blocks import to_csv

        sys.stdout.write(to_csv(out))
        _hint(out, project)
        return
    rows = []
    for b in out["blocks"]:
        start = b["start"][:16].replace("T", " ")
        if b["is_gap"]:
            rows.append([start, "(gap to " + b["end"][11:16] + ")", "", "", "", "", ""])
            continue
        status = "ACTIVE" if b["is_active"] else ""
        pct = f"{b['token_limit']['percent_used']:.1f}%" if "token_limit" in b else ""
        cost = _money(b["cost_usd"]) if b["cost_usd"] is not None else (
            "?" if b["cost_usd_known"] is None else f">={_money(b['cost_usd_known'])}")
        rows.append([start, status, str(b["entries"]), _tokens(b["total_tokens"]), pct, cost,
                     _limits(b["rate_limits"])])
    if not rows:
        print("No active block." if active else "No Claude usage in the index.")
        _hint(out, project)
        return
    header = ["Block start (UTC)", "Status", "Entries", "Tokens", "%", "Cost", "5h used"]
    whole = [True, False, True, True, True, True, True]  # (formatted numbers and the start: never cut)
    # the official limits' column only where a block has samples (unknown is never a 0); the
    # --token-limit's only with one
    cols = [i for i in range(len(header)) if (i != 4 or out["token_limit"]) and
            (i != 6 or any(_limits(b["rate_limits"]) for b in out["blocks"]))]
    header, whole, rows = [header[i] for i in cols], [whole[i] for i in cols], [[r[i] for i in cols] for r in rows]
    print_table(rows, header, title=f"{out['session_length_hours']:g}-hour blocks ({out['harness']})", whole=whole)
    for b in out["blocks"]:
        if b["is_active"] and b["burn_rate"]:
            r, p = b["burn_rate"], b["projection"]
            rate = _money(r["cost_usd_per_hour"])
            # (two lines: one did not fit 80 columns)
            print(f"Active block: {_tokens(round(r['tokens_per_hour']))} tokens/h, {rate}/h ({b['cost_basis']})")
            print(f"  projected {_tokens(p['total_tokens'])} tokens, {_money(p['cost_usd'])} by {b['end'][11:16]} UTC "
                  f"({round(p['remaining_minutes'])} min left)")
    last = next((b for b in reversed(out["blocks"]) if b["rate_limits"]), None)
    if last is not None:  # (the reset times: the last block that has samples)
        print(f"Official limits, block of {last['start'][:16].replace('T', ' ')} (`ledger statusline`'s samples):")
        for k, w in last["rate_limits"].items():
            reset = f", resets {w['resets_at'][:16].replace('T', ' ')} UTC" if w["resets_at"] else ""
            print(f"  {LABELS.get(k, k)}: {_pct(w['max_used_percentage'])} used at most{reset}")
