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
    """Split a byte stream into lines (returned without their newline)."""

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
        return lines

    def finish(self) -> bytes | None:
        """The final line without a newline, if any."""
        rest, self._rest = self._rest, b""
        return rest or None


class RawCapture:
    """Head + rolling tail of a byte stream within `limit` bytes, cut at line boundaries,
    with the omitted middle counted (bytes and lines) and the overflow flagged.

    Works on the chunks read from the pipe (not line by line): cheap for a fast stream."""

    def __init__(self, limit: int = DEFAULT_CAPTURE_BYTES, tail_reserve: int = DEFAULT_TAIL_RESERVE) -> None:
        self.limit = max(0, limit)
        self.tail_reserve = min(tail_reserve, self.limit // 2)
        self.head_limit = self.limit - self.tail_reserve
        self._head: list[bytes] = []
        self.head_bytes = 0
        self._tail: deque[bytes] = deque()
        self._tail_bytes = 0
        self._dropped_bytes = 0       # whole chunks dropped from the tail's left
        self._dropped_lines = 0
        self._dropped_clean = True
        self.total_bytes = 0
        self._in_tail = False
        self._final: tuple[bytes, int, int] | None = None

    def add(self, chunk: bytes) -> None:
        if not chunk:
            return
        self._final = None
        self.total_bytes += len(chunk)
        if not self._in_tail:
            room = self.head_limit - self.head_bytes
            if len(chunk) <= room:
                self._head.append(chunk)
                self.head_bytes += len(chunk)
                return
            cut = chunk.rfind(b"\n", 0, room) + 1  # keep whole lines in the head
            if cut:
                self._head.append(chunk[:cut])
                self.head_bytes += cut
            self._in_tail = True
            chunk = chunk[cut:]
            if not chunk:
                return
        self._tail.append(chunk)
        self._tail_bytes += len(chunk)
        # drop whole chunks from the left while what remains still covers the reserve
        while self._tail and self._tail_bytes - len(self._tail[0]) >= self.tail_reserve:
            old = self._tail.popleft()
            self._tail_bytes -= len(old)
            self._dropped_bytes += len(old)
            self._dropped_lines += old.count(b"\n")
            self._dropped_clean = old.endswith(b"\n")

    def _finalize(self) -> tuple[bytes, int, int]:
        """(tail bytes kept, omitted bytes, omitted lines)."""
        if self._final is None:
            tail = b"".join(self._tail)
            omitted, omitted_lines = self._dropped_bytes, self._dropped_lines
            start = max(0, len(tail) - self.tail_reserve)
            if start or (omitted and not self._dropped_clean):
                # keep at most the reserve, starting right after a newline
                nl = tail.find(b"\n", max(start - 1, 0))
                cut = len(tail) if nl < 0 else nl + 1
                omitted += cut
                omitted_lines += tail.count(b"\n", 0, cut)
                tail = tail[cut:]
            self._final = (tail, omitted, omitted_lines)
        return self._final

    @property
    def omitted_bytes(self) -> int:
        return self._finalize()[1]

    @property
    def truncated(self) -> bool:
        return self.omitted_bytes > 0

    def data(self) -> bytes:
        return b"".join(self._head) + self._finalize()[0]

    def describe(self) -> dict[str, Any]:
        tail, omitted, omitted_lines = self._finalize()
        total_lines = sum(c.count(b"\n") for c in self._head) + omitted_lines + tail.count(b"\n")
        if (tail or self._head) and not (tail or self._head[-1]).endswith(b"\n"):
            total_lines += 1  # a final line without newline
        return {"total_bytes": self.total_bytes, "total_lines": total_lines,
                "truncated": omitted > 0, "omitted_bytes": omitted,
                "omitted_lines": omitted_lines, "limit_bytes": self.limit}


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
        if not line or line.isspace():
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
