"""Which runs `ledger runs` shows without --all (one rule, read by the records path and the index).

Runs started in the last RECENT_DAYS days, newest first, at most RECENT_LIMIT, plus every
unterminated run (running, abandoned, unknown, or unreadable: a record that cannot be read)
whatever its age, so nothing in flight, lost or damaged is ever hidden.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Iterable

from ledger.records.model import RunSnapshot

RECENT_DAYS = 7
RECENT_LIMIT = 50


def select_runs(snapshots: Iterable[RunSnapshot], all_: bool, now: datetime | None = None) -> list[RunSnapshot]:
    ordered = sorted(snapshots, key=lambda s: (s.started or "", s.id), reverse=True)
    if all_:
        return ordered
    now = now or datetime.now(timezone.utc)
    cutoff = (now - timedelta(days=RECENT_DAYS)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    recent = [s for s in ordered if (s.started or "") >= cutoff][:RECENT_LIMIT]
    chosen = {s.id for s in recent}
    extra = [s for s in ordered if s.state != "settled" and s.id not in chosen]
    return sorted(recent + extra, key=lambda s: (s.started or "", s.id), reverse=True)
