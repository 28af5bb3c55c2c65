"""`ledger runs` as people read it: at any width the id is whole (it pastes into `ledger show`)
and numbers are never cut; lower-priority columns are hidden first, and stderr says which."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from indexhelpers import append_event, make_run


@pytest.fixture
def one_run(tmp_path):
    home = tmp_path / "home"
    run = make_run(home, cost=0.007455000000000001, usage=((4100, 3), (12345, 410)), subjects=("task:LOO-1",))
    # what `ledger run` writes last: the exit code and the (redacted) argv
    append_event(run, type="result", outcome="completed", exit_code=0, command=["claude", "-p", "fix the tests"])
    return home, run


@pytest.mark.parametrize("width", [60, 80, 100, 120, 200])
def test_id_and_numbers_are_whole_at_every_width(one_run, width):
    home, run = one_run
    env = {**os.environ, "COLUMNS": str(width), "LEDGER_HOME": str(home)}
    env.pop("LEDGER_DB", None)
    res = subprocess.run([sys.executable, "-m", "ledger", "runs"], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert all(len(line.rstrip()) <= width for line in lines), res.stdout
    assert "1 run" in res.stdout and "1 runs" not in res.stdout
    row = next(line for line in lines if run.name[:12] in line)
    assert "0.0075" in row and "…" not in row  # money rounded for people, nothing cut
    assert "completed" in row
    if width >= 80:
        assert "410" in row.split()
    if width >= 200:
        assert "12,345" in row and "task:LOO-1" in row and "not shown" not in res.stderr
        assert row.rstrip().endswith("   claude -p 'fix the tests'")  # the command, whole, pastes into a shell
        assert " 0 " in row  # its exit code
    elif width >= 120:  # (the duration column, issue 12: only gaps, the harness, command and exit may go)
        # (the run's duration is the writer's own time between events: 0.0s idle, 0.3s on a loaded machine)
        assert "12,345" in row and "task:LOO-1" in row and re.search(r" \d+\.\ds ", row), row
        assert ("not shown" not in res.stderr
                or "(narrow terminal: gaps, harness, command, exit not shown" in res.stderr), res.stderr
    else:
        assert "not shown; widen it or use --json" in res.stderr
    # the id as printed is accepted by `ledger show`
    shown = subprocess.run([sys.executable, "-m", "ledger", "show", row.split()[0], "--json"], capture_output=True,
                           text=True, env=env, timeout=60)
    assert shown.returncode == 0 and run.name in shown.stdout


def test_an_empty_list_fits_too(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "COLUMNS": "60", "LEDGER_HOME": str(home)}
    env.pop("LEDGER_DB", None)
    res = subprocess.run([sys.executable, "-m", "ledger", "runs"], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0 and "0 runs" in res.stdout and "Traceback" not in res.stderr


@pytest.mark.parametrize("width", [60, 80, 100, 130, 200])
@pytest.mark.parametrize("kind", ["subject", "daily", "model"])
def test_report_tables_keep_the_key_and_whole_numbers(tmp_path, width, kind):
    """Issue 12: at 60-160 columns the subject/date column and `Total` disappeared and values
    were cut (`partia`, `2,050+` shown as `2,050`). Secondary columns are hidden first now."""
    home = tmp_path / "home"
    for i in range(3):
        make_run(home, subjects=(f"task:LOO-{1000 + i}",), usage=((4100, 3), (12345, 410)), cost=0.25 * (i + 1))
    make_run(home, subjects=("task:LOO-2000",), model="no-such-model-x", cost=None, usage=((10, 1),))
    make_run(home, subjects=("task:LOO-2001",), usage=(), cost=None, tools=())  # no usage: token sums get '+'
    env = {**os.environ, "COLUMNS": str(width), "LEDGER_HOME": str(home), "TZ": "UTC"}
    env.pop("LEDGER_DB", None)
    res = subprocess.run([sys.executable, "-m", "ledger", "report", kind, "--tz", "UTC"], capture_output=True,
                         text=True, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert all(len(line.rstrip()) <= width for line in lines), res.stdout
    total = next(line for line in lines if line.strip().startswith("Total"))
    assert "≥1.5000" in total  # the partial sum, whole, with its mark
    assert "…" not in res.stdout
    if "basis" in res.stdout:
        assert "partial" in total
    if kind == "subject":
        for i in range(3):
            assert f"task:LOO-{1000 + i}" in res.stdout
    if "tokens" in lines[2] or "total tokens" in res.stdout:
        assert any(cell.endswith("+") for cell in total.split())  # a lower bound stays marked


def test_show_prints_streams_attempts_tools_and_duration(tmp_path):
    from indexhelpers import cli

    home = tmp_path / "home"
    run = make_run(home, cost=0.25, usage=((4100, 3), (12345, 410)), tools=("Bash", "Bash", "Read"))
    res = cli("show", run.name[:12], "--home", str(home))
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "stream attempt-1/turn-1/claude-sonnet-4-5: claude-sonnet-4-5: in 12,345 · out 410" in out
    assert "$0.2500 · final receipt" in out
    assert "attempt attempt-1: anthropic claude-sonnet-4-5" in out
    assert "tools: Bash ×2, Read ×1" in out
    assert "duration: " in out and "None" not in out


def test_duration_for_people():
    from ledger.cli.runs_cmd import _duration

    assert _duration("2026-01-01T00:00:00Z", "2026-01-01T00:01:05.25Z") == "1m 05.2s"
    assert _duration("2026-01-01T00:00:00Z", "2026-01-01T00:00:09.5Z") == "9.5s"
    assert _duration("2026-01-01T00:00:00Z", None) is None
    assert _duration("2026-01-01T00:00:10Z", "2026-01-01T00:00:00Z") is None  # a clock that went back
    assert _duration("garbage", "2026-01-01T00:00:00Z") is None


@pytest.mark.parametrize("cmd", [("runs",), ("show",), ("report",), ("index",), ("sql",), ("verify",), ()])
def test_flags_show_no_bool_metavar(cmd):
    """Issue 12: every flag showed a `<bool>` metavar. None does now, Typer's own --help included."""
    from indexhelpers import cli

    res = cli(*cmd, "--help")
    assert res.exit_code == 0
    assert "--help" in res.stdout and "<bool>" not in res.stdout


def test_runs_filters_match_the_records_path(tmp_path):
    """--since/--limit/--harness/--outcome/--subject/--skill through the index equal the same
    selection over the records (ledger.records.selection is the one rule)."""
    import orjson

    from indexhelpers import cli, json_stream
    from datetime import datetime, timezone

    from ledger.records.selection import RunFilter, select
    from ledger.views import scan_records

    home = tmp_path / "home"
    make_run(home, subjects=("task:LOO-1",), skill="review", harness="claude")
    make_run(home, subjects=("task:LOO-2",), harness="codex", model="gpt-5", outcome="failed")
    make_run(home, subjects=("task:OTHER",), outcome=None)  # running
    old = make_run(home, subjects=("task:LOO-3",), created_at="2020-01-02T03:04:05.123456Z")
    cases = [
        (["--harness", "codex"], RunFilter(harness=["codex"])),
        (["--outcome", "running"], RunFilter(outcome=["running"])),
        (["--outcome", "failed", "--outcome", "completed"], RunFilter(outcome=["failed", "completed"])),
        (["--subject", "task:LOO-*"], RunFilter(subject=["task:LOO-*"])),
        (["--skill", "rev*"], RunFilter(skill=["rev*"])),
        (["--since", "2019-12-31", "--tz", "UTC"], RunFilter(since=datetime(2019, 12, 31, tzinfo=timezone.utc))),
        (["--until", "2020-01-02T03:04:06Z"], RunFilter(until=datetime(2020, 1, 2, 3, 4, 6, tzinfo=timezone.utc))),
        (["--since", "2020-01-02", "--until", "2020-01-02", "--tz", "Asia/Tokyo"],
         RunFilter(since=datetime(2020, 1, 1, 15, tzinfo=timezone.utc), until=datetime(2020, 1, 2, 15, tzinfo=timezone.utc))),
        (["--limit", "1"], RunFilter(limit=1)),
        (["--all", "--limit", "2"], RunFilter(limit=2)),
    ]
    snaps, _ = scan_records(home)
    for args, f in cases:
        res = cli("runs", "--json", "--home", str(home), *args)
        assert res.exit_code == 0, (args, res.output)
        expected = select(snaps, "--all" in args, None, f).runs
        assert res.stdout == json_stream(s.to_dict() for s in expected).decode(), args
    ids = [r["id"] for r in orjson.loads(cli("runs", "--json", "--home", str(home), "--since", "2019-12-31").stdout)]
    assert old.name in ids  # older than the default 7-day window: an explicit --since reaches it
    assert old.name not in [r["id"] for r in orjson.loads(cli("runs", "--json", "--home", str(home)).stdout)]


def test_runs_title_says_how_many_were_left_out(tmp_path):
    from indexhelpers import cli

    home = tmp_path / "home"
    for _ in range(3):
        make_run(home)
    res = cli("runs", "--home", str(home), "--limit", "2")
    assert res.exit_code == 0 and "2 of 3 runs (--limit N or --all for more)" in res.stdout


@pytest.mark.parametrize("value", ["bogus", "2026-13-01", "7x", ""])
def test_a_bad_since_is_a_usage_error(tmp_path, value):
    from indexhelpers import cli

    home = tmp_path / "home"
    make_run(home)
    res = cli("runs", "--home", str(home), "--since", value)
    assert res.exit_code == 2 and res.stderr.startswith("Error: ") and "Hint: " in res.stderr


def test_parse_since():
    """`ledger runs --since` reads the one --since syntax (ledger.report.buckets.parse_bound;
    its own tests: tests/test_dates.py): in UTC, what it read before."""
    from datetime import date, datetime, timezone

    from ledger.records.selection import _stamp
    from ledger.report.buckets import parse_bound, utc_range

    def parse_since(text, now):
        return utc_range(parse_bound(text, "--since", timezone.utc, now), None, timezone.utc)[0]

    now = datetime(2026, 3, 8, 12, 30, tzinfo=timezone.utc)
    assert parse_since("7d", now) == datetime(2026, 3, 1, 12, 30, tzinfo=timezone.utc)
    assert parse_since("24h", now) == datetime(2026, 3, 7, 12, 30, tzinfo=timezone.utc)
    assert parse_since("today", now) == datetime(2026, 3, 8, tzinfo=timezone.utc)
    assert parse_bound("Yesterday", "--since", timezone.utc, now) == date(2026, 3, 7)
    assert parse_since("2026-03-01", now) == datetime(2026, 3, 1, tzinfo=timezone.utc)
    assert _stamp(parse_since("999999999d", now)) == "0001-01-01T00:00:00.000000Z"  # padded, not '1-01-01'
