"""Writing into the store: directories 0700, files 0600 written whole, synced in batches, and
the lock that lets one push at a time write a store home."""

from __future__ import annotations

import os
from typing import Any

from ledger.errors import LedgerError
from ledger.store.layout import STORE_HINT

DIR_MODE = 0o700
FILE_MODE = 0o600
TMP_SUFFIX = ".push.tmp"


def _mkdirs(path: str) -> None:
    """Directories 0700 whatever the umask (records hold prompts and code)."""
    missing = []
    p = path
    while not os.path.lexists(p):
        missing.append(p)
        p = os.path.dirname(p)
    if not os.path.isdir(p):
        raise LedgerError(f"cannot create {path}: {p} is not a directory", hint=STORE_HINT)
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            pass
        os.chmod(d, DIR_MODE)



def _link_new(path: str, data: bytes) -> None:
    """Write a small file once: two pushes creating it at once agree on the first one."""
    import uuid

    tmp = f"{path}.{uuid.uuid4().hex}{TMP_SUFFIX}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        _write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    else:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)
    _fsync_dir(os.path.dirname(path))


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _syncfs(path: str) -> None:
    """Flush the destination's file system (one call for a whole batch of files)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            if libc.syncfs(fd) == 0:
                return
        finally:
            os.close(fd)
    except (OSError, AttributeError):
        pass
    os.sync()


class _Lock:
    """One push per store home at a time (two would append the same bytes twice)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None

    def __enter__(self) -> "_Lock":
        import fcntl

        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            raise LedgerError(f"another `ledger push` of this home is writing to {os.path.dirname(self.path)}",
                              hint="wait for it to finish, then push again (a push resumes where it stopped)") from None
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.fd is not None:
            os.close(self.fd)

