"""Two processes for a large import (issue 15: a cold import of a long history): on a machine
with an idle second core, a forked worker archives about half of the bytes; its summary comes
back on a pipe, and the part of a worker that dies is archived by the importer itself."""

from __future__ import annotations

import json
import os

from ledger.sources import archivefiles
from ledger.sources.archivesummary import ClientSummary, Gap, Problem, Repair
from ledger.sources.discovery import Found

PARALLEL_MIN = 64 << 20  # a cold import of at least this many bytes (and files, FILE_COST each) forks a worker
FILE_COST = 64 << 10  # a new log's files cost about as much as compressing this many bytes


class ForkMixin:
    """The Archiver's share of a large import with a forked worker (ledger.sources.archiver)."""

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
        if (cores < 2 or total < PARALLEL_MIN or not hasattr(os, "fork") or busy(cores)
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
                archivefiles.write_all(w, b"\n" + json.dumps(out).encode("ascii"))
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


def busy(cores: int) -> bool:
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
