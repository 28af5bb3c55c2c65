"""The reducer fold of a client's first import, kept for the index's first pass (issue 28).

A new user imports a history (`ledger import`), then asks `ledger report`: the report's first
index would read every archive file back (zstd decode, then the reducer's parse of every
line). The first import has every new line in memory already, as it archives it: it feeds
the client's reducer (ledger.sources.claude_usage / codex_usage) with exactly the bytes each
archive file holds, while another thread compresses them, and leaves, next to the archive,

    sources/<client>/.state/prefold.bin: {"rv": reducer state version, "max_line": bound,
                                          "files": {archive file: [bytes, inode]}, "state": ...}

The index's pass on a fresh index (ledger.index.logsource) starts from that state and those
cursors, as an incremental pass starts from its own log_state: a file grown, added or
replaced since is read from there, or the whole archive is read when one shrank or vanished.
It is a cache: an unreadable, older or foreign one is ignored (the archive is read as before).

Only what the index would read the same way is folded: a log whose new bytes fit one frame
of at most `limit()` bytes (16 MiB) (a larger frame is decoded in pieces, where the index applies its
line and ratio bounds: ledger.sources.zframes), and none of an import that adopted or
repaired anything (it starts from an archive that is not empty).
"""

from __future__ import annotations

import os
from typing import Any, Callable

from ledger.sources.zframes import RATIO_MIN_OUT, bound

FILE = "prefold.bin"  # below the client's archive state dir (ledger.sources.archiveformat.STATE_DIR)
FOLDED = ("claude", "codex")  # clients whose logs are JSONL fed line by line (a Gemini chat is rewritten whole)


def reducer(client: str, state: dict[str, Any] | None = None, adopt: bool = False) -> Any:
    """The client's reducer (the one place that names it), from `state` or empty. `adopt`:
    `state` is handed over (freshly parsed): Codex's reducer keeps its lists instead of
    copying them (the others' states are small)."""
    if client == "claude":
        from ledger.sources.claude_usage import ClaudeUsage

        return ClaudeUsage(state)
    if client == "codex":
        from ledger.sources.codex_usage import CodexUsage

        return CodexUsage(state, adopt=adopt)
    if client == "gemini":
        from ledger.sources.gemini_usage import GeminiUsage

        return GeminiUsage(state)
    raise ValueError(client)


def _state_version(client: str) -> int:
    if client == "claude":
        from ledger.sources.claude_usage import STATE_VERSION
    else:
        from ledger.sources.codex_usage import STATE_VERSION
    return STATE_VERSION


def limit() -> int:
    """The most bytes of one log a fold takes (a frame the index decodes in one piece)."""
    return min(RATIO_MIN_OUT, bound("LEDGER_MAX_LINE_BYTES"))


class Fold:
    """The fold of one import: `feed` each archived chunk (complete lines), `wrote` each
    archive file's size after it, `save` at the end (after the import's sync)."""

    def __init__(self, client: str) -> None:
        self.client = client
        self.usage = reducer(client)
        self.files: dict[str, list[int]] = {}
        self.max = limit()
        self.ok = True  # False: something was archived that the fold does not hold (nothing saved)
        self._pool: Any = None

    def takes(self, size: int) -> bool:
        return self.ok and size <= self.max

    def prefetch(self, paths: list[str], compress: Callable[[], Callable[[bytes], bytes]]) -> None:
        """Read and compress the logs at `paths` (new logs this import archives, in its order)
        ahead of it, on two threads (zstd and the reads release the GIL) while this one feeds
        the reducer: a few logs ahead (bounded memory). `compress()` makes a thread's
        compression function (a zstd context is not shared between threads)."""
        from concurrent.futures import ThreadPoolExecutor
        import threading

        local = threading.local()

        def job(path: str) -> tuple[bytes, bytes] | None:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                return None
            try:
                size = os.fstat(fd).st_size
                if size > self.max:
                    return None
                data = os.pread(fd, size, 0)
            except OSError:
                return None
            finally:
                os.close(fd)
            data = data[:data.rfind(b"\n") + 1]
            fn = getattr(local, "compress", None)
            if fn is None:
                fn = local.compress = compress()
            return data, fn(data) if data else b""

        self._pool = ThreadPoolExecutor(2, thread_name_prefix="ledger-compress")
        self._job = job
        self._todo = list(reversed(paths))
        self._ahead: dict[str, Any] = {}
        self._more()

    AHEAD = 6  # logs read and compressed ahead of the one being archived

    def _more(self) -> None:
        while self._todo and len(self._ahead) < self.AHEAD:
            path = self._todo.pop()
            self._ahead[path] = self._pool.submit(self._job, path)

    def compressed(self, path: str, data: bytes) -> bytes | None:
        """The compressed bytes of `data` (the complete lines read from the log at `path`)
        when the thread ahead read exactly those bytes, else None (the log changed since)."""
        job = self._ahead.pop(path, None) if self._pool is not None else None
        if job is None:
            return None
        got = job.result()
        self._more()
        if got is None or got[0] != data:
            return None
        return got[1]

    def feed(self, rel: str, data: bytes) -> None:
        key = rel[:-4] if rel.endswith(".zst") else rel  # (the log's own name: as the index feeds it)
        self.usage.feed(key, data, self.usage.offset(key))

    def wrote(self, rel: str, size: int, inode: int) -> None:
        self.files[rel] = [size, inode]

    def close(self) -> None:
        if self._pool is not None:
            self._todo = []
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
            self._ahead = {}

    def save(self, state_dir: str, write: Callable[[str, bytes], None]) -> None:
        self.close()
        if not self.ok or not self.files:
            return
        import orjson

        try:
            data = orjson.dumps({"rv": _state_version(self.client), "max_line": bound("LEDGER_MAX_LINE_BYTES"),
                                 "files": self.files, "state": self.usage.state()})
        except TypeError:  # (a path that is not UTF-8: no fold, the index reads the archive as before)
            return
        write(os.path.join(state_dir, FILE), data)


def load(state_dir: str, client: str, rv: int) -> tuple[dict[str, list[int]], dict[str, Any]] | None:
    """(archive file -> [bytes, inode] folded, the reducer state) of the client's first import,
    or None (none, unreadable, another reducer version or line bound: the archive is read)."""
    if client not in FOLDED:
        return None
    try:
        with open(os.path.join(state_dir, FILE), "rb") as f:
            import orjson

            data = orjson.loads(f.read())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("rv") != rv or data.get("max_line") != bound("LEDGER_MAX_LINE_BYTES"):
        return None
    files, state = data.get("files"), data.get("state")
    if not isinstance(files, dict) or not isinstance(state, dict) or not all(
            isinstance(v, list) and len(v) == 2 and all(type(x) is int for x in v) for v in files.values()):
        return None
    return files, state
