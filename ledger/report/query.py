"""What a report asks (`ReportQuery`, validated against ledger.report.kinds) and what it
answers (`Report`: rows, totals, pricing), with the two rules both sides share: the report's
range in UTC epoch seconds and its resolved order."""

from __future__ import annotations

from datetime import date, timezone, tzinfo
from typing import Any

from ledger.plainclass import Plain
from ledger.report.buckets import PERIODS, ReportError, bound_text, epoch, utc_range
from ledger.report.costs import COST_MODES
from ledger.report.kinds import EVALUATION_KINDS, FILTERS, KINDS, OUTCOMES, known_outcome


class ReportQuery(Plain):
    """What to report (a dataclass, written out: ledger.plainclass)."""

    __slots__ = ("kind", "zone", "zone_name", "since", "until", "week_start", "filters", "breakdown", "order",
                 "limit", "cost", "evaluation")

    def __init__(self, kind: str = "daily", zone: tzinfo = timezone.utc, zone_name: str = "UTC",
                 since: date | None = None, until: date | None = None,  # a day, or an instant (a datetime)
                 week_start: str = "monday",
                 filters: dict[str, list[str]] | None = None, breakdown: bool = False,
                 order: str | None = None,  # asc | desc | None (the kind's default)
                 limit: int | None = None, cost: str = "auto",
                 evaluation: bool | None = None,  # None: on for subject / skill
                 ) -> None:
        self.kind = kind
        self.zone = zone
        self.zone_name = zone_name
        self.since = since
        self.until = until
        self.week_start = week_start
        self.filters = {} if filters is None else filters
        self.breakdown = breakdown
        self.order = order
        self.limit = limit
        self.cost = cost
        self.evaluation = evaluation
        self.__post_init__()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ReportError(f"unknown report {self.kind!r}; expected one of {', '.join(KINDS)}")
        if self.cost not in COST_MODES:
            raise ReportError(f"unknown --cost {self.cost!r}; expected one of {', '.join(COST_MODES)}")
        if self.order not in (None, "asc", "desc"):
            raise ReportError(f"unknown --order {self.order!r}; expected asc or desc")
        if self.limit is not None and self.limit < 0:
            raise ReportError("--limit must be 0 or more")
        for name, values in self.filters.items():
            if name not in FILTERS:
                raise ReportError(f"unknown filter {name!r}")
            if name == "outcome":
                bad = [v for v in values if not known_outcome(v)]
                if bad:
                    raise ReportError(f"unknown --outcome {bad[0]!r}; expected one of {', '.join(OUTCOMES)}")
        if self.evaluation is None:
            self.evaluation = self.kind in EVALUATION_KINDS

    @property
    def is_time(self) -> bool:
        return self.kind in PERIODS


def time_bounds(q: ReportQuery) -> tuple[int | None, int | None]:
    """[start, end) of the report in UTC epoch seconds (None: open)."""
    start, end = utc_range(q.since, q.until, q.zone)
    return (epoch(start) if start else None, epoch(end) if end else None)


class Report(Plain):
    """A report's rows and totals (a dataclass, written out: ledger.plainclass)."""

    __slots__ = ("query", "rows", "totals", "pricing", "seconds", "unreadable")

    def __init__(self, query: ReportQuery, rows: list[dict[str, Any]], totals: dict[str, Any],
                 pricing: dict[str, Any], seconds: float = 0.0,
                 unreadable: list[dict[str, str]] | None = None) -> None:
        self.query = query
        self.rows = rows
        self.totals = totals
        self.pricing = pricing
        self.seconds = seconds
        # records the index pass could not read ({path, reason}): in no row, but never silently gone
        self.unreadable: list[dict[str, str]] = [] if unreadable is None else unreadable

    def to_dict(self) -> dict[str, Any]:
        q = self.query
        return {
            "report": q.kind,
            "query": {
                "tz": q.zone_name, "since": bound_text(q.since) if q.since else None,
                "until": bound_text(q.until) if q.until else None,
                "week_start": q.week_start if q.kind == "weekly" else None,
                "filters": {k: v for k, v in sorted(q.filters.items()) if v}, "cost": q.cost,
                "breakdown": q.breakdown, "order": resolved_order(q), "limit": q.limit,
            },
            "rows": self.rows, "totals": self.totals, "pricing": self.pricing,
            "unreadable_runs": len(self.unreadable), "unreadable": self.unreadable,
        }


def resolved_order(q: ReportQuery) -> str:
    return q.order or ("asc" if q.is_time else "desc")
