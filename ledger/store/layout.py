"""What a record store is: its marker, its homes, where its index goes (the warm path reads
this module: every `--home` is checked for a store)."""

from __future__ import annotations

import os
import stat as stat_mod
from pathlib import Path
from typing import Any, Sequence

from ledger.errors import LedgerError

STORE_FILE = "ledger-store.json"
STORE_KIND = "ledger-store"
STORE_VERSION = 1
HOMES_DIR = "homes"
INDEX_DIR = "index"
STORE_HINT = "choose an empty directory (or an existing ledger store) with --to or LEDGER_STORE"


def _read_marker(path: str) -> dict[str, Any] | None:
    """The store marker's document, None when it is not ledger's."""
    import json

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            return None
        doc = json.loads(os.read(fd, 4096))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return doc if isinstance(doc, dict) and doc.get("kind") == STORE_KIND else None


def is_store(path: str | os.PathLike[str]) -> bool:
    return os.path.lexists(os.path.join(path, STORE_FILE))


def store_homes(path: str | os.PathLike[str]) -> list[Path] | None:
    """The homes held by the store at `path` (sorted by id), or None when `path` is no store.
    A marker that is not ledger's, or a store of a newer layout, raises LedgerError."""
    marker = os.path.join(path, STORE_FILE)
    if not os.path.lexists(marker):
        return None
    doc = _read_marker(marker)
    if doc is None:
        raise LedgerError(f"{marker} is not a ledger store marker",
                          hint="point --home at a ledger home or at a store made by `ledger push`")
    if doc.get("schema_version") != STORE_VERSION:
        raise LedgerError(f"the store {path} has layout version {doc.get('schema_version')!r}; "
                          f"this ledger reads version {STORE_VERSION}", hint="upgrade ledger (`pip install -U ledger`)")
    homes_dir = os.path.join(path, HOMES_DIR)
    try:
        with os.scandir(homes_dir) as it:
            names = sorted(e.name for e in it if e.is_dir(follow_symlinks=False) and _is_uuid(e.name))
    except FileNotFoundError:
        names = []
    return [Path(homes_dir) / n for n in names]


def _is_uuid(name: str) -> bool:
    import uuid  # (with platform: ~11 M instructions, paid only when a store is read)

    try:
        return str(uuid.UUID(name)) == name
    except ValueError:
        return False


def expand_homes(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """`paths` with every store replaced by its homes (a store with none is an error)."""
    out: list[Path] = []
    for p in paths:
        homes = store_homes(p)
        if homes is None:
            out.append(Path(p))
        elif not homes:
            raise LedgerError(f"the record store {p} holds no homes yet",
                              hint=f"push one into it with `ledger push --to {p}`")
        else:
            out.extend(h for h in homes if h not in out)
    return out


def index_base(path: str | os.PathLike[str]) -> Path:
    """Where the default SQLite index of `path` lives: the home itself, or a store's index/."""
    return Path(path) / INDEX_DIR if is_store(path) else Path(path)


def single_home(path: str | os.PathLike[str], command: str) -> Path:
    """`path`, or the one home of the store at `path` (commands that read one home: runs, show)."""
    homes = store_homes(path)
    if homes is None:
        return Path(path)
    if len(homes) == 1:
        return homes[0]
    ids = ", ".join(h.name for h in homes[:3]) + (", ..." if len(homes) > 3 else "")
    raise LedgerError(f"the record store {path} holds {len(homes)} homes ({ids or 'none'}); "
                      f"`ledger {command}` reads one home",
                      hint=f"name one with --home {os.path.join(path, HOMES_DIR, '<id>')}, or query them all with "
                           f"`ledger report --home {path}` / `ledger sql --home {path}`")

