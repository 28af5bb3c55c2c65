"""The archive of the agents' own session logs (DESIGN §4b): a record, like a run's events.

New complete lines of each log file are copied, append-only, into
`<home>/sources/<client>/<path below the client's config dir>` (Claude:
`projects/<project>/<session>.jsonl` and `<session>/subagents/...`; Codex:
`sessions/YYYY/MM/DD/rollout-*.jsonl`, `archived_sessions/...`, and any other `*.jsonl`
there). An archive file is never rewritten: the clients delete or rewrite their logs, the
archive keeps what it saw.

Per log (its *key*: the path below the config dir; for a Codex rollout whose name holds its
thread's UUID the file name, so a rollout moved from sessions/ to archived_sessions/
continues where it was) one state file,
`sources/<client>/.state/<sha256(key)[:32]>.json`, written atomically, keeps:
- its generations: the archive file of each, its archived size, sha256 of its first 4 KiB
  (the prefix check) and of the 256 bytes before its end (the bytes the next append follows);
- per source path seen: size, mtime, inode and generation at the last import, so that an
  unchanged log costs one stat and no read.

A log that shrank, or whose archived bytes no longer match, starts a new generation
(`<name>.gen2.jsonl`, ...) counted as an evidence gap; earlier generations stay as they are.
Only complete lines are copied: a torn last line (a live session) waits for its newline.
Unreadable files, directories named like logs, FIFOs and symlinks (never followed) are skipped
and named; the import goes on.

A log's new complete lines are appended as one zstd frame per import (read in blocks of
BLOCK bytes: one read and one compression call for a log under 16 MiB). An import syncs once,
at its end (an fsync per log cost ~11 s per 2,000 new logs on a 2-core machine). A large
import (PARALLEL_MIN) on a machine with an idle second core forks one worker for about half
of the bytes: each log is written by one process only, the worker's summary comes back on a
pipe, and a worker that dies leaves its part to this process (what it wrote is adopted like
an interrupted import's).

This module holds the entry points (import_client, refresh, prepare_home). The rest:
logdirs (the clients and their config dirs), discovery and quickfile (finding the logs),
archiver (copying them in), archivefork (the worker), archiverepair (damage and leftovers),
archivestate (the state files), archiveformat (file names, frames, JSON), archivefiles
(file-system helpers), archivesummary (what an import reports).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

from ledger.errors import LedgerError
from ledger.sources import archivefiles
from ledger.sources.archiveformat import (
    CHANGED_FILE, IMPORTING_FILE, QUICK_FILE, ROOTS_FILE, SEEN_FILE, STATE_DIR, TREE_FILE, dumps,
)
from ledger.sources.archivefiles import FILE_MODE, mkdirs
from ledger.sources.archiver import Archiver
from ledger.sources.archivestate import imported_roots
from ledger.sources.archivesummary import ClientSummary
from ledger.sources.discovery import Tree, discover
from ledger.sources.logdirs import CLIENTS, Client, has_logs_dir
from ledger.sources.quickfile import Quick


class _Lock:
    """One importer per home at a time (two would append the same bytes twice)."""

    def __init__(self, sources_dir: Path, busy_ok: bool = False) -> None:
        self.path = sources_dir / ".lock"
        self.fd: int | None = None
        self.busy_ok = busy_ok  # raise BlockingIOError instead of waiting for another importer

    def __enter__(self) -> "_Lock":
        import fcntl

        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        fcntl.flock(self.fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if self.busy_ok else 0))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the lock


def prepare_home(home: Path) -> Path:
    """The home's sources/ directory, creating the home (0700) when missing, like `ledger run`;
    an existing directory that is not a ledger home is refused."""
    from ledger.home import HOME_HINT, home_problem

    why = home_problem(home)
    if why not in (None, "missing"):
        raise LedgerError(f"the ledger home {home} is {why}", hint=HOME_HINT)
    sources = Path(home) / "sources"
    mkdirs(sources)
    return sources


def refresh(home: Path, busy: Callable[[], None] | None = None, only: list[str] | None = None) -> list[ClientSummary]:
    """Bring every client that was imported into `home` up to date from the config dirs it was
    imported from (readers call this before indexing: after the first `ledger import`, every
    report is current). Only changed logs are read; an importer already at work (it holds the
    home's sources/.lock) is not waited for: what it archives is counted by the next reader,
    and `busy` is called (once) so that the reader can say its figures may be incomplete.
    `only` (absolute log paths: a status line's transcript): only those logs are brought up
    to date (see Quick.check), in the clients whose config dirs hold them; when no config dir
    holds them as written (another spelling of the path, a symlink), every log, as without."""
    out = []
    if not os.path.isdir(os.path.join(home, "sources")):
        return out
    clients = [(client, [r for r in map(Path, imported_roots(home, client)) if has_logs_dir(client, r)])
               for client in CLIENTS.values()]
    if only is not None:
        holding = [(client, roots) for client, roots in clients
                   if any(p.startswith(os.path.join(os.path.abspath(r), "")) for r in roots for p in only)]
        clients, only = (holding, only) if holding else (clients, None)
    for client, roots in clients:
        if roots:
            try:
                out.append(import_client(home, client, roots, busy_ok=True, only=only))
            except BlockingIOError:
                if busy is not None:
                    busy()
                    busy = None  # (said once)
                continue
    return out


def _first_import(client_dir: Path) -> bool:
    """Whether nothing was archived into the client's archive yet: no import finished writing
    (its change marker) nor left its seen cache (an interrupted one leaves its flag: see
    Archiver.recovering). Two stats: a reader's refresh never asks, an import asks once."""
    return not any(os.path.lexists(client_dir / name) for name in (CHANGED_FILE, SEEN_FILE))


def import_client(home: Path, client: Client, roots: list[Path],
                  progress: Callable[[int, int], None] | None = None, busy_ok: bool = False,
                  check: bool = False, fold: bool = False, only: list[str] | None = None) -> ClientSummary:
    """Archive the new bytes of `client`'s logs below each of `roots` (existing config dirs).
    `check` (`ledger import`; a reader's refresh does not): first check the archive files
    against their state and repair the damaged ones from their logs (Archiver.check_archives).
    `fold` (`ledger import`): a first import also folds what it archives for the index
    (ledger.sources.prefold); a reader's refresh never imports a first time. `only`: see
    refresh."""
    roots = [Path(os.path.abspath(r)) for r in roots]  # state keys are absolute paths
    summary = ClientSummary(client.name, roots=[str(r) for r in roots])
    sources = prepare_home(home)
    for d in (sources / client.name, sources / client.name / STATE_DIR):
        if os.path.islink(d):
            rel = os.path.relpath(d, home)
            raise LedgerError(f"{rel} is a symlink: ledger never writes through one",
                              hint=f"make {rel} a directory again (move its target's files into it)")
    with _Lock(sources, busy_ok):
        known = imported_roots(home, client)
        if any(str(r) not in known for r in roots):
            mkdirs(sources / client.name / STATE_DIR)
            archivefiles.write_atomic(sources / client.name / ROOTS_FILE, json.dumps(
                {"roots": known + [str(r) for r in roots if str(r) not in known]}, indent=1).encode() + b"\n")
        arch = Archiver(Path(home), client, summary)
        client_dir = arch.client_dir
        if fold and not arch.recovering and _first_import(client_dir):
            from ledger.sources import prefold

            if client.name in prefold.FOLDED:
                arch.fold = prefold.Fold(client.name)
        if arch.recovering:  # (an import died before its sync: what it left is adopted or removed)
            arch.leftovers()
        if check:
            arch.check_archives()
        quick_path = client_dir / QUICK_FILE
        names = [str(r) for r in roots]
        quick = None if client.key_by_name else Quick.load(quick_path, names)
        found = quick.check(summary, only) if quick is not None else None
        tree = None
        if found is None:  # (no quick file, or a directory changed: the walk)
            quick = None
            found = []
            tree = Tree(client_dir / TREE_FILE)
            seen = None if client.key_by_name else (lambda: arch.seen)
            for root in roots:  # (the logs unchanged since archived are counted, not returned)
                found.extend(discover(client, root, summary, tree, seen))
            # sessions/ before archived_sessions/ whatever the walk order: the first of a key wins
            rank = {sub: i for i, sub in enumerate(client.subdirs)}
            if len(rank) > 1:
                found.sort(key=lambda f: rank.get(f.rel.split("/", 1)[0], len(rank)))
        arch.run(found, progress)
        if arch.changed:
            # one sync for the whole import (an fsync per log cost ~11 s per 2,000 new logs),
            # then the files that trust it: the seen cache, the quick file and the change marker
            os.sync()
            mkdirs(client_dir / STATE_DIR)
            archivefiles.write_atomic(client_dir / SEEN_FILE, dumps(arch.seen), durable=False)
        elif arch.seen_dirty and os.path.isdir(client_dir / STATE_DIR):
            # (what the state files say already, durably: the cache needs no sync)
            archivefiles.write_atomic(client_dir / SEEN_FILE, dumps(arch.seen), durable=False)
        if tree is not None:
            tree.save()
            if not client.key_by_name and os.path.isdir(client_dir / STATE_DIR):
                quick = Quick.build(client, names, tree, arch.seen, arch.waiting_at)
                if quick is not None:
                    quick.save(quick_path)
                elif os.path.lexists(quick_path):
                    os.unlink(quick_path)
        elif quick.changed and quick.note(arch.seen, arch.waiting_at):
            quick.save(quick_path)
        if arch.changed:
            archivefiles.write_atomic(client_dir / CHANGED_FILE, f"{time.time_ns()}\n".encode(), durable=True)
        if arch.fold is not None:
            arch.fold.save(os.fspath(client_dir / STATE_DIR),
                           lambda p, b: archivefiles.write_atomic(p, b, durable=False))
        if arch.flagged:  # (everything this import wrote is on disk: the flag may go)
            os.unlink(client_dir / IMPORTING_FILE)
    return summary
