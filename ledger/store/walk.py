"""The home's record files, in the order a push takes them (runs, then the clients' archives),
and the walk both pushes (a directory store, a bucket) make of them."""

from __future__ import annotations

import os
from typing import Iterator, Protocol

from ledger.plainclass import Plain
from ledger.store.reads import _open_regular, _whole_json
from ledger.store.summary import Progress, PushSummary

RUNS = "runs"
SOURCES = "sources"
STATE_DIR = ".state"  # (ledger.sources.archiveformat.STATE_DIR: the archive's bookkeeping)
EVENTS = "events.jsonl"
TERMINAL = "terminal.json"
PROVIDER_SESSION = "provider-session.json"
RUN_FIRST = ("manifest.json", "context.json", PROVIDER_SESSION)  # pushed first; events, then the receipt last
ARCHIVE_SUFFIXES = (".jsonl", ".jsonl.zst")

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



class HomePusher(Protocol):
    """What push_in_order drives: the pusher of a directory store (ledger.store.pusher) or of a
    bucket (ledger.bucket.push)."""

    def push_run(self, rrel: str, walk: _Walk) -> None: ...

    def push_archive(self, item: _Item) -> str: ...

    def mark_changed(self, client: str) -> None: ...


def push_in_order(p: HomePusher, walk: _Walk, summary: PushSummary, progress: Progress | None) -> int:
    """Push the home's runs, then each client's archived logs (a client whose archive had bytes
    copied or extended is marked changed once its logs are pushed), with progress every 50;
    the total, for the last progress call once the push is done."""
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
        grew = False
        for item in items:
            if p.push_archive(item) in ("copied", "extended"):
                grew = True
            done += 1
            if progress is not None and done % 50 == 0:
                progress(done, total)
        if grew:
            p.mark_changed(client)
    return total
