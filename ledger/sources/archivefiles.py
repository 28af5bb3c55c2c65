"""File-system helpers of the archive: modes, directories, whole writes and reads, atomic
replacement. BLOCK lives here because both the copy (archiver) and the repair
(archiverepair) read logs in blocks: they read it as `archivefiles.BLOCK` at call time, so
one setting (and one test patch) reaches both."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
BLOCK = 1 << 24  # a log's new bytes are read (and compressed) in blocks of this size


def fsync_dir(path: str | Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def umask_strips(mode: int) -> bool:
    """Whether the process's umask removes bits of `mode` (then a new file or directory is
    chmod'ed to it; the usual umask removes none of 0700 and saves that call per file)."""
    if not _UMASK:
        try:
            with open("/proc/self/status", "rb") as f:
                line = next(ln for ln in f if ln.startswith(b"Umask:"))
            _UMASK.append(int(line.split()[1], 8))
        except (OSError, StopIteration, ValueError, IndexError):
            _UMASK.append(0o777)  # (unknown: always chmod)
    return bool(_UMASK[0] & mode)


_UMASK: list[int] = []


def mkdirs(path: str | Path) -> None:
    """Directories 0700 whatever the umask (an archive holds prompts and code)."""
    missing = []
    p = os.path.abspath(path)
    while not os.path.lexists(p):
        missing.append(p)
        p = os.path.dirname(p)
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            os.chmod(d, DIR_MODE)
            continue
        if umask_strips(DIR_MODE):
            os.chmod(d, DIR_MODE)


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


TMP_SEQ = itertools.count()


def write_atomic(path: str | Path, data: bytes, durable: bool = True) -> None:
    """tmp (0600, O_EXCL) + fsync + rename + fsync dir: a state file is whole or absent.
    `durable=False`: no fsync here (an import syncs once at its end, see import_client)."""
    path = os.fspath(path)
    parent, name = os.path.split(path)
    while True:  # (a name of this process's own: O_EXCL says if a dead process left one)
        tmp = f"{parent}/.{name}.{os.getpid()}-{next(TMP_SEQ)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
            break
        except FileExistsError:
            continue
    try:
        try:
            if umask_strips(FILE_MODE):
                os.fchmod(fd, FILE_MODE)
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:  # (a full disk fails the write: the tmp is ours, never left behind)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        fsync_dir(parent)


def pread_all(fd: int, n: int, offset: int) -> bytes:
    first = os.pread(fd, n, offset) if n > 0 else b""
    if len(first) == n or not first:  # (the usual case: one read, its bytes as they came, no copy)
        return first
    out = bytearray(first)
    while len(out) < n:
        chunk = os.pread(fd, n - len(out), offset + len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)
