"""One progress line on stderr for long work (issue 28: a large import, a first index).

Only when stderr is a terminal (a pipe, a file or a test runner's capture never sees it),
only once the work has lasted DELAY seconds, rewritten in place at most every INTERVAL
seconds, and erased when the work is done (`done()`), so the command's own output follows on
a clean line. It says what is being done and how far it is:

    ledger: indexing Claude Code sessions: 1,200/2,000 sessions (60 %)

Callers anywhere (the archive, the index) call `show(...)`; nothing is imported or written
when stderr is not a terminal.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

DELAY = 1.0  # seconds of work before the first line (short work says nothing)
INTERVAL = 0.2  # seconds between two rewrites of the line
WIDTH = 79

_state: dict[str, Any] = {"stream": None, "enabled": None, "start": None, "last": 0.0, "shown": False}


def _enabled() -> bool:
    if _state["enabled"] is None:
        stream = _state["stream"] or sys.stderr
        try:
            _state["enabled"] = bool(stream.isatty())
        except (AttributeError, ValueError, OSError):
            _state["enabled"] = False
    return bool(_state["enabled"])


def use(stream: TextIO | None) -> None:
    """Write to `stream` (None: sys.stderr), deciding again whether it is a terminal (tests)."""
    _state.update(stream=stream, enabled=None, start=None, last=0.0, shown=False)


def _fmt(n: int, unit: str) -> str:
    return f"{n / 1e6:,.0f}" if unit == "MB" else f"{n:,}"


def show(what: str, done: int, total: int, unit: str) -> None:
    """The work `what` has done `done` of `total` (`unit`: "MB" for a byte count)."""
    if not _enabled():
        return
    now = time.monotonic()
    if _state["start"] is None:
        _state["start"] = now
    if now - _state["start"] < DELAY or (now - _state["last"] < INTERVAL and done < total):
        return
    _state["last"] = now
    if total > 0:
        line = f"ledger: {what}: {_fmt(done, unit)}/{_fmt(total, unit)} {unit} ({100 * done // total} %)"
    else:
        line = f"ledger: {what} ..."
    stream = _state["stream"] or sys.stderr
    try:
        stream.write("\r" + line[:WIDTH] + "\x1b[K")
        stream.flush()
    except (OSError, ValueError):
        _state["enabled"] = False
        return
    _state["shown"] = True


def done() -> None:
    """The work is over: the line is erased (the next work starts its own delay)."""
    shown = _state["shown"]
    _state.update(start=None, last=0.0, shown=False)
    if shown:
        stream = _state["stream"] or sys.stderr
        try:
            stream.write("\r\x1b[K")
            stream.flush()
        except (OSError, ValueError):
            pass
