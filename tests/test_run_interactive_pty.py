"""Interactive runs on a pseudo-terminal with a fake agent (issue 33): what ledger does with
the terminal, whatever the agent does with it. The fake is named `claude` and started
without `-p`, so `ledger run` hands it the terminal as it does the real client
(tests/test_run_interactive.py drives the real clients in tmux).
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import time
from pathlib import Path

import pytest

from launchkit import REPO, events, ledger_cli, result_event
from ledger.records import read_run

FAKE = r'''#!{python}
import os, signal, sys, termios, time, tty
mode = sys.argv[sys.argv.index("--mode") + 1]
print("argv", " ".join(sys.argv[1:]), "fg", os.tcgetpgrp(0) == os.getpgrp(), "pgid", os.getpgrp(), flush=True)
if mode == "int":
    tty.setcbreak(0)
    def winch(*a):
        rows, cols = os.get_terminal_size(0).lines, os.get_terminal_size(0).columns
        os.write(1, f"winch {{rows}}x{{cols}}\n".encode())
    def intr(*a):
        os.write(1, b"agent got SIGINT\n")
        os._exit(0)
    signal.signal(signal.SIGWINCH, winch)
    signal.signal(signal.SIGINT, intr)
    print("ready", flush=True)
    while True:
        time.sleep(0.1)
elif mode == "exit3":
    tty.setraw(0)
    print("raw and leaving\r", flush=True)
    os._exit(3)
elif mode == "sleep":
    tty.setraw(0)
    print("ready\r", flush=True)
    time.sleep(300)
elif mode == "quit":
    pass
elif mode == "tstp":
    print("ready", flush=True)
    line = sys.stdin.readline()
    print("read", line.strip(), flush=True)
'''


def fake_claude(tmp_path: Path) -> Path:
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    exe = d / "claude"
    exe.write_text(FAKE.format(python=sys.executable))
    exe.chmod(0o755)
    return exe


class Pty:
    """`python -m ledger ARGS` as the session leader of a fresh pty (as a shell's job)."""

    def __init__(self, args: list[str], home: Path, cfg: Path) -> None:
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home), "TERM": "xterm",
               "HOME": str(cfg), "CLAUDE_CONFIG_DIR": str(cfg / ".claude")}
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execve(sys.executable, [sys.executable, "-m", "ledger", *args], env)
        self.out = bytearray()
        self.modes = termios.tcgetattr(self.fd)  # (the pty's initial modes: cooked, echo)

    def read_until(self, pattern: bytes, timeout: float = 30) -> re.Match:
        end = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.out)
            if m:
                return m
            if time.monotonic() > end:
                raise AssertionError(f"{pattern!r} not seen: {bytes(self.out)!r}")
            r, _, _ = select.select([self.fd], [], [], 0.2)
            if r:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    raise AssertionError(f"{pattern!r} not seen before EOF: {bytes(self.out)!r}")
                self.out += data

    def write(self, data: bytes) -> None:
        os.write(self.fd, data)

    def wait(self, timeout: float = 30) -> int:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            r, _, _ = select.select([self.fd], [], [], 0.2)
            if r:
                try:
                    self.out += os.read(self.fd, 65536)
                except OSError:
                    pass
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError(f"ledger did not exit: {bytes(self.out)!r}")

    def lflag(self) -> int:
        return termios.tcgetattr(self.fd)[3]

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


def _run(home: Path) -> Path:
    (run,) = home.glob("runs/*/run_*")
    return run


@pytest.fixture
def cfg(tmp_path) -> Path:
    c = tmp_path / "cfg"
    (c / ".claude").mkdir(parents=True)
    return c


def test_ctrl_c_and_window_size_reach_the_agent_not_ledger(tmp_path, cfg):
    home = tmp_path / "home"
    t = Pty(["run", "--subject", "task:P-1", "--", str(fake_claude(tmp_path)), "--mode", "int"], home, cfg)
    try:
        m = t.read_until(rb"argv (.*) fg (\w+) pgid (\d+)")
        assert m.group(2) == b"True"  # the agent holds the terminal's foreground
        assert re.match(rb"--session-id [0-9a-f-]{36} --mode int", m.group(1))
        t.read_until(rb"ready")
        fcntl.ioctl(t.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
        t.read_until(rb"winch 33x101")
        t.write(b"\x03")  # Ctrl-C
        t.read_until(rb"agent got SIGINT")
        code = t.wait()
    finally:
        t.close()
    assert code == 0
    run = _run(home)
    snap = read_run(run)
    assert snap.outcome == "completed" and snap.surface == "interactive" and snap.exit_code == 0
    res = result_event(run)
    assert res["stop_reason"] is None and res["stopped_by"] is None  # ledger stopped nothing
    assert [e["surface"] for e in events(run) if e["type"] == "handoff"] == ["interactive"]
    # nothing was sent to the fake provider: its session has no transcript; the run says why
    assert res["provider_session"]["status"] == "unresolved"
    assert "wrote no transcript for session" in res["provider_session"]["reason"]
    assert snap.provider_session_id == res["command"][2]
    assert res["evidence"] == "unverifiable" and snap.ok is False


def test_terminal_restored_after_the_agent_left_it_raw(tmp_path, cfg):
    home = tmp_path / "home"
    t = Pty(["run", "--", str(fake_claude(tmp_path)), "--mode", "exit3"], home, cfg)
    try:
        t.read_until(rb"raw and leaving")
        code = t.wait()
        lflag = t.lflag()
    finally:
        t.close()
    assert code == 3
    assert lflag & termios.ECHO and lflag & termios.ICANON and lflag & termios.ISIG
    snap = read_run(_run(home))
    assert snap.outcome == "failed" and snap.exit_code == 3 and snap.surface == "interactive"


def test_ledger_stop_of_an_interactive_run_restores_the_terminal(tmp_path, cfg):
    home = tmp_path / "home"
    t = Pty(["run", "--", str(fake_claude(tmp_path)), "--mode", "sleep"], home, cfg)
    try:
        pgid = int(t.read_until(rb"pgid (\d+)").group(1))
        t.read_until(rb"ready")
        assert not t.lflag() & termios.ECHO  # the agent's raw mode
        env = {**os.environ, "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home)}
        t0 = time.monotonic()
        p = ledger_cli(["stop", _run(home).name], env=env)
        assert p.returncode == 0, p.stderr
        code = t.wait()
        assert time.monotonic() - t0 < 5
        lflag = t.lflag()
    finally:
        t.close()
    assert code == 143
    assert lflag & termios.ECHO and lflag & termios.ICANON
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)
    run = _run(home)
    assert read_run(run).outcome == "interrupted"
    assert result_event(run)["stop_reason"] == "stop_request"


def test_not_a_terminal_keeps_the_headless_path(tmp_path, cfg):
    """stdin/stdout not a terminal: no hand-over (the agent is recorded as before)."""
    home = tmp_path / "home"
    env = {**os.environ, "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home), "HOME": str(cfg),
           "CLAUDE_CONFIG_DIR": str(cfg / ".claude")}
    p = ledger_cli(["run", "--", str(fake_claude(tmp_path)), "--mode", "neither"], env=env)
    snap = read_run(_run(home))
    assert snap.surface == "headless"
    assert b"--session-id" not in p.stdout + p.stderr


def test_ctrl_z_stops_the_agent_as_a_job(tmp_path, cfg):
    """Ctrl-Z: the agent stops, ledger takes the terminal back and stops itself (the shell's
    job control); continued, the agent has the terminal again and goes on."""
    home = tmp_path / "home"
    t = Pty(["run", "--", str(fake_claude(tmp_path)), "--mode", "tstp"], home, cfg)
    try:
        t.read_until(rb"ready")
        t.write(b"\x1a")  # Ctrl-Z
        end = time.monotonic() + 10
        while time.monotonic() < end:  # ledger itself stops (as a shell's job would be)
            pid, status = os.waitpid(t.pid, os.WUNTRACED | os.WNOHANG)
            if pid and os.WIFSTOPPED(status):
                break
            time.sleep(0.05)
        else:
            raise AssertionError(f"ledger did not stop: {bytes(t.out)!r}")
        assert os.tcgetpgrp(t.fd) == t.pid  # the terminal is back with ledger's group
        os.kill(t.pid, signal.SIGCONT)  # `fg`
        time.sleep(0.3)
        t.write(b"hello\n")
        t.read_until(rb"read hello")
        code = t.wait()
    finally:
        t.close()
    assert code == 0
    res = result_event(_run(home))
    assert res["job_stops"] == 1 and read_run(_run(home)).outcome == "completed"


@pytest.mark.parametrize("flag,value", [("--max-cost", "1"), ("--expect-skill", "fix")])
def test_stream_options_are_refused_for_an_interactive_run(tmp_path, cfg, flag, value):
    home = tmp_path / "home"
    t = Pty(["run", flag, value, "--", str(fake_claude(tmp_path)), "--mode", "int"], home, cfg)
    try:
        code = t.wait()
    finally:
        t.close()
    assert code == 1
    out = bytes(t.out).decode()
    assert f"Error: {flag} needs the agent's stream" in out and "Hint: run the agent headless" in out
    assert "argv" not in out and not list(home.glob("runs/*/run_*"))  # nothing started, nothing recorded


def test_a_session_not_found_at_exit_is_resolved_by_a_later_import(tmp_path, cfg, db_url):
    """The agent's transcript appears only after ledger gave up (here: written after the run,
    Claude Code 2.1.328's own TUI transcript, tests/data/captures/claude/model_tui, under the
    pinned session id): `ledger import` then gives the run the session's figures, counted
    once (no imported session of its own), equal to what the mock served."""
    home = tmp_path / "home"
    t = Pty(["run", "--", str(fake_claude(tmp_path)), "--mode", "quit"], home, cfg)
    try:
        t.read_until(rb"argv")
        assert t.wait() == 0
    finally:
        t.close()
    run = _run(home)
    res = result_event(run)
    sid = res["command"][2]
    assert res["provider_session"]["status"] == "unresolved"
    assert f"wrote no transcript for session {sid}" in res["provider_session"]["reason"]
    # the transcript, as the real client wrote it, under the run's session id
    cap = REPO / "tests" / "data" / "captures" / "claude" / "model_tui"
    truth = json.loads((cap / "truth.json").read_text())
    (src,) = cap.glob("projects/*/*.jsonl")
    old = src.stem
    later = tmp_path / "later"
    (later / "projects" / src.parent.name).mkdir(parents=True)
    (later / "projects" / src.parent.name / f"{sid}.jsonl").write_text(src.read_text().replace(old, sid))
    env = {**os.environ, "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home), "LEDGER_DB": db_url}
    p = ledger_cli(["import", "claude", "--from", str(later), "--json"], env=env)
    assert p.returncode == 0, p.stderr
    knowable = [r for r in truth["responses"] if r["max_tokens"] != 1]  # (as test_conformance_claude)
    want_in = sum(r["usage"]["input_tokens"] for r in knowable)
    want_out = sum(r["usage"]["output_tokens"] for r in knowable)
    want_cost = sum(r["cost_usd"] for r in knowable)
    runs = json.loads(ledger_cli(["runs", "--json"], env=env).stdout)
    rows = runs["runs"] if isinstance(runs, dict) else runs
    assert [r["id"] for r in rows] == [run.name]  # counted once: no imported session of its own
    shown = json.loads(ledger_cli(["show", run.name, "--json"], env=env).stdout)
    assert shown["usage"]["input_tokens"] == want_in and shown["usage"]["output_tokens"] == want_out, shown
    assert shown["cost_usd"] == pytest.approx(want_cost, abs=1e-9)
    assert shown["provider_session_id"] == sid and shown["streams"]
    rep = json.loads(ledger_cli(["report", "session", "--tz", "UTC", "--json"], env=env).stdout)
    (row,) = rep["rows"]
    assert row["input_tokens"] == want_in and row["output_tokens"] == want_out
    assert row["cost_usd"] == pytest.approx(want_cost, abs=1e-9)
    # a second import changes nothing (still once)
    assert ledger_cli(["import", "claude", "--from", str(later)], env=env).returncode == 0
    rep2 = json.loads(ledger_cli(["report", "session", "--tz", "UTC", "--json"], env=env).stdout)
    assert rep2["rows"] == rep["rows"]
