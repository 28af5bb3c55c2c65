"""A long import and a first index say what they are doing and how far they are, on a
terminal only (issue 28): a pty sees the progress line, a pipe sees none of it."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from ledger import progressline

sys.path.insert(0, str(Path(__file__).parent))
from claudehistory import generate  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
# the delay and the throttle set to 0 in the child: a small history is "long work"
RUN = ("import sys, runpy, ledger.progressline as p; p.DELAY = 0; p.INTERVAL = 0; "
       "sys.argv = ['ledger'] + sys.argv[1:]; runpy.run_module('ledger', run_name='__main__')")


def env(home: Path) -> dict[str, str]:
    e = {**os.environ, "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home)}
    e.pop("LEDGER_DB", None)
    return e


def on_pty(args: list[str], home: Path) -> tuple[int, bytes]:
    """Run ledger with stderr on a pty (stdout a pipe): (exit code, what the terminal got)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-c", RUN, *args], stdout=subprocess.DEVNULL, stderr=slave,
                         stdin=subprocess.DEVNULL, env=env(home))
    os.close(slave)
    out = b""
    while True:
        r, _, _ = select.select([master], [], [], 60)
        if not r:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # (EIO: the child closed the terminal)
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(60), out


@pytest.fixture
def history(tmp_path: Path) -> Path:
    cfg = tmp_path / "cfg"
    generate(cfg, sessions=6, seed=3, pad=20)
    return cfg


def test_a_terminal_sees_the_import_and_the_first_index_progress(tmp_path, history):
    home = tmp_path / "home"
    code, out = on_pty(["import", "claude", "--from", str(history)], home)
    assert code == 0, out
    assert b"\rledger: archiving Claude Code logs: " in out
    assert b" files (100 %)" in out
    code, out = on_pty(["report", "daily", "--tz", "UTC"], home)
    assert code == 0, out
    assert b"\rledger: indexing Claude Code sessions: " in out and b" sessions (" in out
    assert b"\rledger: building the report tables" in out
    assert b"\r\x1b[K" in out  # (the line is erased before the command's own output)
    for line in out.replace(b"\r\n", b"\n").split(b"\r"):
        assert len(line.rstrip(b"\x1b[K\n")) <= 80 or b"\n" in line  # (the progress line fits 80 columns)


def test_a_pipe_sees_no_progress(tmp_path, history):
    home = tmp_path / "home"
    for args in (["import", "claude", "--from", str(history)], ["report", "daily", "--tz", "UTC"]):
        p = subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, env=env(home), timeout=120)
        assert p.returncode == 0, p.stderr
        assert b"\r" not in p.stderr and b"\x1b[" not in p.stderr
        assert b"archiving" not in p.stderr and b"indexing Claude" not in p.stderr


def test_short_work_and_a_finished_line(monkeypatch):
    class Tty:
        def __init__(self):
            self.text = ""

        def isatty(self):
            return True

        def write(self, s):
            self.text += s

        def flush(self):
            pass

    t = Tty()
    progressline.use(t)
    clock = [100.0]
    monkeypatch.setattr(progressline.time, "monotonic", lambda: clock[0])
    try:
        progressline.show("reading", 1, 10, "files")
        clock[0] += 0.5
        progressline.show("reading", 2, 10, "files")
        assert t.text == ""  # (work shorter than DELAY says nothing)
        clock[0] += 0.6
        progressline.show("reading", 3, 10, "files")
        assert t.text == "\rledger: reading: 3/10 files (30 %)\x1b[K"
        clock[0] += 0.05
        progressline.show("reading", 4, 10, "files")  # (throttled)
        assert t.text.count("\r") == 1
        progressline.show("reading", 2_000_000_000, 4_000_000_000, "MB")
        assert t.text.count("\r") == 1
        clock[0] += 0.3
        progressline.show("reading", 2_000_000_000, 4_000_000_000, "MB")
        assert t.text.endswith("\rledger: reading: 2,000/4,000 MB (50 %)\x1b[K")
        progressline.done()
        assert t.text.endswith("\r\x1b[K")
        t.text = ""
        progressline.done()  # (nothing shown since: nothing to erase)
        assert t.text == ""
    finally:
        progressline.use(None)
