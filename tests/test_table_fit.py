"""One table style and one fitting rule (ledger.tables.fit) for `ledger sql`, `ledger runs`
and `ledger homes list`: at 40, 80 and 120 columns a number is never cut nor split across
lines, text is cut with `…`, a row is one line, empty columns go first (issue 34)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from indexhelpers import make_run
from ledger.tables import TEXT_MIN, fit

REPO = Path(__file__).resolve().parent.parent
WIDTHS = (40, 80, 120)
LONG_FLOAT = "0.026157379150390625"


@pytest.mark.parametrize("width", WIDTHS)
def test_fit_never_cuts_a_number_and_cuts_text_with_an_ellipsis(width):
    headers = ["key", "runs_without_cost", "value", "note", "empty"]
    rows = [["run_" + "a" * 30, "12345", LONG_FLOAT, "a long free-text note " * 3, "—"],
            ["run_" + "b" * 30, "7", "1.5", "short", ""]]
    numeric = [False, True, True, False, False]
    keep, out, hidden = fit(width, headers, rows, numeric)
    widths = [max(len(r[i]) for r in out) for i in range(len(keep))]
    assert sum(widths) + 3 * len(keep) - 1 <= width
    assert "empty" in hidden  # (an empty column is the first to go)
    for r, original in zip(out[1:], rows):
        for i, k in enumerate(keep):
            if numeric[k]:
                assert r[i] == original[k]  # whole
            else:
                assert r[i] == original[k] or (r[i].endswith("…") and original[k].startswith(r[i][:-1])
                                               and len(r[i]) >= min(TEXT_MIN, len(original[k])))
    assert sorted([headers[k] for k in keep] + hidden) == sorted(headers)  # each kept or named as hidden
    assert keep[0] == 0  # (the key stays)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    h = tmp_path_factory.mktemp("fit") / "home"
    for i in range(3):  # (no exit code or command recorded: those columns are empty, as for imported sessions)
        make_run(h, cost=float(LONG_FLOAT) * (i + 1), usage=((4100, 3), (12345, 410)))
    return h


def _ledger(home: Path, width: int, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(width), "LEDGER_HOME": str(home), "PYTHONPATH": str(REPO)}
    env.pop("LEDGER_DB", None)
    p = subprocess.run([sys.executable, "-m", "ledger", *argv], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p


def _body(stdout: str) -> tuple[list[str], list[str]]:
    """The header line and the row lines of a SIMPLE_HEAD table (between its rule and its end)."""
    lines = [line for line in stdout.splitlines()]
    rule = next(i for i, line in enumerate(lines) if set(line.strip()) == {"─"})
    return lines[rule - 1].split(), [line for line in lines[rule + 1:] if line.strip()]


QUERY = ("SELECT run_id, model, cost_usd, input_tokens, 12345678901 AS runs_without_cost_known "
         "FROM runs_v ORDER BY cost_usd")


@pytest.mark.parametrize("width", WIDTHS)
def test_sql_numbers_are_whole_and_one_line_a_row(home, width):
    p = _ledger(home, width, "sql", QUERY)
    assert not set("┃━┏┡│") & set(p.stdout)  # the one style, no heavy box
    assert all(len(line) <= width for line in p.stdout.splitlines())
    header, rows = _body(p.stdout)
    assert len(rows) == 3  # one line per row: nothing wrapped
    exact = json.loads(_ledger(home, width, "sql", QUERY, "--json").stdout)
    for line, want in zip(rows, exact):
        cells = re.split(r"\s{3,}", line.strip())
        numbers = [c for c in cells if re.fullmatch(r"[0-9.]+", c)]
        for c in numbers:  # every number shown is one of the row's numbers, whole
            assert c in {str(v) for v in want.values()}, (c, line)
        if width >= 80:
            assert str(want["cost_usd"]) in cells
    if width == 40:
        assert "not shown; widen it or use --json" in p.stderr


@pytest.mark.parametrize("width", WIDTHS)
def test_runs_hides_empty_columns_first_and_never_cuts_a_number(home, width):
    p = _ledger(home, width, "runs")
    assert all(len(line) <= width for line in p.stdout.splitlines())
    header, rows = _body(p.stdout)
    assert len(rows) == 3
    for line in rows:
        assert re.search(r"\b0\.0(262|523|785)\b", line)  # the cost, whole
    if width >= 80:
        assert "model" in header and all("claude-sonnet-4-5" in line for line in rows)
        assert all("12,345" in line and " 410 " in line for line in rows)  # in / out
    if width < 120:
        # the columns no row has a value in went first (stderr names every hidden column)
        assert re.search(r"^\(narrow terminal: command, exit, gaps", p.stderr, re.M), p.stderr
    if width == 40:  # (the promise README makes: the token counts are the last to go, never cut)
        assert "in, out not shown" in p.stderr and "12,34" not in p.stdout


def test_homes_list_is_in_the_one_style(home):
    _ledger(home, 120, "index")
    p = _ledger(home, 60, "homes", "list")
    header, rows = _body(p.stdout)
    assert header[:3] == ["id", "runs", "copies"] and len(rows) == 1
    assert not set("┃━┏│") & set(p.stdout)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("kind", ["daily", "model", "run"])
def test_report_tables_keep_the_key_and_whole_numbers(home, width, kind):
    """The reports' own column order (render.DROP_ORDER): at 40/80/120 columns the key column
    and the Total stay (`report model` lost its `model` key column, named like the `run`
    report's model column), and the cost is whole on one line."""
    p = _ledger(home, width, "report", kind, "--tz", "UTC")
    lines = p.stdout.splitlines()
    assert all(len(line) <= width for line in lines), p.stdout
    header, rows = _body(p.stdout)
    assert header[0] == {"daily": "date", "model": "model", "run": "run"}[kind], p.stdout
    total = next(line for line in rows if line.lstrip().startswith("Total"))
    exact = json.loads(_ledger(home, width, "report", kind, "--tz", "UTC", "--json").stdout)
    assert f"{exact['totals']['cost_usd']:,.4f}" in total.split()
    for row in exact["rows"]:
        cost = f"{row['cost_usd']:,.4f}"
        assert any(cost in line.split() for line in rows), (row["key"], p.stdout)  # whole, on one line
        if width >= 80:  # (at 40 columns a long key folds: the key column is text, shown whole)
            key = str(row["key"])[:16] if kind == "run" else str(row["key"])  # (render._key_text)
            assert any(line.split()[0] == key and cost in line.split() for line in rows), p.stdout
