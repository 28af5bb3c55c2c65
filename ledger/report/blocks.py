"""`ledger report blocks`: Claude's 5-hour billing windows from the report facts (issue 29).

The entries are the counted-once report_facts rows (one per run, 15-minute slot and model;
records and imported sessions alike, a session linked to its run record counted once) of
the `claude` harness, each with its responses from usage_streams (an imported session's
stream counts its API responses, `observations`; a run record's usage is one entry per
usage stream, at the slot the run was created in). The rules (ccusage's, checked against
ccusage 20.0.24 in tests/test_report_blocks.py):

- a block starts at its first entry's time floored to the UTC hour and lasts
  `session_length` hours (default 5); an entry at or after the block's end starts the next
  block (ccusage: after; the index keeps usage per 15 minutes, so an entry in the first
  slot after the end cannot be told from one exactly at it: `session_length` must be a
  multiple of 15 minutes);
- a gap block stands between two blocks when the later one starts after the earlier one's
  end (ccusage: from the last entry + session length to the next entry; the index does not
  keep an entry's second, so ledger's gap runs from block end to block start, whole hours);
- `actual_end` is the end of the 15-minute slot of the block's last entry (at most its end);
- the active block holds `now` (start <= now < end); its burn rate is its tokens and cost per
  hour of the time elapsed since its start (ccusage: per minute between its first and last
  entry), its projection adds that rate over the time left to its end.

`now` is the clock, or LEDGER_NOW (RFC 3339; for tests and reproducible output).

A block's `rate_limits` are the official limits Claude Code showed while the block ran: the
samples `ledger statusline` kept (ledger.report.statusline.read_samples) taken in [start,
end), per window kind (five_hour, seven_day, ...) the largest `used_percentage` seen, the
latest reset time seen and the samples' count; None where no sample was taken (unknown,
never 0). The limits are the account's: `--project` leaves them as they are.
"""

from __future__ import annotations

import os
import time
from typing import Any, Iterable

from ledger.report.costs import pieces_cost
from ledger.report.kinds import SLOT_SECONDS

HARNESS = "claude"
RECENT_DAYS = 3  # --recent: blocks that started in the last 3 days, and the active one
TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


class BlocksError(ValueError):
    """A --session-length or --token-limit the blocks cannot use (the CLI says it as usage)."""


def session_seconds(hours: float) -> int:
    """--session-length in seconds: positive, a multiple of 15 minutes (the index's slot)."""
    secs = hours * 3600
    if not secs > 0 or secs != int(secs) or int(secs) % SLOT_SECONDS:
        raise BlocksError(f"{hours:g} is not a positive multiple of 0.25 hours (the index keeps usage per 15 minutes)")
    return int(secs)


def parse_limit(value: str | None) -> str | int | None:
    """--token-limit: None, `max` (the largest completed block) or a positive integer."""
    if value is None or value == "max":
        return value
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n <= 0:
        raise BlocksError(f"{value!r} is neither a positive number of tokens nor `max`")
    return n


def now_s() -> float:
    """The clock, or LEDGER_NOW (RFC 3339) when set."""
    fixed = os.environ.get("LEDGER_NOW")
    if fixed:
        from datetime import datetime

        return datetime.fromisoformat(fixed.replace("Z", "+00:00")).timestamp()
    return time.time()


_USAGE = ("harness = ? AND (input_tokens IS NOT NULL OR output_tokens IS NOT NULL "
          "OR cache_read_tokens IS NOT NULL OR cache_write_tokens IS NOT NULL)")


def read_entries(c: Any, since_slot: int | None = None) -> list[dict[str, Any]]:
    """The claude harness's fact rows with usage (from `since_slot` on), oldest first, each
    with its entry count."""
    since = "" if since_slot is None else " AND slot >= ?"
    args: tuple = (HARNESS,) if since_slot is None else (HARNESS, since_slot)
    facts = c.rows(
        "SELECT slot, home_id, run_id, source, model_key, input_tokens, output_tokens, cache_read_tokens, "
        f"cache_write_tokens, cost_auto, cost_auto_partial, basis_auto FROM report_facts WHERE {_USAGE}{since} "
        "ORDER BY slot, home_id, run_id, model_key", args)
    runs = "" if since_slot is None else (
        f" AND (s.home_id, s.run_id) IN (SELECT home_id, run_id FROM report_facts WHERE {_USAGE}{since})")
    counts: dict[tuple, int] = {}
    for home_id, run_id, slot, key, observations, streams in c.rows(
            "SELECT s.home_id, s.run_id, s.slot, COALESCE(s.model, ''), SUM(s.observations), COUNT(*) "
            "FROM usage_streams s JOIN runs r ON r.home_id = s.home_id AND r.run_id = s.run_id "
            f"WHERE r.harness = ?{runs} GROUP BY s.home_id, s.run_id, s.slot, COALESCE(s.model, '')",
            (HARNESS,) + (args if since_slot is not None else ())):
        # an imported session's stream: its responses; a run record's (no slot): one per stream
        counts[(home_id, run_id, slot, key)] = int(observations or 0) if slot is not None else int(streams)
    out = []
    for slot, home_id, run_id, source, key, inp, outp, cr, cw, cost, part, basis in facts:
        n = counts.get((home_id, run_id, slot, key))
        if n is None:
            n = counts.get((home_id, run_id, None, key), 0)
        out.append({"slot": slot, "run": (home_id, run_id), "source": source, "model": key or None,
                    "tokens": (inp or 0, outp or 0, cr or 0, cw or 0), "cost": cost, "cost_partial": part,
                    "basis": basis, "entries": n})
    return out


def _iso(s: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(s, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


class _Block:
    def __init__(self, start: int, length: int) -> None:
        self.start, self.end = start, start + length
        self.rows: list[dict[str, Any]] = []


def identify(entries: Iterable[dict[str, Any]], length: int) -> list[_Block]:
    """Entries (oldest first) into blocks (no gaps yet)."""
    blocks: list[_Block] = []
    for e in entries:
        t = e["slot"] * SLOT_SECONDS
        if not blocks or t >= blocks[-1].end:
            blocks.append(_Block(t - t % 3600, length))
        blocks[-1].rows.append(e)
    return blocks


def _cost(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return pieces_cost((r["cost"], r["cost_partial"], r["basis"]) for r in rows)


def _figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    tok = [sum(r["tokens"][i] for r in rows) for i in range(4)]
    return {"entries": sum(r["entries"] for r in rows), **dict(zip(TOKENS, tok)), "total_tokens": sum(tok),
            **_cost(rows)}


def block_dict(b: _Block, now: float) -> dict[str, Any]:
    rows = b.rows
    last = max(r["slot"] for r in rows) * SLOT_SECONDS + SLOT_SECONDS
    runs = {r["run"] for r in rows if r["source"] == "record"}
    sessions = {r["run"] for r in rows if r["source"] != "record"}
    models: dict[str | None, list[dict[str, Any]]] = {}
    for r in rows:
        models.setdefault(r["model"], []).append(r)
    d: dict[str, Any] = {
        "id": _iso(b.start), "start": _iso(b.start), "end": _iso(b.end), "actual_end": _iso(min(last, b.end)),
        "is_active": b.start <= now < b.end, "is_gap": False, "runs": len(runs), "sessions": len(sessions),
        **_figures(rows),
        "models": sorted(({"model": m, **_figures(rs)} for m, rs in models.items()),
                         key=lambda x: (-(x["total_tokens"]), x["model"] or "")),
        "burn_rate": None, "projection": None,
    }
    if d["is_active"]:
        _rates(d, b.start, b.end, now)
    return d


def _rates(d: dict[str, Any], start: int, end: int, now: float) -> None:
    """An active block's `burn_rate` and `projection` from its totals (see the module)."""
    elapsed_h = (now - start) / 3600
    left_h = (end - now) / 3600
    if elapsed_h > 0:
        tph = d["total_tokens"] / elapsed_h
        cost = d["cost_usd"] if d["cost_usd"] is not None else d["cost_usd_known"]
        cph = cost / elapsed_h if cost is not None else None
        d["burn_rate"] = {"tokens_per_hour": tph, "cost_usd_per_hour": cph, "elapsed_minutes": (now - start) / 60,
                          "cost_basis": d["cost_basis"]}
        d["projection"] = {"total_tokens": round(d["total_tokens"] + tph * left_h),
                           "cost_usd": None if cph is None else cost + cph * left_h,
                           "remaining_minutes": (end - now) / 60}


def limits_in(samples: list[tuple[float, dict[str, tuple[float, float | None]]]], start: int,
              end: int) -> dict[str, Any] | None:
    """The block's `rate_limits` from the samples taken in [start, end) (see the module)."""
    out: dict[str, dict[str, Any]] = {}
    resets: dict[str, float] = {}
    for at, windows in samples:
        if not start <= at < end:
            continue
        for name, (used, reset) in windows.items():
            w = out.get(name)
            if w is None:
                w = out[name] = {"max_used_percentage": used, "resets_at": None, "samples": 0}
            w["max_used_percentage"] = max(w["max_used_percentage"], used)
            w["samples"] += 1
            if reset is not None and reset > resets.get(name, float("-inf")):
                resets[name] = reset
    for name, reset in resets.items():
        try:
            out[name]["resets_at"] = _iso(reset)
        except (OverflowError, OSError, ValueError):
            pass
    return {k: out[k] for k in sorted(out)} or None


def gap_dict(start: int, end: int) -> dict[str, Any]:
    return {"id": "gap-" + _iso(start), "start": _iso(start), "end": _iso(end), "actual_end": None,
            "is_active": False, "is_gap": True, "runs": 0, "sessions": 0, "entries": 0,
            **dict.fromkeys(TOKENS, 0), "total_tokens": 0, "cost_usd": 0.0, "cost_usd_known": 0.0,
            "cost_basis": None, "models": [], "burn_rate": None, "projection": None, "rate_limits": None}


def blocks_doc(entries: list[dict[str, Any]], *, session_hours: float = 5, now: float | None = None,
               active: bool = False, recent: bool = False, token_limit: str | int | None = None,
               samples: list | None = None) -> dict[str, Any]:
    """The blocks document (`report blocks --json`); `samples`: the kept rate_limits samples
    (each block's `rate_limits`)."""
    length = session_seconds(session_hours)
    now = now_s() if now is None else now
    out: list[dict[str, Any]] = []
    prev_end: int | None = None
    for b in identify(entries, length):
        if prev_end is not None and prev_end < b.start:
            out.append(gap_dict(prev_end, b.start))
        out.append(block_dict(b, now))
        out[-1]["rate_limits"] = limits_in(samples or [], b.start, b.end)
        prev_end = b.end
    if recent:
        cutoff = _iso(now - RECENT_DAYS * 86400)
        out = [b for b in out if b["start"] >= cutoff or b["is_active"]]
    if active:
        out = [b for b in out if b["is_active"]]
    done = [b["total_tokens"] for b in out if not b["is_gap"] and not b["is_active"]]
    limit = (max(done) if done else None) if token_limit == "max" else token_limit
    if limit:
        for b in out:
            if b["is_gap"]:
                continue
            b["token_limit"] = {"limit": limit, "percent_used": b["total_tokens"] / limit * 100}
            if b["projection"] is not None:
                proj = b["projection"]["total_tokens"]
                b["token_limit"].update(projected_percent=proj / limit * 100,
                                        status="exceeds" if proj > limit else "warning" if proj > 0.8 * limit else "ok")
    return {"session_length_hours": session_hours, "now": _iso(now), "harness": HARNESS,
            "token_limit": limit, "blocks": out}


def _active_since(c: Any, now: float, length: int) -> tuple[int, list[int]] | None:
    """(anchor slot, the usage slots from it to now's) deciding the block holding `now`:
    blocks chain from an entry at least a block's length after the one before it (that entry
    starts a block whatever came earlier), so the entries from the last such one on decide
    the active block; the look-back widens until one is found or the history is read whole.
    None: no entry within the look-back (an active block's are all within a block's length
    of now). Only the slots are read: a block's bounds depend on its entries' slots alone."""
    now_slot = int(now) // SLOT_SECONDS
    back = 2 * length
    while True:
        since = (int(now) - back) // SLOT_SECONDS
        slots = [s for (s,) in c.rows(f"SELECT DISTINCT slot FROM report_facts WHERE {_USAGE} AND slot >= ? "
                                      "AND slot <= ? ORDER BY slot", (HARNESS, since, now_slot))]
        if not slots:
            return None
        older = c.rows(f"SELECT max(slot) FROM report_facts WHERE {_USAGE} AND slot < ?", (HARNESS, since))[0][0]
        anchor = None
        prev = older
        for i, s in enumerate(slots):
            if prev is None or (s - prev) * SLOT_SECONDS >= length:
                anchor = i
            prev = s
        if anchor is not None:
            return slots[anchor], slots[anchor:]
        back *= 4


def active_bounds(c: Any, now: float, session_hours: float = 5) -> tuple[int, int] | None:
    """(start, end) epoch seconds of the block holding `now` (identify's rule over the recent
    slots, `_active_since`), or None."""
    from ledger.index.rawread import wrap

    length = session_seconds(session_hours)
    found = _active_since(wrap(c), now, length)
    if found is None:
        return None
    b = identify(({"slot": s} for s in found[1]), length)[-1]  # (the last block holds now or none does)
    return (b.start, b.end) if b.start <= now < b.end else None


def active_block(c: Any, now: float, session_hours: float = 5) -> dict[str, Any] | None:
    """The block holding `now` (`report blocks --active`'s), read from the recent entries
    only (`_active_since`)."""
    from ledger.index.rawread import wrap

    c = wrap(c)
    found = _active_since(c, now, session_seconds(session_hours))
    if found is None:
        return None
    now_slot = int(now) // SLOT_SECONDS
    entries = [e for e in read_entries(c, found[0]) if e["slot"] <= now_slot]
    doc = blocks_doc(entries, session_hours=session_hours, now=now)
    return next((b for b in doc["blocks"] if b["is_active"]), None)


def active_totals(c: Any, now: float, session_hours: float = 5) -> dict[str, Any] | None:
    """The active block's bounds, tokens, cost and basis, burn rate and projection (the keys
    of active_block's block the status line shows, the same values) summed in SQL: no record
    per entry (a block may hold thousands)."""
    from ledger.index.rawread import wrap
    from ledger.report.costs import pieces_cost_of, pieces_cost_sql

    c = wrap(c)
    bounds = active_bounds(c, now, session_hours)
    if bounds is None:
        return None
    start, end = bounds
    last = min(end // SLOT_SECONDS - 1, int(now) // SLOT_SECONDS)  # (active_block: no entry after now's slot)
    row = c.rows("SELECT " + ", ".join(f"COALESCE(sum({t}), 0)" for t in TOKENS) + ", "
                 + pieces_cost_sql("cost_auto", "cost_auto_partial", "basis_auto")
                 + f" FROM report_facts WHERE {_USAGE} AND slot >= ? AND slot <= ?",
                 (HARNESS, start // SLOT_SECONDS, last))[0]
    tok = [int(v) for v in row[:4]]
    d: dict[str, Any] = {"start": _iso(start), "end": _iso(end), "is_active": True, **dict(zip(TOKENS, tok)),
                         "total_tokens": sum(tok), **pieces_cost_of(row[4:]), "burn_rate": None, "projection": None}
    _rates(d, start, end, now)
    return d


def read_blocks(c: Any, _q: Any = None, project: list[str] | None = None, **options: Any) -> dict[str, Any]:
    """The blocks document of a synced index (ledger.report.service.build_reports' `answer`);
    `project`: only the entries of runs and sessions of the projects it matches."""
    from ledger.index.rawread import wrap

    c = wrap(c)
    entries = read_entries(c)
    if project:
        from ledger.report.projects import project_runs

        keep = project_runs(c, project)
        entries = [e for e in entries if e["run"] in keep]
    return blocks_doc(entries, **options)


CSV_FIELDS = ("start", "end", "actual_end", "is_active", "is_gap", "runs", "sessions", "entries", *TOKENS,
              "total_tokens", "cost_usd", "cost_usd_known", "cost_basis")
CSV_LIMITS = ("five_hour", "seven_day")  # (the CSV's official-limit columns, after the models)


def to_csv(doc: dict[str, Any]) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS + ("models",) + tuple(f"{k}_max_used_percentage" for k in CSV_LIMITS))
    for b in doc["blocks"]:
        limits = b.get("rate_limits") or {}
        w.writerow([b[f] for f in CSV_FIELDS] + ["|".join(m["model"] or "" for m in b["models"])]
                   + [limits[k]["max_used_percentage"] if k in limits else "" for k in CSV_LIMITS])
    return buf.getvalue()
