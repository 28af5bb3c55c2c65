"""Setting a damaged SQLite index aside and swapping a rebuilt one in (see ledger.index.db for
the locks the callers hold: nobody has the file open while it is moved).

A damaged index is kept as `<name>.corrupt-<UTC time>` (with its -wal), the newest
KEEP_SET_ASIDE copies only; a rebuild is written to `<name>.rebuild-<pid>` and replaces the
index with `os.replace`.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path


def utc_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


def _unlink(p: Path) -> None:
    try:
        os.unlink(p)
    except FileNotFoundError:
        pass


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


SIDE_SUFFIXES = ("-wal", "-shm", "-journal")


def remove_sqlite_files(path: Path) -> None:
    for suffix in ("",) + SIDE_SUFFIXES:
        _unlink(Path(os.fspath(path) + suffix))


KEEP_SET_ASIDE = 3  # damaged copies kept next to the index (newest first); older ones are removed


def set_aside_copies(path: Path) -> list[Path]:
    """The damaged copies `<name>.corrupt-<UTC time>` next to the index, newest first."""
    prefix = f"{path.name}.corrupt-"
    try:
        names = [n for n in os.listdir(path.parent)
                 if n.startswith(prefix) and not n.endswith(SIDE_SUFFIXES)]
    except OSError:
        return []
    return [path.with_name(n) for n in sorted(names, reverse=True)]  # the stamp sorts by time


def set_aside(path: Path) -> Path:
    """Move a damaged index (and its WAL) to `<name>.corrupt-<UTC time>`; drop its -shm.

    Caller holds the exclusive file lock (nobody has the file open) and has checked that
    the file is ledger's (FileStatus.ours) or sits at the home's own index place. Only the
    newest KEEP_SET_ASIDE copies are kept: they are named by us, so removing older ones
    touches nothing that is not ledger's.
    """
    aside = path.with_name(f"{path.name}.corrupt-{utc_stamp()}")
    os.replace(path, aside)
    wal = Path(os.fspath(path) + "-wal")
    if wal.exists() and wal.stat().st_size > 0:  # committed pages not yet in the file: keep them with it
        os.replace(wal, Path(os.fspath(aside) + "-wal"))
    _unlink(wal)
    _unlink(Path(os.fspath(path) + "-shm"))
    _unlink(Path(os.fspath(path) + "-journal"))
    for old in set_aside_copies(path)[KEEP_SET_ASIDE:]:
        try:
            if old.is_file() and not old.is_symlink():
                remove_sqlite_files(old)
        except OSError:
            pass
    return aside


def swap_in(tmp: Path, path: Path) -> None:
    """Atomically replace `path` by the finished `tmp` (caller holds the exclusive file lock).

    The old file's -wal/-shm are removed first: a stale WAL next to the new file would be
    replayed into it.
    """
    for suffix in SIDE_SUFFIXES:
        _unlink(Path(os.fspath(path) + suffix))
    os.replace(tmp, path)
    _fsync_dir(path.parent)

