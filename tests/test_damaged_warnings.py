"""Reading commands name a few damaged records and sum up the rest; `ledger index` lists all.

A home with many unreadable records (1% of 100,000 in the bench) printed one warning line per
record before every `ledger runs` / `report` answer."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ledger.cli.app import app
from ledger.records.model import SKIPPED_SHOWN
from reporthelpers import claude_stream, make

runner = CliRunner()


def _damaged_home(home, n: int) -> None:
    make(home, "2026-03-01T10:00:00Z", [claude_stream()])
    for i in range(n):
        run = make(home, f"2026-03-01T11:{i:02d}:00Z", [claude_stream()])
        (run / "manifest.json").write_text("{not json")


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning: ") and "damaged" in line]


def test_reading_commands_name_five_and_count_the_rest(home, tmp_path):
    _damaged_home(home, SKIPPED_SHOWN + 3)
    db = f"sqlite:///{tmp_path / 'i.sqlite'}"
    for args in (["runs", "--all"], ["report", "--json"], ["runs", "--json"], ["sql", "select 1"]):
        res = runner.invoke(app, [*args, "--db", db])
        assert res.exit_code == 0, res.output
        lines = _warnings(res.stderr)
        assert len(lines) == SKIPPED_SHOWN + 1, (args, lines)
        assert all("skipped damaged record" in line and "manifest.json" in line for line in lines[:-1])
        assert lines[-1] == "warning: ... and 3 more damaged records skipped (`ledger index` lists them all)"
    res = runner.invoke(app, ["index", "--db", db, "--json"])
    assert len(json.loads(res.stdout)["skipped"]) == SKIPPED_SHOWN + 3
    res = runner.invoke(app, ["index", "--db", db])
    assert sum("skipped damaged record" in line for line in res.stderr.splitlines()) == SKIPPED_SHOWN + 3


def test_a_few_damaged_records_are_all_named(home, tmp_path):
    _damaged_home(home, 2)
    res = runner.invoke(app, ["runs", "--all", "--db", f"sqlite:///{tmp_path / 'i.sqlite'}"])
    lines = _warnings(res.stderr)
    assert len(lines) == 2 and all("skipped damaged record" in line for line in lines)
