"""Repairing a damaged archive (issue 26): an archive file missing, cut short or changed
behind ledger's back is written again from its log while the log still holds its bytes, and
what an interrupted import left (bytes past the recorded end, unrecorded files, temporary
files) is adopted or removed."""

from __future__ import annotations

import errno
import os
import stat as stat_mod
import time
from pathlib import Path
from typing import Any

from ledger.errors import LedgerError
from ledger.sources import archivefiles
from ledger.sources.archiveformat import (
    CHUNK, PREFIX_BYTES, STATE_DIR, TAIL_BYTES, ZSTD, ZSTD_SUFFIX, LogOverBound, complete_frames,
    compressor, dumps, inflate, read_archive, sha, utc_now,
)
from ledger.sources.archivefiles import FILE_MODE, TMP_SEQ, fsync_dir, mkdirs, pread_all
from ledger.sources.archivestate import fresh_state, iter_states, note_sig, rehash, state_file_path
from ledger.sources.archivesummary import Problem, Repair


class RepairMixin:
    """The Archiver's repairs and recovery (ledger.sources.archiver): opening a generation for
    appending, checking every archive file (`ledger import`), adopting an interrupted import's
    leftovers."""

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
            extra = pread_all(fd, actual - g["size"], g["size"])
            keep = extra.rfind(b"\n") + 1
            if keep < len(extra):
                os.ftruncate(fd, g["size"] + keep)
            g["size"] += keep
            rehash(fd, g)
            self.summary.notes.append(f"{g['archive']}: kept {keep} bytes of an interrupted import")
        elif actual < g["size"] and not self.recovering:
            os.close(fd)
            raise LedgerError(f"the archive file {path} is shorter than recorded ({actual} < {g['size']} bytes)",
                              hint="run `ledger verify`; the archive was changed outside ledger")
        elif actual < g["size"]:
            # the previous import died before its sync: the state got to the disk and the
            # appended bytes did not. The archive's own complete lines are the truth, the rest
            # is copied again from the log (which still holds it: it matched the state's hashes)
            have = pread_all(fd, actual, max(0, actual - CHUNK))
            keep = actual - (len(have) - (have.rfind(b"\n") + 1)) if b"\n" in have else 0
            if keep < actual:
                os.ftruncate(fd, keep)
            self.summary.notes.append(f"{g['archive']}: {g['size'] - keep} bytes recorded but not on disk "
                                      "(an import interrupted before its sync): copied again")
            g["size"] = keep
            rehash(fd, g)
        return fd


    def _repair(self, g: dict[str, Any], src: int, log: str, reason: str) -> bool:
        """Write generation `g`'s archive file again from the log `src` when the log still
        holds its bytes (size, prefix and tail hashes as recorded); the damaged file, if any,
        is kept aside in `.state/damaged/`, and the generation remembers the repair
        (`repairs`). Whether it was repaired."""
        size = os.fstat(src).st_size
        head = pread_all(src, min(PREFIX_BYTES, size), 0)
        if not self._continues(src, size, head, g):
            return False
        self.begin_write()
        path = os.path.join(self.client_dir, g["archive"])
        parent, name = os.path.split(path)
        self._mkdirs(parent)
        tmp = f"{parent}/.{name}.{os.getpid()}-{next(TMP_SEQ)}.tmp"
        zstd = g.get("format") == ZSTD
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        try:
            frame = compressor().compressobj() if zstd else None
            pos = 0
            while pos < g["size"]:
                chunk = pread_all(src, min(archivefiles.BLOCK, g["size"] - pos), pos)
                if not chunk:
                    raise OSError(errno.EIO, f"{log}: shorter than it was a moment ago")
                pos += len(chunk)
                self.summary.read_bytes += len(chunk)
                archivefiles.write_all(fd, frame.compress(chunk) if frame is not None else chunk)
            if frame is not None:
                archivefiles.write_all(fd, frame.flush())
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
            mkdirs(self.client_dir / STATE_DIR / "damaged")
            os.replace(path, self.client_dir / aside)
        os.replace(tmp, path)
        fsync_dir(parent)
        if zstd:
            g["csize"] = st.st_size
        note_sig(g, st)
        g.setdefault("repairs", []).append({"at": utc_now(), "reason": reason, "aside": aside})
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
            end, data = complete_frames(pread_all(fd, os.fstat(fd).st_size, 0))
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
        state = state if state is not None else fresh_state(self.client, key)
        g = {"generation": 1, "archive": rel, "format": ZSTD, "csize": end, "size": len(data),
             "prefix_sha256": sha(data[:PREFIX_BYTES]), "tail_sha256": sha(data[-TAIL_BYTES:]), "source": None,
             "created_at": utc_now(), "adopted": True}
        note_sig(g, st)
        state["generations"].append(g)
        state_path = state_file_path(self.client_dir, key)
        self._mkdirs(os.path.dirname(state_path))
        archivefiles.write_atomic(state_path, dumps(state), durable=False)
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
                            note_sig(g, st)
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
                archivefiles.write_atomic(os.path.join(self.client_dir, STATE_DIR, name), dumps(state), durable=False)
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
                        src, _ = inflate(src)
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
        end, data = complete_frames(pread_all(fd, actual - start, start))
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
        g["tail_sha256"] = sha(tail)
        if g["size"] <= PREFIX_BYTES or not start:
            g["prefix_sha256"] = sha(read_archive(path)[:PREFIX_BYTES])
        return fd
