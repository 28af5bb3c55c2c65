"""The central record store (issue 11): `ledger push` brings a home's records to one place.

    DEST/ledger-store.json        {"schema_version": 1, "kind": "ledger-store"}
    DEST/homes/<home id>/         a ledger home: home-id.json, runs/<xx>/<run id>/..., sources/...
    DEST/index/                   where the store's own SQLite index goes when no --db is named

Each home is pushed into the directory named by its id (ledger.home, `home-id.json`), so two
machines with the same home path never meet, and `ledger index --home DEST/homes/<id>` (or
`--home DEST`: every home of the store) reads a pushed home exactly as it reads the original.

The store is append-only, and a push is idempotent:
- a file missing in the store is copied (temporary name, synced, then linked into place:
  a file is whole or absent, 0600 in 0700 directories);
- an append-only file that grew (a run's events.jsonl, an archived session log) is extended
  with the new bytes only, and only when the store's bytes are exactly the home's first bytes
  (compared byte for byte). Only complete lines (zstd archives: complete frames) are pushed:
  a torn last line is still being written and waits for the next push;
- any other difference (a manifest or receipt that changed, a file that shrank, a store copy
  that is not a prefix) is a conflict: listed, never overwritten, never merged;
- provider-session.json is the one record file the home itself replaces (while its run is
  unsettled); the store follows it until the store's copy of the run holds a terminal.json;
- a settled file being written (terminal.json that is not yet whole JSON) and the blobs of an
  unsettled run (written just before its receipt) wait for a later push.

Not pushed: the index (index.sqlite and its locks), the archive's own bookkeeping
(`sources/<client>/.state/`: the roots it imports from are this machine's paths, and an index
of the store must never import the indexing machine's logs into it), staging entries (`.`
names in runs/). The store home gets its own change marker (`.state/changed`) whenever a
client's archive grew, which is what tells an index pass to look again.

What a push verified is kept in the store's copy of the home (`.push-state.json`, written
after everything it vouches for is synced): a settled run whose files (lstat: size, mtime,
inode) are as they were is not read again, nor is an archived log with the same inode, size
and mtime; a log that grew is taken to continue the store's copy when its first 4 KiB and the
256 bytes before the end pushed hash as before (the archive's own rule for the clients'
logs). `ledger push --full` compares every file byte for byte again.

Symlinks in the home are never followed (they are listed as skipped); a DEST inside the home,
a DEST that is a ledger home, or a non-empty directory that is not a store is refused.
Durability is batched: the files of a batch are synced with one syncfs() before they are
linked into place, and once more at the end (an fsync per file would cost ~5 ms each).
"""

from __future__ import annotations

import errno
import os
import stat as stat_mod
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ledger.errors import LedgerError
from ledger.plainclass import Plain

STORE_FILE = "ledger-store.json"
STORE_KIND = "ledger-store"
STORE_VERSION = 1
HOMES_DIR = "homes"
INDEX_DIR = "index"
LOCK_FILE = ".push.lock"
STATE_FILE = ".push-state.json"  # in the store's copy of a home: what the last push verified
FROM_FILE = ".pushed-from.json"  # in the store's copy of a home: the (path, machine) it is pushed from
COPIED_ID_HINT = ("this home carries a copy of another home's id (home-id.json copied with `cp -a` or rsync): "
                  "move its home-id.json aside and run `ledger index` (this home gets an id of its own), "
                  "then push again; the same goes for a home that was moved")
STATE_VERSION = 1
PREFIX_BYTES = 4096
TAIL_BYTES = 256
DIR_MODE = 0o700
FILE_MODE = 0o600
CHUNK = 1 << 20
BATCH_FILES = 2000  # files written between two syncs of the destination
BATCH_BYTES = 256 << 20
TMP_SUFFIX = ".push.tmp"

RUNS = "runs"
SOURCES = "sources"
STATE_DIR = ".state"  # (ledger.sources.archiveformat.STATE_DIR: the archive's bookkeeping)
EVENTS = "events.jsonl"
TERMINAL = "terminal.json"
PROVIDER_SESSION = "provider-session.json"
RUN_FIRST = ("manifest.json", "context.json", PROVIDER_SESSION)  # pushed first; events, then the receipt last
ARCHIVE_SUFFIXES = (".jsonl", ".jsonl.zst")

STORE_HINT = "choose an empty directory (or an existing ledger store) with --to or LEDGER_STORE"
CONFLICT_HINT = ("the store keeps what it received first and nothing was overwritten: compare the two copies "
                 "(`cmp HOME/PATH STORE/homes/ID/PATH`) and check the home with `ledger verify`")

Progress = Callable[[int, int], None]


# ---------------------------------------------------------------- what a store is

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


# ---------------------------------------------------------------- the summary

class PushSummary(Plain):
    """What a push did (a dataclass, written out: ledger.plainclass; a reader imports this
    module for expand_homes / index_base)."""

    __slots__ = ("home", "home_id", "dest", "copied", "extended", "replaced", "unchanged", "waiting", "bytes", "runs",
                 "conflicts", "skipped", "seconds")

    def __init__(self, home: str, home_id: str, dest: str, copied: int = 0, extended: int = 0, replaced: int = 0,
                 unchanged: int = 0, waiting: int = 0, bytes: int = 0, runs: int = 0,
                 conflicts: list[dict[str, str]] | None = None, skipped: list[dict[str, str]] | None = None,
                 seconds: float = 0.0) -> None:
        self.home = home
        self.home_id = home_id
        self.dest = dest
        self.copied = copied
        self.extended = extended
        self.replaced = replaced
        self.unchanged = unchanged
        self.waiting = waiting  # files held back until they are complete (see the module doc)
        self.bytes = bytes
        self.runs = runs
        self.conflicts: list[dict[str, str]] = [] if conflicts is None else conflicts
        self.skipped: list[dict[str, str]] = [] if skipped is None else skipped
        self.seconds = seconds

    def to_dict(self) -> dict[str, Any]:
        return {"home_id": self.home_id, "home": self.home, "dest": self.dest, "copied": self.copied,
                "extended": self.extended, "replaced": self.replaced, "unchanged": self.unchanged,
                "waiting": self.waiting, "bytes": self.bytes, "runs": self.runs, "conflicts": self.conflicts,
                "skipped": self.skipped, "seconds": round(self.seconds, 3)}

    def line(self) -> str:
        parts = [f"{self.copied:,} copied", f"{self.extended:,} extended"]
        if self.replaced:
            parts.append(f"{self.replaced:,} replaced")
        parts.append(f"{self.unchanged:,} unchanged")
        if self.waiting:
            parts.append(f"{self.waiting:,} waiting")
        parts.append(f"{len(self.conflicts):,} conflict" + ("" if len(self.conflicts) == 1 else "s"))
        if self.skipped:
            parts.append(f"{len(self.skipped):,} skipped")
        return (f"pushed home {self.home_id} ({self.runs:,} runs, {_size(self.bytes)} written) to {self.dest}: "
                + ", ".join(parts) + f" in {self.seconds:.1f} s")


_DAMAGE = {"the store's copy cannot be opened": "unreadable", "the store's copy is not a regular file": "not a regular file",
           "the store's copy changed after it was pushed": "changed in the store after it was pushed"}


def conflict_error(summary: PushSummary) -> LedgerError:
    """The error of a push with conflicts: the home's changed files, and the store's damaged
    copies named with the store's path and what is wrong with them."""
    home = [c for c in summary.conflicts if c.get("side") == "home"]
    store = [c for c in summary.conflicts if c.get("side") != "home"]
    parts, hints = [], []
    if home:
        n = len(home)
        parts.append(f"{n} file{'' if n == 1 else 's'} of the home differ{'s' if n == 1 else ''} from the store's copies")
        hints.append(CONFLICT_HINT)
    if store:
        where = os.path.join(summary.dest, HOMES_DIR, summary.home_id)
        n = len(store)
        kinds = sorted({"a symlink" if "symlink" in c["reason"] else
                        _DAMAGE.get(c["reason"].split(" (")[0], "changed in the store") for c in store})
        parts.append(f"the record store {where} is damaged: {n} of its copies {'is' if n == 1 else 'are'} "
                     f"not what was pushed ({', '.join(kinds)}; each listed above)")
        hints.append(f"restore {where} from a backup, or move it aside and push again")
    return LedgerError("; ".join(parts) + "; nothing was overwritten", hint="; ".join(hints))


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)  # pragma: no cover


# ---------------------------------------------------------------- the destination

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


# ---------------------------------------------------------------- the source home

ONCE, LINES, FRAMES, REPLACE = "once", "lines", "frames", "replace"


class _Item(Plain):
    __slots__ = ("rel", "kind", "ready")

    def __init__(self, rel: str, kind: str, ready: bool = True) -> None:
        self.rel = rel  # path below the home (and below the store's copy of it)
        self.kind = kind  # ONCE, LINES (events, plain archives), FRAMES (zstd archives), REPLACE
        self.ready = ready  # False: a blob of an unsettled run (waits for its receipt)


def _entries(path: str) -> list[os.DirEntry[str]]:
    with os.scandir(path) as it:
        return sorted(it, key=lambda e: e.name)


class _Walk:
    """The home's record files, in push order, without following a symlink."""

    def __init__(self, home: str, skipped: list[dict[str, str]]) -> None:
        self.home = home
        self.skipped = skipped

    def skip(self, rel: str, reason: str) -> None:
        self.skipped.append({"path": rel, "reason": reason})

    def listing(self, rel: str) -> list[os.DirEntry[str]]:
        try:
            return _entries(os.path.join(self.home, rel))
        except FileNotFoundError:
            return []
        except OSError as exc:
            self.skip(rel, f"cannot be listed ({exc.strerror})")
            return []

    def top(self, name: str) -> bool:
        p = os.path.join(self.home, name)
        if os.path.islink(p):
            self.skip(name, "a symlink: not followed")
            return False
        return os.path.isdir(p)

    def run_dirs(self) -> list[str]:
        out = []
        if not self.top(RUNS):
            return out
        for shard in self.listing(RUNS):
            if shard.name.startswith("."):
                continue  # (staging)
            srel = f"{RUNS}/{shard.name}"
            if shard.is_symlink():
                self.skip(srel, "a symlink: not followed")
                continue
            if not shard.is_dir(follow_symlinks=False):
                continue
            for run in self.listing(srel):
                if run.name.startswith("."):
                    continue
                rrel = f"{srel}/{run.name}"
                if run.is_symlink():
                    self.skip(rrel, "a symlink: not followed")
                elif run.is_dir(follow_symlinks=False) and run.name.startswith("run_"):
                    out.append(rrel)
        return out

    def run_listing(self, rrel: str) -> tuple[list[str], str | None]:
        """A run's files, and a signature of them (lstat of every file and directory; None
        when the run cannot be remembered as pushed: something in it is skipped)."""
        import hashlib

        files: list[str] = []
        skips = len(self.skipped)
        try:
            st = os.lstat(os.path.join(self.home, rrel))
        except OSError:
            return [], None
        sig = [f"{st.st_mtime_ns}:{st.st_ino}"]
        stack = [rrel]
        while stack:
            d = stack.pop()
            for e in self.listing(d):
                if e.name.startswith("."):
                    continue  # (a staging file being replaced)
                rel = f"{d}/{e.name}"
                if e.is_symlink():
                    self.skip(rel, "a symlink: not followed")
                elif e.is_dir(follow_symlinks=False):
                    stack.append(rel)
                elif e.is_file(follow_symlinks=False):
                    files.append(rel)
                else:
                    self.skip(rel, "not a regular file")
                    continue
                try:
                    est = e.stat(follow_symlinks=False)
                except OSError:
                    skips = -1
                    continue
                sig.append(f"{rel}:{est.st_size}:{est.st_mtime_ns}:{est.st_ino}")
        if len(self.skipped) != skips:
            return files, None
        return files, hashlib.sha256("|".join(sorted(sig)).encode()).hexdigest()[:32]

    def run_items(self, rrel: str, files: list[str]) -> list[_Item]:
        """A run's files: manifest, context, provider session, blobs, events, then the receipt."""
        names = {f[len(rrel) + 1:]: f for f in files}
        out = [_Item(names.pop(n), REPLACE if n == PROVIDER_SESSION else ONCE) for n in RUN_FIRST if n in names]
        last = [names.pop(n) for n in (EVENTS, TERMINAL) if n in names]
        if names:  # blobs: written just before the receipt, so pushed once the receipt is whole
            settled = any(f.endswith("/" + TERMINAL) for f in last) and self.whole(f"{rrel}/{TERMINAL}")
            out.extend(_Item(f, ONCE, ready=settled) for _, f in sorted(names.items()))
        out.extend(_Item(f, LINES if f.endswith("/" + EVENTS) else ONCE) for f in last)
        return out

    def whole(self, rel: str) -> bool:
        try:
            fd = _open_regular(os.path.join(self.home, rel))
        except OSError:
            return False
        try:
            return _whole_json(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)

    def archive_items(self) -> Iterator[tuple[str, list[_Item]]]:
        """(client, its archive files) per client directory of sources/."""
        if not self.top(SOURCES):
            return
        for client in self.listing(SOURCES):
            crel = f"{SOURCES}/{client.name}"
            if client.name.startswith("."):
                continue  # (the importer's lock)
            if client.is_symlink():
                self.skip(crel, "a symlink: not followed")
                continue
            if not client.is_dir(follow_symlinks=False):
                continue
            items: list[_Item] = []
            stack = [crel]
            while stack:
                d = stack.pop()
                for e in self.listing(d):
                    rel = f"{d}/{e.name}"
                    if d == crel and e.name == STATE_DIR:
                        continue  # the archive's bookkeeping: this machine's, not a record
                    if e.is_symlink():
                        self.skip(rel, "a symlink: not followed")
                    elif e.is_dir(follow_symlinks=False):
                        stack.append(rel)
                    elif e.name.endswith(ARCHIVE_SUFFIXES) and e.is_file(follow_symlinks=False):
                        items.append(_Item(rel, FRAMES if e.name.endswith(".zst") else LINES))
            yield client.name, sorted(items, key=lambda i: i.rel)


# ---------------------------------------------------------------- copying

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


class _Pusher:
    def __init__(self, home: str, dest_home: str, summary: PushSummary) -> None:
        self.home = home
        self.dest = dest_home
        self.s = summary
        self.pending: list[tuple[str, str, bool]] = []  # (temporary, final, replace) waiting for the sync
        self.pending_bytes = 0
        self.dirs: set[str] = set()
        self.safe: set[str] = set()  # store directories seen to be real directories
        # what the last push verified (see load_state): settled runs by signature, archive
        # files by their stat and the hashes of the bytes around the end pushed
        # (held_*: what the last push verified of files it then found changed in the store: kept
        # to say whose copy changed, never to skip one)
        self.old: dict[str, Any] = {"runs": {}, "files": {}, "held_runs": {}, "held_files": {}}
        self.new: dict[str, Any] = {"runs": {}, "files": {}, "held_runs": {}, "held_files": {}}
        self.full = False  # (--full: the last push's state says whose copy changed, never what to skip)
        self.as_pushed: str | None = None  # the settled run being pushed, when the home's is as last verified
        self.end = 0  # (the end pushed of the last append-only file: its store copy's size)
        self.changed_clients: set[str] = set()

    # -- per file
    def conflict(self, rel: str, reason: str, store: bool = True) -> None:
        """A file not pushed. `store`: what is wrong is the store's copy (a symlink, not a regular
        file, unreadable, or changed in the store while the home's file is as the last push
        verified it); else the home's file changed (a file written once, a log rewritten)."""
        self.s.conflicts.append({"path": rel, "reason": reason, "side": "store" if store else "home"})

    def changed_in_store(self, rel: str) -> bool:
        """The home's file is as the last push verified it (so a difference is the store's; kept
        for the next push, held_files, so that it still says so)."""
        ent = self.old["files"].get(rel) or self.old["held_files"].get(rel)
        if ent is not None:
            try:
                st = os.lstat(os.path.join(self.home, rel))
            except OSError:
                return False
            if [st.st_ino, st.st_size, st.st_mtime_ns] == ent[:3]:
                self.new["held_files"][rel] = ent
                return True
            return False
        return self.as_pushed is not None and rel.startswith(self.as_pushed + "/")

    def differs(self, rel: str, home_reason: str) -> None:
        if self.changed_in_store(rel):
            self.conflict(rel, "the store's copy changed after it was pushed (the home's file is as the last "
                               "push verified it)")
        else:
            self.conflict(rel, home_reason, store=False)

    # -- what the last push verified
    def load_state(self) -> None:
        import json

        try:
            fd = _open_regular(os.path.join(self.dest, STATE_FILE))
            try:
                doc = json.loads(_pread(fd, os.fstat(fd).st_size, 0))
            finally:
                os.close(fd)
        except (OSError, ValueError):
            return  # (none, or unreadable: everything is compared again)
        if isinstance(doc, dict) and doc.get("v") == STATE_VERSION and doc.get("home_id") == self.s.home_id:
            self.old = {k: doc.get(k) or {} for k in ("runs", "files", "held_runs", "held_files")}

    def save_state(self) -> None:
        import json
        import uuid

        path = os.path.join(self.dest, STATE_FILE)
        tmp = os.path.join(self.dest, f".{STATE_FILE}.{uuid.uuid4().hex[:12]}{TMP_SUFFIX}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        try:
            _write_all(fd, json.dumps({"v": STATE_VERSION, "home_id": self.s.home_id, **self.new},
                                      separators=(",", ":")).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)

    def push_run(self, rrel: str, walk: "_Walk") -> None:
        files, sig = walk.run_listing(rrel)
        verified = sig is not None and self.old["runs"].get(rrel) == sig
        self.as_pushed = rrel if verified or (sig is not None and self.old["held_runs"].get(rrel) == sig) else None
        if verified and not self.full:
            self.s.unchanged += len(files)  # (settled and untouched since the last push verified it)
            self.new["runs"][rrel] = sig
            return
        outcomes = [self.push(item) for item in walk.run_items(rrel, files)]
        if sig is not None and any(f.endswith("/" + TERMINAL) for f in files) and \
                all(o in ("copied", "extended", "unchanged", "replaced") for o in outcomes):
            self.new["runs"][rrel] = sig
        elif self.as_pushed is not None and "conflict" in outcomes:
            self.new["held_runs"][rrel] = sig

    def push_archive(self, item: _Item) -> str:
        """An archived log: untouched since the last push (same inode, size, mtime), nothing
        is read; else push() (which trusts the prefix hashes of the last push, see _prefix)."""
        rel = item.rel
        ent = self.old["files"].get(rel)
        if ent is not None and not self.full:
            try:
                st = os.lstat(os.path.join(self.home, rel))
            except OSError:
                st = None
            if st is not None and [st.st_ino, st.st_size, st.st_mtime_ns] == ent[:3]:
                self.s.unchanged += 1
                self.new["files"][rel] = ent
                return "unchanged"
        self.end = -1
        outcome = self.push(item)
        if outcome in ("copied", "extended", "unchanged") and self.end >= 0:
            try:
                fd = _open_regular(os.path.join(self.home, rel))
            except OSError:
                return outcome
            try:
                st = os.fstat(fd)
                end = self.end
                head = _sha(_pread(fd, min(PREFIX_BYTES, end), 0))
                tail = _sha(_pread(fd, min(TAIL_BYTES, end), end - min(TAIL_BYTES, end)))
            finally:
                os.close(fd)
            self.new["files"][rel] = [st.st_ino, st.st_size, st.st_mtime_ns, end, head, tail]
        return outcome

    def _prefix(self, rel: str, src: int, dst: int, have: int) -> bool:
        """The store's copy is the start of the home's file: by the hashes the last push kept
        (same inode, the store's copy still the size pushed, the first 4 KiB and the bytes
        before that end unchanged in the home), else compared byte for byte."""
        ent = self.old["files"].get(rel)
        if ent is not None and not self.full and ent[0] == os.fstat(src).st_ino and ent[3] == have:
            t = min(TAIL_BYTES, have)
            if _sha(_pread(src, min(PREFIX_BYTES, have), 0)) == ent[4] and _sha(_pread(src, t, have - t)) == ent[5]:
                return True
        return _same_prefix(dst, src, have)

    def push(self, item: _Item) -> str:
        """Push one file; what happened: copied, extended, replaced, unchanged, waiting, conflict."""
        rel = item.rel
        try:
            src = _open_regular(os.path.join(self.home, rel))
        except FileNotFoundError:
            return "gone"  # (a staging file renamed meanwhile: the next push sees its result)
        except OSError as exc:
            self.s.skipped.append({"path": rel, "reason": f"cannot be read ({exc.strerror})"})
            return "skipped"
        try:
            return self._push(item, src)
        finally:
            os.close(src)

    def _push(self, item: _Item, src: int) -> str:
        rel = item.rel
        size = os.fstat(src).st_size
        target = os.path.join(self.dest, rel)
        bad = self._symlinked(os.path.dirname(rel))
        if bad is not None:
            self.conflict(rel, f"the store's {bad} is a symlink (never followed)")
            return "conflict"
        try:
            dst = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            dst = None
        except OSError as exc:
            self.conflict(rel, f"the store's copy cannot be opened ({exc.strerror}; a symlink is never followed)")
            return "conflict"
        if dst is None:
            return self._new(item, src, size, target)
        try:
            dst_st = os.fstat(dst)
            if not stat_mod.S_ISREG(dst_st.st_mode):
                self.conflict(rel, "the store's copy is not a regular file")
                return "conflict"
            have = dst_st.st_size
            if item.kind in (ONCE, REPLACE):
                if have == size and _same_prefix(src, dst, size):
                    self.s.unchanged += 1
                    return "unchanged"
                if rel.endswith(".json") and not _whole_json(src, size):
                    self.s.waiting += 1  # (a receipt being written in place)
                    return "waiting"
                if item.kind == REPLACE and not os.path.lexists(os.path.join(os.path.dirname(target), TERMINAL)):
                    self._copy_new(src, size, target, replace=True)
                    self.s.replaced += 1
                    return "replaced"
                self.differs(rel, "differs from the store's copy (a file written once was changed in the home)")
                return "conflict"
            # append-only: the store's bytes must be the start of the home's
            if have > size or not self._prefix(rel, src, dst, have):
                self.differs(rel, "the store's copy is not the start of the home's file "
                                  "(the home's file was rewritten or shrank)")
                return "conflict"
            end = _lines_end(src, have, size) if item.kind == LINES else _frames_end(src, have, size)
            if end <= have:
                self.end = have
                self.s.unchanged += 1
                return "unchanged"
            self.end = end
            self._extend(src, have, end, target)
            self.s.extended += 1
            return "extended"
        finally:
            if dst is not None:
                os.close(dst)

    def _new(self, item: _Item, src: int, size: int, target: str) -> str:
        if not item.ready:
            self.s.waiting += 1  # (a blob of an unsettled run: its receipt follows it)
            return "waiting"
        if item.kind == LINES:
            end = _lines_end(src, 0, size)
        elif item.kind == FRAMES:
            end = _frames_end(src, 0, size)
        else:
            end = size
            if item.rel.endswith(".json") and not _whole_json(src, size):
                self.s.waiting += 1  # (a receipt being written: whole on the next push)
                return "waiting"
        if end == 0 and size and item.kind in (LINES, FRAMES):
            self.s.waiting += 1  # (only a torn first line or frame so far)
            return "waiting"
        self.end = end
        self._copy_new(src, end, target)
        self.s.copied += 1
        return "copied"

    def _symlinked(self, rel_dir: str) -> str | None:
        """The first directory on the way to `rel_dir` in the store that is a symlink, else None."""
        parts = rel_dir.split("/") if rel_dir else []
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub in self.safe:
                continue
            try:
                st = os.lstat(os.path.join(self.dest, sub))
            except FileNotFoundError:
                return None  # (created below, as a directory)
            if not stat_mod.S_ISDIR(st.st_mode):
                return sub
            self.safe.add(sub)
        return None

    # -- writes
    def _dir(self, path: str) -> None:
        if path not in self.dirs:
            _mkdirs(path)
            self.dirs.add(path)

    def _copy_new(self, src: int, end: int, target: str, replace: bool = False) -> None:
        import uuid

        self._dir(os.path.dirname(target))
        tmp = f"{os.path.dirname(target)}/.{os.path.basename(target)}.{uuid.uuid4().hex[:12]}{TMP_SUFFIX}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        try:
            os.fchmod(fd, FILE_MODE)
            pos = 0
            while pos < end:
                chunk = os.pread(src, min(CHUNK, end - pos), pos)
                if not chunk:
                    raise OSError(errno.EIO, f"{target}: the home's file shrank while it was copied")
                _write_all(fd, chunk)
                pos += len(chunk)
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        os.close(fd)
        self.pending.append((tmp, target, replace))
        self.pending_bytes += end
        self.s.bytes += end
        self._maybe_flush()

    def _extend(self, src: int, start: int, end: int, target: str) -> None:
        # O_APPEND after the prefix check, under the push lock: nobody else appends here
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            pos = start
            while pos < end:
                chunk = os.pread(src, min(CHUNK, end - pos), pos)
                if not chunk:
                    raise OSError(errno.EIO, f"{target}: the home's file shrank while it was copied")
                _write_all(fd, chunk)
                pos += len(chunk)
        except OSError:
            # (a full store, issue 32): cut the store's copy back to the whole lines it had, so
            # the next push extends it again instead of finding a torn line it never wrote
            try:
                os.ftruncate(fd, start)
            except OSError:
                pass
            raise
        finally:
            os.close(fd)
        self.pending_bytes += end - start
        self.s.bytes += end - start
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if len(self.pending) >= BATCH_FILES or self.pending_bytes >= BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        """Sync the batch's bytes, then link its new files into place (never over a file)."""
        if not self.pending and not self.pending_bytes:
            return
        _syncfs(self.dest)
        for tmp, final, replace in self.pending:
            if replace:
                os.replace(tmp, final)
                continue
            try:
                os.link(tmp, final)
            except FileExistsError:
                # (only a push writes here, under the lock: a file that appeared meanwhile is
                # somebody else's; ours is dropped and the next push compares them)
                pass
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                    raise
                if not os.path.lexists(final):  # a share without hard links
                    os.rename(tmp, final)
                    continue
            os.unlink(tmp)
        self.pending.clear()
        self.pending_bytes = 0

    def mark_changed(self, client: str) -> None:
        """The store home's own change marker for a client's archive (ledger.index.logsource
        walks an archive only when its marker moved)."""
        import uuid

        d = os.path.join(self.dest, SOURCES, client, STATE_DIR)
        self._dir(d)
        tmp = os.path.join(d, f".changed.{uuid.uuid4().hex[:12]}{TMP_SUFFIX}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        try:
            _write_all(fd, f"{time.time_ns()}\n".encode())
        finally:
            os.close(fd)
        self.pending.append((tmp, os.path.join(d, "changed"), True))


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


# ---------------------------------------------------------------- entry point

def push(home: str | os.PathLike[str], dest: str | os.PathLike[str], *,
         progress: Progress | None = None, full: bool = False) -> PushSummary:
    """Copy the home's records into the store at `dest` (see the module doc); a PushSummary
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
        runs = walk.run_dirs()
        clients = list(walk.archive_items())
        total = len(runs) + sum(len(items) for _, items in clients)
        done = 0
        for rrel in runs:
            p.push_run(rrel, walk)
            summary.runs += 1
            done += 1
            if progress is not None and done % 50 == 0:
                progress(done, total)
        for client, items in clients:
            for item in items:
                if p.push_archive(item) in ("copied", "extended"):
                    p.changed_clients.add(client)
                done += 1
                if progress is not None and done % 50 == 0:
                    progress(done, total)
            if client in p.changed_clients:
                p.mark_changed(client)
        p.flush()
        _syncfs(dest_home)  # (the links themselves)
        p.save_state()  # (only after everything it vouches for is on disk)
    if progress is not None:
        progress(total, total)
    summary.seconds = time.perf_counter() - t0
    return summary
