"""One push into a directory store: each file copied, extended, replaced, left or listed as a
conflict (the rules: ledger.store), and what the push verified kept for the next one."""

from __future__ import annotations

import errno
import os
import stat as stat_mod
import time
from typing import Any

from ledger.store.reads import (
    CHUNK, PREFIX_BYTES, TAIL_BYTES, _frames_end, _lines_end, _open_regular, _pread, _same_prefix, _sha, _whole_json)
from ledger.store.summary import PushSummary
from ledger.store.walk import FRAMES, LINES, ONCE, REPLACE, SOURCES, STATE_DIR, TERMINAL, _Item, _Walk
from ledger.store.writes import FILE_MODE, TMP_SUFFIX, _mkdirs, _syncfs, _write_all

STATE_FILE = ".push-state.json"  # in the store's copy of a home: what the last push verified
STATE_VERSION = 1
BATCH_FILES = 2000  # files written between two syncs of the destination
BATCH_BYTES = 256 << 20


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
