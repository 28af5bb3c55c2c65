"""ledger.tables.draw writes what Rich's Table draws, byte for byte (issue 10: a
200-row report rendered by Rich cell by cell took ~100 ms)."""

from __future__ import annotations

import io
import random

import pytest
from rich import box
from rich.console import Console
from rich.table import Table

from ledger.tables import draw

WORDS = ["a", "run_0f3a", "claude-sonnet-4-5", "1,234", "≥0.0123", "—", "表格", "x y", "trailing  ", "  lead",
         "partial", "", "└ gpt-5", "\\x1b[31m", "é", "🙂"]


def console(width: int, terminal: bool) -> Console:
    return Console(file=io.StringIO(), width=width, emoji=False, highlight=False, force_terminal=terminal,
                   color_system="standard" if terminal else None)


def by_rich(headers, justify, rows, title, width, terminal, style="SIMPLE_HEAD") -> str:
    c = console(width, terminal)
    t = Table(title=title, box=getattr(box, style), pad_edge=style != "SIMPLE_HEAD")
    for h, j in zip(headers, justify):
        t.add_column(h, justify=j, overflow="fold", no_wrap=False)
    for cells, style, section in rows:
        if section:
            t.add_section()
        t.add_row(*cells, style=style)
    c.print(t)
    return c.file.getvalue()


def by_us(headers, justify, rows, title, width, terminal, style="SIMPLE_HEAD") -> str | None:
    c = console(width, terminal)
    drawn = draw(c, headers, justify, rows, title, box=style, pad_edge=style != "SIMPLE_HEAD")
    return c.file.getvalue() if drawn else None


@pytest.mark.parametrize("style", ["SIMPLE_HEAD", "HEAVY_HEAD"])  # (reports and `runs`; `sql`)
@pytest.mark.parametrize("seed", range(40))
def test_a_table_that_fits_is_what_rich_draws(seed, style):
    rnd = random.Random(seed)
    n = rnd.randint(1, 6)
    headers = [rnd.choice(["key", "runs", "cost $", "model", "tokens", "表"]) for _ in range(n)]
    justify = [rnd.choice(["left", "right"]) for _ in range(n)]
    rows = [([rnd.choice(WORDS) for _ in range(n)], rnd.choice([None, None, "dim", "bold"]), rnd.random() < 0.1)
            for _ in range(rnd.randint(0, 12))]
    title = rnd.choice([None, "3 runs", "1,234 of 10,000 runs (--limit N or --all for more)"])
    for terminal in (False, True):
        ours = by_us(headers, justify, rows, title, 200, terminal, style)
        theirs = by_rich(headers, justify, rows, title, 200, terminal, style)
        if ours is None:  # only a title wider than the table (Rich wraps it) is left to Rich
            from rich.cells import cell_len

            assert title is not None and cell_len(title) > cell_len(
                by_rich(headers, justify, rows, None, 200, False, style).splitlines()[0])
            continue
        assert ours == theirs


def test_a_table_wider_than_the_console_is_left_to_rich():
    rows = [(["x" * 50, "y" * 50], None, False)]
    assert by_us(["a", "b"], ["left", "right"], rows, None, 80, False) is None
    assert by_us(["a", "b"], ["left", "right"], rows, None, 200, False) is not None
    # a title wider than the table wraps in Rich: left to it
    assert by_us(["a"], ["left"], [(["x"], None, False)], "a title wider than the table", 200, False) is None
    # a console that cannot show the box's characters gets Rich's substitutes
    c = Console(file=io.StringIO(), width=200, force_terminal=False, legacy_windows=False)
    assert draw(c, ["a"], ["left"], [(["x"], None, False)])
    ascii_only = Console(file=io.TextIOWrapper(io.BytesIO(), encoding="ascii"), width=200, force_terminal=False)
    assert not draw(ascii_only, ["a"], ["left"], [(["x"], None, False)])


def test_the_report_and_runs_tables_take_the_fast_path(home, monkeypatch):
    from indexhelpers import cli, make_run

    for _ in range(3):
        make_run(home)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(Table, "add_row", lambda *a, **k: (_ for _ in ()).throw(AssertionError("Rich Table used")))
    for args in (("report",), ("report", "model", "--breakdown"), ("runs", "--all"),
                 ("sql", "SELECT run_id, model FROM runs_v")):
        res = cli(*args)
        assert res.exit_code == 0, (args, res.output)
