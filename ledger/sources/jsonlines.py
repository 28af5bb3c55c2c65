"""Complete JSON-object lines of a log chunk, shared by the agents' log reducers.

A reducer is fed the bytes of a log from the offset it reached; only complete lines (ending
in a newline) are read, a torn last line waits for its newline. Blank lines are skipped;
anything that is not a JSON object is reported (the line number and why), never raised.
Also shared: a reducer's report of a line it skipped, and a JSON number read as a token count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

import orjson

Report = Callable[[int, str], None]  # (line number, reason)
TORN = "torn last line (no newline yet): not read"


@dataclass(frozen=True)
class Problem:
    """A line a reducer skipped: where, and why."""

    file: str
    line: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "reason": self.reason}


class Timed:
    """A reducer's result with a `time` (canonical UTC text, or None): its UTC day."""

    __slots__ = ()
    time: str | None

    @property
    def day(self) -> str | None:
        return self.time[:10] if self.time else None


def _count(v: Any) -> int | None:
    """A token counter: a non-negative whole number (a float such as 3.0 too), else unknown."""
    if type(v) is int:
        return v if v >= 0 else None
    if type(v) is float and v.is_integer() and v >= 0:
        return int(v)
    return None


def complete_end(data: bytes) -> int:
    """How many bytes of `data` are complete lines."""
    return data.rfind(b"\n") + 1


def json_objects(data: bytes, end: int, lineno: int, problem: Report) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each complete line of data[:end] holding a JSON object;
    numbering continues from `lineno` (the lines already consumed)."""
    pos = 0
    while pos < end:
        nl = data.index(b"\n", pos)
        raw = data[pos:nl]
        pos = nl + 1
        lineno += 1
        if not raw.strip():
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            try:
                raw.decode("utf-8")
                reason = f"not JSON: {e}"
            except UnicodeDecodeError:
                reason = "not UTF-8"
            problem(lineno, reason)
            continue
        if not isinstance(obj, dict):
            problem(lineno, "not a JSON object")
            continue
        yield lineno, obj
