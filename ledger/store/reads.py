"""Reading the home's files without following a symlink: in chunks, up to their last complete
line or zstd frame, and the hashes a push keeps of the bytes around the end it pushed."""

from __future__ import annotations

import errno
import os
import stat as stat_mod

PREFIX_BYTES = 4096
TAIL_BYTES = 256
CHUNK = 1 << 20


def _open_regular(path: str) -> int:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file")
    return fd


def _pread(fd: int, n: int, offset: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = os.pread(fd, min(CHUNK, n - len(out)), offset + len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def _same_prefix(a: int, b: int, n: int) -> bool:
    """The first `n` bytes of two files are equal (read in chunks: memory stays flat)."""
    pos = 0
    while pos < n:
        k = min(CHUNK, n - pos)
        x, y = os.pread(a, k, pos), os.pread(b, k, pos)
        if len(x) != k or x != y:
            return False
        pos += k
    return True


def _lines_end(fd: int, start: int, size: int) -> int:
    """The end of the last complete line of a file (at least `start`)."""
    pos = size
    while pos > start:
        k = min(CHUNK, pos - start)
        block = os.pread(fd, k, pos - k)
        i = block.rfind(b"\n")
        if i >= 0:
            return pos - k + i + 1
        pos -= k
    return start


def _frames_end(fd: int, start: int, size: int) -> int:
    """The end of the last complete zstd frame (frames are appended whole by each import; a
    torn one is an import at work, or one that died and will be cut by the next)."""
    from ledger.sources.archiveformat import complete_frames

    if size <= start:
        return start
    done, _ = complete_frames(_pread(fd, size - start, start))
    if done == 0 and start > 0:
        # the store's copy ends inside a frame (a push stopped mid-write): find the frames from 0
        done, _ = complete_frames(_pread(fd, size, 0))
        return max(done, start)
    return start + done


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _whole_json(fd: int, size: int) -> bool:
    """A JSON file is whole (a receipt is written in place: a push may meet it half written)."""
    import json

    if size > 16 << 20:
        return True  # (not a receipt; copied as it is)
    try:
        json.loads(_pread(fd, size, 0))
    except ValueError:
        return False
    return True
