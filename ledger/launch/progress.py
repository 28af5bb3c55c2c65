"""Live progress of `ledger run` on stderr: elapsed, model calls, tools, tokens, cost (a
plain command, which has no model calls: elapsed time only).

On a terminal one status line is redrawn in place (at most 5 times a second); the child's
output passes through `passthrough()`, which erases the status line first and leaves it
off while the child's last line is unfinished (so the two are never glued); otherwise
(`--progress` with stderr redirected) a plain line is printed every few seconds. API
retries are always printed loudly on their own line; a heartbeat says when the agent has
been quiet for a while.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable

HEARTBEAT_SECS = 10.0


def _fmt_tokens(n: int | None) -> str:
    if n is None:
        return "?"
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    return f"{n:,}"


class Progress:
    def __init__(self, enabled: bool, tty: bool, fd: int = 2, command: bool = False) -> None:
        self.enabled = enabled
        self.command = command  # a plain command: no model calls, tokens or cost to show
        self._lock = threading.Lock()  # the stderr reader thread passes output through too
        self._partial = False   # the child's output on the terminal ends mid-line
        self._ttys: dict[int, bool] = {}
        self.tty = tty
        self.fd = fd
        self.started = time.monotonic()
        self._last_draw = 0.0
        self._drawn = False
        self._last_retries = 0
        self._last_heartbeat = 0.0
        self.interval = 0.2 if tty else 5.0

    def _write(self, text: str) -> None:
        try:
            os.write(self.fd, text.encode("utf-8", "replace"))
        except OSError:
            self.enabled = False

    def _is_tty(self, fd: int) -> bool:
        tty = self._ttys.get(fd)
        if tty is None:
            tty = self._ttys[fd] = os.isatty(fd)
        return tty

    def passthrough(self, fd: int, data: bytes) -> bool:
        """Write the child's output to fd with the status line erased first; False when fd
        is gone (the caller stops passing output)."""
        from ledger.launch.process import _write_all

        if not (self.enabled and self.tty):
            return _write_all(fd, data)
        with self._lock:
            if self._drawn:
                self._drawn = False
                self._write("\r\x1b[K")
            ok = _write_all(fd, data)
            if data and self._is_tty(fd):
                self._partial = not data.endswith(b"\n")
        return ok

    def line(self, text: str) -> None:
        """A message on its own line (the status line is redrawn after it)."""
        if not self.enabled:
            return
        with self._lock:
            lead = "\r\x1b[K" if self.tty and self._drawn else ("\n" if self.tty and self._partial else "")
            self._write(lead + text + "\n")
            self._drawn = self._partial = False

    def update(self, stats: Any, figures: Callable[[], tuple[dict[str, Any], float | None, str | None]],
               force: bool = False) -> None:
        """Print new retries now; redraw the status line when due (`figures()` gives the
        tokens, cost and cost basis so far; it is only called when the line is drawn)."""
        if not self.enabled:
            return
        now = time.monotonic()
        while stats.api_retries > self._last_retries:
            self._last_retries += 1
            n = self._last_retries
            what = stats.retry_log[n - 1] if n - 1 < len(stats.retry_log) else None
            if what:
                from ledger.text import plain

                what = plain(what)  # the provider's words: shown, never sent to the terminal as controls
            self.line(f"ledger: API retry #{n}" + (f" ({what})" if what else "") + " — the provider is failing")
        quiet = now - stats.last_event_at
        if quiet >= HEARTBEAT_SECS and now - self._last_heartbeat >= HEARTBEAT_SECS and not self.tty:
            self._last_heartbeat = now
            self.line(f"ledger: {now - self.started:.0f}s elapsed, agent quiet for {quiet:.0f}s")
        if not force and now - self._last_draw < self.interval:
            return
        self._last_draw = now
        if self.command:
            parts = [f"ledger: {now - self.started:5.1f}s"]
            cost = None
        else:
            tokens, cost, cost_basis = figures()
            inp = tokens.get("total_input_tokens", tokens.get("input_tokens"))
            parts = [f"ledger: {now - self.started:5.1f}s", f"{stats.model_calls} model calls",
                     f"{stats.tool_calls} tools",
                     f"in {_fmt_tokens(inp)} out {_fmt_tokens(tokens.get('output_tokens'))}"]
        if cost is not None:
            parts.append(f"${cost:.4f}" + (" est" if cost_basis == "estimated" else ""))
        if stats.api_retries:
            parts.append(f"{stats.api_retries} API retries")
        if quiet >= HEARTBEAT_SECS:
            parts.append(f"quiet {quiet:.0f}s")
        text = " · ".join(parts)
        if self.tty:
            with self._lock:
                if not self._partial:  # never drawn over (or after) the child's unfinished line
                    self._write("\r\x1b[K" + text)
                    self._drawn = True
        else:
            self._write(text + "\n")

    def clear(self) -> None:
        """Erase the status line (before someone else writes to the terminal)."""
        with self._lock:
            if self.enabled and self.tty and self._drawn:
                self._drawn = False
                self._write("\r\x1b[K")

    def close(self) -> None:
        """Erase the status line; end the child's unfinished line (what ledger prints next
        starts on a line of its own)."""
        with self._lock:
            if self.enabled and self.tty and self._drawn:
                self._write("\r\x1b[K")
                self._drawn = False
            elif self.enabled and self.tty and self._partial:
                self._write("\n")
            self._partial = False
