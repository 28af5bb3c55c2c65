"""Stopping a run: the one place that decides when and why `ledger run` stops its agent, and
how a stopped run settles (`stop_exit`: its outcome and exit code, for both launchers).

Two sides:

- **The launcher** (`StopControl`, used by the headless runner and by the interactive
  launcher alike): every tick it asks why the child should stop: a signal to ledger
  (SIGINT / SIGTERM / SIGHUP), `--timeout`, or a *stop request* (`stop-request.json` in the
  run directory, written by `ledger stop`). A stop sends SIGTERM to the child's process
  group, waits a grace period, then SIGKILLs the group; a second signal kills at once.
  Whatever of the group outlives its leader after a stop is killed too.
- **`ledger stop RUN`** (`request_stop`): writes the stop request (first one wins: a
  second `ledger stop` keeps the first requester), then, when the launcher runs on this
  host (same host name and boot id, its pid alive with the start time the manifest
  recorded: a reused pid is never signalled), sends it SIGTERM through a pidfd, and waits
  for the run to settle. A launcher on another host (another container sharing the home)
  reads the request file itself within a tick; when it does not settle in time, that is an
  error with a hint. A settled run is a no-op.

The stop request is evidence of who stopped the run: the launcher copies it into its
`result` event (`stop_request`) and names the requester in `stopped_by`.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from ledger.errors import LedgerError
from ledger.records import jsonio

STOP_FILE = "stop-request.json"
STOP_REQUEST = "stop_request"        # the result event's stop_reason
EXIT_STOPPED = 128 + signal.SIGTERM  # a run stopped by `ledger stop` exits as if SIGTERMed
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXIT_TIMEOUT = 124                   # `--timeout` (as timeout(1))
EXIT_MAX_COST = 125                  # `--max-cost` passed
NEEDS_TERMINAL = "needs_terminal"    # stop_reason / stopped_by: the child stopped for the terminal
EXIT_NEEDS_TERMINAL = 1              # (an error, not a cancellation)
STOP_SCHEMA = 1


# ---------------------------------------------------------------- the request file

def stop_file(run_path: str | os.PathLike[str]) -> str:
    return os.path.join(os.fspath(run_path), STOP_FILE)


def requester() -> dict[str, Any]:
    """Who asks: user, host, pid (recorded in the request and in the run's result)."""
    import getpass

    from ledger.records.liveness import hostname
    from ledger.records.timefmt import now_rfc3339

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return {"user": user, "host": hostname(), "pid": os.getpid(), "requested_at": now_rfc3339()}


def write_stop_request(run_path: str | os.PathLike[str], by: dict[str, Any]) -> bool:
    """Create the stop request (0600, exclusive); False when one is there already (kept)."""
    from ledger.records.writer import write_exclusive

    body = {"schema_version": STOP_SCHEMA, "requested_by": by}
    try:
        write_exclusive(stop_file(run_path), jsonio.dumps_pretty(body))
    except FileExistsError:
        return False
    return True


def read_stop_request(run_path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The stop request, if there is one (an unreadable one still asks to stop)."""
    try:
        with open(stop_file(run_path), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError:
        return {"requested_by": None}
    try:
        body = jsonio.loads(data)
    except jsonio.JSONDecodeError:
        return {"requested_by": None}
    return body if isinstance(body, dict) else {"requested_by": None}


def describe_requester(request: dict[str, Any] | None) -> str:
    """`ledger stop (alice@build-7, pid 4242)`: the result event's `stopped_by`."""
    by = (request or {}).get("requested_by")
    if not isinstance(by, dict):
        return "ledger stop"
    who = f"{by.get('user') or '?'}@{by.get('host') or '?'}"
    return f"ledger stop ({who}, pid {by.get('pid')})" if by.get("pid") is not None else f"ledger stop ({who})"


# ---------------------------------------------------------------- the launcher's side

class Signals:
    """SIGINT/SIGTERM/SIGHUP to ledger: remember them; StopControl stops the child."""

    def __init__(self, signals: tuple[int, ...] = STOP_SIGNALS) -> None:
        self.signals = signals
        self.received: list[int] = []
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for sig in self.signals:
            try:
                if signal.getsignal(sig) == signal.SIG_IGN:
                    continue  # e.g. nohup / a background job: keep ignoring it, as the child does
                self._previous[sig] = signal.signal(sig, self._handler)
            except (ValueError, OSError):  # not the main thread
                pass

    def _handler(self, signum: int, frame: Any) -> None:
        self.received.append(signum)

    def restore(self) -> None:
        for sig, prev in self._previous.items():
            try:
                signal.signal(sig, prev)
            except (ValueError, OSError, TypeError):
                pass


class Stoppable(Protocol):  # pragma: no cover - typing only
    stopped_by: str | None
    killed: bool

    def poll(self) -> int | None: ...
    def terminate(self, reason: str) -> None: ...
    def kill(self) -> None: ...
    def signal_group(self, sig: int) -> bool: ...
    pgid: int


class StopControl:
    """When and why to stop the child: signals, `--timeout`, a stop request; the grace
    period and the SIGKILL after it. `check(child, now)` is called every tick, while the
    stream is read and while the child is waited for (one rule for both)."""

    def __init__(self, signals: Signals, run_path: str | os.PathLike[str] | None, *, started: float,
                 timeout: float | None, grace_secs: float, say: Callable[[str], None] = lambda s: None) -> None:
        self.signals = signals
        self.run_path = os.fspath(run_path) if run_path is not None else None
        self.deadline = started + timeout if timeout is not None and timeout > 0 else None
        self.timeout = timeout
        self.grace_secs = grace_secs
        self.say = say
        self.kill_at: float | None = None
        self.handled_signals = 0
        self.request: dict[str, Any] | None = None  # the stop request that stopped the run

    def stop(self, child: Stoppable, reason: str, now: float, grace: float | None = None) -> None:
        """SIGTERM the group now (remembering why), SIGKILL after the grace period."""
        child.terminate(reason)
        self.kill_at = now + (self.grace_secs if grace is None else grace)

    def _requested(self) -> dict[str, Any] | None:
        if self.run_path is None:
            return None
        try:
            os.stat(stop_file(self.run_path))
        except OSError:
            return None
        return read_stop_request(self.run_path)

    def check(self, child: Stoppable, now: float) -> None:
        if len(self.signals.received) > self.handled_signals:
            sig = self.signals.received[self.handled_signals]
            self.handled_signals = len(self.signals.received)
            if child.stopped_by is None:
                request = self._requested() if sig == signal.SIGTERM else None
                if request is not None:  # `ledger stop` wrote its request, then signalled
                    self._stop_requested(child, request, now)
                else:
                    name = signal.Signals(sig).name
                    self.stop(child, f"signal:{name}", now)
                    self.say(f"ledger: {name} received; stopping the agent (SIGKILL in {self.grace_secs:g}s)")
            else:  # a second signal: no more grace
                child.kill()
        if child.stopped_by is None and child.poll() is None:
            if self.deadline is not None and now >= self.deadline:
                self.stop(child, "timeout", now)
                self.say(f"ledger: timeout after {self.timeout:g}s; stopping the agent")
            else:
                request = self._requested()
                if request is not None:
                    self._stop_requested(child, request, now)
        if self.kill_at is not None and now >= self.kill_at and child.poll() is None and not child.killed:
            child.kill()

    def _stop_requested(self, child: Stoppable, request: dict[str, Any], now: float) -> None:
        self.request = request
        self.stop(child, describe_requester(request), now)
        self.say(f"ledger: stop requested by {describe_requester(request)}; stopping the agent")

    @property
    def requested(self) -> bool:
        return self.request is not None

    def reap_group(self, child: Stoppable, wait_secs: float = 1.0) -> None:
        """After a stop: what is left of the child's process group (its leader is gone) gets
        SIGTERM, then SIGKILL; no process of a stopped run's group outlives the run."""
        if child.stopped_by is None or not group_alive(child.pgid):
            return
        child.signal_group(signal.SIGTERM)
        child.signal_group(signal.SIGCONT)
        end = time.monotonic() + wait_secs
        while time.monotonic() < end:
            if not group_alive(child.pgid):
                return
            time.sleep(0.05)
        child.signal_group(signal.SIGKILL)

    def wait_out(self, child: Stoppable, tick: float, wait: Callable[[float], int | None] | None = None) -> int | None:
        """Wait for the child's exit (it may outlive its stdout), still honouring stops every
        tick, then reap what is left of a stopped child's group; its return code."""
        rc = child.poll()
        while rc is None:
            if wait is not None:
                rc = wait(tick)
            else:
                time.sleep(tick)
                rc = child.poll()
            if rc is None:
                self.check(child, time.monotonic())
        self.reap_group(child)
        return rc

    def fields(self) -> dict[str, Any]:
        """The result event's additions: the stop request that stopped the run."""
        return {"stop_request": self.request} if self.request is not None else {}


def stop_exit(stop_reason: str | None, stopped_by: str | None, rc: int | None) -> tuple[str | None, int]:
    """How a run ended by a stop (or by a stopping signal to the child) settles, for both
    launchers: (its outcome, or None when the child's own end decides it; its exit code).
    A stop interrupts the run, except a child stopped for the terminal (it could never have
    run headless: failed); a child killed by SIGINT/SIGTERM/SIGHUP was interrupted too."""
    if stop_reason == "timeout":
        code = EXIT_TIMEOUT
    elif stop_reason == "signal":
        name = (stopped_by or "signal:SIGTERM").split(":", 1)[1]
        code = 128 + int(getattr(signal.Signals, name, signal.SIGINT))
    elif stop_reason == "max_cost":
        code = EXIT_MAX_COST
    elif stop_reason == STOP_REQUEST:
        code = EXIT_STOPPED
    elif stop_reason == NEEDS_TERMINAL:
        code = EXIT_NEEDS_TERMINAL
    else:
        from ledger.launch.process import exit_code_for

        code = exit_code_for(rc)
    if stop_reason == NEEDS_TERMINAL:
        return "failed", code
    if stop_reason is not None or (rc is not None and rc < 0 and -rc in STOP_SIGNALS):
        return "interrupted", code
    return None, code


def group_alive(pgid: int) -> bool:
    """A process of group `pgid` is alive (Linux /proc; a zombie is not: it waits for
    whoever reaps it, which in a container may be slow)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        names = os.listdir("/proc")
    except OSError:
        return True
    want = str(pgid).encode()
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 2 and fields[2] == want and fields[0] != b"Z":
            return True
    return False


def stop_reason_of(stopped_by: str | None, requested: bool) -> str | None:
    """The result's `stop_reason` from why the child was stopped."""
    if not stopped_by:
        return None
    if requested:
        return STOP_REQUEST
    return "signal" if stopped_by.startswith("signal:") else stopped_by


# ---------------------------------------------------------------- `ledger stop RUN`

@dataclass
class StopResult:
    run_id: str
    path: str
    action: str             # already-settled | stopped | requested
    outcome: str | None     # the settled outcome, when known
    message: str
    signalled: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "path": self.path, "action": self.action, "outcome": self.outcome,
                "signalled": self.signalled, "message": self.message}


def _signal_launcher(manifest: Any) -> bool:
    """SIGTERM the launcher if it is this host's, alive, and the very process the manifest
    names (pid + start time, checked through a pidfd so the pid cannot be reused between the
    check and the signal). False when it is not this host's (or not alive)."""
    from ledger.records.liveness import boot_id, process_start_ticks

    launcher = manifest.launcher or {}
    pid, ticks = launcher.get("pid"), launcher.get("start_ticks")
    if type(pid) is not int or pid <= 0:
        return False
    if manifest.boot_id and boot_id() and manifest.boot_id != boot_id():
        return False
    try:
        fd = os.pidfd_open(pid)
    except (ProcessLookupError, OSError, AttributeError):
        return False
    try:
        if ticks is None or process_start_ticks(pid) != ticks:
            return False  # the pid is now another process
        try:
            signal.pidfd_send_signal(fd, signal.SIGTERM)
        except (ProcessLookupError, PermissionError, OSError):
            return False
        return True
    finally:
        os.close(fd)


def request_stop(home: Path, selector: str, *, wait_secs: float = 10.0, send_signal: bool = True,
                 by: dict[str, Any] | None = None) -> StopResult:
    """`ledger stop RUN`: see the module docstring. Raises LedgerError when the run cannot be
    stopped from here (another host's launcher did not pick the request up, or it is gone)."""
    from ledger.records.ids import resolve_selector
    from ledger.records.liveness import hostname, liveness
    from ledger.records.reader import read_manifest, read_terminal

    path = resolve_selector(home, selector)
    manifest = read_manifest(path)
    run_id = manifest.run_id
    term = read_terminal(os.fspath(path))
    if term.present:
        return StopResult(run_id, os.fspath(path), "already-settled", term.outcome,
                          f"{run_id} is already settled ({term.outcome or 'unreadable outcome'}): nothing to stop")
    state = liveness(manifest.host or None, manifest.boot_id, manifest.launcher)
    if state == "abandoned":
        raise LedgerError(f"{run_id} is abandoned: its launcher is gone and nothing would read a stop request",
                          hint=f"inspect it with `ledger show {run_id}`; an abandoned run stays unsettled")
    write_stop_request(path, by or requester())
    local = manifest.host == hostname()
    signalled = bool(send_signal and local and _signal_launcher(manifest))
    end = time.monotonic() + wait_secs
    while True:
        term = read_terminal(os.fspath(path))
        if term.present:
            return StopResult(run_id, os.fspath(path), "stopped", term.outcome,
                              f"{run_id} stopped: {term.outcome or 'unreadable outcome'}", signalled)
        if time.monotonic() >= end:
            break
        time.sleep(0.05)
    if not local:
        raise LedgerError(
            f"{run_id} runs on host {manifest.host!r}, not here, and did not settle within {wait_secs:g}s "
            "(a stop request was left in its run directory)",
            hint=f"run `ledger stop {run_id}` on {manifest.host}; its launcher reads the request only "
                 "when it shares this home")
    raise LedgerError(f"{run_id} did not settle within {wait_secs:g}s of the stop request",
                      hint=f"check it with `ledger show {run_id}`, or wait longer: `ledger stop {run_id} --wait 60`")
