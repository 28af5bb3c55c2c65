"""Issue 29: the daily / weekly / monthly table keeps input, output, cache read (`cache rd`),
cache write (`cache wr`) and cost at 80 columns, with abbreviated token counts (`12.3k`, `4.5M`); the exact figures
stay in --json / --csv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.report.render import fmt_short
from reporthelpers import claude_stream, make

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("value,text", [
    (0, "0"), (987, "987"), (999, "999"), (1000, "1.0k"), (12345, "12.3k"), (999_949, "999.9k"),
    (999_950, "1.0M"), (4_500_000, "4.5M"), (1_234_567_890, "1.2B"), (999_960_000_000, "1.0T"),
    (12_345_678_901_234, "12.3T"), (None, "—"),
])
def test_abbreviated_counts(value, text):
    assert fmt_short(value) == text


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    home = tmp_path_factory.mktemp("compact") / "home"
    big = {"input_tokens": 12_345_678, "output_tokens": 456_789, "cache_read_tokens": 98_765_432,
           "cache_write_tokens": 4_500_000, "cost_usd": 1234.5678}
    for day in ("2026-03-02", "2026-03-09", "2026-04-01"):
        make(home, f"{day}T10:00:00Z", [claude_stream(counters=big)])
    return home


def _report(home: Path, width: int, *argv: str) -> str:
    env = {**os.environ, "COLUMNS": str(width), "LEDGER_HOME": str(home), "PYTHONPATH": str(REPO)}
    env.pop("LEDGER_DB", None)
    p = subprocess.run([sys.executable, "-m", "ledger", "report", *argv, "--tz", "UTC"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("kind", ["daily", "weekly", "monthly"])
def test_the_time_tables_keep_the_split_at_80_columns(history, kind):
    out = _report(history, 80, kind)
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), out
    header = next(line for line in lines if line.lstrip().startswith(("date", "week", "month")))
    for name in ("input", "output", "cache rd", "cache wr", "cost $"):
        assert f"  {name}" in header, (name, out)
    exact = json.loads(_report(history, 80, kind, "--json"))
    total = next(line for line in lines if line.lstrip().startswith("Total")).split()
    t = exact["totals"]
    assert total[2:6] == [fmt_short(t["input_tokens"]), fmt_short(t["output_tokens"]),
                          fmt_short(t["cache_read_tokens"]), fmt_short(t["cache_write_tokens"])]
    assert total[2:6] == ["37.0M", "1.4M", "296.3M", "13.5M"]
    assert f"{t['cost_usd']:,.4f}" in total  # the cost as every table shows it: whole
    assert t["input_tokens"] == 3 * 12_345_678  # (exact in --json)


def test_wide_tables_still_show_exact_counts(history):
    out = _report(history, 160, "daily")
    assert "12,345,678" in out and "98,765,432" in out and "total tokens" in out
