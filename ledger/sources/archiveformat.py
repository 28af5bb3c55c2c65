"""The archive's on-disk format (ledger.sources.archive): the names of its files, the zstd
frames its generations are written in, the state files' JSON, and how the index names a
damaged archive file. What `ledger verify` (archivecheck) and the index read of the archive
without the importer."""

from __future__ import annotations

import errno
import json
import os
import time
from typing import Any, Iterator

PREFIX_BYTES = 4096
TAIL_BYTES = 256
CHUNK = 1 << 20
STATE_DIR = ".state"
ZSTD = "zstd"
ZSTD_SUFFIX = ".zst"
LEVEL = 3  # on transcripts: ~20 % of the bytes at ~275 MB/s (level 6: the same ratio at 60 MB/s)
FRAME_BLOCK = 1 << 17

ROOTS_FILE = f"{STATE_DIR}/roots.json"
TREE_FILE = f"{STATE_DIR}/tree.json"  # directory -> [mtime_ns, inode, logs, subdirectories] (a cache, see Tree)
SEEN_FILE = f"{STATE_DIR}/seen.json"  # log path -> [size, mtime_ns, inode] archived whole (a cache)
QUICK_FILE = f"{STATE_DIR}/quick.bin"  # the last walk's directories and logs with their stat (a cache, see Quick)
CHANGED_FILE = f"{STATE_DIR}/changed"  # rewritten after every import that archived anything
IMPORTING_FILE = f"{STATE_DIR}/importing"  # exists while an import's writes are not yet synced


def sha(data: bytes) -> str:
    import hashlib  # (OpenSSL: ~11 M instructions that a reader's refresh, which hashes nothing, does without)

    return hashlib.sha256(data).hexdigest()


EMPTY_SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"  # sha256 of no bytes


def loads(data: bytes) -> Any:
    """orjson, or json for what it refuses (surrogate escapes of paths that are not UTF-8)."""
    import orjson

    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def dumps(state: dict[str, Any]) -> bytes:
    """A state file's bytes: orjson, or json for what it refuses (a path with bytes that are not
    UTF-8, kept as surrogate escapes, is written as \\udcXX escapes)."""
    import orjson

    try:
        return orjson.dumps(state, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return json.dumps(state, separators=(",", ":")).encode("ascii") + b"\n"


PROBLEMS = "/problems"  # the index's log_state.source `<client>-log/problems`: its damaged archive files


def parse_problems(text: str | bytes) -> dict[str, list[Any]]:
    """The index's record of a client's damaged archive files: archive file -> [byte offset
    or None, reason] (anything unexpected: none)."""
    try:
        out = json.loads(text)["problems"]
    except (ValueError, KeyError, TypeError):
        return {}
    return out if isinstance(out, dict) else {}


def archive_reason(offset: int | None, reason: str) -> str:
    """How a damaged archive file is named by the index's passes, reports and `ledger runs`."""
    at = f" at byte {offset:,}" if isinstance(offset, int) else ""
    if reason.startswith(LINK_REASON):
        return f"damaged archive: {reason} (an evidence gap; make it a directory again)"
    return (f"damaged archive{at}: {reason} (an evidence gap; `ledger import` copies it again "
            "while the log still holds it)")


LINK_REASON = "a symlink inside the archive"  # (how the index and verify name one: never followed)
ARCHIVE_SKIP = (STATE_DIR,)  # the archive's own bookkeeping: not logs
LOG_SUFFIXES = (".jsonl", ".jsonl" + ZSTD_SUFFIX)  # an archived log, plain or in zstd frames


def change_marker(root: str) -> str | None:
    """The signature of the archive's change marker (rewritten by every import that archived
    something): unchanged, the archive is as the last pass saw it (the index's pass,
    ledger.index.logsource, and its freshness check, ledger.index.fresh)."""
    try:
        st = os.stat(os.path.join(root, CHANGED_FILE))
    except OSError:
        return None
    return f"{st.st_mtime_ns}:{st.st_size}:{st.st_ino}"


def archive_files(root: str, links: dict[str, list[Any]] | None = None) -> Iterator[tuple[str, os.stat_result]]:
    """(path below root, stat) of every regular log file of an archive (no symlinks: each one
    where a directory or an archive file is goes to `links` as a problem)."""
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, rel) if rel else root))
        except OSError:
            continue
        for e in entries:
            r = f"{rel}/{e.name}" if rel else e.name
            try:
                if links is not None and e.is_symlink() and (e.is_dir() or e.name.endswith(LOG_SUFFIXES)):
                    links[r] = [None, f"{LINK_REASON}: not followed (its sessions are not read)"]
                    continue
                if e.is_dir(follow_symlinks=False):
                    if not rel and e.name in ARCHIVE_SKIP:
                        continue
                    stack.append(r)
                elif e.is_file(follow_symlinks=False) and e.name.endswith(LOG_SUFFIXES):
                    yield r, e.stat(follow_symlinks=False)
            except OSError:
                continue


_CCTX: list[Any] = []


def compressor() -> Any:
    """One compression context for the process (making one per log costs ~30 us each)."""
    if not _CCTX:
        _CCTX.append(new_compressor())
    return _CCTX[0]


def new_compressor() -> Any:
    import zstandard  # (only an import that writes needs it)

    return zstandard.ZstdCompressor(level=LEVEL, write_checksum=True)  # (verify finds a damaged frame)


_NOW: list[Any] = [None, ""]


def utc_now() -> str:
    """The current second, ISO 8601 UTC (formatted once per second: once per log of an import)."""
    t = int(time.time())
    if _NOW[0] != t:
        _NOW[:] = [t, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))]
    return _NOW[1]


def complete_frames(data: bytes) -> tuple[int, bytes]:
    """(bytes of the complete zstd frames at the start of `data`, their content): a torn or
    damaged frame, or one over the bounds (ledger.sources.zframes), ends them."""
    from ledger.sources.zframes import leading

    return leading(data)


class LogOverBound(Exception):
    """A log (or its line) over one of the bounds of ledger.sources.zframes: skipped, named."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def inflate(fd: int) -> tuple[int, int]:
    """A whole-zstd log's content in an unlinked temporary file: (its fd, its size); `fd` is
    closed on success (on failure the caller's). Such a log is cold (Codex compresses rollouts
    untouched for 7 days), so this happens once per file: then its signature skips it. The
    content is streamed with the bounds of ledger.sources.zframes: a log that would grow past
    them (a zstd bomb) raises LogOverBound before its frame is decompressed."""
    import mmap
    import tempfile

    from ledger.sources import zframes

    size = os.fstat(fd).st_size
    if size == 0:
        raise OSError(errno.EIO, "not a whole zstd file: it is empty")
    with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as buf, tempfile.TemporaryFile() as tmp:
        end = 0
        try:
            for f, piece in zframes.inflate(buf, 0):
                if piece is not None:
                    tmp.write(piece)
                elif f.bad is not None:
                    raise OSError(errno.EIO, f"not a whole zstd file: the frame at byte {f.start:,} {f.bad}")
                else:
                    end = f.end
        except zframes.OverBound as exc:
            raise LogOverBound(exc.reason) from None
        if end != size:
            raise OSError(errno.EIO, "not a whole zstd file: its last frame is torn")
        tmp.flush()
        out = os.dup(tmp.fileno())
    os.close(fd)
    return out, os.fstat(out).st_size


def read_archive(path: str | os.PathLike[str], start: int = 0) -> bytes:
    """An archive file's content from byte `start` of the file: a `.zst` generation's complete
    frames decompressed (a torn last frame, being written, is left out), else the bytes."""
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read()
    if not os.fspath(path).endswith(ZSTD_SUFFIX):
        return data
    return complete_frames(data)[1]
