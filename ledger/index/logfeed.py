"""Reading a client's log archive (`<home>/sources/<client>/`, ledger.sources.archive): its
change marker and its files (ledger.sources.archiveformat: the freshness check reads them the
same way), and their new bytes fed to the reducer in bounded pieces (a zstd file frame by
frame, ledger.sources.zframes). Problems found on the way (a damaged frame, a
line over the bounds, a file the archive recorded and the disk lacks) are returned as
(byte offset, reason), for the pass to store and name.
"""

from __future__ import annotations

import os
from typing import Any

from ledger.sources.archiveformat import (  # noqa: F401 - (re-exported: logsource, tests)
    ARCHIVE_SKIP, ZSTD_SUFFIX, archive_files, change_marker,
)

SOURCES_DIR = "sources"
# the columns of the tables the log pass writes, in the models' order (tests/test_tabledefs.py
# checks them, as project.EXPECTED_COLS for the run records' tables)
LOG_SESSION_COLS = ("home_id", "row_id", "source", "provider_session_id", "linked_run_id", "files", "path",
                    "fingerprint", "indexed_at")
LOG_STATE_COLS = ("home_id", "source", "state", "indexed_at")
FEED_CHUNK = 16 << 20  # bytes of a plain archive file fed to the reducer at a time


def feed_file(usage: Any, key: str, path: str, start: int, size: int, zstd: bool
               ) -> tuple[int, int, list[tuple[int, str]]] | None:
    """Feed an archive file's new content from `start` (a zstd file: its byte offset; a plain
    one: the reducer's offset) to the reducer, in bounded pieces (ledger.sources.zframes);
    (the file's new cursor, bytes read, problems as (byte offset, reason)), or None when it
    cannot be opened. A damaged frame is skipped (frames hold whole lines: what follows is
    read), a frame over the bounds ends the file, a torn last frame waits for the next pass."""
    import mmap

    from ledger.sources import zframes

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    bad: list[tuple[int, str]] = []
    try:
        if not zstd:
            return _feed_plain(usage, key, fd, start, size, bad)
        try:
            buf = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return None
        max_line = zframes.bound("LEDGER_MAX_LINE_BYTES")
        with buf:
            end = start
            carry = b""
            total = usage.offset(key)
            try:
                for f, piece in zframes.inflate(buf, start, "", total):
                    if piece is not None:
                        data = carry + piece if carry else piece
                        cut = data.rfind(b"\n") + 1
                        if cut:
                            usage.feed(key, data[:cut], usage.offset(key))
                        carry = data[cut:]
                        if len(carry) > max_line:
                            bad.append((f.start, f"a line longer than {max_line:,} bytes in the frame at byte "
                                                  f"{f.start:,} (LEDGER_MAX_LINE_BYTES): not read past it"))
                            return size, size - start, bad
                        continue
                    if f.bad is not None:
                        bad.append((f.start, f"the frame of bytes {f.start:,}-{f.end:,} {f.bad}"))
                    end = f.end
            except zframes.OverBound as exc:
                bad.append((exc.offset, exc.reason))
                end = size  # (not read again until the file changes)
            if carry:
                usage.feed(key, carry, usage.offset(key))  # (a torn line: the reducer names it)
            return end, end - start, bad
    finally:
        os.close(fd)


def _feed_plain(usage: Any, key: str, fd: int, start: int, size: int, bad: list[tuple[int, str]]
                ) -> tuple[int, int, list[tuple[int, str]]] | None:
    from ledger.sources.zframes import bound

    max_line = bound("LEDGER_MAX_LINE_BYTES")
    pos = start
    carry = b""
    try:
        while pos < size:
            chunk = os.pread(fd, min(FEED_CHUNK, size - pos), pos)
            if not chunk:
                break
            pos += len(chunk)
            data = carry + chunk if carry else chunk
            cut = data.rfind(b"\n") + 1
            if cut:
                usage.feed(key, data[:cut], usage.offset(key))
            carry = data[cut:]
            if len(carry) > max_line:
                bad.append((pos - len(carry), f"a line longer than {max_line:,} bytes (LEDGER_MAX_LINE_BYTES): "
                                              "not read past it"))
                return size, pos - start, bad
    except OSError:
        return None
    if carry:
        usage.feed(key, carry, usage.offset(key))  # (a torn line: the reducer names it, and waits)
    return pos, pos - start, bad


def state_problems(root: str, files: dict[str, os.stat_result]) -> dict[str, list[Any]]:
    """The archive files the archive's state files (ledger.sources.archive) hold more of than
    the disk: deleted (absent) or truncated (shorter than recorded). Read on a pass that reads
    the whole archive (a fresh index, --full, a file that shrank or vanished)."""
    from ledger.sources.archivestate import recorded_archives

    out: dict[str, list[Any]] = {}
    for rel, want in recorded_archives(root).items():
        st = files.get(rel)
        if st is None:
            out[rel] = [None, f"missing (the archive recorded {want:,} bytes; deleted?)"]
        elif st.st_size < want:
            out[rel] = [st.st_size, f"truncated: {st.st_size:,} of the {want:,} bytes recorded"]
    return out
