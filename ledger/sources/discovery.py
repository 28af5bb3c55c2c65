"""Finding a client's session logs below its config dirs (symlinks never followed), with the
kept listings of unchanged directories (Tree, `.state/tree.json`)."""

from __future__ import annotations

import operator
import os
import stat as stat_mod
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from ledger.sources import archivefiles
from ledger.sources.archiveformat import ZSTD_SUFFIX, dumps, loads
from ledger.sources.archivesummary import ClientSummary, Problem, Record
from ledger.sources.logdirs import Client


class Found(Record):
    __slots__ = ("root", "rel", "path", "st")

    def __init__(self, root: str, rel: str, path: str, st: os.stat_result) -> None:
        self.root = root
        self.rel = rel  # below the config dir, "/"-separated
        self.path = path  # absolute
        self.st = st


def discover(client: Client, root: Path, summary: ClientSummary, tree: "Tree | None" = None,
             seen: "Callable[[], Mapping[str, list[int]]] | None" = None) -> list[Found]:
    """The logs below `root`, symlinks never followed; problems go to `summary.skipped`.
    `tree`: the listings of directories unchanged since an earlier walk (see Tree).
    `seen` (the Archiver's seen cache, loaded when first needed; not for a client whose logs
    are keyed by name): a log whose size, mtime and inode are those it was archived whole at
    is counted unchanged in `summary` (files, unchanged) and not returned, as Archiver.run
    would do (most logs of a walk)."""
    found: list[Found] = []
    real_root = os.path.realpath(root)
    for sub in client.subdirs:
        top = os.path.join(root, sub)
        try:
            st = os.lstat(top)
        except FileNotFoundError:
            continue
        except OSError as exc:
            summary.skipped.append(Problem(top, f"unreadable ({exc.strerror})"))
            continue
        if stat_mod.S_ISLNK(st.st_mode):
            summary.skipped.append(Problem(top, _symlink_reason(top, real_root)))
            continue
        if not stat_mod.S_ISDIR(st.st_mode):
            summary.skipped.append(Problem(top, "not a directory"))
            continue
        found.extend(_walk(client, str(root), sub, real_root, summary, tree,
                           None if client.key_by_name else seen))
    return found


def _walk(client: Client, root: str, sub: str, real_root: str, summary: ClientSummary,
          tree: "Tree | None" = None, seen: "Callable[[], Mapping[str, list[int]]] | None" = None
          ) -> Iterator[Found]:
    # (every reader walks the config dirs: this loop is most of a warm `ledger report`)
    by_name = operator.attrgetter("name")
    stack = [sub]
    unchanged = 0  # (logs `seen` has as they are: counted, not yielded)
    while stack:
        rel_dir = stack.pop()
        path_dir = root + rel_dir if root.endswith("/") else f"{root}/{rel_dir}"  # (os.path.join's answer)
        st_dir = None
        if tree is not None:
            try:
                st_dir = os.lstat(path_dir)  # (before the listing: a change after it is seen next time)
            except OSError:
                pass
            cached = tree.walk_cached(path_dir, st_dir, rel_dir, root, seen) if st_dir is not None else None
            if cached is not None:
                logs, subdirs, same = cached
                unchanged += same
                if logs:
                    yield from logs
                stack.extend(reversed(subdirs))
                continue
        listed_ns = time.time_ns()
        try:
            with os.scandir(path_dir) as it:
                entries = list(it)
        except OSError as exc:
            summary.skipped.append(Problem(path_dir, f"unreadable directory ({exc.strerror})"))
            continue
        entries.sort(key=by_name)
        subdirs = []
        names = []
        plain = True  # only logs, plain subdirectories and other files: the listing may be kept
        for e in entries:
            name = e.name
            try:
                if e.is_symlink():
                    if e.is_dir() or client.wanted(name, f"{rel_dir}/{name}"):
                        summary.skipped.append(Problem(e.path, _symlink_reason(e.path, real_root)))
                        plain = False
                    continue
                if e.is_dir(follow_symlinks=False):
                    rel = f"{rel_dir}/{name}"
                    if client.wanted(name, rel):
                        summary.skipped.append(Problem(e.path, "a directory where a log file should be"))
                        plain = False
                    else:
                        subdirs.append(rel)
                    continue
                if not name.endswith((".jsonl", ".jsonl" + ZSTD_SUFFIX)):
                    continue  # (not a log whatever the client: no stat)
                rel = f"{rel_dir}/{name}"
                if not client.wanted(name, rel):
                    continue
                st = e.stat(follow_symlinks=False)
            except OSError as exc:
                summary.skipped.append(Problem(e.path, f"unreadable ({exc.strerror})"))
                plain = False
                continue
            if not stat_mod.S_ISREG(st.st_mode):
                summary.skipped.append(Problem(e.path, "not a regular file"))
                plain = False
                continue
            names.append(name)
            if seen is not None:
                was = seen().get(e.path)
                if (was is not None and was[0] == st.st_size and was[1] == st.st_mtime_ns
                        and was[2] == st.st_ino):
                    unchanged += 1
                    continue
            yield Found(root, rel, e.path, st)
        if tree is not None and plain and st_dir is not None:
            tree.keep(path_dir, st_dir, listed_ns, names, [d.rsplit("/", 1)[-1] for d in subdirs])
        stack.extend(reversed(subdirs))
    summary.files += unchanged
    summary.unchanged += unchanged


class Tree:
    """The listings of the config dirs' directories (`.state/tree.json`, a cache): a directory
    whose mtime and inode are those of its kept listing has the same entries (creating,
    removing or renaming an entry changes its directory's mtime), so a walk stats its logs
    without listing it again. A listing is kept only when the directory's mtime is older than
    the listing by RACY_NS (a change in the same clock tick would not move the mtime), and
    only for a directory holding nothing but logs, plain subdirectories and other files."""

    RACY_NS = 2_000_000_000

    def __init__(self, path: Path) -> None:
        self.path = path
        self.dirty = False
        try:
            data = loads(path.read_bytes())
            self.dirs: dict[str, list[Any]] = data["dirs"] if data.get("v") == 1 else {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            self.dirs = {}

    def walk_cached(self, path_dir: str, st: os.stat_result, rel_dir: str, root: str,
                    seen: "Callable[[], Mapping[str, list[int]]] | None" = None
                    ) -> tuple[list[Found], list[str], int] | None:
        """(the directory's logs, stat'ed now; its subdirectories; how many logs are unchanged
        since archived whole, left out of the logs: see discover) from the kept listing, or
        None when it must be listed."""
        kept = self.dirs.get(path_dir)
        if kept is None or kept[0] != st.st_mtime_ns or kept[1] != st.st_ino or not stat_mod.S_ISDIR(st.st_mode):
            return None
        logs = []
        same = 0
        lstat, is_reg = os.lstat, stat_mod.S_ISREG
        get = seen().get if seen is not None and kept[2] else None
        for name in kept[2]:
            path = f"{path_dir}/{name}"
            try:
                fst = lstat(path)
            except OSError:
                fst = None
            if fst is None or not is_reg(fst.st_mode):  # (cannot happen unless the mtime was set back)
                del self.dirs[path_dir]
                self.dirty = True
                return None
            if get is not None:
                was = get(path)
                if was is not None and was[0] == fst.st_size and was[1] == fst.st_mtime_ns and was[2] == fst.st_ino:
                    same += 1  # (most logs of a reader's walk: no Found made)
                    continue
            logs.append(Found(root, f"{rel_dir}/{name}", path, fst))
        return logs, [f"{rel_dir}/{d}" for d in kept[3]] if kept[3] else [], same

    def keep(self, path_dir: str, st: os.stat_result, listed_ns: int, logs: list[str], subdirs: list[str]) -> None:
        if st.st_mtime_ns + self.RACY_NS > listed_ns:
            if self.dirs.pop(path_dir, None) is not None:
                self.dirty = True
            return
        entry = [st.st_mtime_ns, st.st_ino, logs, subdirs]
        if self.dirs.get(path_dir) != entry:
            self.dirs[path_dir] = entry
            self.dirty = True

    def save(self) -> None:
        if self.dirty and os.path.isdir(self.path.parent):
            archivefiles.write_atomic(self.path, dumps({"v": 1, "dirs": self.dirs}), durable=False)
            self.dirty = False


def _symlink_reason(path: str, real_root: str) -> str:
    target = os.path.realpath(path)
    if target == real_root or target.startswith(real_root.rstrip(os.sep) + os.sep):
        return "a symlink (not followed; its target inside the config dir is archived on its own path)"
    return "a symlink pointing out of the config dir (not followed)"
