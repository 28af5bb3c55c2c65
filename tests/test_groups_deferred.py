"""The group tables (report_groups, report_group_days) are made by the first report that reads
them (issue 10: the first `ledger report` after a cold index builds only what it answers from).

`report session|skill` read them; every other report leaves them deferred (report_state's
group_rules = facts.GROUPS_DEFERRED), through the Core sync and the small one alike. Once made
they are kept up to date like the other tables. A session report over a deferred index (one
that cannot be written) is answered from the facts, with the same figures.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from ledger.cli.app import app
from ledger.index.rawread import reading
from ledger.report import facts
from ledger.report.aggregate import reads_groups, run_report
from ledger.report.query import ReportQuery
from reporthelpers import claude_stream, make


def state(home: Path) -> tuple[str | None, int, int]:
    con = sqlite3.connect(home / "index.sqlite")
    try:
        row = con.execute("SELECT value FROM report_state WHERE key = 'group_rules'").fetchone()
        return (row[0] if row else None, con.execute("SELECT count(*) FROM report_groups").fetchone()[0],
                con.execute("SELECT count(*) FROM report_group_days").fetchone()[0])
    finally:
        con.close()


def report(*args: str) -> dict:
    res = CliRunner().invoke(app, ["report", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def runs(home: Path) -> None:
    make(home, "2026-03-08T10:00:00Z", [claude_stream()], skill="deploy", subjects=["task:A"])
    make(home, "2026-03-08T12:00:00Z", [claude_stream(model="claude-opus-4-1")], skill="review")
    make(home, "2026-03-09T09:00:00Z", [claude_stream()], skill="deploy", outcome="failed")


def test_which_reports_read_the_group_tables():
    assert reads_groups(ReportQuery(kind="session")) and reads_groups(ReportQuery(kind="skill"))
    assert not any(reads_groups(ReportQuery(kind=k)) for k in ("daily", "model", "harness", "subject", "run"))


def test_the_first_daily_report_leaves_them_and_the_first_skill_report_makes_them(home):
    runs(home)
    daily = report()
    assert state(home) == (facts.GROUPS_DEFERRED, 0, 0)
    make(home, "2026-03-09T10:00:00Z", [claude_stream()], skill="review")
    assert report() != daily  # (the small sync keeps them deferred)
    assert state(home) == (facts.GROUPS_DEFERRED, 0, 0)
    skill = report("skill")
    rules, groups, cells = state(home)
    assert rules == facts.GROUP_RULES and groups > 0 and cells > 0
    assert skill == report("skill", "--resync")  # (made from nothing: the same groups)
    make(home, "2026-03-10T10:00:00Z", [claude_stream()], skill="deploy")
    assert report("skill") == report("skill", "--resync")  # kept up to date once made
    assert state(home)[0] == facts.GROUP_RULES


def test_a_deferred_index_answers_a_session_report_from_the_facts(home):
    runs(home)
    report()
    assert state(home)[0] == facts.GROUPS_DEFERRED
    from ledger.index import db as dbmod

    url = dbmod.default_url(home)
    with reading(url) as c:
        deferred = run_report(c, ReportQuery(kind="skill")).to_dict()
    report("skill")
    with reading(url) as c:
        made = run_report(c, ReportQuery(kind="skill")).to_dict()
    deferred.pop("timing", None)
    made.pop("timing", None)
    assert deferred == made
