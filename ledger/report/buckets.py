"""Time-zone bucketing for reports, done at query time.

A run belongs to the bucket (day, week or month) that contains its start time
(`created_at`, stored in UTC) *in the report's zone*. The database never needs to know about
zones: we compute, in Python, the UTC instants at which the zone's local buckets begin
(`bucket_starts`), pick the coarsest UTC slot size (1 day, 1 hour, 15 min, 1 min, 1 s) that
every one of those instants is a multiple of (`slot_seconds`), let SQL pre-aggregate rows per
slot (`floor(epoch / slot)`), and map each slot to its bucket with a binary search.

Because every bucket start is a multiple of the slot size, a slot never straddles two
buckets, so the regrouping is exact, whatever the zone (:30 and :45 offsets, DST days of
23 or 25 hours, days that begin at 01:00 because midnight was skipped, historical offsets in
seconds). UTC days need one row per day from SQL; US zones one per hour; Asia/Kathmandu
(+05:45) one per 15 minutes.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from datetime import date, datetime, timedelta, timezone, tzinfo
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from ledger.errors import LedgerError
from ledger.plainclass import Plain

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

PERIODS = ("daily", "weekly", "monthly")
WEEK_STARTS = ("monday", "sunday")
SLOT_CHOICES = (86400, 3600, 900, 60, 1)
_DAY_RE = re.compile(r"^(\d{4})-?(\d{2})-?(\d{2})$")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class ReportError(LedgerError):
    """A report request that cannot be answered as asked (bad date, unknown zone...)."""


def parse_day(text: str, option: str = "--since") -> date:
    """`YYYY-MM-DD` or `YYYYMMDD` -> date (a calendar day in the report's zone)."""
    m = _DAY_RE.match(text.strip())
    if m and (len(text.strip()) in (8, 10)):
        try:
            return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            pass
    raise ReportError(f"{option} {text!r} is not a date; expected YYYY-MM-DD or YYYYMMDD",
                      hint=f"for example `ledger report {option} 2026-03-01`")


_REL_RE = re.compile(r"^(\d+)\s*([wdhm])$")
_REL_UNITS = {"w": "weeks", "d": "days", "h": "hours", "m": "minutes"}
_TIME_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?)\s*(Z|[+-]\d{2}:?\d{2})?$",
                      re.IGNORECASE)
BOUND_FORMS = "a day (YYYY-MM-DD, today, yesterday), a time (YYYY-MM-DDTHH:MM) or a time ago (30m, 24h, 7d, 2w)"


def parse_bound(text: str, option: str, zone: tzinfo, now: datetime | None = None,
                command: str = "report") -> date | datetime:
    """Every `--since` / `--until` of every command (one syntax, one zone rule; docs/report.md,
    "Dates"): a calendar day in `zone` (a `date`: `YYYY-MM-DD`, `YYYYMMDD`, `today`,
    `yesterday`), or an instant (an aware UTC `datetime`: `YYYY-MM-DDTHH:MM[:SS]`, in `zone`
    unless it names its own offset, or `Nm` / `Nh` / `Nd` / `Nw` back from `now`).

    A day as --since starts at its first instant in `zone`; as --until it is included whole
    (utc_range). Raises ReportError with an example (a usage mistake)."""
    t = text.strip()
    low = t.lower()
    if low in ("today", "yesterday"):
        current = (now or datetime.now(timezone.utc)).astimezone(zone)
        return current.date() - timedelta(days=1 if low == "yesterday" else 0)
    m = _REL_RE.match(low)
    if m:
        n = int(m.group(1))
        try:
            return (now or datetime.now(timezone.utc)) - timedelta(**{_REL_UNITS[m.group(2)]: n})
        except OverflowError:  # further back than the calendar: every run is after it
            return datetime.min.replace(tzinfo=timezone.utc)
    m = _TIME_RE.match(t)
    if m:
        try:
            clock = datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}{(m.group(3) or '').upper()}")
            if clock.tzinfo is None:
                clock = clock.replace(tzinfo=zone)
            return clock.astimezone(timezone.utc)
        except (ValueError, OverflowError):
            pass
    else:
        try:
            return parse_day(t, option)
        except ReportError:
            pass
    raise ReportError(f"{option} {text!r} is not a day, a time or a time ago; expected {BOUND_FORMS}",
                      hint=f"for example `ledger {command} {option} 2026-03-01`, `{option} 7d` or `{option} yesterday`")


def bound_text(bound: date) -> str:
    """A --since / --until as the report's JSON and title say it: the day (`2026-03-01`), or
    the instant in UTC (`2026-03-01T11:00:00Z`)."""
    if isinstance(bound, datetime):
        b = bound.astimezone(timezone.utc)
        return f"{b.year:04d}-{b.month:02d}-{b.day:02d}T{b.hour:02d}:{b.minute:02d}:{b.second:02d}Z"
    return bound.isoformat()


def utc_range(since: date | None, until: date | None, zone: tzinfo) -> tuple[datetime | None, datetime | None]:
    """[start, end) in UTC of `--since since --until until` (parse_bound's answers; None:
    open): a day starts at its local midnight, an --until day is included whole, an instant
    is itself. Raises ReportError when the range ends before it starts."""
    start = end = None
    # A bound past the calendar's ends (`--until 9999-12-31`, `--since 0001-01-01` east of
    # UTC) cannot be an instant; no run lies beyond it either, so the range is open there.
    if isinstance(since, datetime):
        start = since
    elif since is not None:
        try:
            start = local_midnight_utc(since, zone)
        except OverflowError:
            start = None
    if isinstance(until, datetime):
        end = until
    elif until is not None:
        try:
            end = local_midnight_utc(until + timedelta(days=1), zone)
        except OverflowError:
            end = None
    if since is not None and until is not None:
        if isinstance(since, datetime) or isinstance(until, datetime):
            if start is not None and end is not None and end < start:
                raise ReportError(f"--until {until.isoformat()} is before --since {since.isoformat()}")
        elif until < since:
            raise ReportError(f"--until {until.isoformat()} is before --since {since.isoformat()}")
    return start, end


UTC_NAMES = ("UTC", "Z")


def resolve_zone(name: str | None, env: Mapping[str, str] | None = None,
                 warn: Callable[[str], None] | None = None, fixed_utc: bool = False) -> tuple[tzinfo, str]:
    """The report's zone and its display name. None means the local zone.

    Local zone: $TZ when it names an IANA zone (`:Europe/Paris` and a path into a zoneinfo
    directory too), else /etc/localtime (its symlink target names the zone), else UTC.
    A $TZ that is set but names nothing we can use (`Nowhere/Bogus`, `:/etc/passwd`, a
    POSIX rule string) means UTC, as the C library takes it, and `warn` is told so: the
    report's days must not silently move.

    `fixed_utc` (`ledger report`): UTC is datetime's own `timezone.utc`, the same instants as
    ZoneInfo("UTC") without loading the zone database (zoneinfo: ~12 M instructions of a warm
    report); other zones are ZoneInfo's either way.
    """

    def utc() -> tzinfo:
        if fixed_utc:
            return timezone.utc
        from zoneinfo import ZoneInfo

        return ZoneInfo("UTC")

    if name is not None and not name.strip():  # (`--tz ''`: not silently the local zone)
        raise ReportError("--tz '' names no time zone; expected an IANA name such as Europe/Paris",
                          hint="for example `--tz America/New_York` or `--tz UTC` (leave --tz out for the local zone)")
    if name:
        if name.upper() in UTC_NAMES:
            return utc(), "UTC"
        zone = _zone(name)
        if zone is None:
            raise ReportError(f"unknown time zone {name!r}; expected an IANA name such as Europe/Paris",
                              hint="for example `ledger report --tz America/New_York` (or `--tz UTC`)")
        return zone, name
    env = os.environ if env is None else env
    raw = env.get("TZ") or ""
    tz = raw[1:] if raw.startswith(":") else raw
    if tz:
        if tz.upper() in UTC_NAMES:
            return utc(), "UTC"
        key = tz
        if os.path.isabs(tz) and "/zoneinfo/" in tz:  # glibc accepts a path to a zone file
            key = tz[tz.index("/zoneinfo/") + len("/zoneinfo/"):]
        zone = _zone(key)
        if zone is not None:
            return zone, key
        if warn is not None:
            warn(f"warning: $TZ={raw!r} is not a usable time zone; using UTC "
                 "(set TZ to an IANA name such as Europe/Paris, or pass --tz)")
        return utc(), "UTC"
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        target = os.readlink("/etc/localtime")
        idx = target.find("zoneinfo/")
        if idx >= 0:
            key = target[idx + len("zoneinfo/"):]
            return ZoneInfo(key), key
    except (OSError, ZoneInfoNotFoundError, ValueError):
        pass
    try:
        with open("/etc/localtime", "rb") as f:
            return ZoneInfo.from_file(f, key="localtime"), "localtime"
    except (OSError, ValueError):
        return utc(), "UTC"


def _zone(key: str) -> "ZoneInfo | None":
    """The IANA zone `key`, or None (unknown, a path, not a zone file, unreadable)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError, IsADirectoryError, OSError):
        return None


def local_midnight_utc(day: date, zone: tzinfo) -> datetime:
    """The first instant of `day` in `zone`, as an aware UTC datetime.

    When local midnight does not exist (a DST gap at 00:00), the day starts at the first
    local time that does: Python's fold=0 rule maps the missing time with the offset in force
    before the gap, which lands exactly on the end of the gap.
    """
    return datetime(day.year, day.month, day.day, tzinfo=zone).astimezone(timezone.utc)


def epoch(dt: datetime) -> int:
    """Whole seconds since 1970 (floor) of an aware or naive-UTC datetime."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    delta = dt - _EPOCH
    return delta.days * 86400 + delta.seconds


def period_start(day: date, period: str, week_start: str = "monday") -> date:
    if period == "daily":
        return day
    if period == "weekly":
        first = 0 if week_start == "monday" else 6  # date.weekday(): Monday=0 .. Sunday=6
        return day - timedelta(days=(day.weekday() - first) % 7)
    if period == "monthly":
        return day.replace(day=1)
    raise ReportError(f"unknown period {period!r}")


def next_period(start: date, period: str) -> date:
    if period == "daily":
        return start + timedelta(days=1)
    if period == "weekly":
        return start + timedelta(days=7)
    if start.month == 12:
        return date(start.year + 1, 1, 1)
    return date(start.year, start.month + 1, 1)


def bucket_label(start: date, period: str) -> str:
    """Row keys: daily `2026-03-08`; weekly the week's first day `2026-03-02`; monthly `2026-03`."""
    if period == "monthly":
        return f"{start.year:04d}-{start.month:02d}"
    return start.isoformat()


class Buckets(Plain):
    """The local buckets covering a UTC span, as sorted UTC epoch starts and their labels (a
    dataclass, written out: ledger.plainclass)."""

    __slots__ = ("starts", "labels", "slot")

    def __init__(self, starts: list[int], labels: list[str], slot: int) -> None:
        self.starts = starts
        self.labels = labels
        self.slot = slot

    def label_of_slot(self, slot_index: int) -> str | None:
        """The bucket label of the UTC slot `slot_index` (slot_index * slot = slot start)."""
        i = bisect_right(self.starts, slot_index * self.slot) - 1
        if i < 0 or i >= len(self.labels):
            return None
        return self.labels[i]

    def label_of_epoch(self, seconds: float) -> str | None:
        i = bisect_right(self.starts, seconds) - 1
        if i < 0 or i >= len(self.labels):
            return None
        return self.labels[i]


def slot_seconds(instants: Iterable[int]) -> int:
    """The coarsest slot size that every instant (epoch seconds) is a multiple of."""
    choices = list(SLOT_CHOICES)
    for t in instants:
        while choices and t % choices[0]:
            choices.pop(0)
        if len(choices) == 1:
            break
    return choices[0]


def make_buckets(first: datetime, last: datetime, zone: tzinfo, period: str,
                 week_start: str = "monday") -> Buckets:
    """Buckets covering [first, last] (UTC instants, inclusive) in `zone`.

    The list holds one start more than the labels: the end of the last bucket.
    """
    first_day = first.astimezone(zone).date()
    last_day = last.astimezone(zone).date()
    cur = period_start(first_day, period, week_start)
    starts: list[int] = []
    labels: list[str] = []
    while cur <= last_day:
        starts.append(epoch(local_midnight_utc(cur, zone)))
        labels.append(bucket_label(cur, period))
        cur = next_period(cur, period)
    starts.append(epoch(local_midnight_utc(cur, zone)))
    return Buckets(starts=starts, labels=labels, slot=slot_seconds(starts))
