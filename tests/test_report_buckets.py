"""Time-zone bucketing: local days / weeks / months from UTC instants, computed in Python."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.report.buckets import (
    ReportError, epoch, local_midnight_utc, make_buckets, parse_day, period_start, resolve_zone, slot_seconds,
    utc_range,
)

NY = ZoneInfo("America/New_York")
TOKYO = ZoneInfo("Asia/Tokyo")


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_parse_day_forms():
    assert parse_day("2026-03-08") == date(2026, 3, 8)
    assert parse_day("20260308") == date(2026, 3, 8)
    for bad in ("2026-3-8", "2026/03/08", "20260230", "yesterday", "2026-03-08T00:00"):
        with pytest.raises(ReportError) as exc:
            parse_day(bad)
        assert "YYYY-MM-DD or YYYYMMDD" in exc.value.message


def test_resolve_zone():
    assert resolve_zone("Asia/Tokyo")[1] == "Asia/Tokyo"
    assert resolve_zone("utc")[1] == "UTC"
    assert resolve_zone(None, env={"TZ": "Europe/Paris"})[1] == "Europe/Paris"
    with pytest.raises(ReportError) as exc:
        resolve_zone("Mars/Olympus")
    assert "unknown time zone" in exc.value.message


def test_the_two_runs_of_the_dst_morning_fall_on_their_local_days():
    # 2026-03-08 is the US DST start: 02:00 EST -> 03:00 EDT (07:00Z)
    a, b = utc("2026-03-08T06:30:00Z"), utc("2026-03-08T07:30:00Z")
    for zone, expected in ((NY, ("2026-03-08", "2026-03-08")), (TOKYO, ("2026-03-08", "2026-03-08"))):
        bk = make_buckets(a, b, zone, "daily")
        assert (bk.label_of_epoch(epoch(a)), bk.label_of_epoch(epoch(b))) == expected
    assert a.astimezone(NY).strftime("%H:%M %Z") == "01:30 EST"
    assert b.astimezone(NY).strftime("%H:%M %Z") == "03:30 EDT"


def test_dst_day_is_23_hours_and_the_boundaries_are_local_midnights():
    bk = make_buckets(utc("2026-03-07T12:00:00Z"), utc("2026-03-09T12:00:00Z"), NY, "daily")
    assert bk.labels == ["2026-03-07", "2026-03-08", "2026-03-09"]
    starts = [datetime.fromtimestamp(s, timezone.utc) for s in bk.starts]
    assert starts[1] == utc("2026-03-08T05:00:00Z")  # midnight EST
    assert starts[2] == utc("2026-03-09T04:00:00Z")  # midnight EDT: the day had 23 hours
    assert bk.label_of_epoch(epoch(utc("2026-03-08T04:59:59Z"))) == "2026-03-07"
    assert bk.label_of_epoch(epoch(utc("2026-03-08T05:00:00Z"))) == "2026-03-08"
    assert bk.label_of_epoch(epoch(utc("2026-03-09T03:59:59Z"))) == "2026-03-08"
    assert bk.label_of_epoch(epoch(utc("2026-03-09T04:00:00Z"))) == "2026-03-09"
    assert bk.slot == 3600


def test_since_until_are_inclusive_local_days():
    start, end = utc_range(date(2026, 3, 8), date(2026, 3, 8), NY)
    assert (start, end) == (utc("2026-03-08T05:00:00Z"), utc("2026-03-09T04:00:00Z"))
    start, end = utc_range(date(2026, 3, 8), date(2026, 3, 9), TOKYO)
    assert (start, end) == (utc("2026-03-07T15:00:00Z"), utc("2026-03-09T15:00:00Z"))
    with pytest.raises(ReportError):
        utc_range(date(2026, 3, 9), date(2026, 3, 8), NY)


def test_a_day_whose_midnight_does_not_exist_starts_when_it_does():
    # America/Santiago 2026-09-06: 00:00 -> 01:00 (DST starts at midnight)
    zone = ZoneInfo("America/Santiago")
    start = local_midnight_utc(date(2026, 9, 6), zone)
    assert start.astimezone(zone).strftime("%H:%M") == "01:00"
    assert start.astimezone(zone).date() == date(2026, 9, 6)


def test_slot_sizes():
    assert make_buckets(utc("2026-01-01T00:00:00Z"), utc("2026-12-31T00:00:00Z"), ZoneInfo("UTC"), "daily").slot == 86400
    assert make_buckets(utc("2026-01-01T00:00:00Z"), utc("2026-02-01T00:00:00Z"), ZoneInfo("Asia/Kolkata"), "daily").slot == 900
    assert make_buckets(utc("2026-01-01T00:00:00Z"), utc("2026-02-01T00:00:00Z"), ZoneInfo("Asia/Kathmandu"), "daily").slot == 900
    assert slot_seconds([0, 86400, 60, 7]) == 1
    # a historical offset in seconds (Amsterdam, +00:19:32 until 1937) still buckets exactly
    bk = make_buckets(utc("1930-01-01T00:00:00Z"), utc("1930-01-03T00:00:00Z"), ZoneInfo("Europe/Amsterdam"), "daily")
    assert bk.slot < 900


def test_weeks_and_months():
    d = date(2026, 3, 8)  # a Sunday
    assert period_start(d, "weekly", "monday") == date(2026, 3, 2)
    assert period_start(d, "weekly", "sunday") == date(2026, 3, 8)
    assert period_start(date(2026, 3, 7), "weekly", "sunday") == date(2026, 3, 1)
    assert period_start(d, "monthly") == date(2026, 3, 1)
    bk = make_buckets(utc("2025-12-20T00:00:00Z"), utc("2026-02-10T00:00:00Z"), NY, "monthly")
    assert bk.labels == ["2025-12", "2026-01", "2026-02"]
    bk = make_buckets(utc("2026-03-08T06:30:00Z"), utc("2026-03-08T07:30:00Z"), NY, "weekly", "sunday")
    assert bk.labels == ["2026-03-08"]


ZONES = ["UTC", "America/New_York", "Asia/Tokyo", "Asia/Kathmandu", "Australia/Lord_Howe", "Asia/Kolkata",
         "America/St_Johns", "Pacific/Chatham", "Europe/London", "America/Santiago", "Pacific/Apia"]


@settings(max_examples=300, deadline=None)
@given(zone=st.sampled_from(ZONES), period=st.sampled_from(["daily", "weekly", "monthly"]),
       week_start=st.sampled_from(["monday", "sunday"]),
       offsets=st.lists(st.integers(min_value=0, max_value=4 * 365 * 86400), min_size=1, max_size=6))
def test_slot_regrouping_equals_per_instant_conversion(zone, period, week_start, offsets):
    """The slot path (SQL groups by floor(t / slot), Python maps slots to buckets) gives every
    instant the bucket that converting the instant itself to local time gives."""
    z = ZoneInfo(zone)
    base = epoch(utc("2024-01-01T00:00:00Z"))
    instants = [base + o for o in offsets]
    bk = make_buckets(datetime.fromtimestamp(min(instants), timezone.utc),
                      datetime.fromtimestamp(max(instants), timezone.utc), z, period, week_start)
    for t in instants:
        local_day = datetime.fromtimestamp(t, timezone.utc).astimezone(z).date()
        start = period_start(local_day, period, week_start)
        expected = f"{start.year:04d}-{start.month:02d}" if period == "monthly" else start.isoformat()
        slot = t // bk.slot
        assert bk.label_of_slot(slot) == expected
        assert bk.label_of_epoch(t) == expected
    # the slot size divides every bucket boundary, so no slot straddles two buckets
    assert all(s % bk.slot == 0 for s in bk.starts)


def test_long_range_is_cheap():
    bk = make_buckets(utc("2016-01-01T00:00:00Z"), utc("2026-01-01T00:00:00Z"), NY, "daily")
    assert len(bk.labels) == 3654
    assert bk.starts[1] - bk.starts[0] in (86400, 82800, 90000)
    assert timedelta(seconds=bk.starts[-1] - bk.starts[0]).days >= 3652
