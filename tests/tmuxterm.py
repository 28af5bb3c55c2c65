"""A real terminal for tests: a tmux server of its own (socket per test) running a bash with
no rc files; keys are typed with `send-keys`, the screen read with `capture-pane`.

Used by the interactive-run tests: `ledger run -- claude` / `-- codex` as a person types it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path


def tmux_available() -> bool:
    return shutil.which("tmux") is not None


class Terminal:
    def __init__(self, tmp: Path, env: dict[str, str], cwd: Path, width: int = 120, height: int = 40) -> None:
        self.socket = f"ledger-{uuid.uuid4().hex[:12]}"
        self.name = "t"
        envfile = tmp / f"{self.socket}.env"
        envfile.write_text("".join(f"export {k}={json.dumps(v)}\n" for k, v in env.items()))
        self._tmux("new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height),
                   "env -i PATH=/usr/bin:/bin TERM=xterm-256color bash --norc --noprofile")
        self.type_line(f"source {envfile}; cd {cwd}; PS1='$ '; clear")
        self.wait_for(r"^\$ ?$", 10)

    def _tmux(self, *args: str) -> str:
        p = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30)
        if p.returncode != 0:
            raise AssertionError(f"tmux {args[0]} failed: {p.stderr}")
        return p.stdout

    def keys(self, *keys: str) -> None:
        """tmux key names: Enter, C-c, Escape..."""
        self._tmux("send-keys", "-t", self.name, *keys)

    def text(self, text: str) -> None:
        self._tmux("send-keys", "-t", self.name, "-l", text)

    def type_line(self, text: str, pause: float = 0.0) -> None:
        self.text(text)
        if pause:
            time.sleep(pause)  # (Codex takes text and Enter in one burst for a paste)
        self.keys("Enter")

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", self.name, "-S", "-200")

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match:
        end = time.monotonic() + timeout
        rx = re.compile(pattern, re.M)
        while True:
            s = self.screen()
            m = rx.search(s)
            if m:
                return m
            if time.monotonic() > end:
                raise AssertionError(f"{pattern!r} not on the screen within {timeout}s:\n{s}")
            time.sleep(0.2)

    def pane_pid(self) -> int:
        return int(self._tmux("display-message", "-p", "-t", self.name, "#{pane_pid}").strip())

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)
