"""The store a push writes to: checked (and, when new or empty, created), and the one place
each of its homes is pushed from."""

from __future__ import annotations

import os
from pathlib import Path

from ledger.errors import LedgerError
from ledger.store.layout import HOMES_DIR, INDEX_DIR, STORE_FILE, STORE_HINT, STORE_KIND, STORE_VERSION, store_homes
from ledger.store.writes import _link_new, _mkdirs

FROM_FILE = ".pushed-from.json"  # in the store's copy of a home: the (path, machine) it is pushed from
COPIED_ID_HINT = ("this home carries a copy of another home's id (home-id.json copied with `cp -a` or rsync): "
                  "move its home-id.json aside and run `ledger index` (this home gets an id of its own), "
                  "then push again; the same goes for a home that was moved")


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip(os.sep) + os.sep)


def open_store(dest: str | os.PathLike[str], home: str | os.PathLike[str] | None = None) -> Path:
    """Check (and, when new or empty, create) the store at `dest`; its absolute path."""
    import json

    from ledger.home import HOME_MARKERS

    d = os.path.abspath(os.path.expanduser(os.fspath(dest)))
    if home is not None:
        rhome, rdest = os.path.realpath(home), os.path.realpath(d)
        if _inside(rdest, rhome):
            raise LedgerError(f"the store {d} is inside the home {home}",
                              hint="a store must be outside every home: choose a directory elsewhere (a mounted share)")
    if os.path.lexists(d) and not os.path.isdir(d):
        raise LedgerError(f"the store {d} is not a directory", hint=STORE_HINT)
    marker = os.path.join(d, STORE_FILE)
    if not os.path.lexists(marker):
        try:
            names = set(os.listdir(d)) if os.path.isdir(d) else set()
        except OSError as exc:
            raise LedgerError(f"cannot read the store directory {d}: {exc.strerror}", hint=STORE_HINT) from None
        if names & HOME_MARKERS:
            raise LedgerError(f"{d} is a ledger home, not a record store", hint=STORE_HINT)
        if names:
            raise LedgerError(f"{d} is not empty and is not a ledger record store (no {STORE_FILE})", hint=STORE_HINT)
        if not os.path.isdir(os.path.dirname(d)):
            # (no `mkdir -p`: a share that is not mounted must not become a local directory tree)
            raise LedgerError(f"cannot create the store {d}: {os.path.dirname(d)} does not exist",
                              hint="check that the share is mounted, or create the directory first")
        _mkdirs(d)
        _link_new(marker, json.dumps({"schema_version": STORE_VERSION, "kind": STORE_KIND}).encode() + b"\n")
    store_homes(d)  # (the marker is ledger's, of a layout this version writes)
    for sub in (HOMES_DIR, INDEX_DIR):
        p = os.path.join(d, sub)
        if os.path.islink(p) or (os.path.lexists(p) and not os.path.isdir(p)):
            raise LedgerError(f"{p} is not a directory (a symlink is never followed)", hint=STORE_HINT)
        _mkdirs(p)
    return Path(d)


def _check_pushed_from(dest_home: str, home: str, uid: str, here: tuple[str, str]) -> None:
    """The store's copy of a home is pushed from one place: the first push records it
    (FROM_FILE); a push of the same id from another path or machine is refused (issue 32: a
    second home carrying a copy of the first's home-id.json, also one written before the id
    file said where it was made)."""
    import json

    path = os.path.join(dest_home, FROM_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        _link_new(path, json.dumps({"path": here[0], "machine": here[1]}).encode() + b"\n")
        return
    try:
        data = json.loads(os.read(fd, 4096))
        first = (data["path"], data["machine"])
    except (ValueError, KeyError, TypeError):
        return  # (not ours to judge: the store's own bookkeeping, damaged; nothing is refused for it)
    finally:
        os.close(fd)
    if first != here:
        where = first[0] + ("" if first[1] == here[1] else " on another machine")
        raise LedgerError(f"the store already holds the home {uid} pushed from {where}; {home} has the same id: "
                          "pushing would merge its runs into that home's", hint=COPIED_ID_HINT)

