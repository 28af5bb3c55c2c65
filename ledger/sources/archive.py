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
"""

from __future__ import annotations

import errno
import itertools
import json
import operator
import os
import stat as stat_mod
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from ledger.errors import LedgerError

DIR_MODE = 0o700
FILE_MODE = 0o600
PREFIX_BYTES = 4096
TAIL_BYTES = 256
CHUNK = 1 << 20
PARALLEL_MIN = 64 << 20  # a cold import of at least this many bytes (and files, FILE_COST each) forks a worker
FILE_COST = 64 << 10  # a new log's files cost about as much as compressing this many bytes
BLOCK = 1 << 24  # a log's new bytes are read (and compressed) in blocks of this size
STATE_DIR = ".state"
EARLY_SYNC_MIN = 32 << 20  # new bytes in one import before half of them are synced early (see Archiver.run)
STATED_MIN = 64  # logs to archive in one import before the state files are listed (see Archiver.stated)
STATE_VERSION = 1


# ---------------------------------------------------------------- records

class _Record:
    """A record class as @dataclass makes it (fields set by __init__, ==, repr, to_plain for
    JSON) but written out: a dataclass compiles its methods when its module is imported, and
    this module's six cost ~3 ms of every reader's start (issue 15: a warm `ledger report`)."""

    __slots__: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # (mutable, as a dataclass without frozen)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={getattr(self, k)!r}' for k in self.__slots__)})"

    def to_plain(self) -> dict[str, Any]:
        """dataclasses.asdict: the fields, records and lists of records within made plain."""
        return {k: _plain(getattr(self, k)) for k in self.__slots__}


def _plain(v: Any) -> Any:
    if isinstance(v, _Record):
        return v.to_plain()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


# ---------------------------------------------------------------- clients and where they log

class Client(_Record):
    __slots__ = ("name", "label", "subdirs", "env_var", "defaults", "prefix", "key_by_name", "env_subdir", "log_dir",
                 "zstd", "name_prefix")

    def __init__(self, name: str, label: str, subdirs: tuple[str, ...], env_var: str, defaults: tuple[str, ...],
                 prefix: str = "", key_by_name: bool = False, env_subdir: str = "", log_dir: str = "",
                 zstd: bool = False, name_prefix: str = "") -> None:
        set_ = object.__setattr__
        set_(self, "name", name)
        set_(self, "label", label)
        set_(self, "subdirs", subdirs)  # below the config dir, in priority order (first wins a key)
        set_(self, "env_var", env_var)
        set_(self, "defaults", defaults)  # config dirs tried when env_var is unset ("~" expanded)
        set_(self, "prefix", prefix)  # a log's file name starts with it
        # the file name alone identifies a log when it is the client's own name for it (Codex:
        # `rollout-<time>-<uuid>.jsonl`, moved from sessions/ to archived_sessions/); any other
        # name: its path below the config dir
        set_(self, "key_by_name", key_by_name)
        set_(self, "env_subdir", env_subdir)  # the config dir below env_var's dir ($GEMINI_CLI_HOME/.gemini)
        set_(self, "log_dir", log_dir)  # a log lies in (or below) a directory of this name (Gemini: chats/)
        set_(self, "zstd", zstd)  # a log may be a whole zstd file `<name>.jsonl.zst` (Codex compresses cold rollouts)
        set_(self, "name_prefix", name_prefix)  # the client's own log names start with it (key_by_name)

    def __setattr__(self, name: str, value: Any) -> None:  # (frozen: CLIENTS are constants)
        raise AttributeError(f"cannot assign to field {name!r}")

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, k) for k in self.__slots__))

    def wanted(self, name: str, rel: str | None = None) -> bool:
        if self.log_dir and rel is not None and f"/{self.log_dir}/" not in f"/{rel}":
            return False
        if self.zstd and name.endswith(ZSTD_SUFFIX):
            name = name[:-len(ZSTD_SUFFIX)]
        return name.endswith(".jsonl") and name.startswith(self.prefix)

    def key(self, rel: str) -> str:
        if self.zstd and rel.endswith(ZSTD_SUFFIX):
            rel = rel[:-len(ZSTD_SUFFIX)]  # (its lines are the plain log's: one log, one archive)
        name = rel.rsplit("/", 1)[-1]
        return name if self.key_by_name and name.startswith(self.name_prefix) else rel


CLIENTS: dict[str, Client] = {
    "claude": Client("claude", "Claude Code", ("projects",), "CLAUDE_CONFIG_DIR", ("~/.claude", "~/.config/claude")),
    # every *.jsonl below sessions/ and archived_sessions/, as ccusage reads them (the client
    # names its rollouts `rollout-<time>-<uuid>.jsonl`; a copy renamed, or a peer's fixture,
    # `sessions/<project>/<name>.jsonl`, is a rollout all the same)
    "codex": Client("codex", "Codex", ("sessions", "archived_sessions"), "CODEX_HOME", ("~/.codex",),
                    key_by_name=True, zstd=True, name_prefix="rollout-"),
    # tmp/<project>/chats/session-*.jsonl, subagents in chats/<session>/<id>.jsonl
    "gemini": Client("gemini", "Gemini CLI", ("tmp",), "GEMINI_CLI_HOME", ("~/.gemini",), env_subdir=".gemini",
                     log_dir="chats"),
}


def default_roots(client: Client, env: Mapping[str, str] | None = None) -> list[Path]:
    """The config dirs to look in: $CLAUDE_CONFIG_DIR / $CODEX_HOME / $GEMINI_CLI_HOME/.gemini,
    else the defaults."""
    env = os.environ if env is None else env
    if env.get(client.env_var):
        return [Path(env[client.env_var]).expanduser() / client.env_subdir]
    home = env.get("HOME") or os.path.expanduser("~")
    return [Path(home) / d[2:] if d.startswith("~/") else Path(d) for d in client.defaults]


def has_logs_dir(client: Client, root: Path) -> bool:
    return any(os.path.isdir(root / sub) for sub in client.subdirs)


def clients_with_logs(env: Mapping[str, str] | None = None) -> list[str]:
    """The clients (their labels) whose logs `ledger import` would find on this machine."""
    return [c.label for c in CLIENTS.values() if any(has_logs_dir(c, root) for root in default_roots(c, env))]


def missing_home_hint() -> str:
    """The hint for a missing home: names `ledger import` when agent logs are here."""
    from ledger.home import missing_home_hint as hint

    return hint(clients_with_logs())


# ---------------------------------------------------------------- the summary

class Problem(_Record):
    __slots__ = ("path", "reason")

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason


class Gap(_Record):
    __slots__ = ("path", "archive", "generation", "reason")

    def __init__(self, path: str, archive: str, generation: int, reason: str) -> None:
        self.path = path
        self.archive = archive
        self.generation = generation
        self.reason = reason


class Repair(_Record):
    """An archive file written again from its log (ledger import, issue 26)."""

    __slots__ = ("archive", "log", "reason", "aside")

    def __init__(self, archive: str, log: str, reason: str, aside: str | None = None) -> None:
        self.archive = archive  # below sources/<client>/
        self.log = log  # the log it was copied from
        self.reason = reason  # what was wrong with it
        self.aside = aside  # where the damaged file was kept (below sources/<client>/), if it existed


class ClientSummary(_Record):
    __slots__ = ("client", "roots", "files", "unchanged", "new_files", "new_bytes", "read_bytes", "waiting",
                 "generations", "gaps", "skipped", "notes", "repaired")

    def __init__(self, client: str, roots: list[str] | None = None, files: int = 0, unchanged: int = 0,
                 new_files: int = 0, new_bytes: int = 0, read_bytes: int = 0, waiting: int = 0, generations: int = 0,
                 gaps: list[Gap] | None = None, skipped: list[Problem] | None = None,
                 notes: list[str] | None = None, repaired: list[Repair] | None = None) -> None:
        self.client = client
        self.roots = [] if roots is None else roots
        self.files = files  # logs found
        self.unchanged = unchanged  # logs skipped on their stat alone
        self.new_files = new_files  # logs archived for the first time
        self.new_bytes = new_bytes  # bytes appended to the archive
        self.read_bytes = read_bytes  # bytes read from the logs (new bytes plus prefix/tail checks)
        self.waiting = waiting  # logs whose last line is torn (a live session): it waits for its newline
        self.generations = generations  # new generations (each an evidence gap)
        self.gaps: list[Gap] = [] if gaps is None else gaps
        self.skipped: list[Problem] = [] if skipped is None else skipped
        self.notes: list[str] = [] if notes is None else notes
        self.repaired: list[Repair] = [] if repaired is None else repaired

    def to_dict(self) -> dict[str, Any]:
        return _printable(self.to_plain())


def _printable(obj: Any) -> Any:
    """Paths may hold bytes that are not UTF-8 (surrogate escapes): shown as \\udcXX in JSON."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
            return obj
        except UnicodeEncodeError:
            return obj.encode("utf-8", "surrogatepass").decode("utf-8", "backslashreplace")
    if isinstance(obj, dict):
        return {k: _printable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_printable(v) for v in obj]
    return obj


# ---------------------------------------------------------------- discovery

class Found(_Record):
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
            data = _loads(path.read_bytes())
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
            _write_atomic(self.path, _dumps({"v": 1, "dirs": self.dirs}), durable=False)
            self.dirty = False


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

    def __init__(self, roots: list[str], ints: Any, paths: list[bytes]) -> None:
        self.roots = roots
        self.ints = ints  # array('q'): the four columns, n each
        self.paths = paths
        self.changed: list[int] = []  # entries whose log differed in check()

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
            paths = data[start + 32 * n:].split(b"\0")  # (bytes: os.lstat takes them as they are)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return cls(roots, ints, paths) if len(paths) == n else None

    def check(self, summary: ClientSummary) -> list[Found] | None:
        """The logs that differ from their entry, stat'ed now (counted in `summary` with the
        ones that do not), or None (nothing counted) when a directory differs."""
        n = len(self.paths)
        cols = self.ints.tolist()
        kinds, sizes, mtimes, inodes = cols[:n], cols[n:2 * n], cols[2 * n:3 * n], cols[3 * n:]
        lstat, fmt, s_dir, s_reg = os.lstat, stat_mod.S_IFMT, stat_mod.S_IFDIR, stat_mod.S_IFREG
        changed: list[tuple[int, os.stat_result]] = []
        same = waiting = 0
        i = -1
        for path, kind, size, mtime, inode in zip(self.paths, kinds, sizes, mtimes, inodes):
            i += 1
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
            r = kinds[i] >> 2
            path = os.fsdecode(self.paths[i])
            found.append(Found(self.roots[r], path[len(prefixes[r]):], path, st))
        return found

    def note(self, seen: Mapping[str, list[int]], waiting: Mapping[str, list[int]]) -> bool:
        """The entries of the logs check() found changed, as this import left them; whether
        any moved."""
        n = len(self.paths)
        moved = False
        for i in self.changed:
            path = os.fsdecode(self.paths[i])
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
        head = _dumps({"v": self.VERSION, "roots": self.roots, "n": len(self.paths)})
        _write_atomic(path, head + self.ints.tobytes() + b"\0".join(self.paths), durable=False)

def _symlink_reason(path: str, real_root: str) -> str:
    target = os.path.realpath(path)
    if target == real_root or target.startswith(real_root.rstrip(os.sep) + os.sep):
        return "a symlink (not followed; its target inside the config dir is archived on its own path)"
    return "a symlink pointing out of the config dir (not followed)"


# ---------------------------------------------------------------- files and modes

def _fsync_dir(path: str | Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask_strips(mode: int) -> bool:
    """Whether the process's umask removes bits of `mode` (then a new file or directory is
    chmod'ed to it; the usual umask removes none of 0700 and saves that call per file)."""
    if not _UMASK:
        try:
            with open("/proc/self/status", "rb") as f:
                line = next(ln for ln in f if ln.startswith(b"Umask:"))
            _UMASK.append(int(line.split()[1], 8))
        except (OSError, StopIteration, ValueError, IndexError):
            _UMASK.append(0o777)  # (unknown: always chmod)
    return bool(_UMASK[0] & mode)


_UMASK: list[int] = []


def _mkdirs(path: str | Path) -> None:
    """Directories 0700 whatever the umask (an archive holds prompts and code)."""
    missing = []
    p = os.path.abspath(path)
    while not os.path.lexists(p):
        missing.append(p)
        p = os.path.dirname(p)
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            os.chmod(d, DIR_MODE)
            continue
        if _umask_strips(DIR_MODE):
            os.chmod(d, DIR_MODE)


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


_TMP_SEQ = itertools.count()


def _write_atomic(path: str | Path, data: bytes, durable: bool = True) -> None:
    """tmp (0600, O_EXCL) + fsync + rename + fsync dir: a state file is whole or absent.
    `durable=False`: no fsync here (an import syncs once at its end, see import_client)."""
    path = os.fspath(path)
    parent, name = os.path.split(path)
    while True:  # (a name of this process's own: O_EXCL says if a dead process left one)
        tmp = f"{parent}/.{name}.{os.getpid()}-{next(_TMP_SEQ)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
            break
        except FileExistsError:
            continue
    try:
        try:
            if _umask_strips(FILE_MODE):
                os.fchmod(fd, FILE_MODE)
            _write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:  # (a full disk fails the write: the tmp is ours, never left behind)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        _fsync_dir(parent)


def _sha(data: bytes) -> str:
    import hashlib  # (OpenSSL: ~11 M instructions that a reader's refresh, which hashes nothing, does without)

    return hashlib.sha256(data).hexdigest()


_EMPTY_SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"  # sha256 of no bytes


def _loads(data: bytes) -> Any:
    """orjson, or json for what it refuses (surrogate escapes of paths that are not UTF-8)."""
    import orjson

    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def _dumps(state: dict[str, Any]) -> bytes:
    """A state file's bytes: orjson, or json for what it refuses (a path with bytes that are not
    UTF-8, kept as surrogate escapes, is written as \\udcXX escapes)."""
    import orjson

    try:
        return orjson.dumps(state, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return json.dumps(state, separators=(",", ":")).encode("ascii") + b"\n"


def _pread_all(fd: int, n: int, offset: int) -> bytes:
    first = os.pread(fd, n, offset) if n > 0 else b""
    if len(first) == n or not first:  # (the usual case: one read, its bytes as they came, no copy)
        return first
    out = bytearray(first)
    while len(out) < n:
        chunk = os.pread(fd, n - len(out), offset + len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


# ---------------------------------------------------------------- state

def _state_path(client_dir: Path, key: str) -> str:
    import hashlib

    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return f"{client_dir}/{STATE_DIR}/{digest}.json"


def _fresh_state(client: Client, key: str) -> dict[str, Any]:
    return {"schema_version": STATE_VERSION, "client": client.name, "key": key, "generations": [], "sources": {}}


def _load_state(path: str | Path, client: Client, key: str) -> tuple[dict[str, Any], str | None]:
    """The log's state (fresh when none); a damaged state file is set aside, with a reason."""
    fresh = _fresh_state(client, key)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return fresh, None
    except OSError as exc:
        raise LedgerError(f"cannot read the archive state {path}: {exc.strerror}",
                          hint="check the permissions of the ledger home") from None
    try:
        raw = _pread_all(fd, os.fstat(fd).st_size, 0)
    finally:
        os.close(fd)
    try:
        state = json.loads(raw)
        if state.get("schema_version") != STATE_VERSION or state.get("key") != key:
            raise ValueError("not this log's state")
        for g in state["generations"]:
            g["archive"], g["size"], g["prefix_sha256"], g["tail_sha256"]  # noqa: B018 - shape check
        dict(state["sources"])
        return state, None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        path = Path(path)
        aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}-{os.urandom(3).hex()}")
        os.replace(path, aside)
        return fresh, f"its archive state was damaged ({type(exc).__name__}), set aside as {aside.name}"


PROBLEMS = "/problems"  # the index's log_state.source `<client>-log/problems`: its damaged archive files


def parse_problems(text: str | bytes) -> dict[str, list[Any]]:
    """The index's record of a client's damaged archive files: archive file -> [byte offset
    or None, reason] (anything unexpected: none)."""
    try:
        out = json.loads(text)["problems"]
    except (ValueError, KeyError, TypeError):
        return {}
    return out if isinstance(out, dict) else {}


def archive_reason(offset: int | None, reason: str) -> str:
    """How a damaged archive file is named by the index's passes, reports and `ledger runs`."""
    at = f" at byte {offset:,}" if isinstance(offset, int) else ""
    if reason.startswith(LINK_REASON):
        return f"damaged archive: {reason} (an evidence gap; make it a directory again)"
    return (f"damaged archive{at}: {reason} (an evidence gap; `ledger import` copies it again "
            "while the log still holds it)")


LINK_REASON = "a symlink inside the archive"  # (how the index and verify name one: never followed)


def recorded_archives(client_dir: str | Path) -> dict[str, int]:
    """archive file (below the client dir) -> the bytes its state file says it holds (a zstd
    generation's compressed size, a plain one's size): what `ledger verify` and the index
    compare the files with. Damaged or foreign state files are left out."""
    out: dict[str, int] = {}
    for name, state in iter_states(client_dir):
        for g in state.get("generations", ()):
            try:
                rel, n = g["archive"], g["csize"] if g.get("format") == ZSTD else g["size"]
            except (KeyError, TypeError):
                continue
            if isinstance(rel, str) and isinstance(n, int):
                out[rel] = n
    return out


def iter_states(client_dir: str | Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(file name, content) of each readable state file of a client's archive."""
    sdir = os.path.join(client_dir, STATE_DIR)
    try:
        names = sorted(os.listdir(sdir))
    except OSError:
        return
    for name in names:
        if len(name) != 37 or not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(sdir, name), "rb") as f:
                state = _loads(f.read())
        except (OSError, ValueError):
            continue
        if isinstance(state, dict) and state.get("schema_version") == STATE_VERSION:
            yield name, state


# ---------------------------------------------------------------- archiving

class Archiver:
    """One import of one client into one home (hold `lock()` around it)."""

    def __init__(self, home: Path, client: Client, summary: ClientSummary) -> None:
        self.home = home
        self.client = client
        self.summary = summary
        self.client_dir = self.home / "sources" / self.client.name
        self._seen: dict[str, list[int]] | None = None
        self.seen_dirty = False
        # log path -> [size, mtime_ns, inode] at which its state says it waits for the end of
        # its last line (what Quick keeps of this import's outcomes besides the seen cache)
        self.waiting_at: dict[str, list[int]] = {}
        self.changed = False
        # an earlier import did not reach its sync (its flag is still there): an archive file
        # shorter than its state is that crash's doing, not damage (see _open_archive)
        self.recovering = os.path.exists(self.client_dir / IMPORTING_FILE)
        self.flagged = False
        self.made: set[str] = set()  # directories this import made or found (see _mkdirs)
        self.safe: set[str] = set()  # archive directories found to be no symlinks (see unsafe)
        self.unsafe_dirs: dict[str, str] = {}  # ... and those that are, with the reason
        # the state files' names, listed once by a large import (a log without one is new: no
        # failing open per log); None: each log's is opened
        self.stated: set[str] | None = None
        # a first import's reducer fold, kept for the index's first pass (ledger.sources.prefold)
        self.fold: Any = None

    @property
    def seen(self) -> dict[str, list[int]]:
        """log path -> [size, mtime_ns, inode] it was archived whole at (SEEN_FILE), read when
        first needed (a reader's refresh that finds nothing new never needs it: see Quick)."""
        if self._seen is None:
            self._seen = _load_seen(self.client_dir)
        return self._seen

    @property
    def seen_loaded(self) -> bool:
        return self._seen is not None

    def begin_write(self) -> None:
        """Before the first byte this import writes: the flag that says a sync is pending."""
        if not self.flagged:
            self._safe(self.client_dir / STATE_DIR)
            _mkdirs(self.client_dir / STATE_DIR)
            _write_atomic(self.client_dir / IMPORTING_FILE, b"", durable=True)
            self.flagged = True

    def run(self, found: list[Found], progress: Callable[[int, int], None] | None = None) -> None:
        todo: list[tuple[Found, str]] = []
        seen_keys: dict[str, str] = {}
        for f in found:
            key = self.client.key(f.rel)
            first = seen_keys.setdefault(key, f.path)
            if first != f.path and self.client.key_by_name:
                # Codex: the same rollout in sessions/ and archived_sessions/: sessions/ wins
                self.summary.skipped.append(Problem(f.path, f"the same log is at {first} (that one is archived)"))
                continue
            if self.seen.get(f.path) == [f.st.st_size, f.st.st_mtime_ns, f.st.st_ino]:
                # (as _one would say, without the call: most logs of a reader's refresh)
                self.summary.files += 1
                self.summary.unchanged += 1
                continue
            todo.append((f, key))
        skipped = len(found) - len(todo)
        if len(todo) >= STATED_MIN:
            try:
                self.stated = set(os.listdir(self.client_dir / STATE_DIR))
            except FileNotFoundError:
                self.stated = set()
            except OSError:
                self.stated = None
        mine, theirs = self._split(todo)
        if self.fold is not None:
            self.fold.prefetch([f.path for f, _ in mine if self.fold.takes(f.st.st_size)],
                               lambda: _new_compressor().compress)
        child = self._fork(theirs) if theirs else None
        done = 0
        # halfway through a large import, the bytes written so far start for the disk (a sync
        # in a thread: the GIL is free while it waits) while the rest is compressed, so the
        # import's one sync at its end waits for the second half only (~0.1 s of a cold import)
        early = len(mine) // 2 if sum(f.st.st_size for f, _ in mine) >= EARLY_SYNC_MIN else -1
        for f, key in mine:
            if done == early:
                import threading

                threading.Thread(target=os.sync, name="ledger-early-sync", daemon=True).start()
            self._one_safe(f, key)
            done += 1
            if progress is not None:
                progress(skipped + done + (child.poll() if child else 0), len(found))
        if child is not None:
            self._join(child, theirs)
            if progress is not None:
                progress(len(found), len(found))

    def _one_safe(self, f: Found, key: str) -> None:
        self.summary.files += 1
        try:
            self._one(f, key)
        except OSError as exc:
            self.summary.skipped.append(Problem(f.path, f"unreadable ({exc.strerror or exc})"))
        except LedgerError as exc:  # this log's archive is damaged: the others go on
            self.summary.skipped.append(Problem(f.path, exc.message))

    # ---- two processes for a large import (issue 15: a cold import of a long history)
    def _split(self, todo: list[tuple[Found, str]]) -> tuple[list[tuple[Found, str]], list[tuple[Found, str]]]:
        """(this process's logs, a worker's): on a machine with a second core, a large import
        is shared by byte count (its cost is compressing the bytes and creating the archive
        and state files, ~equal per byte and per file); every log of one key stays in one
        process (they share a state file). Small imports stay in this process."""
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
        cost: dict[str, int] = {}
        for f, key in todo:
            if self.seen.get(f.path) != [f.st.st_size, f.st.st_mtime_ns, f.st.st_ino]:  # (unchanged: no cost)
                cost[key] = cost.get(key, 0) + f.st.st_size + FILE_COST
        total = sum(cost.values())
        if (cores < 2 or total < PARALLEL_MIN or not hasattr(os, "fork") or _busy(cores)
                or self.fold is not None):  # (a fold needs every line in one process: it uses a thread)
            return todo, []
        theirs_keys: set[str] = set()
        acc = 0
        for key, c in cost.items():  # (in the order of the walk: a worker's logs share directories)
            if acc >= total // 2:
                break
            theirs_keys.add(key)
            acc += c
        mine = [t for t in todo if t[1] not in theirs_keys]
        return mine, [t for t in todo if t[1] in theirs_keys]

    def _fork(self, part: list[tuple[Found, str]]) -> "_Worker | None":
        """A forked worker archiving `part` (its summary and seen entries come back on a pipe;
        it writes only its own logs' archive and state files)."""
        self.begin_write()  # (the flag is this process's to remove, after the one sync)
        r, w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            return None  # (no second process: this one archives everything)
        if pid == 0:  # the worker: never returns
            code = 1
            try:
                os.close(r)
                self.summary = ClientSummary(self.client.name)
                for f, key in part:
                    self._one_safe(f, key)
                    os.write(w, b".")  # (progress)
                out = {"summary": self.summary.to_plain(), "changed": self.changed, "seen_dirty": self.seen_dirty,
                       "seen": {f.path: self.seen[f.path] for f, _ in part if f.path in self.seen},
                       "waiting_at": self.waiting_at}
                _write_all(w, b"\n" + json.dumps(out).encode("ascii"))
                code = 0
            except BaseException:  # noqa: BLE001 - the parent archives this part itself
                pass
            finally:
                os._exit(code)
        os.close(w)
        os.set_blocking(r, False)
        return _Worker(pid, r)

    def _join(self, child: "_Worker", part: list[tuple[Found, str]]) -> None:
        """The worker's results merged into this import's; a worker that died is replaced by
        archiving its part here (what it archived of a log before dying is adopted like an
        interrupted import's: see _open_archive)."""
        data = child.finish()
        payload = data[data.find(b"\n") + 1:] if b"\n" in data else b""
        try:
            out = json.loads(payload) if child.status == 0 else None
        except ValueError:
            out = None
        if not isinstance(out, dict):
            for f, key in part:
                self._one_safe(f, key)
            return
        theirs = out["summary"]
        s = self.summary
        for name in ("files", "unchanged", "new_files", "new_bytes", "read_bytes", "waiting", "generations"):
            setattr(s, name, getattr(s, name) + theirs[name])
        s.gaps.extend(Gap(**g) for g in theirs["gaps"])
        s.skipped.extend(Problem(**p) for p in theirs["skipped"])
        s.notes.extend(theirs["notes"])
        s.repaired.extend(Repair(**r) for r in theirs["repaired"])
        self.seen.update(out["seen"])
        self.waiting_at.update(out["waiting_at"])
        self.changed = self.changed or out["changed"]
        self.seen_dirty = self.seen_dirty or out["seen_dirty"]

    def _one(self, f: Found, key: str) -> None:
        if self.seen.get(f.path) == [f.st.st_size, f.st.st_mtime_ns, f.st.st_ino]:
            self.summary.unchanged += 1  # (archived whole at this signature: the state agrees)
            return
        state_path = _state_path(self.client_dir, key)
        name = state_path[state_path.rfind("/") + 1:]
        if self.stated is not None and name not in self.stated:  # (a new log: no state to read)
            state, damaged = _fresh_state(self.client, key), None
        else:
            state, damaged = _load_state(state_path, self.client, key)
        seen = state["sources"].get(f.path)
        sig = {"size": f.st.st_size, "mtime_ns": f.st.st_mtime_ns, "inode": f.st.st_ino}
        if seen is not None and all(seen.get(k) == v for k, v in sig.items()) and seen.get("refused"):
            self.summary.skipped.append(Problem(f.path, seen["refused"]))  # (as it was: not read again)
            return
        if seen is not None and all(seen.get(k) == v for k, v in sig.items()):
            self.summary.unchanged += 1
            self.summary.waiting += bool(seen.get("pending_bytes"))
            if seen.get("pending_bytes"):
                self.waiting_at[f.path] = [sig["size"], sig["mtime_ns"], sig["inode"]]
            else:
                self.seen[f.path] = [sig["size"], sig["mtime_ns"], sig["inode"]]
                self.seen_dirty = True
            return
        try:
            src = os.open(f.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            reason = "a symlink (not followed)" if exc.errno == errno.ELOOP else f"unreadable ({exc.strerror})"
            self.summary.skipped.append(Problem(f.path, reason))
            return
        try:
            st = os.fstat(src)  # what was read is at least this: recorded as the log's signature
            if not stat_mod.S_ISREG(st.st_mode):
                self.summary.skipped.append(Problem(f.path, "not a regular file"))
                return
            sig = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}
            size = st.st_size
            if self.client.zstd and f.path.endswith(ZSTD_SUFFIX):
                try:
                    src, size = _inflate(src)  # (its lines, read like a plain log's; the signature stays the file's)
                except LogOverBound as exc:
                    self._refuse(f, state, state_path, name, sig, seen, exc.reason)
                    return
            gens = state["generations"]
            # a log never archived is read whole in one go (the copy starts from these bytes);
            # one that was is read from its archived end, after the prefix check's 4 KiB
            first = _pread_all(src, min(max(BLOCK, PREFIX_BYTES) if not gens else PREFIX_BYTES, size), 0)
            head = first[:PREFIX_BYTES]
            self.summary.read_bytes += len(first)
            current = seen.get("generation") if seen else None
            gen = self._matching(src, size, head, gens, current)
            gap_reason = None
            if gen is None and gens:
                gap_reason = self._why_not(src, size, head, gens, current)
            elif gen is None and damaged:
                gap_reason = damaged
            folding = self.fold is not None and not gens and self.fold.takes(size)
            copied, pending, refused = self._copy(src, f, size, gens, gen, first, folding)
            if copied and gen is None:
                gen = gens[-1]
                if gap_reason is not None:
                    self.summary.generations += 1
                    self.summary.gaps.append(Gap(f.path, gen["archive"], gen["generation"], gap_reason))
                else:
                    self.summary.new_files += 1
            if refused:
                self.summary.skipped.append(Problem(f.path, refused))
            elif pending:
                self.summary.waiting += 1
            state["sources"][f.path] = {**sig, "generation": gen["generation"] if gen else None,
                                        "pending_bytes": pending, "root": f.root, "rel": f.rel,
                                        **({"refused": refused} if refused else {})}
            self._mkdirs(os.path.dirname(state_path))
            _write_atomic(state_path, _dumps(state), durable=False)
            if self.stated is not None:
                self.stated.add(name)
            self.changed = True
            if not pending:
                self.seen[f.path] = [sig["size"], sig["mtime_ns"], sig["inode"]]
            elif not refused:
                self.waiting_at[f.path] = [sig["size"], sig["mtime_ns"], sig["inode"]]
        finally:
            os.close(src)

    def _refuse(self, f: Found, state: dict[str, Any], state_path: str, name: str, sig: dict[str, int],
                seen: dict[str, Any] | None, reason: str) -> None:
        """A log over a bound (ledger.sources.zframes): named, and remembered at its signature
        in its state file, so that the next import skips it on its stat alone (a zstd bomb is
        not decompressed again by every reader)."""
        self.summary.skipped.append(Problem(f.path, reason))
        self.begin_write()
        state["sources"][f.path] = {**sig, "generation": seen.get("generation") if seen else None,
                                    "pending_bytes": 0, "root": f.root, "rel": f.rel, "refused": reason}
        self._mkdirs(os.path.dirname(state_path))
        _write_atomic(state_path, _dumps(state), durable=False)
        if self.stated is not None:
            self.stated.add(name)
        self.changed = True

    def _matching(self, src: int, size: int, head: bytes, gens: list[dict[str, Any]],
                  current: int | None) -> dict[str, Any] | None:
        """The generation this log continues (the one it was last seen in first), or None."""
        order = sorted(gens, key=lambda g: (g["generation"] != current, -g["generation"]))
        for g in order:
            if self._continues(src, size, head, g):
                return g
        return None

    def _continues(self, src: int, size: int, head: bytes, g: dict[str, Any]) -> bool:
        if size < g["size"] or _sha(head[:min(PREFIX_BYTES, g["size"])]) != g["prefix_sha256"]:
            return False
        n = min(TAIL_BYTES, g["size"])
        if g["size"] <= PREFIX_BYTES:  # the tail lies in the head already read
            return _sha(head[g["size"] - n:g["size"]]) == g["tail_sha256"]
        tail = _pread_all(src, n, g["size"] - n)
        self.summary.read_bytes += len(tail)
        return _sha(tail) == g["tail_sha256"]

    def _why_not(self, src: int, size: int, head: bytes, gens: list[dict[str, Any]], current: int | None) -> str:
        g = next((g for g in gens if g["generation"] == current), gens[-1])
        if size < g["size"]:
            return f"shrank from {g['size']} to {size} bytes"
        if _sha(head[:min(PREFIX_BYTES, g["size"])]) != g["prefix_sha256"]:
            return "rewritten: its first bytes differ from the archive"
        return "rewritten: the bytes before the archived end differ from the archive"

    def _copy(self, src: int, f: Found, size: int, gens: list[dict[str, Any]], gen: dict[str, Any] | None,
              first: bytes, folding: bool = False) -> tuple[int, int, str | None]:
        """Append the complete lines after the generation's end, up to the log's `size` when it
        was opened (a new generation when `gen` is None and there is a complete line); returns
        (bytes copied, bytes of a torn line, why the copy stopped short). `first`: the log's
        bytes from 0, read already. A line longer than LEDGER_MAX_LINE_BYTES (a line still
        being written, or a file that is not JSONL) stops the copy before it: the log is
        archived up to that line, and the reading stops there (memory stays bounded).
        `folding`: the copied lines are also fed to the import's fold (one frame, see prefold)."""
        from ledger.sources.zframes import bound

        max_line = bound("LEDGER_MAX_LINE_BYTES")
        refused = None
        self.begin_write()
        dst = self._open_archive(gen, src) if gen is not None else None  # may adopt an interrupted append
        made = gen is None  # (a new archive file: its size is what this call writes)
        written = 0
        offset = gen["size"] if gen is not None else 0
        zstd = gen is None or gen.get("format") == ZSTD  # (new generations are zstd)
        copied = 0
        frame = None  # new bytes larger than a block: one frame streamed over several reads
        pending: bytes | bytearray = first[offset:] if offset < len(first) else b""
        pos = max(offset, len(first))
        last_line = b""  # the end of the copied bytes (the tail check hash is taken from it)
        try:
            while True:
                want = min(BLOCK, size - pos)
                chunk = _pread_all(src, want, pos) if want > 0 else b""
                pos += len(chunk)
                self.summary.read_bytes += len(chunk)
                done = len(chunk) < want or pos >= size  # (a log that shrank meanwhile ends early)
                if chunk:
                    if pending:
                        pending = (pending if isinstance(pending, bytearray) else bytearray(pending))
                        pending += chunk
                    else:
                        pending = chunk
                cut = pending.rfind(b"\n") + 1
                if cut:
                    if dst is None:
                        gen, dst = self._new_generation(f, gens)
                    view = memoryview(pending)[:cut]
                    if not zstd:
                        _write_all(dst, view)
                    else:
                        if done and frame is None and folding:
                            # (compressed ahead on other threads while the reducer reads the lines)
                            data = pending if cut == len(pending) else bytes(pending[:cut])
                            out = self.fold.compressed(f.path, data)
                            self.fold.feed(gen["archive"], data)
                            if out is None:
                                out = _compressor().compress(view)
                        elif done and frame is None:  # (the usual case: all new bytes in one read)
                            out = _compressor().compress(view)
                        else:
                            if folding:
                                self.fold.ok = False  # (never: a folded log fits one read)
                            frame = frame or _compressor().compressobj()
                            out = frame.compress(view)
                        _write_all(dst, out)
                        written += len(out)
                    copied += cut
                    last_line = bytes(view[-TAIL_BYTES:])
                    view.release()
                    pending = pending[cut:]
                if len(pending) > max_line:
                    refused = (f"a line longer than {max_line:,} bytes at byte {pos - len(pending):,} (a line still "
                               "being written, or not a JSONL log): archived up to it, not read past it "
                               "(LEDGER_MAX_LINE_BYTES)")
                    break
                if done:
                    break
            if copied:
                if frame is not None:
                    out = frame.flush()
                    _write_all(dst, out)
                    written += len(out)
                if zstd:
                    gen["csize"] = written if made else os.fstat(dst).st_size
                grown_from = gen["size"]
                gen["size"] += copied
                # the archive holds the log's first `size` bytes: the check hashes come from
                # the log (the archive may be compressed)
                if grown_from < PREFIX_BYTES:
                    gen["prefix_sha256"] = _sha(first[:min(PREFIX_BYTES, gen["size"])])
                if len(last_line) == TAIL_BYTES or gen["size"] <= TAIL_BYTES:
                    gen["tail_sha256"] = _sha(last_line if gen["size"] > TAIL_BYTES else first[:gen["size"]])
                else:
                    _hash_from(src, gen, first, prefix=False)
                self.summary.new_bytes += copied
        except BaseException:
            if folding:
                self.fold.ok = False  # (what it read may not be what the archive holds)
            raise
        finally:
            if dst is not None:
                if gen is not None:
                    fst = os.fstat(dst)
                    _note_sig(gen, fst)  # (ledger's own write: an explicit import stats it)
                    if folding and copied:
                        self.fold.wrote(gen["archive"], fst.st_size, fst.st_ino)
                os.close(dst)
        return copied, len(pending), refused

    def _new_generation(self, f: Found, gens: list[dict[str, Any]]) -> tuple[dict[str, Any], int]:
        """A new (zstd) generation of the log and its archive file, created empty and open for
        appending."""
        number = max((g["generation"] for g in gens), default=0) + 1
        z = ZSTD_SUFFIX
        rel = f.rel[:-len(z)] if f.rel.endswith(z) else f.rel  # (a compressed log: its plain name)
        stem = rel[: -len(".jsonl")]
        names = itertools.chain([rel + z] if number == 1 else [], [f"{stem}.gen{number}.jsonl{z}"],
                                (f"{stem}.gen{number}.{i}.jsonl{z}" for i in range(2, 1000)))
        for rel in names:
            target = os.path.join(self.client_dir, rel)
            self._mkdirs(os.path.dirname(target))
            try:
                # O_EXCL: an archive file is never reused; a name taken (by another log named
                # like a generation) moves on to the next one
                fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                             FILE_MODE)
            except FileExistsError:
                continue
            if _umask_strips(FILE_MODE):
                os.fchmod(fd, FILE_MODE)  # (made durable, with its directory entry, by the import's one sync)
            g = {"generation": number, "archive": rel, "format": ZSTD, "csize": 0, "size": 0,
                 "prefix_sha256": _EMPTY_SHA, "tail_sha256": _EMPTY_SHA, "source": f.path,
                 "created_at": _utc_now()}
            gens.append(g)
            return g, fd
        raise LedgerError(f"no free archive name for {f.path}", hint="run `ledger verify`")

    def unsafe(self, path: str | Path) -> str | None:
        """Why ledger must not write in the archive directory `path` (None: it may): a
        component of it below the home's sources/ is a symlink (issue 32: a file created
        there would land in the link's target, where no reader looks). Each directory is
        checked once per import."""
        d = os.fspath(path)
        base = os.fspath(self.home / "sources")
        todo = []
        while d.startswith(base + os.sep) and d not in self.safe:
            todo.append(d)
            d = os.path.dirname(d)
        for d in reversed(todo):
            why = self.unsafe_dirs.get(d)
            if why is None:
                try:
                    link = stat_mod.S_ISLNK(os.lstat(d).st_mode)
                except OSError:
                    link = False  # (missing: made by _mkdirs, as a directory)
                if not link:
                    self.safe.add(d)
                    continue
                rel = os.path.relpath(d, self.home)
                why = (f"its archive directory {rel} is a symlink (ledger never writes through one): not archived. "
                       f"Hint: make {rel} a directory again (move its target's files into it), then run "
                       "`ledger import`")
                self.unsafe_dirs[d] = why
                self.summary.skipped.append(Problem(d, why))
            return why
        return None

    def _safe(self, path: str | Path) -> None:
        why = self.unsafe(path)
        if why is not None:
            raise LedgerError(why.split(" Hint: ")[0], hint=why.split(" Hint: ")[-1])

    def _mkdirs(self, path: str | Path) -> None:
        """_mkdirs, once per directory and import (a directory holds many logs), never
        through a symlink (see unsafe)."""
        key = os.fspath(path)
        if key not in self.made:
            self._safe(key)
            try:  # (its parent made already, the usual case: one call)
                os.mkdir(key, DIR_MODE)
                if _umask_strips(DIR_MODE):
                    os.chmod(key, DIR_MODE)
            except FileExistsError:
                pass
            except FileNotFoundError:
                _mkdirs(key)
            self.made.add(key)

    def _open_archive(self, g: dict[str, Any], src: int) -> int:
        """The generation's archive file open for appending. A file deleted or cut short
        behind ledger's back is written again from the log `src`, which holds its bytes (it
        matched the generation's hashes: see _matching)."""
        path = self.client_dir / g["archive"]
        self._safe(path.parent)
        flags = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            if not self._repair(g, src, g.get("source") or "", "missing (deleted?)"):
                raise
            fd = os.open(path, flags)
        recorded = g["csize"] if g.get("format") == ZSTD else g["size"]
        actual = os.fstat(fd).st_size
        if actual < recorded and not self.recovering:
            os.close(fd)
            if not self._repair(g, src, g.get("source") or "",
                                f"truncated: {actual:,} of the {recorded:,} bytes recorded"):
                raise LedgerError(f"the archive file {path} is shorter than recorded ({actual} < {recorded} bytes)",
                                  hint="run `ledger verify`; the archive was changed outside ledger")
            fd = os.open(path, flags)
        if g.get("format") == ZSTD:
            return self._check_frames(fd, g, path)
        actual = os.fstat(fd).st_size
        if actual > g["size"]:
            # an import that died after appending and before its state was written: those
            # bytes are this log's next lines (complete ones are kept, a torn write is cut)
            extra = _pread_all(fd, actual - g["size"], g["size"])
            keep = extra.rfind(b"\n") + 1
            if keep < len(extra):
                os.ftruncate(fd, g["size"] + keep)
            g["size"] += keep
            _rehash(fd, g)
            self.summary.notes.append(f"{g['archive']}: kept {keep} bytes of an interrupted import")
        elif actual < g["size"] and not self.recovering:
            os.close(fd)
            raise LedgerError(f"the archive file {path} is shorter than recorded ({actual} < {g['size']} bytes)",
                              hint="run `ledger verify`; the archive was changed outside ledger")
        elif actual < g["size"]:
            # the previous import died before its sync: the state got to the disk and the
            # appended bytes did not. The archive's own complete lines are the truth, the rest
            # is copied again from the log (which still holds it: it matched the state's hashes)
            have = _pread_all(fd, actual, max(0, actual - CHUNK))
            keep = actual - (len(have) - (have.rfind(b"\n") + 1)) if b"\n" in have else 0
            if keep < actual:
                os.ftruncate(fd, keep)
            self.summary.notes.append(f"{g['archive']}: {g['size'] - keep} bytes recorded but not on disk "
                                      "(an import interrupted before its sync): copied again")
            g["size"] = keep
            _rehash(fd, g)
        return fd


    def _repair(self, g: dict[str, Any], src: int, log: str, reason: str) -> bool:
        """Write generation `g`'s archive file again from the log `src` when the log still
        holds its bytes (size, prefix and tail hashes as recorded); the damaged file, if any,
        is kept aside in `.state/damaged/`, and the generation remembers the repair
        (`repairs`). Whether it was repaired."""
        size = os.fstat(src).st_size
        head = _pread_all(src, min(PREFIX_BYTES, size), 0)
        if not self._continues(src, size, head, g):
            return False
        self.begin_write()
        path = os.path.join(self.client_dir, g["archive"])
        parent, name = os.path.split(path)
        self._mkdirs(parent)
        tmp = f"{parent}/.{name}.{os.getpid()}-{next(_TMP_SEQ)}.tmp"
        zstd = g.get("format") == ZSTD
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        try:
            frame = _compressor().compressobj() if zstd else None
            pos = 0
            while pos < g["size"]:
                chunk = _pread_all(src, min(BLOCK, g["size"] - pos), pos)
                if not chunk:
                    raise OSError(errno.EIO, f"{log}: shorter than it was a moment ago")
                pos += len(chunk)
                self.summary.read_bytes += len(chunk)
                _write_all(fd, frame.compress(chunk) if frame is not None else chunk)
            if frame is not None:
                _write_all(fd, frame.flush())
            os.fsync(fd)
            st = os.fstat(fd)
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        os.close(fd)
        aside = None
        if os.path.lexists(path):
            aside = f"{STATE_DIR}/damaged/{g['archive'].replace('/', '%')}.{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
            _mkdirs(self.client_dir / STATE_DIR / "damaged")
            os.replace(path, self.client_dir / aside)
        os.replace(tmp, path)
        _fsync_dir(parent)
        if zstd:
            g["csize"] = st.st_size
        _note_sig(g, st)
        g.setdefault("repairs", []).append({"at": _utc_now(), "reason": reason, "aside": aside})
        self.summary.repaired.append(Repair(g["archive"], log, reason, aside))
        self.changed = True
        return True

    def leftovers(self) -> None:
        """What an interrupted import (killed at any point) may have left, adopted or removed
        by the next import (it finds the flag of a sync still pending: every write of an
        import comes after that flag, see begin_write):
        - temporary files of atomic writes (`.<name>.<pid>-<n>.tmp`): removed (the lock is
          held: no other importer is writing);
        - an archive file no state file records (created, then the import died before it
          wrote the log's state): its whole frames are adopted as the first generation of the
          log its name belongs to (a torn frame is cut; an empty file is removed), so the next
          import continues it like any generation and no new generation (no gap) is made."""
        import re

        tmp = re.compile(r"^\..+\.[0-9]+-[0-9]+\.tmp$")
        recorded: set[str] = set()
        states: dict[str, tuple[str, dict[str, Any]]] = {}
        for name, state in iter_states(self.client_dir):
            states[state.get("key")] = (name, state)
            recorded.update(g.get("archive") for g in state.get("generations", ()))
        root = os.fspath(self.client_dir)
        for dirpath, dirnames, filenames in os.walk(root):
            if dirpath == root:
                dirnames[:] = [d for d in dirnames if d != STATE_DIR]
            elif dirpath == os.path.join(root, STATE_DIR):
                dirnames[:] = []
            if dirpath == root and os.path.isdir(os.path.join(root, STATE_DIR)):
                for n in os.listdir(os.path.join(root, STATE_DIR)):
                    if tmp.match(n):
                        self._remove(os.path.join(root, STATE_DIR, n))
            for n in filenames:
                path = os.path.join(dirpath, n)
                if tmp.match(n):
                    self._remove(path)
                    continue
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                if not n.endswith(".jsonl" + ZSTD_SUFFIX) or rel in recorded or ".gen" in n:
                    continue
                key = self.client.key(rel[:-len(ZSTD_SUFFIX)])
                name, state = states.get(key, (None, None))
                if state is not None and state.get("generations"):
                    continue  # (another copy of a log that has its archive: `ledger verify` names it)
                self._adopt(path, rel, key, state)

    def _remove(self, path: str) -> None:
        try:
            os.unlink(path)
        except OSError:
            return
        self.summary.notes.append(f"removed {os.path.relpath(path, self.client_dir)} (left by an interrupted import)")

    def _adopt(self, path: str, rel: str, key: str, state: dict[str, Any] | None) -> None:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            end, data = _complete_frames(_pread_all(fd, os.fstat(fd).st_size, 0))
            if not data:
                os.close(fd)
                fd = -1
                self._remove(path)
                return
            self.begin_write()
            if end < os.fstat(fd).st_size:
                os.ftruncate(fd, end)
            st = os.fstat(fd)
        finally:
            if fd >= 0:
                os.close(fd)
        state = state if state is not None else _fresh_state(self.client, key)
        g = {"generation": 1, "archive": rel, "format": ZSTD, "csize": end, "size": len(data),
             "prefix_sha256": _sha(data[:PREFIX_BYTES]), "tail_sha256": _sha(data[-TAIL_BYTES:]), "source": None,
             "created_at": _utc_now(), "adopted": True}
        _note_sig(g, st)
        state["generations"].append(g)
        state_path = _state_path(self.client_dir, key)
        self._mkdirs(os.path.dirname(state_path))
        _write_atomic(state_path, _dumps(state), durable=False)
        if self.stated is not None:
            self.stated.add(os.path.basename(state_path))
        self.changed = True
        self.summary.notes.append(f"{rel}: adopted {len(data):,} bytes left by an interrupted import")

    def check_archives(self) -> None:
        """`ledger import` (not a reader's refresh): every generation's archive file is
        stat'ed against its state; one that is missing, shorter than recorded, or changed
        since ledger last wrote it (its signature differs: then its frames are decoded and
        compared, as `ledger verify` does) is damaged, and written again from its log while
        the log still holds those bytes; else it is named (an evidence gap, not repaired)."""
        from ledger.sources.archivecheck import ArchiveCheck, check_file

        for name, state in iter_states(self.client_dir):
            dirty = False
            for g in state.get("generations", ()):
                path = os.path.join(self.client_dir, g["archive"])
                if self.unsafe(os.path.dirname(path)) is not None:
                    continue  # (named once for its directory; its logs are named as they come)
                recorded = g["csize"] if g.get("format") == ZSTD else g["size"]
                reason = None
                try:
                    st = os.lstat(path)
                except FileNotFoundError:
                    reason = f"missing (deleted?): its state records {recorded:,} bytes"
                else:
                    if not stat_mod.S_ISREG(st.st_mode):
                        reason = "not a regular file (a symlink?)"
                    elif st.st_size < recorded and self.recovering:
                        continue  # (an import that died before its sync: _open_archive copies the rest again)
                    elif st.st_size < recorded:
                        reason = f"truncated: {st.st_size:,} of the {recorded:,} bytes recorded"
                    elif g.get("file_sig") != [st.st_size, st.st_mtime_ns, st.st_ino]:
                        chk = ArchiveCheck()
                        check_file(path, g["archive"], st, g, chk)
                        bad = [p for p in chk.problems if p.offset is None or p.offset < recorded]
                        if not bad:
                            _note_sig(g, st)
                            dirty = True
                            continue
                        reason = str(bad[0].reason) + (f" at byte {bad[0].offset:,}" if bad[0].offset is not None else "")
                if reason is None:
                    continue
                if self._repair_from_logs(state, g, reason):
                    dirty = True
                else:
                    self.summary.skipped.append(Problem(path, f"a damaged archive file ({reason}); its log no longer "
                                                              "holds those bytes: not repaired (an evidence gap)"))
            if dirty:
                self.begin_write()
                _write_atomic(os.path.join(self.client_dir, STATE_DIR, name), _dumps(state), durable=False)
                self.changed = True

    def _repair_from_logs(self, state: dict[str, Any], g: dict[str, Any], reason: str) -> bool:
        paths = [p for p, seen in state.get("sources", {}).items() if seen.get("generation") == g["generation"]]
        for p in [g.get("source")] + paths:
            if not isinstance(p, str):
                continue
            try:
                src = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not stat_mod.S_ISREG(os.fstat(src).st_mode):
                    continue
                if self.client.zstd and p.endswith(ZSTD_SUFFIX):
                    try:
                        src, _ = _inflate(src)
                    except (OSError, LogOverBound):
                        continue
                if self._repair(g, src, p, reason):
                    return True
            finally:
                os.close(src)
        return False

    def _check_frames(self, fd: int, g: dict[str, Any], path: Path) -> int:
        """A zstd generation: complete frames past the recorded end (an import that died before
        writing its state) are adopted, a torn frame is cut; an archive shorter than recorded
        is damage, unless an import died before its sync (then its complete frames stand)."""
        actual = os.fstat(fd).st_size
        if actual == g["csize"]:
            return fd
        if actual < g["csize"] and not self.recovering:
            os.close(fd)
            raise LedgerError(f"the archive file {path} is shorter than recorded ({actual} < {g['csize']} bytes)",
                              hint="run `ledger verify`; the archive was changed outside ledger")
        start = g["csize"] if actual > g["csize"] else 0
        end, data = _complete_frames(_pread_all(fd, actual - start, start))
        keep = start + end
        if keep < actual:
            os.ftruncate(fd, keep)
        before = g["size"]
        g["size"] = (g["size"] if start else 0) + len(data)
        g["csize"] = keep
        if start:
            self.summary.notes.append(f"{g['archive']}: kept {len(data)} bytes of an interrupted import")
        else:
            self.summary.notes.append(f"{g['archive']}: {before - g['size']} bytes recorded but not on disk "
                                      "(an import interrupted before its sync): copied again")
        tail = data[-TAIL_BYTES:] if len(data) >= TAIL_BYTES or not start else None
        if tail is None:  # (the adopted part is shorter than the tail: read it back whole)
            tail = read_archive(path)[-TAIL_BYTES:]
        g["tail_sha256"] = _sha(tail)
        if g["size"] <= PREFIX_BYTES or not start:
            g["prefix_sha256"] = _sha(read_archive(path)[:PREFIX_BYTES])
        return fd


def _note_sig(g: dict[str, Any], st: os.stat_result) -> None:
    """The archive file's signature as ledger left it: an explicit import that finds it so
    does not decode it again (see Archiver.check_archives)."""
    g["file_sig"] = [st.st_size, st.st_mtime_ns, st.st_ino]


def _busy(cores: int) -> bool:
    """No core to spare: as many other tasks running right now as there are cores (the
    instantaneous count of /proc/loadavg; the minute's average would count the commands just
    before this one). A worker would then only share this process's CPU and add its own cost
    (~10 % more CPU for a cold import), so the import stays in one process."""
    try:
        with open("/proc/loadavg", "rb") as f:
            running = int(f.read().split()[3].split(b"/")[0])
        return running - 1 >= cores  # (this process is one of them)
    except (OSError, ValueError, IndexError):
        return False


class _Worker:
    """A forked archiving process: its pid and the read end of its pipe."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd
        self.data = bytearray()
        self.status: int | None = None

    def poll(self) -> int:
        """Logs the worker has finished so far (it writes a dot per log)."""
        try:
            while chunk := os.read(self.fd, 65536):
                self.data += chunk
        except BlockingIOError:
            pass
        return self.data.count(b".", 0, self.data.find(b"\n") if b"\n" in self.data else len(self.data))

    def finish(self) -> bytes:
        try:
            os.set_blocking(self.fd, True)
            while chunk := os.read(self.fd, 1 << 20):
                self.data += chunk
        finally:
            os.close(self.fd)
            _, status = os.waitpid(self.pid, 0)
            self.status = os.waitstatus_to_exitcode(status)
        return bytes(self.data)


ZSTD = "zstd"
ZSTD_SUFFIX = ".zst"
LEVEL = 3  # on transcripts: ~20 % of the bytes at ~275 MB/s (level 6: the same ratio at 60 MB/s)
FRAME_BLOCK = 1 << 17


_CCTX: list[Any] = []


def _compressor() -> Any:
    """One compression context for the process (making one per log costs ~30 us each)."""
    if not _CCTX:
        _CCTX.append(_new_compressor())
    return _CCTX[0]


def _new_compressor() -> Any:
    import zstandard  # (only an import that writes needs it)

    return zstandard.ZstdCompressor(level=LEVEL, write_checksum=True)  # (verify finds a damaged frame)


_NOW: list[Any] = [None, ""]


def _utc_now() -> str:
    """The current second, ISO 8601 UTC (formatted once per second: once per log of an import)."""
    t = int(time.time())
    if _NOW[0] != t:
        _NOW[:] = [t, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))]
    return _NOW[1]


def _complete_frames(data: bytes) -> tuple[int, bytes]:
    """(bytes of the complete zstd frames at the start of `data`, their content): a torn or
    damaged frame, or one over the bounds (ledger.sources.zframes), ends them."""
    from ledger.sources.zframes import leading

    return leading(data)


class LogOverBound(Exception):
    """A log (or its line) over one of the bounds of ledger.sources.zframes: skipped, named."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _inflate(fd: int) -> tuple[int, int]:
    """A whole-zstd log's content in an unlinked temporary file: (its fd, its size); `fd` is
    closed on success (on failure the caller's). Such a log is cold (Codex compresses rollouts
    untouched for 7 days), so this happens once per file: then its signature skips it. The
    content is streamed with the bounds of ledger.sources.zframes: a log that would grow past
    them (a zstd bomb) raises LogOverBound before its frame is decompressed."""
    import mmap
    import tempfile

    from ledger.sources import zframes

    size = os.fstat(fd).st_size
    if size == 0:
        raise OSError(errno.EIO, "not a whole zstd file: it is empty")
    with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as buf, tempfile.TemporaryFile() as tmp:
        end = 0
        try:
            for f, piece in zframes.inflate(buf, 0):
                if piece is not None:
                    tmp.write(piece)
                elif f.bad is not None:
                    raise OSError(errno.EIO, f"not a whole zstd file: the frame at byte {f.start:,} {f.bad}")
                else:
                    end = f.end
        except zframes.OverBound as exc:
            raise LogOverBound(exc.reason) from None
        if end != size:
            raise OSError(errno.EIO, "not a whole zstd file: its last frame is torn")
        tmp.flush()
        out = os.dup(tmp.fileno())
    os.close(fd)
    return out, os.fstat(out).st_size


def read_archive(path: str | os.PathLike[str], start: int = 0) -> bytes:
    """An archive file's content from byte `start` of the file: a `.zst` generation's complete
    frames decompressed (a torn last frame, being written, is left out), else the bytes."""
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read()
    if not os.fspath(path).endswith(ZSTD_SUFFIX):
        return data
    return _complete_frames(data)[1]


def _hash_from(src: int, g: dict[str, Any], head: bytes, prefix: bool) -> None:
    """The generation's check hashes from the log, which holds the archived bytes at the same
    offsets (that is what the checks verified before the copy)."""
    if prefix:
        g["prefix_sha256"] = _sha(head[:min(PREFIX_BYTES, g["size"])])
    t = min(TAIL_BYTES, g["size"])
    g["tail_sha256"] = _sha(_pread_all(src, t, g["size"] - t))


def _rehash(fd: int, g: dict[str, Any], prefix: bool = True) -> None:
    """The generation's check hashes, from the archive itself (what the next log must match)."""
    if prefix:
        g["prefix_sha256"] = _sha(_pread_all(fd, min(PREFIX_BYTES, g["size"]), 0))
    t = min(TAIL_BYTES, g["size"])
    g["tail_sha256"] = _sha(_pread_all(fd, t, g["size"] - t))


# ---------------------------------------------------------------- entry points

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
    _mkdirs(sources)
    return sources


ROOTS_FILE = f"{STATE_DIR}/roots.json"
TREE_FILE = f"{STATE_DIR}/tree.json"  # directory -> [mtime_ns, inode, logs, subdirectories] (a cache, see Tree)
SEEN_FILE = f"{STATE_DIR}/seen.json"  # log path -> [size, mtime_ns, inode] archived whole (a cache)
QUICK_FILE = f"{STATE_DIR}/quick.bin"  # the last walk's directories and logs with their stat (a cache, see Quick)
CHANGED_FILE = f"{STATE_DIR}/changed"  # rewritten after every import that archived anything
IMPORTING_FILE = f"{STATE_DIR}/importing"  # exists while an import's writes are not yet synced


def _load_seen(client_dir: Path) -> dict[str, list[int]]:
    """The seen cache; anything unexpected is an empty cache (the state files decide then)."""
    try:
        data = _loads((client_dir / SEEN_FILE).read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}  # the config dirs a client was imported from (refresh() reads them)


def imported_roots(home: Path, client: Client) -> list[str]:
    try:
        data = json.loads((Path(home) / "sources" / client.name / ROOTS_FILE).read_bytes())
    except (OSError, ValueError):
        return []
    return [r for r in data.get("roots", []) if isinstance(r, str)] if isinstance(data, dict) else []


def refresh(home: Path, busy: Callable[[], None] | None = None) -> list[ClientSummary]:
    """Bring every client that was imported into `home` up to date from the config dirs it was
    imported from (readers call this before indexing: after the first `ledger import`, every
    report is current). Only changed logs are read; an importer already at work (it holds the
    home's sources/.lock) is not waited for: what it archives is counted by the next reader,
    and `busy` is called (once) so that the reader can say its figures may be incomplete."""
    out = []
    if not os.path.isdir(os.path.join(home, "sources")):
        return out
    for client in CLIENTS.values():
        roots = [Path(r) for r in imported_roots(home, client)]
        roots = [r for r in roots if has_logs_dir(client, r)]
        if roots:
            try:
                out.append(import_client(home, client, roots, busy_ok=True))
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
                  check: bool = False, fold: bool = False) -> ClientSummary:
    """Archive the new bytes of `client`'s logs below each of `roots` (existing config dirs).
    `check` (`ledger import`; a reader's refresh does not): first check the archive files
    against their state and repair the damaged ones from their logs (Archiver.check_archives).
    `fold` (`ledger import`): a first import also folds what it archives for the index
    (ledger.sources.prefold); a reader's refresh never imports a first time."""
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
            _mkdirs(sources / client.name / STATE_DIR)
            _write_atomic(sources / client.name / ROOTS_FILE, json.dumps(
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
        found = quick.check(summary) if quick is not None else None
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
            _mkdirs(client_dir / STATE_DIR)
            _write_atomic(client_dir / SEEN_FILE, _dumps(arch.seen), durable=False)
        elif arch.seen_dirty and os.path.isdir(client_dir / STATE_DIR):
            # (what the state files say already, durably: the cache needs no sync)
            _write_atomic(client_dir / SEEN_FILE, _dumps(arch.seen), durable=False)
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
            _write_atomic(client_dir / CHANGED_FILE, f"{time.time_ns()}\n".encode(), durable=True)
        if arch.fold is not None:
            arch.fold.save(os.fspath(client_dir / STATE_DIR), lambda p, b: _write_atomic(p, b, durable=False))
        if arch.flagged:  # (everything this import wrote is on disk: the flag may go)
            os.unlink(client_dir / IMPORTING_FILE)
    return summary
