"""Tables that print fast: the lines Rich's Table draws for a table that fits (issue 10).

Rich measures and renders every cell of a Table on its own (a 200-row report: ~80-160 ms).
Ledger's tables are plain: one line per row, in one box (`SIMPLE_HEAD` without edge padding:
`ledger runs`, `sql`, `homes list` and the reports), fitted to the terminal by `fit` (numbers
never cut, text cut with `…`). When such a
table fits the console at its natural width, nothing needs measuring beyond each cell's
length, and `draw()` writes exactly what Rich would (tests/test_tables.py compares them byte
for byte, styles included), as one Text. A table that does not fit (columns to shrink,
cells to cut or fold), or a console that cannot show the box's characters, is left to Rich:
`draw()` returns False and the caller builds the Table.

Cells are strings already made printable (ledger.text.plain): one line each.
"""

from __future__ import annotations

from typing import Any, Sequence

HEAD_STYLE = "bold"  # Rich's "table.header" in its default theme
TITLE_STYLE = "italic"  # Rich's "table.title"


def draw(console: Any, headers: Sequence[str], justify: Sequence[str],
         rows: Sequence[tuple[Sequence[str], str | None, bool]], title: str | None = None,
         box: str = "SIMPLE_HEAD", pad_edge: bool = False) -> bool:
    """Print the table as `Table(box=box, pad_edge=pad_edge, title=title)` would, or return
    False (Rich must lay it out). `rows`: (cells, row style, a section line before it);
    `justify`: "left" or "right" per column."""
    options = console.options
    if options.ascii_only or options.legacy_windows:
        return False  # (Rich would substitute the box's characters)
    pieces = layout(console.width, headers, justify, rows, title, box, pad_edge)
    if pieces is None:
        return False
    from rich.text import Text

    text = Text(end="")
    for piece, style in pieces:
        text.append(piece, style)
    console.print(text, soft_wrap=True)
    return True


def layout(width: int, headers: Sequence[str], justify: Sequence[str],
           rows: Sequence[tuple[Sequence[str], str | None, bool]], title: str | None = None,
           box: str = "SIMPLE_HEAD", pad_edge: bool = False) -> list[tuple[str, str | None]] | None:
    """The table's text as (piece, style) in the order Rich writes them (its last line without
    the newline print adds), or None when it does not fit `width` as it is (Rich's layout)."""
    from rich import box as boxes
    from rich.cells import cell_len

    n = len(headers)
    if not n or any(j not in ("left", "right") for j in justify):
        return None
    b = getattr(boxes, box)
    widths = [cell_len(h) for h in headers]
    lens = []
    for cells, _style, _section in rows:
        ls = [cell_len(c) for c in cells]
        lens.append(ls)
        widths = [w if w >= x else x for w, x in zip(widths, ls)]
    last = n - 1
    pads = [(0 if i == 0 and not pad_edge else 1, 0 if i == last and not pad_edge else 1) for i in range(n)]
    spans = [w + lp + rp for w, (lp, rp) in zip(widths, pads)]  # Rich's column widths: padding included
    total = sum(spans) + n + 1  # the dividers and both edges
    if total > width or any(c in h for h in headers for c in "\n\r"):
        return None
    if title is not None:
        title = title.rstrip()
        if cell_len(title) > total or "\n" in title:
            return None  # (a title wider than the table wraps: Rich's)

    out: list[tuple[str, str | None]] = []

    def append(piece: str, style: str | None = None) -> None:
        out.append((piece, style))

    if title is not None:
        left = (total - cell_len(title)) // 2
        append(" " * left + title + " " * (total - left - cell_len(title)), TITLE_STYLE)
        append("\n")
    append(b.get_top(spans) + "\n")

    def line(cells: Sequence[str], ls: Sequence[int], style: str | None, edges: tuple[str, str, str]) -> None:
        # one piece per segment Rich writes: a cell's padding apart from its text
        left_edge, right_edge, divider = edges
        append(left_edge)
        for i, (cell, width) in enumerate(zip(cells, widths)):
            lp, rp = pads[i]
            if lp:
                append(" ", style)
            if justify[i] == "right":
                # (Rich strips a right-justified cell's trailing blanks, then pads on the left)
                stripped = cell.rstrip()
                append(" " * (width - (ls[i] - (len(cell) - len(stripped)))) + stripped, style)
            else:
                append(cell + " " * (width - ls[i]), style)
            if rp:
                append(" ", style)
            if i < last:
                append(divider)
        append(right_edge + "\n")

    line(headers, [cell_len(h) for h in headers], HEAD_STYLE, (b.head_left, b.head_right, b.head_vertical))
    append(b.get_row(spans, "head") + "\n")
    for k, ((cells, style, section), ls) in enumerate(zip(rows, lens)):
        if section and k:  # (a section ends a row: none before the first)
            append(b.get_row(spans, "row") + "\n")
        edges = (b.foot_left, b.foot_right, b.foot_vertical) if k == len(rows) - 1 else (
            b.mid_left, b.mid_right, b.mid_vertical)
        line(cells, ls, style, edges)
    append(b.get_bottom(spans))  # (print ends the line)
    return out


def plain_stdout() -> int | None:
    """The width Rich's Console would give standard output when it writes no styles there (not a
    terminal: a pipe or a file, no FORCE_COLOR / TTY_COMPATIBLE saying otherwise, a UTF-8
    stream), or None (a terminal, or a case left to Rich). A table for such an output is
    written as plain text without importing Rich's console and text (~11 ms: issue 10, a
    report's table within 20 % of its JSON)."""
    import os
    import sys

    env = os.environ
    out = sys.stdout
    tty_compatible = env.get("TTY_COMPATIBLE", "")
    if tty_compatible == "1" or out is None or out is not sys.__stdout__:
        return None  # (a swapped stream: a test runner, a library caller; Rich decides)
    if tty_compatible != "0":
        force = env.get("FORCE_COLOR")
        try:
            if (force != "") if force is not None else out.isatty():
                return None
        except ValueError:
            return None
    if not (getattr(out, "encoding", None) or "utf-8").lower().startswith("utf"):
        return None
    columns = env.get("COLUMNS")
    if columns is not None and columns.isdigit():
        return int(columns) or None
    for fd in (0, 1, 2):  # (Rich asks the standard streams in this order)
        try:
            return os.get_terminal_size(fd).columns or 80
        except (AttributeError, ValueError, OSError):
            continue
    return 80


def elide(text: str, width: int) -> str:
    """`text` in at most `width` terminal cells, ending in `…` where it was cut."""
    from rich.cells import cell_len

    if cell_len(text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        w = cell_len(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…"


EMPTY = ("", "—")
TEXT_MIN = 8  # a text column is cut (…) to no fewer cells than this before columns are hidden


def fit(width: int, headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool],
        drop_first: Sequence[int] = (), keep_always: Sequence[int] = (0,)) -> tuple[list[int], list[list[str]], list[str]]:
    """The one rule of every table ledger prints (`ledger runs`, `sql`, `homes list`; the
    reports keep their columns by render.DROP_ORDER): a table wider than `width` first hides
    its empty columns (every cell `—` or blank), then the `drop_first` columns in that order,
    then cuts its text columns (…, the widest first, to TEXT_MIN cells), and last hides
    columns from the right. A number (a `numeric` column) is never cut nor split: a cut number
    reads as another number (its header may be cut). Returns the columns kept, the rows as printed (headers first, one
    line each) and the names hidden (for a note on stderr). The SIMPLE_HEAD box without edge
    padding takes sum(widths) + 3 * columns - 1 cells."""
    from rich.cells import cell_len

    n = len(headers)
    widths = [max([cell_len(headers[i])] + [cell_len(r[i]) for r in rows]) for i in range(n)]
    keep = list(range(n))
    shown = list(widths)

    def need() -> int:
        return sum(shown[k] for k in keep) + 3 * len(keep) - 1

    hidden: list[str] = []

    def hide(i: int) -> None:
        keep.remove(i)
        hidden.append(headers[i])

    if rows:
        for i in range(n):
            if need() <= width:
                break
            if i not in keep_always and all(r[i] in EMPTY for r in rows):
                hide(i)
    for i in drop_first:
        if need() <= width:
            break
        if i in keep and i not in keep_always:
            hide(i)
    # the floor of a column: a text column TEXT_MIN cells (or its width); a number column its
    # widest number (its header may be cut to TEXT_MIN)
    floor = [min(widths[i], TEXT_MIN) if not numeric[i] else
             max([cell_len(r[i]) for r in rows] + [min(cell_len(headers[i]), TEXT_MIN)]) for i in range(n)]
    while need() > width:
        cut = [k for k in keep if shown[k] > floor[k]]
        if not cut:
            break
        widest = max(cut, key=lambda k: (shown[k], k))
        others = [shown[k] for k in cut if k != widest]
        shown[widest] -= max(1, min(need() - width, shown[widest] - floor[widest],
                                    shown[widest] - max(others + [floor[widest]])))
    for i in reversed(list(keep)):
        if need() <= width or len(keep) == 1:
            break
        if i not in keep_always:
            hide(i)
    while need() < width:  # (room a hidden column left: the cut columns take it back, narrowest first)
        short = [k for k in keep if shown[k] < widths[k]]
        if not short:
            break
        shown[min(short, key=lambda k: (shown[k], k))] += 1
    out = [[elide(headers[k], shown[k]) for k in keep]]
    out += [[r[k] if numeric[k] else elide(r[k], shown[k]) for k in keep] for r in rows]
    return keep, out, hidden
