"""`ledger report`'s table to a pipe or a file is written without Rich's console (issue 10: the
table within 20 % of `--json`; importing rich.console and rich.text was ~11 ms of ~60), and its
bytes are the ones Rich writes there (no styles), at every width and for every report shape.
A terminal, FORCE_COLOR / TTY_COMPATIBLE, or a table that does not fit: Rich, as before."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys

import pytest

import ledger.tables as tables
from ledger.report import render
from ledger.report.query import ReportQuery
from ledger.report.buckets import resolve_zone
from ledger.report.service import build_report
from reporthelpers import claude_stream, make

WIDTHS = (30, 40, 60, 80, 100, 120, 160, 240)


@pytest.fixture
def varied(home):
    make(home, "2026-03-08T10:00:00Z", [claude_stream()], skill="deploy", subjects=["task:A"])
    make(home, "2026-03-08T12:00:00Z", [claude_stream(model="claude-opus-4-1")], skill="review",
         subjects=["task:表格"])
    make(home, "2026-03-09T09:00:00Z", [claude_stream(model="gpt-5-ümlaut"), claude_stream()], outcome="failed")
    make(home, "2026-03-10T09:00:00Z", [], harness="command", model=None, outcome="interrupted")
    return home


def printed(capsys, monkeypatch, report, width: int, plain: bool) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    monkeypatch.setattr(tables, "plain_stdout", (lambda: width) if plain else (lambda: None))
    render.print_table(report)
    return capsys.readouterr().out


QUERIES = [dict(kind="daily"), dict(kind="model"), dict(kind="run"), dict(kind="skill"), dict(kind="subject"),
           dict(kind="daily", breakdown=True), dict(kind="model", since=dt.date(2026, 3, 8), until=dt.date(2026, 3, 9))]


@pytest.mark.parametrize("spec", QUERIES, ids=lambda s: "-".join(str(v) for v in s.values()))
def test_the_plain_table_is_what_rich_writes_to_a_pipe(varied, capsys, monkeypatch, spec):
    zone, name = resolve_zone(None, warn=lambda m: None, fixed_utc=True)
    report = build_report(varied, None, ReportQuery(zone=zone, zone_name=name, **spec))
    for width in WIDTHS:
        assert printed(capsys, monkeypatch, report, width, True) == printed(capsys, monkeypatch, report, width, False)


def run_plain_stdout(**env: str) -> str:
    code = "from ledger.tables import plain_stdout; print(plain_stdout())"
    e = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE")}
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL).stdout.strip()


def test_when_the_output_takes_no_styles():
    assert run_plain_stdout() == "80"  # (a pipe, no terminal anywhere: Rich's default width)
    assert run_plain_stdout(COLUMNS="97") == "97"
    assert run_plain_stdout(COLUMNS="0") == "None"  # (Rich's own odd case: left to it)
    assert run_plain_stdout(FORCE_COLOR="1") == "None"
    assert run_plain_stdout(FORCE_COLOR="") == "80"
    assert run_plain_stdout(TTY_COMPATIBLE="1") == "None"
    assert run_plain_stdout(TTY_COMPATIBLE="0", FORCE_COLOR="1") == "80"
    assert run_plain_stdout(PYTHONIOENCODING="latin-1") == "None"  # (Rich would swap the box's characters)


def test_the_command_writes_it_without_rich_console(varied):
    env = dict(os.environ, LEDGER_HOME=str(varied), COLUMNS="100")
    env.pop("LEDGER_DB", None)
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "ledger", "report"], env=env, capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr[-2000:]
    assert " rich.console\n" not in p.stderr and " rich.text\n" not in p.stderr
    assert p.stdout.startswith("ledger report daily · ") and "\x1b" not in p.stdout
