"""`ledger push` into a directory store: the checks every push makes first, then the home's
files pushed under the store home's lock (the rules: ledger.store)."""

from __future__ import annotations

import os
import time

from ledger.errors import LedgerError
from ledger.store.destination import COPIED_ID_HINT, _check_pushed_from, open_store
from ledger.store.layout import HOMES_DIR, STORE_HINT, is_store
from ledger.store.pusher import _Pusher
from ledger.store.summary import Progress, PushSummary
from ledger.store.walk import ONCE, _Item, _Walk, push_in_order
from ledger.store.writes import _Lock, _mkdirs, _syncfs

LOCK_FILE = ".push.lock"


def push(home: str | os.PathLike[str], dest: str | os.PathLike[str], *,
         progress: Progress | None = None, full: bool = False) -> PushSummary:
    """Copy the home's records into the store at `dest` (see ledger.store); a PushSummary
    (its conflicts are listed there, not raised). `full`: compare every file again, whatever
    the last push verified. A store that is read-only or full is an Error naming it (issue
    32): what it held is kept, the files of the batch not yet in place are removed, and the
    next push resumes."""
    from ledger.errors import FULL, StorageError, storage_problem

    pending: list[tuple[str, str, bool]] = []
    try:
        return _push(home, dest, progress, full, pending)
    except OSError as exc:
        what = storage_problem(exc)
        if what is None:
            raise
        for tmp, _final, _replace in pending:  # (temporary names: never read, removed here)
            try:
                os.unlink(tmp)
            except OSError:
                pass
        where = f" ({exc.filename})" if exc.filename else ""
        raise StorageError(
            f"cannot push to the record store {os.path.abspath(os.fspath(dest))}: {what}{where}",
            hint=("free some space on the store's disk and push again: the files already pushed are whole and "
                  "kept, and the push resumes where it stopped" if what == FULL else
                  "mount the store read-write (or push to another store with --to), then push again; what the "
                  "store holds is unchanged")) from None


def pushable_home(home: str | os.PathLike[str]) -> tuple[str, tuple[str, str]]:
    """The home's absolute path and (real path, machine) after the checks every push makes
    before it writes anything (a home; not a store; its id made here, not copied)."""
    from ledger.home import check_home, home_origin, machine_id

    home_abs = os.path.abspath(os.path.expanduser(os.fspath(home)))
    check_home(home_abs)
    if is_store(home_abs):
        raise LedgerError(f"{home_abs} is a record store, not a home", hint="push a home: --home HOME")
    here = (os.path.realpath(home_abs), machine_id())
    origin = home_origin(home_abs)
    if origin is not None and origin != here:  # (before anything is written into the store)
        where = origin[0] + ("" if origin[1] == here[1] else " on another machine")
        raise LedgerError(f"the home {home_abs} has the id of the home at {where} (its home-id.json says so): "
                          "pushing would merge its runs into that home's in the store", hint=COPIED_ID_HINT)
    return home_abs, here


def pushed_home_uid(home_abs: str) -> str:
    from ledger.home import ensure_home_uid

    uid = ensure_home_uid(home_abs)
    if uid is None:
        raise LedgerError(f"the home {home_abs} has no id and cannot be given one (it is not writable)",
                          hint="run `ledger index` once as the home's owner (it writes home-id.json), then push again")
    return uid


def _push(home: str | os.PathLike[str], dest: str | os.PathLike[str], progress: Progress | None, full: bool,
          pending: list[tuple[str, str, bool]]) -> PushSummary:
    from ledger.home import HOME_ID_FILE

    t0 = time.perf_counter()
    home_abs, here = pushable_home(home)
    store = open_store(dest, home_abs)
    uid = pushed_home_uid(home_abs)
    dest_home = os.path.join(store, HOMES_DIR, uid)
    if os.path.realpath(dest_home) == os.path.realpath(home_abs):
        raise LedgerError(f"{home_abs} is the store's own copy of this home", hint="push the original home")

    if os.path.islink(dest_home):
        raise LedgerError(f"{dest_home} is a symlink (never followed)", hint=STORE_HINT)
    _mkdirs(dest_home)
    summary = PushSummary(home=home_abs, home_id=uid, dest=str(store))
    walk = _Walk(home_abs, summary.skipped)
    p = _Pusher(home_abs, dest_home, summary)
    p.pending = pending  # (push() removes what a failed batch left under temporary names)
    with _Lock(os.path.join(dest_home, LOCK_FILE)):
        _check_pushed_from(dest_home, home_abs, uid, here)
        p.full = full
        p.load_state()
        p.push(_Item(HOME_ID_FILE, ONCE))
        total = push_in_order(p, walk, summary, progress)
        p.flush()
        _syncfs(dest_home)  # (the links themselves)
        p.save_state()  # (only after everything it vouches for is on disk)
    if progress is not None:
        progress(total, total)
    summary.seconds = time.perf_counter() - t0
    return summary
