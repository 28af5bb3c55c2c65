"""Which runs `ledger runs` shows (one rule, read by the records path and the index).

Without --all: runs started in the last RECENT_DAYS days (or in the `--since`/`--until` range),
newest first, at most RECENT_LIMIT (or `--limit`), plus, when no range is given, every unterminated run
(running, abandoned, unknown, or unreadable: a record that cannot be read) whatever its age,
so nothing in flight, lost or damaged is ever hidden. Filters (harness, outcome, subject,
skill; `*` wildcards; project: ledger.records.project's match) apply first; an outcome filter matches the outcome, or the state of a
run that has none (running, abandoned, unknown, unreadable).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from fnmatch import fnmatchcase
from typing import Iterable, Sequence

from ledger.plainclass import Plain
from ledger.records.model import RunSnapshot
from ledger.records.project import project_matches, project_of

RECENT_DAYS = 7
RECENT_LIMIT = 50
_STAMP = "%Y-%m-%dT%H:%M:%S.%fZ"  # the records' started text sorts like time (years >= 1000)


class RunFilter(Plain):
    __slots__ = ("harness", "outcome", "subject", "skill", "source", "project", "since", "until", "limit", "ranged")

    def __init__(
            self,
            harness: Sequence[str] = (),
            outcome: Sequence[str] = (),
            subject: Sequence[str] = (),
            skill: Sequence[str] = (),
            source: Sequence[str] = (),
            project: Sequence[str] = (),  # (ledger.records.project: the worktree, else the cwd; whole or its last part)
            since: datetime | None = None,  # UTC: started at or after
            until: datetime | None = None,  # UTC: started before
            limit: int | None = None,
            ranged: bool = False,  # --since / --until given (an open end included): no default window
    ) -> None:
        self.harness = harness
        self.outcome = outcome
        self.subject = subject
        self.skill = skill
        self.source = source
        self.project = project
        self.since = since
        self.until = until
        self.limit = limit
        self.ranged = ranged

    def matches(self, s: RunSnapshot) -> bool:
        def any_of(patterns: Sequence[str], values: Iterable[str | None]) -> bool:
            vals = [v for v in values if v is not None]
            return any(fnmatchcase(v, p) for p in patterns for v in vals)

        if self.harness and not any_of(self.harness, [s.harness]):
            return False
        if self.outcome and not any_of(self.outcome, [s.outcome or s.state]):
            return False
        if self.subject and not any_of(self.subject, [x.selector for x in s.subjects]):
            return False
        if self.skill and not any_of(self.skill, [s.skill]):
            return False
        if self.source and not any_of(self.source, [s.source]):
            return False
        if self.project and not project_matches(project_of(s.worktree, s.cwd), self.project):
            return False
        return True


class Selection(Plain):
    __slots__ = ("runs", "hidden", "filters", "in_all")

    def __init__(
            self,
            runs: list[RunSnapshot],
            hidden: int = 0,  # runs of the window left out by the limit
            filters: RunFilter | None = None,
            # the default window showed none: how many runs (matching the filters) there are in all
            # (`ledger runs` then says `0 runs in the last 7 days (53 in all: --all)`); None: not asked
            in_all: int | None = None,
    ) -> None:
        self.runs = runs
        self.hidden = hidden
        self.filters = RunFilter() if filters is None else filters
        self.in_all = in_all


def window_cutoff(now: datetime) -> datetime:
    """The start of the default window: a run started at or after it is recent."""
    return now - timedelta(days=RECENT_DAYS)


def pushed_limit(all_: bool, filters: RunFilter | None) -> int | None:
    """How many of the window's newest runs `select` can show, when nothing but the default
    window and the limit apply: the index then returns only those (ties at the last one
    included), the unterminated runs and the window's size (queries.newest_candidates).
    None: any other filter or range applies, and `select` needs every candidate."""
    f = filters or RunFilter()
    # every field but the limit at its "not applied" value (a new filter falls back to the full path)
    if all_ or any(getattr(f, name) for name in f.__slots__ if name != "limit"):
        return None
    return f.limit if f.limit is not None else RECENT_LIMIT


def select(snapshots: Iterable[RunSnapshot], all_: bool, now: datetime | None = None,
           filters: RunFilter | None = None, window_size: int | None = None) -> Selection:
    """The rule. `window_size`: how many runs the default window holds in all, when the caller
    passed only the newest of them (pushed_limit); the rest are counted hidden."""
    f = filters or RunFilter()
    ordered = sorted((s for s in snapshots if f.matches(s)), key=lambda s: (s.started or "", s.id), reverse=True)
    ranged = f.ranged or f.since is not None or f.until is not None
    since = _stamp(f.since) if f.since is not None else None
    until = _stamp(f.until) if f.until is not None else None
    if until is not None:
        ordered = [s for s in ordered if s.started is not None and s.started < until]
    if all_:
        chosen = [s for s in ordered if since is None or (s.started or "") >= since]
        limit = f.limit if f.limit is not None else len(chosen)
        return Selection(chosen[:limit], max(0, len(chosen) - limit), f)
    now = now or datetime.now(timezone.utc)
    cutoff = since if ranged else window_cutoff(now).strftime(_STAMP)
    window = [s for s in ordered if cutoff is None or (s.started or "") >= cutoff]
    limit = f.limit if f.limit is not None else RECENT_LIMIT
    recent = window[:limit]
    chosen = {s.id for s in recent}
    extra = [] if ranged else [s for s in ordered if s.state != "settled" and s.id not in chosen]
    runs = sorted(recent + extra, key=lambda s: (s.started or "", s.id), reverse=True)
    return Selection(runs, (len(window) if window_size is None else window_size) - len(recent), f)


def count_all(snapshots: Iterable[RunSnapshot], filters: RunFilter | None = None) -> int:
    """How many runs `--all` would list with these filters (no limit)."""
    f = filters or RunFilter()
    return sum(1 for s in snapshots if f.matches(s))


def select_runs(snapshots: Iterable[RunSnapshot], all_: bool, now: datetime | None = None) -> list[RunSnapshot]:
    """The default selection (no filters): what `ledger runs` and `ledger runs --all` list."""
    return select(snapshots, all_, now).runs


def _stamp(d: datetime) -> str:
    """The records' started text of `d` (UTC), zero-padded whatever the year (strftime does
    not pad years before 1000)."""
    d = d.astimezone(timezone.utc)
    return (f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}."
            f"{d.microsecond:06d}Z")


