"""Tell a live unsettled run from an abandoned one (its launcher is gone)."""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or None
    except OSError:
        return None


@lru_cache(maxsize=1)
def hostname() -> str:
    import socket  # (~10 ms: only when an unsettled run is judged)

    return socket.gethostname()


def process_start_ticks(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (Linux /proc), None if gone/unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # the command name may contain spaces or parentheses: split after the last ')'
    fields = data[data.rfind(b")") + 2:].split()
    try:
        if fields[0] == b"Z":  # a zombie has exited
            return None
        return int(fields[19])
    except (IndexError, ValueError):
        return None


ABANDONED = "abandoned"


def gone_for_good(state: str) -> bool:
    """Whether a liveness verdict is final. An abandoned run's launcher is gone for good (this
    machine booted since, its pid is dead, or the pid is now another process's): nothing will
    settle or extend the run but a change to its files, so the index need not ask again
    (ledger.index.sealing). `running` may end any moment; `unknown` (another host's run) is
    not this machine's to judge."""
    return state == ABANDONED


def launcher_identity() -> dict[str, Any]:
    pid = os.getpid()
    return {"pid": pid, "start_ticks": process_start_ticks(pid)}


def liveness(host: str | None, run_boot_id: str | None, launcher: dict[str, Any] | None) -> str:
    """`running`, `abandoned` or `unknown` for a run without terminal.json.

    Only this host can judge: another host's run is `unknown`. A different boot, a dead pid
    or a pid reused by another process (start time differs) means the launcher is gone.
    """
    if host != hostname():
        return "unknown"
    current_boot = boot_id()
    if run_boot_id and current_boot and run_boot_id != current_boot:
        return ABANDONED
    pid = launcher.get("pid") if isinstance(launcher, dict) else None
    if type(pid) is not int or pid <= 0:
        return "unknown"
    ticks = process_start_ticks(pid)
    if ticks is None:
        return ABANDONED
    if launcher.get("start_ticks") is not None and ticks != launcher.get("start_ticks"):
        return ABANDONED
    return "running"
