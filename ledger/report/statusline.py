"""`ledger statusline`: one line for Claude Code's status bar, from the index (issue 29).

Claude Code runs its `statusLine.command` after each response and on other changes, with a
JSON object on stdin (2.1.328, tests/data/statusline/: `session_id`, `transcript_path`, `cwd`,
`model{id, display_name}`, `workspace`, `version`, `cost{total_cost_usd, ...}`,
`context_window{total_input_tokens, context_window_size, current_usage, used_percentage,
...}`, and where the account has them `rate_limits.five_hour|seven_day{used_percentage,
resets_at}`). The line says:

- the model (`display_name`);
- this session's own cost from the index (every response counted once, the client's cost
  where its log has one, else estimated) and its basis; the client's `total_cost_usd` is
  per process, not per session, and is not shown;
- today's cost (the local day, as `ledger report daily`);
- the active 5-hour block's cost, burn rate and time left (ledger.report.blocks);
- the official limits' use and reset, where the JSON has them;
- the context window's use.

Nothing here imports SQLAlchemy: a warm status line is the report's warm path
(ledger.report.service.build_reports over the sqlite3 driver).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ledger.report.costs import pieces_cost_of, pieces_cost_sql
from ledger.report.kinds import SLOT_SECONDS

PLACEHOLDER = "ledger: no status"
SAMPLES = "statusline/rate-limits.jsonl"  # below the home: each rate_limits sample it was given
LIMITS = ("five_hour", "seven_day")


def parse_input(raw: bytes) -> dict[str, Any] | None:
    """The status-line JSON object, or None (empty, not JSON, not an object)."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _finite(v: float | None) -> bool:
    return v is not None and -1e300 < v < 1e300  # (NaN and the infinities fail)


def config_root(transcript_path: str | None) -> Path | None:
    """The Claude config dir holding a transcript (`<dir>/projects/<project>/<session>.jsonl`)."""
    if not transcript_path:
        return None
    p = Path(transcript_path)
    if len(p.parents) >= 3 and p.parent.parent.name == "projects":
        return p.parent.parent.parent
    return None


def day_bounds(now: float) -> tuple[int, int]:
    """The local day holding `now`, as epoch seconds [start, end) (DST days included)."""
    t = time.localtime(now)
    start = time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0, 0, 0, -1))
    nxt = time.localtime(start + 26 * 3600)
    end = time.mktime((nxt.tm_year, nxt.tm_mon, nxt.tm_mday, 0, 0, 0, 0, 0, -1))
    return int(start), int(end)


def figures(c: Any, session_id: str | None, now: float) -> dict[str, Any]:
    """The session's, today's and the active block's figures from a synced index (each
    summed in SQL, ledger.report.costs.pieces_cost_sql)."""
    from ledger.index.rawread import wrap
    from ledger.report.blocks import active_totals

    c = wrap(c)
    piece = ("SELECT " + pieces_cost_sql("run_cost_auto", "run_cost_auto_partial", "run_basis_auto")
             + " FROM report_facts WHERE piece = 1")
    none = (0,) * 7  # (the aggregates of no rows: nothing known)
    session = pieces_cost_of(c.rows(piece + " AND session = ?", (session_id,))[0] if session_id else none)
    start, end = day_bounds(now)
    today = pieces_cost_of(c.rows(piece + " AND slot >= ? AND slot < ?",
                                  (start // SLOT_SECONDS, -(-end // SLOT_SECONDS)))[0])
    return {"session": session, "today": today, "block": active_totals(c, now)}


def money(v: float | None, known: float | None = None) -> str:
    if v is None:
        return "?" if known is None else f">=${known:.2f}"
    return f"${v:.4f}" if 0 < v < 0.01 else f"${v:.2f}"


def reset_epoch(v: Any) -> float | None:
    """A reset time (epoch seconds or milliseconds, or RFC 3339 text) in epoch seconds."""
    s = _num(v)
    if s is None and isinstance(v, str):
        from datetime import datetime

        try:
            s = datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    if not _finite(s):
        return None
    return s / 1000 if s > 1e11 else s  # (milliseconds)


def _clock(v: Any) -> str | None:
    """A reset time (reset_epoch) as local HH:MM."""
    s = reset_epoch(v)
    if s is None:
        return None
    try:
        return time.strftime("%H:%M", time.localtime(s))
    except (OverflowError, OSError, ValueError):
        return None


def _left(minutes: float) -> str:
    m = max(0, int(minutes))
    return f"{m // 60}h{m % 60:02d}m" if m >= 60 else f"{m}m"


def render(doc: dict[str, Any], figs: dict[str, Any] | None) -> str:
    """The one line."""
    model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    parts = [_str(model.get("display_name")) or _str(model.get("id")) or "?"]
    if figs is not None:
        s = figs["session"]
        basis = f" {s['cost_basis']}" if s["cost_basis"] else ""
        parts.append(f"session {money(s['cost_usd'], s['cost_usd_known'])}{basis}")
        t = figs["today"]
        parts.append(f"today {money(t['cost_usd'], t['cost_usd_known'])}")
        b = figs["block"]
        if b is not None:
            text = f"block {money(b['cost_usd'], b['cost_usd_known'])}"
            rate = b.get("burn_rate") or {}
            if rate.get("cost_usd_per_hour") is not None:
                text += f" {money(rate['cost_usd_per_hour'])}/h"
            left = (b.get("projection") or {}).get("remaining_minutes")
            if left is not None:
                text += f" {_left(left)} left"
            parts.append(text)
    limits = doc.get("rate_limits") if isinstance(doc.get("rate_limits"), dict) else {}
    for name, label in (("five_hour", "5h"), ("seven_day", "7d")):
        lim = limits.get(name)
        if isinstance(lim, dict) and _num(lim.get("used_percentage")) is not None:
            text = f"{label} {_num(lim['used_percentage']):g}%"
            reset = _clock(lim.get("resets_at"))
            parts.append(text + (f" (resets {reset})" if reset else ""))
    ctx = doc.get("context_window") if isinstance(doc.get("context_window"), dict) else {}
    used = _num(ctx.get("used_percentage"))
    if used is None:
        cur, size = ctx.get("current_usage"), _num(ctx.get("context_window_size"))
        if isinstance(cur, dict) and size:
            used = sum(v for v in map(_num, (cur.get("input_tokens"), cur.get("cache_creation_input_tokens"),
                                             cur.get("cache_read_input_tokens"))) if v) / size * 100
    parts.append(f"ctx {used:.0f}%" if used is not None else "ctx -")
    return " | ".join(parts)


def keep_sample(home: Path, doc: dict[str, Any], now: float) -> bool:
    """Append the JSON's `rate_limits` to the home's samples file when it differs from the
    last one kept (a status line runs often); True when one was written."""
    limits = doc.get("rate_limits")
    if not isinstance(limits, dict) or not limits:
        return False
    path = Path(home) / SAMPLES
    sample = {"at": now, "session_id": _str(doc.get("session_id")), "rate_limits": limits}
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 65536))
            tail = f.read().splitlines()
        last = json.loads(tail[-1]) if tail else None
    except (OSError, ValueError, IndexError):
        last = None
    if isinstance(last, dict) and last.get("rate_limits") == limits:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        f.write(json.dumps(sample, separators=(",", ":"), sort_keys=True).encode() + b"\n")
    return True


def read_samples(home: Path) -> list[tuple[float, dict[str, tuple[float, float | None]]]]:
    """The kept samples, oldest first: (at, {window kind: (used_percentage, reset epoch or
    None)}), each window with a numeric use (a damaged line or window is left out: the
    file is the home's, but its values came from stdin)."""
    try:
        with open(Path(home) / SAMPLES, "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("rate_limits"), dict):
            continue
        at = _num(doc.get("at"))
        if not _finite(at):
            continue
        windows = {}
        for name, lim in doc["rate_limits"].items():
            used = _num(lim.get("used_percentage")) if isinstance(lim, dict) else None
            if _finite(used):
                windows[name] = (used, reset_epoch(lim.get("resets_at")))
        if windows:
            out.append((at, windows))
    out.sort(key=lambda s: s[0])
    return out
