"""Tables that print fast: the lines Rich's Table draws for a table that fits (issue 10).

Rich measures and renders every cell of a Table on its own (a 200-row report: ~80-160 ms).
Ledger's tables are plain: one line per row, the `SIMPLE_HEAD` box without edge padding
(`Table(box=SIMPLE_HEAD, pad_edge=False)`). When such a table fits the console at its
natural width, nothing needs measuring beyond each cell's length, and `simple_head()` writes
exactly what Rich would (tests/test_tables.py compares them byte for byte, styles included),
as one Text. A table that does not fit (columns to shrink, cells to cut or fold) is left to
Rich: `simple_head()` returns False and the caller builds the Table.

Cells are strings already made printable (ledger.text.plain): one line each.
"""

from __future__ import annotations

from typing import Any, Sequence

HEAD_STYLE = "bold"  # Rich's "table.header" in its default theme
TITLE_STYLE = "italic"  # Rich's "table.title"


def simple_head(console: Any, headers: Sequence[str], justify: Sequence[str],
                rows: Sequence[tuple[Sequence[str], str | None, bool]], title: str | None = None) -> bool:
    """Print the table (or return False: Rich must lay it out). `rows`: (cells, row style,
    a section line before it). `justify`: "left" or "right" per column."""
    from rich.cells import cell_len
    from rich.text import Text

    n = len(headers)
    if not n or any(j not in ("left", "right") for j in justify):
        return False
    widths = [cell_len(h) for h in headers]
    lens = []
    for cells, _style, _section in rows:
        ls = [cell_len(c) for c in cells]
        lens.append(ls)
        widths = [w if w >= x else x for w, x in zip(widths, ls)]
    inner = sum(widths) + 3 * n - 3  # cells, their padding (none at the edges) and the dividers
    total = inner + 2
    if total > console.width or any(c in h for h in headers for c in "\n\r"):
        return False
    if title is not None and (cell_len(title) > total or "\n" in title):
        return False  # (a title wider than the table wraps: Rich's)

    text = Text(end="")
    if title is not None:
        title = title.rstrip()
        left = (total - cell_len(title)) // 2
        text.append(" " * left + title + " " * (total - left - cell_len(title)), TITLE_STYLE)
        text.append("\n")
    text.append(" " * total + "\n")  # the box's top: blank
    last = n - 1
    append = text.append

    def line(cells: Sequence[str], ls: Sequence[int], style: str | None) -> None:
        # one piece per segment Rich writes: a cell's padding apart from its text
        append(" ")
        for i, (cell, width) in enumerate(zip(cells, widths)):
            if i:
                append(" ", style)
            if justify[i] == "right":
                # (Rich strips a right-justified cell's trailing blanks, then pads on the left)
                stripped = cell.rstrip()
                append(" " * (width - (ls[i] - (len(cell) - len(stripped)))) + stripped, style)
            else:
                append(cell + " " * (width - ls[i]), style)
            if i < last:
                append(" ", style)
                append(" ")
        append(" \n")

    line(headers, [cell_len(h) for h in headers], HEAD_STYLE)
    text.append(" " + "─" * inner + " \n")
    for k, ((cells, style, section), ls) in enumerate(zip(rows, lens)):
        if section and k:  # (a section ends a row: none before the first)
            text.append(" " * total + "\n")
        line(cells, ls, style)
    text.append(" " * total)  # the box's bottom: blank (print ends the line)
    console.print(text, soft_wrap=True)
    return True
