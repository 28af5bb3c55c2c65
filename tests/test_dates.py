"""One --since / --until syntax and one zone rule for every command that takes them
(ledger.report.buckets.parse_bound; docs/report.md, "Dates"): `ledger runs` and `ledger report`
read the same forms, in the same --tz, and select the same runs."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from indexhelpers import cli, make_run
from ledger.report.buckets import ReportError, parse_bound, resolve_zone, utc_range

UTC = timezone.utc
PARIS = ZoneInfo("Europe/Paris")
NOW = datetime(2026, 3, 8, 23, 30, tzinfo=UTC)  # 00:30 on the 9th in Paris


@pytest.mark.parametrize("text,expected", [
    ("2026-03-01", date(2026, 3, 1)),
    ("20260301", date(2026, 3, 1)),
    ("today", date(2026, 3, 9)),  # the day it is in the zone, not in UTC
    ("Yesterday", date(2026, 3, 8)),
    ("30m", datetime(2026, 3, 8, 23, 0, tzinfo=UTC)),
    ("24h", datetime(2026, 3, 7, 23, 30, tzinfo=UTC)),
    ("7d", datetime(2026, 3, 1, 23, 30, tzinfo=UTC)),
    ("2w", datetime(2026, 2, 22, 23, 30, tzinfo=UTC)),
    ("2026-03-01T12:00", datetime(2026, 3, 1, 11, 0, tzinfo=UTC)),  # in the zone
    ("2026-03-01 12:00:30", datetime(2026, 3, 1, 11, 0, 30, tzinfo=UTC)),
    ("2026-03-01T12:00Z", datetime(2026, 3, 1, 12, 0, tzinfo=UTC)),  # its own offset wins
    ("2026-03-01T12:00+05:30", datetime(2026, 3, 1, 6, 30, tzinfo=UTC)),
    ("999999999d", datetime.min.replace(tzinfo=UTC)),
])
def test_every_form_of_a_bound(text, expected):
    assert parse_bound(text, "--since", PARIS, NOW) == expected


@pytest.mark.parametrize("text", ["soon", "2026-13-01", "2026-03-01T25:00", "7x", "", "03/08/2026"])
def test_a_bound_that_is_none_of_them_says_the_forms(text):
    with pytest.raises(ReportError) as exc:
        parse_bound(text, "--until", PARIS, NOW, command="runs")
    assert exc.value.message == (f"--until {text!r} is not a day, a time or a time ago; expected a day "
                                 "(YYYY-MM-DD, today, yesterday), a time (YYYY-MM-DDTHH:MM) or a time ago (30m, 24h, 7d, 2w)")
    assert exc.value.hint == "for example `ledger runs --until 2026-03-01`, `--until 7d` or `--until yesterday`"


def test_a_day_until_is_included_whole_and_an_instant_is_itself():
    assert utc_range(date(2026, 3, 1), date(2026, 3, 1), PARIS) == (
        datetime(2026, 2, 28, 23, tzinfo=UTC), datetime(2026, 3, 1, 23, tzinfo=UTC))
    t = datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert utc_range(date(2026, 3, 1), t, PARIS) == (datetime(2026, 2, 28, 23, tzinfo=UTC), t)
    with pytest.raises(ReportError, match="is before --since"):
        utc_range(t, datetime(2026, 3, 1, 11, tzinfo=UTC), PARIS)


def test_an_empty_tz_is_no_zone():
    with pytest.raises(ReportError) as exc:
        resolve_zone("")
    assert exc.value.message == "--tz '' names no time zone; expected an IANA name such as Europe/Paris"


@pytest.mark.parametrize("command", ["runs", "report"])
def test_an_empty_tz_is_a_usage_error_of_every_command(tmp_path, command):
    res = cli(command, "--home", str(tmp_path / "home"), "--tz", "", "--since", "7d")
    assert res.exit_code == 2, res.output
    assert res.stderr.splitlines()[0] == "Error: --tz '' names no time zone; expected an IANA name such as Europe/Paris"
    assert not (tmp_path / "home").exists()  # found before any work


STARTS = ("2026-03-01T10:00:00.000000Z", "2026-03-01T23:30:00.000000Z", "2026-03-02T12:00:00.000000Z",
          "2026-03-03T02:00:00.000000Z")


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    home = tmp_path_factory.mktemp("dates") / "home"
    ids = {make_run(home, created_at=t).name: t for t in STARTS}
    return home, ids


@pytest.mark.parametrize("args,chosen", [
    # Tokyo is UTC+9: its 2 March runs from 2026-03-01T15:00Z to 2026-03-02T15:00Z
    (["--since", "2026-03-02", "--until", "2026-03-02", "--tz", "Asia/Tokyo"], STARTS[1:3]),
    (["--since", "20260302", "--tz", "Asia/Tokyo"], STARTS[1:]),
    (["--until", "2026-03-01", "--tz", "UTC"], STARTS[:2]),
    (["--since", "2026-03-01T23:30Z", "--until", "2026-03-03T02:00Z"], STARTS[1:3]),  # until: before
    (["--since", "2026-03-02T08:30", "--tz", "Asia/Tokyo"], STARTS[1:]),  # a time in --tz
    (["--since", "100000d"], STARTS),
    (["--until", "1d"], STARTS),
])
def test_runs_and_report_read_the_same_range(history, args, chosen):
    home, ids = history
    res = cli("runs", "--json", "--home", str(home), *args)
    assert res.exit_code == 0, res.output
    got = sorted(ids[r["id"]] for r in json.loads(res.stdout))
    assert got == sorted(chosen)
    res = cli("report", "run", "--json", "--home", str(home), *args)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert sorted(ids[r["key"]] for r in rep["rows"]) == sorted(chosen)
    assert rep["totals"]["runs"] == len(chosen)


def test_a_report_says_an_instant_bound_in_utc(history):
    home, _ids = history
    res = cli("report", "daily", "--json", "--home", str(home), "--since", "2026-03-02T08:30", "--until", "2026-03-02",
              "--tz", "Asia/Tokyo")
    assert res.exit_code == 0, res.output
    q = json.loads(res.stdout)["query"]
    assert (q["since"], q["until"], q["tz"]) == ("2026-03-01T23:30:00Z", "2026-03-02", "Asia/Tokyo")
    assert [r["key"] for r in json.loads(res.stdout)["rows"]] == ["2026-03-02"]
