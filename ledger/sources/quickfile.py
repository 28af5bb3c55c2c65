"""The quick file (`.state/quick.bin`): the last walk's directories and logs with their stat,
so that a reader's refresh over an unchanged history stats them and reads nothing else."""

from __future__ import annotations

import json
import os
import stat as stat_mod
import sys
from pathlib import Path
from typing import Any, Mapping

from ledger.sources import archivefiles
from ledger.sources.archiveformat import dumps
from ledger.sources.archivesummary import ClientSummary
from ledger.sources.discovery import Found, Tree
from ledger.sources.logdirs import Client


def _entries(blob: bytes, path: bytes, prefix: bool) -> list[tuple[int, bytes]]:
    """(offset of the NUL before it, the entry) of each entry of `blob` (NUL-separated, a NUL
    at each end) equal to `path`, or starting with it (`prefix`). Found by the path's last
    part, then checked whole: every entry starts with the same config dir, which a search for
    the whole path compares again at each of them (~0.1 ms a search on 8,500 logs)."""
    cut = path.rstrip(b"/").rfind(b"/")
    tail = path[cut:] + (b"" if prefix else b"\0")
    out = []
    pos = blob.find(tail)
    while pos >= 0:
        start = pos - cut  # (where the entry starts, if this is one)
        if start >= 1 and blob[start - 1] == 0 and blob.startswith(path, start):
            out.append((start - 1, blob[start:blob.index(b"\0", start)]))
        pos = blob.find(tail, pos + 1)
    return out


class Quick:
    """The last walk in one file (`.state/quick.bin`, a cache), for a reader's refresh (issue
    15: a warm `ledger report`): every directory the walk visited, all of them kept listings
    (see Tree), and every log in them, each with its stat: a directory's mtime and inode, the
    size, mtime and inode at which a log was archived whole (the seen cache's signature) or
    found waiting for the end of its last line (what its state file says at that stat). When
    every directory is as it was, a walk would visit the same directories and list the same
    logs, so the logs whose stat differs are all there is to do: neither the listings nor the
    seen cache are read (on a 5,654-log history that was ~60 of the refresh's ~140 M
    instructions). A directory that differs (an entry added, removed, renamed) or any doubt
    sends the refresh to the walk, which writes the file again. Not used for a client whose
    logs are keyed by name (the walk order decides which copy of a log wins).

    Layout: a JSON header line {"v", "roots", "n"}; four columns of n little-endian int64
    (kind: root index << 2 | WAITING | DIR; size, -1 for none; mtime_ns; inode); the n paths,
    NUL-separated, in the file system's encoding."""

    VERSION = 1
    DIR = 1
    WAITING = 2

    def __init__(self, roots: list[str], ints: Any, paths: list[bytes] | None, blob: bytes = b"") -> None:
        self.roots = roots
        self.ints = ints  # array('q'): the four columns, n each
        self.n = len(ints) // 4
        # the paths: a list, or as the file holds them (NUL-separated) until a list is asked
        # for (a status line's check of one log finds its entries in the bytes: ~2 ms less)
        self._paths, self._blob = paths, blob
        self._found: dict[int, bytes] = {}  # entry -> path, of the entries _concerning found
        self.changed: list[int] = []  # entries whose log differed in check()

    @property
    def paths(self) -> list[bytes]:
        if self._paths is None:
            self._paths = self._blob.split(b"\0")  # (bytes: os.lstat takes them as they are)
        return self._paths

    def _path(self, i: int) -> bytes:
        return self._paths[i] if self._paths is not None else self._found[i]

    @classmethod
    def load(cls, path: str | Path, roots: list[str]) -> "Quick | None":
        from array import array

        try:
            with open(path, "rb") as f:
                data = f.read()
            start = data.index(b"\n") + 1
            meta = json.loads(data[:start])
            n = meta["n"]
            if meta.get("v") != cls.VERSION or meta.get("roots") != roots or not isinstance(n, int) or n <= 0:
                return None
            ints = array("q")
            ints.frombytes(memoryview(data)[start:start + 32 * n])
            if len(ints) != 4 * n or sys.byteorder != "little":
                return None
            blob = data[start + 32 * n:]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return cls(roots, ints, None, blob) if blob.count(b"\0") == n - 1 else None

    def check(self, summary: ClientSummary, only: list[str] | None = None) -> list[Found] | None:
        """The logs that differ from their entry, stat'ed now (counted in `summary` with the
        ones that do not), or None (nothing counted) when a directory differs.

        `only` (a status line: one session's transcript): the entries of those logs alone are
        checked, with the directories above them and below their session directories (a
        new subagent log changes one of them); None, the walk, when a log is not an entry."""
        n, ints = self.n, self.ints
        lstat, fmt, s_dir, s_reg = os.lstat, stat_mod.S_IFMT, stat_mod.S_IFDIR, stat_mod.S_IFREG
        changed: list[tuple[int, os.stat_result]] = []
        same = waiting = 0
        if only is None:
            cols = ints.tolist()
            kinds = cols[:n]
            entries: Any = enumerate(zip(self.paths, kinds, cols[n:2 * n], cols[2 * n:3 * n], cols[3 * n:]))
        else:
            picked = self._concerning(only)
            if picked is None:
                return None
            entries = [(i, (p, ints[i], ints[n + i], ints[2 * n + i], ints[3 * n + i])) for i, p in picked]
        for i, (path, kind, size, mtime, inode) in entries:
            try:
                st = lstat(path)
            except OSError:
                return None
            if kind & 1:  # a directory: as listed, or the walk decides
                if st.st_mtime_ns != mtime or st.st_ino != inode or fmt(st.st_mode) != s_dir:
                    return None
            elif fmt(st.st_mode) != s_reg:
                return None
            elif st.st_size == size and st.st_mtime_ns == mtime and st.st_ino == inode:
                same += 1
                if kind & 2:
                    waiting += 1
            else:
                changed.append((i, st))
        summary.files += same
        summary.unchanged += same
        summary.waiting += waiting
        self.changed = [i for i, _ in changed]
        prefixes = [r if r.endswith("/") else r + "/" for r in self.roots]
        found = []
        for i, st in changed:
            r = ints[i] >> 2
            path = os.fsdecode(self._path(i))
            found.append(Found(self.roots[r], path[len(prefixes[r]):], path, st))
        return found

    def _concerning(self, only: list[str]) -> list[tuple[int, bytes]] | None:
        """The entries check(only=...) looks at, (index, path) in the file's order, or None
        when one of the logs has none: found in the paths' bytes, not a list of them."""
        logs = {os.fsencode(p) for p in only}
        below = [p[:-6] + b"/" for p in logs if p.endswith(b".jsonl")]  # its session dir
        roots = tuple(os.fsencode(r.rstrip("/") + "/") for r in self.roots)  # (no entry is above a root)
        above = {p[:i] for p in logs for i in range(1, len(p)) if p[i] == 47 and p[:i].startswith(roots)}
        blob = b"\0" + (b"\0".join(self._paths) if self._paths is not None else self._blob) + b"\0"
        at: dict[int, bytes] = {}  # offset of the NUL before an entry -> its path
        for whole in logs | above:
            at.update(_entries(blob, whole, False))
        for prefix in below:
            at.update(_entries(blob, prefix, True))
        picked, i, last = [], 0, 0
        for pos in sorted(at):
            i += blob.count(b"\0", last, pos)  # (the entry's index: the NULs before it)
            last = pos
            path = at[pos]
            if path in above and path not in logs and not self.ints[i] & self.DIR:
                continue  # (a log named as a directory above: not one)
            picked.append((i, path))
        if not logs <= {p for _, p in picked}:
            return None
        self._found.update(picked)
        return picked

    def note(self, seen: Mapping[str, list[int]], waiting: Mapping[str, list[int]]) -> bool:
        """The entries of the logs check() found changed, as this import left them; whether
        any moved."""
        n = self.n
        moved = False
        for i in self.changed:
            path = os.fsdecode(self._path(i))
            sig, flag = seen.get(path), 0
            if sig is None:
                sig, flag = waiting.get(path), self.WAITING
            size, mtime, inode = sig if sig is not None else (-1, -1, -1)
            entry = (self.ints[i] & ~self.WAITING | flag, size, mtime, inode)
            if tuple(self.ints[i + k * n] for k in range(4)) != entry:
                for k in range(4):
                    self.ints[i + k * n] = entry[k]
                moved = True
        return moved

    @classmethod
    def build(cls, client: Client, roots: list[str], tree: Tree, seen: Mapping[str, list[int]],
              waiting: Mapping[str, list[int]]) -> "Quick | None":
        """The walk `discover` would do from `roots` over the kept listings, or None when a
        directory on it has no kept listing (it will be listed: nothing to vouch for)."""
        from array import array

        rows: list[tuple[int, int, int, int]] = []
        paths: list[bytes] = []
        fsencode = os.fsencode
        for r, root in enumerate(roots):
            for sub in client.subdirs:
                stack = [root + sub if root.endswith("/") else f"{root}/{sub}"]
                while stack:
                    path_dir = stack.pop()
                    kept = tree.dirs.get(path_dir)
                    if kept is None:
                        return None
                    rows.append((r << 2 | cls.DIR, -1, kept[0], kept[1]))
                    paths.append(fsencode(path_dir))
                    for name in kept[2]:
                        path = f"{path_dir}/{name}"
                        sig, flag = seen.get(path), 0
                        if sig is None:
                            sig, flag = waiting.get(path), cls.WAITING
                        rows.append((r << 2 | flag, *(sig if sig is not None else (-1, -1, -1))))
                        paths.append(fsencode(path))
                    stack.extend(f"{path_dir}/{d}" for d in reversed(kept[3]))
        if not paths:
            return None
        return cls(roots, array("q", [row[k] for k in range(4) for row in rows]), paths)

    def save(self, path: str | Path) -> None:
        blob = b"\0".join(self._paths) if self._paths is not None else self._blob
        head = dumps({"v": self.VERSION, "roots": self.roots, "n": self.n})
        archivefiles.write_atomic(path, head + self.ints.tobytes() + blob, durable=False)
