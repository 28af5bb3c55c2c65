"""One format for every usage mistake (issue 17, item 6): `Error: <message>` and a `Hint:`
on stderr, exit 2; never Typer's boxed panel, never a traceback. Dates past the calendar's
ends are open bounds; a $TZ that cannot be used is said, and means UTC."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from ledger.report.buckets import utc_range
from reporthelpers import claude_stream, cli, make

ROOT = Path(__file__).resolve().parent.parent

# (argv, a piece of the message, a piece of the hint)
CASES = [
    (["report", "--bogus"], "No such option: --bogus", "`ledger report --help`"),
    (["nosuch"], "No such command 'nosuch'", "`ledger --help`"),
    (["db", "nosuch"], "No such command 'nosuch'", "`ledger db --help`"),
    (["show"], "Missing argument", "`ledger show --help`"),
    (["report", "--limit", "x"], "--limit", "`ledger report --help`"),
    (["report", "--limit", "-1"], "--limit", "`ledger report --help`"),
    (["report", "--cost", "cheap"], "expected one of auto, reported, estimated", "`ledger report --help`"),
    (["report", "yearly"], "expected one of daily", "`ledger report --help`"),
    (["report", "--outcome", "bogus"], "'bogus' is not one of completed", "`ledger report --help`"),
    (["report", "--outcome", "completed", "--outcome", "x*"], "'x*' is not one of", "`ledger report --help`"),
    (["report", "--tz", "Nowhere/Bogus"], "unknown time zone 'Nowhere/Bogus'", "--tz America/New_York"),
    (["report", "--tz", "/etc/passwd"], "unknown time zone", "--tz America/New_York"),
    (["report", "--since", "03/08/2026"], "YYYY-MM-DD", "--since 2026-03-01"),
    (["report", "--until", "2026-02-30"], "is not a day, a time or a time ago", "--until 2026-03-01"),
    (["report", "--since", "2026-03-09", "--until", "2026-03-08"], "is before --since", "`ledger report --help`"),
    (["runs", "--json", "--csv"], "--json and --csv cannot be used together", "`ledger runs --help`"),
    (["run", "--bogus", "--", "true"], "no such option: --bogus", "`ledger run --help`"),
    (["run", "--harness", "robot", "--", "true"], "--harness must be one of", "`ledger run --help`"),
]


def _check(code: int, stderr: str, message: str, hint: str) -> None:
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert lines[0].startswith("Error: ") and message in lines[0], stderr
    assert lines[-1].startswith("Hint: ") and hint in lines[-1], stderr
    for junk in ("╭", "│", "Usage:", "Try '", "Traceback"):
        assert junk not in stderr, stderr


@pytest.mark.parametrize("argv,message,hint", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_every_usage_error_has_the_one_format(home, argv, message, hint):
    res = cli(*argv)
    _check(res.exit_code, res.stderr, message, hint)
    assert res.stdout == ""
    assert not home.exists()  # found before any work: nothing was created


@pytest.mark.parametrize("argv,message,hint", [CASES[0], CASES[1], CASES[-2]], ids=["report", "command", "run-fast"])
def test_the_installed_entry_point_too(home, argv, message, hint):
    """`python -m ledger` goes through app.main(); `ledger run` through its fast path."""
    p = subprocess.run([sys.executable, "-m", "ledger", *argv], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "LEDGER_HOME": str(home)})
    _check(p.returncode, p.stderr, message, hint)


def test_help_without_arguments_still_prints_help(home):
    res = cli("db")
    assert res.exit_code == 2 and "upgrade" in res.stdout and "Error" not in res.stderr


def test_dates_past_the_calendar_ends_are_open_bounds(home):
    run = make(home, "2026-03-08T10:00:00Z", [claude_stream()]).name
    for args in (["--until", "9999-12-31"], ["--since", "0001-01-01", "--tz", "Asia/Tokyo"],
                 ["--since", "00010101", "--until", "99991231", "--tz", "Pacific/Kiritimati"],
                 ["--until", "9999-12-31", "--tz", "Etc/GMT+12"]):
        res = cli("report", "run", *args, "--json")
        assert res.exit_code == 0, (args, res.stderr)
        assert [r["key"] for r in json.loads(res.stdout)["rows"]] == [run], args
    start, end = utc_range(date(1, 1, 1), date(9999, 12, 31), ZoneInfo("Asia/Tokyo"))
    assert start is None and end is None
    start, end = utc_range(date(1, 1, 1), date(9999, 12, 30), ZoneInfo("UTC"))
    assert start.year == 1 and end.date() == date(9999, 12, 31)
    # a limit past what SQL integers hold is no limit, not a traceback
    res = cli("report", "run", "--limit", str(10**30), "--json")
    assert res.exit_code == 0 and len(json.loads(res.stdout)["rows"]) == 1


@pytest.mark.parametrize("tz", ["Nowhere/Bogus", ":/etc/passwd", "garbage!!", "../../etc/passwd",
                                "CET-1CEST,M3.5.0,M10.5.0/3"])
def test_an_unusable_tz_is_said_and_means_utc(home, monkeypatch, tz):
    make(home, "2026-03-08T23:30:00Z", [claude_stream()])
    monkeypatch.setenv("TZ", tz)
    res = cli("report", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.stderr.count(f"warning: $TZ={tz!r} is not a usable time zone; using UTC") == 1, res.stderr
    doc = json.loads(res.stdout)
    assert doc["query"]["tz"] == "UTC" and [r["key"] for r in doc["rows"]] == ["2026-03-08"]


@pytest.mark.parametrize("tz,name", [(":Asia/Tokyo", "Asia/Tokyo"), ("Asia/Tokyo", "Asia/Tokyo"),
                                     ("/usr/share/zoneinfo/Asia/Tokyo", "Asia/Tokyo")])
def test_a_usable_tz_is_taken_silently(home, monkeypatch, tz, name):
    make(home, "2026-03-08T23:30:00Z", [claude_stream()])
    monkeypatch.setenv("TZ", tz)
    res = cli("report", "--json")
    assert res.exit_code == 0 and "$TZ" not in res.stderr
    doc = json.loads(res.stdout)
    assert doc["query"]["tz"] == name and [r["key"] for r in doc["rows"]] == ["2026-03-09"]


def test_outcome_patterns_that_match_an_outcome_are_accepted(home):
    make(home, "2026-03-08T10:00:00Z", [claude_stream()], outcome="failed")
    res = cli("report", "--outcome", "fail*", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["totals"]["runs"] == 1


def test_version_prints_the_installed_version():
    from importlib.metadata import version

    from typer.testing import CliRunner

    from ledger.cli.app import app

    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0
    assert res.stdout == f"ledger {version('ledger')}\n"


HELP_SCREENS = [(), ("run",), ("runs",), ("show",), ("index",), ("import",), ("sql",), ("report",),
                ("verify",), ("demo",), ("push",), ("db",), ("db", "upgrade"), ("homes",), ("homes", "forget")]


@pytest.mark.parametrize("cmd", HELP_SCREENS, ids=[" ".join(c) or "ledger" for c in HELP_SCREENS])
def test_help_screens_show_no_type_beside_a_flag(cmd):
    # issue 12: Typer 0.29 prints a type beside every option: a flag takes no value
    res = subprocess.run([sys.executable, "-m", "ledger", *cmd, "--help"], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "100"}, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "--help" in res.stdout and "<bool>" not in res.stdout
    assert res.stdout.count("Usage:") == 1


@pytest.mark.parametrize("words, cword, want", [
    ("ledger ru", 1, ["run", "runs"]),
    ("ledger homes ", 2, ["forget", "list"]),
    ("ledger report --si", 2, ["--since"]),
])
def test_shell_completion_completes_commands_and_options(words, cword, want):
    # the bash protocol `ledger --install-completion bash` installs
    env = {**os.environ, "_LEDGER_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    res = subprocess.run([sys.executable, "-m", "ledger"], capture_output=True, text=True, env=env, timeout=60)
    assert sorted(res.stdout.split()) == want, (res.stdout, res.stderr)
