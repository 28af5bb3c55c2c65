"""Child process control for `ledger run`.

The child runs in its own process group (so that a stop reaches everything it spawned and
the terminal's Ctrl-C reaches only ledger, which then stops the child the same way), with
ledger's stdin passed through unchanged. Its stdout and stderr are pipes read by ledger
itself, each by a small thread that only moves bytes: stdout chunks go to a queue that the
caller consumes (so a fast child is never held back by parsing), stderr is passed through
to ledger's stderr and its tail kept.

Stopping (`stop()`): SIGTERM to the group, a grace period, then SIGKILL to the group.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
import time
from typing import Callable, Mapping, Sequence

from ledger.launch.capture import TailBuffer

READ_SIZE = 1 << 20
# The reader never waits for parsing unless this much read-but-unparsed output piles up
# (memory stays bounded; below it a fast child is never held back).
HIGH_WATER = 256 << 20
F_SETPIPE_SZ = 1031  # Linux fcntl: grow a pipe's buffer
PIPE_SIZE = 1 << 20
EOF = None


def _grow_pipe(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_SIZE)
    except (OSError, ImportError, ValueError):
        pass


def _write_all(fd: int, data: bytes) -> bool:
    """Write everything to fd; False when the reader is gone (EPIPE) or fd is bad."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        return False
    return True


class ChildProcess:
    """A started child: `chunks` yields stdout bytes then EOF (None)."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                 cwd: str | None = None, stderr_passthrough: bool = True,
                 stderr_tail_bytes: int = 64 * 1024,
                 on_stderr: Callable[[bytes], None] | None = None,
                 before_stderr: Callable[[], None] | None = None,
                 write_stderr: Callable[[bytes], bool] | None = None) -> None:
        self.argv = list(argv)
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            self.argv, env=dict(env) if env is not None else None, cwd=cwd,
            stdin=None, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            process_group=0, close_fds=True, bufsize=0,
        )
        self.pid = self.proc.pid
        self.pgid = self.pid
        self.chunks: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.stdout_bytes = 0
        self._queued = 0
        self._room = threading.Condition()
        self.stderr_tail = TailBuffer(stderr_tail_bytes)
        self._stderr_passthrough = stderr_passthrough
        self._on_stderr = on_stderr
        self._before_stderr = before_stderr
        self._write_stderr = write_stderr or (lambda data: _write_all(2, data))  # False: stderr is gone
        self.stopped_by: str | None = None     # why ledger stopped it (timeout, signal, max_cost)
        self.killed = False                    # SIGKILL was needed
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._out_fd = self.proc.stdout.fileno()
        self._err_fd = self.proc.stderr.fileno()
        _grow_pipe(self._out_fd)
        self._out_thread = threading.Thread(target=self._pump_stdout, name="ledger-stdout", daemon=True)
        self._err_thread = threading.Thread(target=self._pump_stderr, name="ledger-stderr", daemon=True)
        self._out_thread.start()
        self._err_thread.start()

    # -- readers -------------------------------------------------------------------------

    def _pump_stdout(self) -> None:
        fd, put, read = self._out_fd, self.chunks.put, os.read
        try:
            while True:
                try:
                    data = read(fd, READ_SIZE)
                except OSError:
                    break
                if not data:
                    break
                self.stdout_bytes += len(data)
                with self._room:
                    self._queued += len(data)
                    while self._queued > HIGH_WATER:
                        self._room.wait(0.5)
                put(data)
        finally:
            put(EOF)

    def _pump_stderr(self) -> None:
        fd = self._err_fd
        passthrough = self._stderr_passthrough
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            self.stderr_tail.add(data)
            if passthrough and self._before_stderr is not None:
                try:
                    self._before_stderr()
                except Exception:  # noqa: BLE001 - a display hook never breaks capture
                    pass
            if passthrough and not self._write_stderr(data):
                passthrough = False
            if self._on_stderr is not None:
                try:
                    self._on_stderr(data)
                except Exception:  # noqa: BLE001 - a display hook never breaks capture
                    pass

    def consumed(self, n: int) -> None:
        """The caller has processed `n` bytes of stdout (frees room for the reader)."""
        with self._room:
            self._queued -= n
            if self._queued <= HIGH_WATER:
                self._room.notify()

    def join_stderr(self, timeout: float) -> None:
        self._err_thread.join(timeout)

    # -- state and control --------------------------------------------------------------

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def signal_group(self, sig: int) -> bool:
        """Send `sig` to the child's process group (to the child itself if the group is gone)."""
        try:
            os.killpg(self.pgid, sig)
            return True
        except ProcessLookupError:
            pass
        except PermissionError:
            pass
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
                return True
            except ProcessLookupError:
                pass
        return False

    def terminate(self, reason: str) -> None:
        """First step of a stop: SIGTERM to the group (remembering why), then SIGCONT: a
        stopped process (e.g. by SIGTTIN) only acts on its SIGTERM once it runs again."""
        if self.stopped_by is None:
            self.stopped_by = reason
        self.signal_group(signal.SIGTERM)
        self.signal_group(signal.SIGCONT)

    def terminal_stop(self) -> str | None:
        """Why the child's process group is stopped, if it is: `SIGTTIN` / `SIGTTOU` when
        the child itself was stopped for touching the terminal from the background group
        (reading it, or setting its mode as interactive programs do), `stopped` when another
        process of the group is stopped (Linux /proc; the signal is not visible there)."""
        try:
            info = os.waitid(os.P_PID, self.pid, os.WSTOPPED | os.WNOHANG | os.WNOWAIT)
        except (ChildProcessError, OSError, AttributeError):
            info = None
        if info is not None and info.si_code == os.CLD_STOPPED:
            try:
                return signal.Signals(info.si_status).name
            except ValueError:
                return "stopped"
        return "stopped" if _group_has_stopped(self.pgid, self.pid) else None

    def kill(self) -> None:
        self.killed = True
        self.signal_group(signal.SIGKILL)

    def close(self) -> None:
        for f in (self.proc.stdout, self.proc.stderr):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass


def _group_has_stopped(pgid: int, skip: int) -> bool:
    """A process of group `pgid` (other than `skip`) is in job-control stop (Linux /proc)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return False
    for name in names:
        if not name.isdigit() or int(name) == skip:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 2 and fields[0] == b"T" and fields[2] == str(pgid).encode():
            return True
    return False


def exit_code_for(returncode: int | None) -> int:
    """A shell-style exit code: negative (killed by signal N) -> 128 + N."""
    if returncode is None:
        return 1
    if returncode < 0:
        return 128 + (-returncode)
    return returncode
