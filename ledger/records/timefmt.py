"""RFC 3339 timestamps. Stored and printed in UTC with microseconds so every path
(records, SQLite, PostgreSQL) renders a time identically."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})\Z",
    re.ASCII,  # \d must not match non-ASCII digits
)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


# What ledger and Loopflow write (format_utc): parsed by the C fromisoformat directly.
_CANONICAL = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z", re.ASCII)


def is_canonical_utc(text: str) -> bool:
    """True for the exact form format_utc() produces (so format_utc(parse(text)) == text
    whenever the date is valid)."""
    return _CANONICAL.fullmatch(text) is not None


_MILLIS_Z = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z", re.ASCII)


def utc_text(v: Any) -> str | None:
    """A log's timestamp as format_utc() writes it, or None (not a string, not RFC 3339, out
    of range). The millisecond `Z` form the clients write (Claude Code, Codex: one per log
    line) is rewritten without a parse: the same text, at a fraction of the cost."""
    if type(v) is not str:
        return None
    if _MILLIS_Z.fullmatch(v):
        try:
            datetime.fromisoformat(v[:-1])  # (a valid date and time: 2026-02-30 is not)
        except ValueError:
            return None
        return v[:-1] + "000Z"
    try:
        return format_utc(parse_rfc3339(v))
    except (ValueError, OverflowError):
        return None


def parse_rfc3339(text: str) -> datetime:
    """Parse an RFC 3339 timestamp (any offset, any fraction length) into an aware UTC datetime."""
    if type(text) is str:
        if _CANONICAL.fullmatch(text):
            try:
                return datetime.fromisoformat(text[:-1] + "+00:00")
            except ValueError:
                raise ValueError(f"not an RFC 3339 timestamp: {text!r}") from None
        return _parse_cached(text)  # a run's created_at / ended_at are parsed by several readers
    return _parse(text)


def _parse(text: Any) -> datetime:
    m = _RFC3339.match(text.strip()) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    y, mo, d, h, mi, s, frac, off = m.groups()
    micro = int((frac or "0")[:6].ljust(6, "0"))
    tz = "+00:00" if off in ("Z", "z") else off
    try:
        dt = datetime.fromisoformat(f"{y}-{mo}-{d}T{h}:{mi}:{s}.{micro:06d}{tz}")
        return dt.astimezone(timezone.utc)
    except OverflowError:  # e.g. 9999-12-31T23:00:00-05:00 is past year 9999 in UTC
        raise ValueError(f"timestamp out of range: {text!r}") from None


_parse_cached = lru_cache(maxsize=64)(_parse)  # datetimes are immutable: sharing is safe


def format_utc(dt: datetime | None) -> str | None:
    if dt is None:
        return None
    if dt.tzinfo is None:  # naive values come back from SQLite: they are UTC by construction
        dt = dt.replace(tzinfo=timezone.utc)
    u = dt.astimezone(timezone.utc)
    # explicit zero padding: strftime's %Y does not pad years below 1000 on glibc
    return (f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}"
            f".{u.microsecond:06d}Z")


def now_rfc3339() -> str:
    return format_utc(utcnow())  # type: ignore[return-value]
