"""Printing data as stored: what an agent, a provider or a query wrote is shown, never obeyed.

Values that come from records and queries (final answers, subjects, models, tool names, cwd,
host, paths, SQL results) are printed through `shown()` (Rich) or `plain()` (print / stderr):

- no Rich markup and no emoji codes: `[bold]`, `[/]`, `[link=...]` and `:x:` stay literal text;
- no highlighting (Rich would colour numbers and URLs it finds in the text);
- characters that steer a terminal or reorder what it shows are written as escapes, like
  Python's: `\\t \\n \\r`, `\\x1b` (C0, DEL, C1), `\\u202e` (format characters: bidi overrides
  and isolates, zero-width spaces, BOM; U+200C/U+200D are kept: scripts and emoji need them),
  `\\u2028`/`\\u2029` (line and paragraph separators) and `\\udcff` (a lone surrogate: a
  byte of a path that is not UTF-8).
  Newline and tab stay as they are only in free text of several lines (`multiline=True`: a
  final answer, a message on stderr); in a table cell or after a label they are escaped too.

A backslash is printed as it is (paths and code are full of them), so the text `\\x1b` and an
escaped ESC look alike; `--json` tells them apart.
"""

from __future__ import annotations

import functools
import unicodedata
from typing import Any

_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_KEEP = frozenset("\u200c\u200d")  # zero-width (non-)joiner: part of scripts and emoji sequences
_UNSAFE_CATEGORIES = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))


@functools.lru_cache(maxsize=4096)
def _escaped(ch: str, multiline: bool) -> str:
    if ch in _KEEP or (multiline and ch in "\n\t") or unicodedata.category(ch) not in _UNSAFE_CATEGORIES:
        return ch
    if ch in _SHORT:
        return _SHORT[ch]
    c = ord(ch)
    if c <= 0xFF:
        return f"\\x{c:02x}"
    if c <= 0xFFFF:
        return f"\\u{c:04x}"
    return f"\\U{c:08x}"


def plain(value: Any, multiline: bool = False) -> str:
    """`value` as a string whose control and format characters are escaped (see the module
    docstring); newline and tab are kept with `multiline`. None is the empty string."""
    s = "" if value is None else value if isinstance(value, str) else str(value)
    if s.isprintable():  # the common case, decided in C: nothing to escape
        return s
    return "".join([_escaped(ch, multiline) for ch in s])


def shown(value: Any, multiline: bool = False, style: str = "") -> Any:
    """`value` as a Rich Text: printed literally (no markup, emoji or highlighting), control
    and format characters escaped; one line unless `multiline`."""
    from rich.text import Text

    return Text(plain(value, multiline), style=style)
