"""`ledger run` in a terminal (issue 12), under a real pseudo-terminal: ledger is the session
leader with the pty as its controlling terminal, as in an interactive shell.

What a person sees is checked on a small terminal model (`screen()`): carriage return,
erase-to-end-of-line and newline, the only controls ledger's status line uses.
"""

from __future__ import annotations

import os
import pty
import re
import select
import sys
import time
from pathlib import Path

import pytest

from ledger.records import read_run
from ledger.records.ids import resolve_selector

REPO = Path(__file__).resolve().parent.parent
SUMMARY = re.compile(r"^ledger: (run_[0-9a-f]{8}) (\w+)")


def in_terminal(args: list[str], home: Path, timeout: float = 60,
                env: dict[str, str] | None = None) -> tuple[int, bytes, float]:
    """`python -m ledger ARGS` on a fresh pty; (exit code, everything written, seconds)."""
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home), "TERM": "xterm",
           "COLUMNS": "80", "LINES": "24", **(env or {})}
    t = time.monotonic()
    pid, fd = pty.fork()
    if pid == 0:  # the child: ledger, on the pty (stdin, stdout, stderr, controlling terminal)
        os.execve(sys.executable, [sys.executable, "-m", "ledger", *args], env)
    out = bytearray()
    try:
        while time.monotonic() - t < timeout:
            r, _, _ = select.select([fd], [], [], 0.5)
            if not r:
                continue
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the terminal's other side is closed (ledger exited)
                break
            if not data:
                break
            out += data
    finally:
        if time.monotonic() - t >= timeout:
            os.kill(pid, 9)
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), bytes(out), time.monotonic() - t


def screen(data: bytes) -> list[str]:
    """The lines a terminal shows for `data` (CR, ESC[K and LF; nothing else expected)."""
    lines: list[str] = []
    cur: list[str] = []
    col = 0
    text = data.decode("utf-8", "replace")
    i = 0
    while i < len(text):
        c = text[i]
        if text.startswith("\x1b[K", i):
            del cur[col:]
            i += 3
            continue
        assert c != "\x1b", f"unexpected escape sequence at {text[i:i + 10]!r}"
        if c == "\r":
            col = 0
        elif c == "\n":
            lines.append("".join(cur))
            cur, col = [], 0
        else:
            if col < len(cur):
                cur[col] = c
            else:
                cur.append(c)
            col += 1
        i += 1
    if cur:
        lines.append("".join(cur))
    return lines


SLOW = ("import sys, time\n"
        "for i in range(5):\n"
        "    print(f'line{i}', flush=True)\n"
        "    print(f'err{i}', file=sys.stderr, flush=True)\n"
        "    time.sleep(0.35)\n")


def test_slow_output_is_never_glued_to_the_status_line_and_one_summary_ends_the_run(tmp_path):
    home = tmp_path / "home"
    code, raw, _ = in_terminal(["run", "--", sys.executable, "-c", SLOW], home)
    assert code == 0, raw
    assert b"\x1b[K" in raw  # the status line was drawn (and erased) while the child ran
    shown = screen(raw)
    body = [line for line in shown[:-1] if line]
    # every line whole, each stream in its order (stdout and stderr are two pipes: they may interleave)
    assert sorted(body) == sorted(f"{k}{i}" for i in range(5) for k in ("line", "err")), shown
    assert [x for x in body if x.startswith("line")] == [f"line{i}" for i in range(5)]
    assert [x for x in body if x.startswith("err")] == [f"err{i}" for i in range(5)]
    m = SUMMARY.match(shown[-1])
    assert m and m.group(2) == "completed", shown[-1]
    assert re.fullmatch(r"ledger: run_[0-9a-f]{8} completed · 1\.\d+s", shown[-1]), shown[-1]
    assert len(shown[-1]) <= 80
    # the id prefix is one `ledger show` accepts: the run it names is this one, completed
    snap = read_run(resolve_selector(home, m.group(1)))
    assert snap.outcome == "completed" and snap.harness == "command"
    # a plain command's status line is elapsed time only: no model calls, tokens or cost
    assert b"model calls" not in raw and b"in ?" not in raw
    assert re.search(rb"ledger: +\d+\.\ds(\r|\x1b)", raw), raw


def test_an_unfinished_line_is_not_drawn_over(tmp_path):
    code, raw, _ = in_terminal(["run", "--", "sh", "-c", "printf 'name? '; sleep 1; echo done"], tmp_path / "h")
    assert code == 0
    shown = [line for line in screen(raw) if line]
    assert shown[0] == "name? done" and SUMMARY.match(shown[1]) and len(shown) == 2, shown


@pytest.mark.parametrize("how", ["timeout", "max_cost_agent"])
def test_a_stopped_run_still_ends_with_one_summary_line(tmp_path, how):
    if how == "timeout":
        args = ["run", "--timeout", "1", "--", "sh", "-c", "echo started; sleep 30"]
        want = r"ledger: run_[0-9a-f]{8} interrupted \(--timeout\) · 1\.\ds"
        code_want = 124
    else:
        line = ('{"type":"assistant","message":{"id":"m%d","model":"claude-sonnet-4-5","content":[],'
                '"usage":{"input_tokens":10000,"output_tokens":100}},"session_id":"s"}')
        script = tmp_path / "claude"
        script.write_text("#!/bin/sh\n" + "".join(f"echo '{line % i}'; sleep 0.05\n" for i in range(40))
                          + "sleep 30\n")
        script.chmod(0o755)
        args = ["run", "--max-cost", "0.05", "--", str(script), "--output-format", "stream-json", "--verbose"]
        want = (r"ledger: run_[0-9a-f]{8} interrupted \(--max-cost\) · \d\.\ds"
                r" · in [\d.]+[kM] out [\d.,]+k? · \$0\.\d{4} est")
        code_want = 125
    code, raw, _ = in_terminal(args, tmp_path / "h")
    assert code == code_want
    summaries = [line for line in screen(raw) if SUMMARY.match(line)]
    assert len(summaries) == 1 and re.fullmatch(want, summaries[0]), screen(raw)
    if how == "timeout":
        assert len(summaries[0]) <= 80


READS_TTY = "import sys\nprint('asking', flush=True)\nopen('/dev/tty').readline()\nprint('never')\n"


def test_a_child_that_reads_the_terminal_ends_with_an_error_and_a_hint(tmp_path):
    home = tmp_path / "home"
    code, raw, secs = in_terminal(["run", "--", sys.executable, "-c", READS_TTY], home, timeout=30)
    assert secs < 10 and code == 1
    shown = [line for line in screen(raw) if line]
    assert shown[0] == "asking" and "never" not in shown
    assert re.fullmatch(r"ledger: run_[0-9a-f]{8} failed \(needs a terminal\) · [\d.]+s · exit 1", shown[1]), shown
    assert shown[2].startswith("Error: ") and "waits for a terminal (it read from the terminal)" in shown[2]
    assert shown[3].startswith("Hint: ") and len(shown) == 4, shown
    snap = read_run(resolve_selector(home, SUMMARY.match(shown[1]).group(1)))
    assert snap.outcome == "failed" and snap.error_kind == "session-error"
    assert "waits for a terminal" in snap.error_detail


def test_a_grandchild_reading_the_terminal_is_caught_too(tmp_path):
    code, raw, secs = in_terminal(["run", "--", "sh", "-c", "cat /dev/tty; echo never"], tmp_path / "h", timeout=30)
    assert secs < 10 and code == 1
    shown = [line for line in screen(raw) if line]
    assert shown[-2].startswith("Error: cat waits for a terminal") is False  # named by the direct child
    assert shown[-2].startswith("Error: sh waits for a terminal") and shown[-1].startswith("Hint: ")


CLAUDE = REPO / "node_modules" / ".bin" / "claude"


@pytest.mark.skipif(not CLAUDE.exists(), reason="the pinned claude CLI is not installed (npm ci)")
def test_real_claude_without_print_gets_the_terminal(tmp_path):
    """Claude Code without -p is its interactive UI: since issue 33 it gets the terminal and
    the run is interactive (before, it was stopped for SIGTTOU and recorded as failed, which
    this test pinned). A fresh config dir makes Claude check its connection first, which
    fails here (no network): it says so on the terminal and exits; the run has its exit code."""
    home = tmp_path / "home"
    env_dir = tmp_path / "claude-config"
    env_dir.mkdir()
    code, raw, secs = in_terminal(["run", "--", str(CLAUDE)], home, timeout=60,
                                  env={"CLAUDE_CONFIG_DIR": str(env_dir), "HOME": str(tmp_path)})
    assert secs < 45
    assert b"Welcome" in raw and b"Claude" in raw  # Claude's own UI, drawn on the terminal
    m = re.search(rb"ledger: (run_[0-9a-f]{8}) (\w+)", raw)
    assert m, raw[-2000:]
    snap = read_run(resolve_selector(home, m.group(1).decode()))
    assert snap.surface == "interactive" and snap.harness == "claude"
    assert snap.exit_code == code and snap.outcome == ("completed" if code == 0 else "failed")
    assert b"Error: " not in raw and b"waits for a terminal" not in raw
