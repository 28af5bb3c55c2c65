"""Copying a client's session logs into the archive: one import of one client (Archiver), log
by log, each log's new complete lines appended as one zstd frame (see ledger.sources.archive)."""

from __future__ import annotations

import errno
import itertools
import os
import stat as stat_mod
from pathlib import Path
from typing import Any, Callable

from ledger.errors import LedgerError
from ledger.sources import archivefiles, archivestate
from ledger.sources.archiveformat import (
    EMPTY_SHA, IMPORTING_FILE, PREFIX_BYTES, STATE_DIR, TAIL_BYTES, ZSTD, ZSTD_SUFFIX, LogOverBound, compressor,
    dumps, inflate, new_compressor, sha, utc_now,
)
from ledger.sources.archivefiles import DIR_MODE, FILE_MODE, mkdirs, pread_all, umask_strips
from ledger.sources.archivefork import ForkMixin
from ledger.sources.archiverepair import RepairMixin
from ledger.sources.archivestate import fresh_state, hash_from, note_sig, state_file_path
from ledger.sources.archivesummary import ClientSummary, Gap, Problem
from ledger.sources.discovery import Found
from ledger.sources.logdirs import Client

EARLY_SYNC_MIN = 32 << 20  # new bytes in one import before half of them are synced early (see Archiver.run)
STATED_MIN = 64  # logs to archive in one import before the state files are listed (see Archiver.stated)


class Archiver(RepairMixin, ForkMixin):
    """One import of one client into one home (hold `lock()` around it). Its repairs and its
    worker process are mixins (archiverepair, archivefork): they share this import's state."""

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
            self._seen = archivestate.load_seen(self.client_dir)
        return self._seen

    @property
    def seen_loaded(self) -> bool:
        return self._seen is not None

    def begin_write(self) -> None:
        """Before the first byte this import writes: the flag that says a sync is pending."""
        if not self.flagged:
            self._safe(self.client_dir / STATE_DIR)
            mkdirs(self.client_dir / STATE_DIR)
            archivefiles.write_atomic(self.client_dir / IMPORTING_FILE, b"", durable=True)
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
                               lambda: new_compressor().compress)
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

    def _one(self, f: Found, key: str) -> None:
        if self.seen.get(f.path) == [f.st.st_size, f.st.st_mtime_ns, f.st.st_ino]:
            self.summary.unchanged += 1  # (archived whole at this signature: the state agrees)
            return
        state_path = state_file_path(self.client_dir, key)
        name = state_path[state_path.rfind("/") + 1:]
        if self.stated is not None and name not in self.stated:  # (a new log: no state to read)
            state, damaged = fresh_state(self.client, key), None
        else:
            state, damaged = archivestate.load_state(state_path, self.client, key)
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
                    src, size = inflate(src)  # (its lines, read like a plain log's; the signature stays the file's)
                except LogOverBound as exc:
                    self._refuse(f, state, state_path, name, sig, seen, exc.reason)
                    return
            gens = state["generations"]
            # a log never archived is read whole in one go (the copy starts from these bytes);
            # one that was is read from its archived end, after the prefix check's 4 KiB
            first = pread_all(src, min(max(archivefiles.BLOCK, PREFIX_BYTES) if not gens else PREFIX_BYTES, size), 0)
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
            archivefiles.write_atomic(state_path, dumps(state), durable=False)
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
        archivefiles.write_atomic(state_path, dumps(state), durable=False)
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
        if size < g["size"] or sha(head[:min(PREFIX_BYTES, g["size"])]) != g["prefix_sha256"]:
            return False
        n = min(TAIL_BYTES, g["size"])
        if g["size"] <= PREFIX_BYTES:  # the tail lies in the head already read
            return sha(head[g["size"] - n:g["size"]]) == g["tail_sha256"]
        tail = pread_all(src, n, g["size"] - n)
        self.summary.read_bytes += len(tail)
        return sha(tail) == g["tail_sha256"]

    def _why_not(self, src: int, size: int, head: bytes, gens: list[dict[str, Any]], current: int | None) -> str:
        g = next((g for g in gens if g["generation"] == current), gens[-1])
        if size < g["size"]:
            return f"shrank from {g['size']} to {size} bytes"
        if sha(head[:min(PREFIX_BYTES, g["size"])]) != g["prefix_sha256"]:
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
                want = min(archivefiles.BLOCK, size - pos)
                chunk = pread_all(src, want, pos) if want > 0 else b""
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
                        archivefiles.write_all(dst, view)
                    else:
                        if done and frame is None and folding:
                            # (compressed ahead on other threads while the reducer reads the lines)
                            data = pending if cut == len(pending) else bytes(pending[:cut])
                            out = self.fold.compressed(f.path, data)
                            self.fold.feed(gen["archive"], data)
                            if out is None:
                                out = compressor().compress(view)
                        elif done and frame is None:  # (the usual case: all new bytes in one read)
                            out = compressor().compress(view)
                        else:
                            if folding:
                                self.fold.ok = False  # (never: a folded log fits one read)
                            frame = frame or compressor().compressobj()
                            out = frame.compress(view)
                        archivefiles.write_all(dst, out)
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
                    archivefiles.write_all(dst, out)
                    written += len(out)
                if zstd:
                    gen["csize"] = written if made else os.fstat(dst).st_size
                grown_from = gen["size"]
                gen["size"] += copied
                # the archive holds the log's first `size` bytes: the check hashes come from
                # the log (the archive may be compressed)
                if grown_from < PREFIX_BYTES:
                    gen["prefix_sha256"] = sha(first[:min(PREFIX_BYTES, gen["size"])])
                if len(last_line) == TAIL_BYTES or gen["size"] <= TAIL_BYTES:
                    gen["tail_sha256"] = sha(last_line if gen["size"] > TAIL_BYTES else first[:gen["size"]])
                else:
                    hash_from(src, gen, first, prefix=False)
                self.summary.new_bytes += copied
        except BaseException:
            if folding:
                self.fold.ok = False  # (what it read may not be what the archive holds)
            raise
        finally:
            if dst is not None:
                if gen is not None:
                    fst = os.fstat(dst)
                    note_sig(gen, fst)  # (ledger's own write: an explicit import stats it)
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
            if umask_strips(FILE_MODE):
                os.fchmod(fd, FILE_MODE)  # (made durable, with its directory entry, by the import's one sync)
            g = {"generation": number, "archive": rel, "format": ZSTD, "csize": 0, "size": 0,
                 "prefix_sha256": EMPTY_SHA, "tail_sha256": EMPTY_SHA, "source": f.path,
                 "created_at": utc_now()}
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
        """mkdirs, once per directory and import (a directory holds many logs), never
        through a symlink (see unsafe)."""
        key = os.fspath(path)
        if key not in self.made:
            self._safe(key)
            try:  # (its parent made already, the usual case: one call)
                os.mkdir(key, DIR_MODE)
                if umask_strips(DIR_MODE):
                    os.chmod(key, DIR_MODE)
            except FileExistsError:
                pass
            except FileNotFoundError:
                mkdirs(key)
            self.made.add(key)
