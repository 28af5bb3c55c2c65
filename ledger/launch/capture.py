"""Bounded capture and strict parsing of a child's machine-readable stdout.

`LineSplitter` turns pipe chunks into complete lines. `RawCapture` keeps the raw stream as
evidence within a byte bound (8 MiB by default): the head of the stream and, once the bound
is reached, a rolling tail (so the final `result` line is kept), at line boundaries, with
the omitted middle counted and the overflow flagged. `StrictParser` parses each line the
strict way (UTF-8, one JSON object per non-blank line, NaN/Infinity rejected: orjson) and
counts what did not parse; the adapters decide the rest of the verification (how many
terminal events, what may follow them).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterator

import orjson

DEFAULT_CAPTURE_BYTES = 8 * 1024 * 1024
DEFAULT_TAIL_RESERVE = 1024 * 1024
MAX_LINE_BYTES = 64 * 1024 * 1024  # a longer "line" is junk and is not buffered further


class LineSplitter:
    """Split a byte stream into lines (each returned with its trailing newline)."""

    __slots__ = ("_rest", "overlong")

    def __init__(self) -> None:
        self._rest = b""
        self.overlong = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        data = self._rest + chunk if self._rest else chunk
        lines = data.split(b"\n")
        rest = lines.pop()
        if len(rest) > MAX_LINE_BYTES:
            self.overlong += 1
            rest = rest[-1024:]  # keep a little context; the line is junk anyway
        self._rest = rest
        return [line + b"\n" for line in lines]

    def finish(self) -> bytes | None:
        """The final line without a newline, if any."""
        rest, self._rest = self._rest, b""
        return rest or None


class RawCapture:
    """Head + rolling tail of a line stream within `limit` bytes (overflow flagged)."""

    def __init__(self, limit: int = DEFAULT_CAPTURE_BYTES, tail_reserve: int = DEFAULT_TAIL_RESERVE) -> None:
        self.limit = max(0, limit)
        self.tail_reserve = min(tail_reserve, self.limit // 2)
        self.head_limit = self.limit - self.tail_reserve
        self._head: list[bytes] = []
        self.head_bytes = 0
        self._tail: deque[bytes] = deque()
        self._tail_bytes = 0
        self.total_bytes = 0
        self.total_lines = 0
        self.omitted_bytes = 0
        self.omitted_lines = 0
        self._in_tail = False

    @property
    def truncated(self) -> bool:
        return self.omitted_bytes > 0

    def add(self, line: bytes) -> None:
        n = len(line)
        self.total_bytes += n
        self.total_lines += 1
        if not self._in_tail:
            if self.head_bytes + n <= self.head_limit:
                self._head.append(line)
                self.head_bytes += n
                return
            self._in_tail = True
        self._tail.append(line)
        self._tail_bytes += n
        while self._tail_bytes > self.tail_reserve and self._tail:
            old = self._tail.popleft()
            self._tail_bytes -= len(old)
            self.omitted_bytes += len(old)
            self.omitted_lines += 1

    def lines(self) -> Iterator[bytes]:
        yield from self._head
        yield from self._tail

    def data(self) -> bytes:
        return b"".join(self.lines())

    def describe(self) -> dict[str, Any]:
        return {"total_bytes": self.total_bytes, "total_lines": self.total_lines,
                "truncated": self.truncated, "omitted_bytes": self.omitted_bytes,
                "omitted_lines": self.omitted_lines, "limit_bytes": self.limit}


class TailBuffer:
    """The last `limit` bytes of a byte stream (e.g. stderr), with the total seen."""

    def __init__(self, limit: int = 64 * 1024) -> None:
        self.limit = limit
        self._buf = bytearray()
        self.total_bytes = 0

    def add(self, data: bytes) -> None:
        self.total_bytes += len(data)
        self._buf += data
        if len(self._buf) > 2 * self.limit:
            del self._buf[: len(self._buf) - self.limit]

    def data(self) -> bytes:
        data = bytes(self._buf[-self.limit:]) if len(self._buf) > self.limit else bytes(self._buf)
        if self.total_bytes > len(data):
            nl = data.find(b"\n")  # start at a line boundary when we cut
            if 0 <= nl < len(data) - 1:
                data = data[nl + 1:]
        return data

    @property
    def truncated(self) -> bool:
        return self.total_bytes > len(self.data())


@dataclass
class ParseStats:
    lines: int = 0          # non-blank lines
    objects: int = 0        # lines that parsed as a JSON object
    junk: int = 0           # lines that did not
    first_junk_line: int | None = None
    first_junk_reason: str | None = None
    reasons: list[str] = field(default_factory=list)

    def note_junk(self, line_no: int, reason: str) -> None:
        self.junk += 1
        if self.first_junk_line is None:
            self.first_junk_line = line_no
            self.first_junk_reason = reason


class StrictParser:
    """Parse lines strictly; count blank lines apart and junk lines as verification failures."""

    def __init__(self) -> None:
        self.stats = ParseStats()
        self.line_no = 0

    def parse(self, line: bytes) -> dict[str, Any] | None:
        """The JSON object on this line, or None (blank or junk; junk is counted)."""
        self.line_no += 1
        if not line.strip():
            return None
        st = self.stats
        st.lines += 1
        try:
            obj = orjson.loads(line)  # strict: UTF-8 only, NaN/Infinity rejected
        except orjson.JSONDecodeError as exc:
            reason = "invalid UTF-8" if "utf-8" in str(exc).lower() else "not JSON"
            st.note_junk(self.line_no, reason)
            return None
        if not isinstance(obj, dict):
            st.note_junk(self.line_no, "not a JSON object")
            return None
        st.objects += 1
        return obj
