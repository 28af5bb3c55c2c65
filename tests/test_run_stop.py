"""`ledger stop RUN` (issue 33): a stop request in the run directory plus SIGTERM to the
launcher when it is this host's; the run settles `interrupted`, naming who stopped it.

The launcher runs in a real process (`python -m ledger run -- sleep 300`), the stop comes
from another process (`python -m ledger stop`), or through the stop file alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launchkit import LEDGER, REPO, ledger_cli, result_event
from ledger.launch import stop as stopmod
from ledger.records import jsonio
from ledger.records.reader import read_terminal


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home)}


def start_run(home: Path, *cmd: str, extra: tuple[str, ...] = (), env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([*LEDGER, "run", "--no-progress", *extra, "--", *cmd], env=env or _env(home),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def wait_run(home: Path, timeout: float = 30) -> Path:
    """The one run directory of the home, once its manifest is published."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = list(home.glob("runs/*/run_*/manifest.json"))
        if found:
            return found[0].parent
        time.sleep(0.05)
    raise AssertionError("no run was published")


def child_pids(pid: int, timeout: float = 20) -> list[int]:
    """The children of `pid` (the agent ledger started), once there is one."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            kids = []
        if kids:
            return [int(k) for k in kids]
        time.sleep(0.05)
    raise AssertionError("the launcher started no child")


def group_members(pgid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if fields[2] == str(pgid).encode() and fields[0] != b"Z":
            out.append(int(name))
    return out


def _assert_stopped(run: Path, launcher: subprocess.Popen, agent: int, t0: float, signalled: bool) -> dict:
    launcher.wait(10)
    assert time.monotonic() - t0 < 5, "the run did not stop within 5 s"
    assert read_terminal(str(run)).outcome == "interrupted"
    assert launcher.returncode == stopmod.EXIT_STOPPED
    assert group_members(agent) == [], "a process of the agent's group outlived the run"
    ev = result_event(run)
    assert ev["stop_reason"] == "stop_request"
    by = ev["stop_request"]["requested_by"]
    assert by["host"] and by["user"] and isinstance(by["pid"], int)
    assert ev["stopped_by"].startswith("ledger stop (") and by["user"] in ev["stopped_by"]
    return ev


def test_stop_sleep_from_another_process(tmp_path):
    home = tmp_path / "home"
    launcher = start_run(home, "sleep", "300")
    run = wait_run(home)
    (agent,) = child_pids(launcher.pid)
    t0 = time.monotonic()
    p = ledger_cli(["stop", run.name[:12], "--json"], env=_env(home))
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["action"] == "stopped" and doc["outcome"] == "interrupted" and doc["signalled"] is True
    _assert_stopped(run, launcher, agent, t0, True)
    # the summary and `ledger show` say who stopped it
    assert b"interrupted" in launcher.stderr.read()
    show = ledger_cli(["show", run.name, "--json"], env=_env(home))
    detail = json.loads(show.stdout)
    assert detail["outcome"] == "interrupted" and detail["error_kind"] == "cancelled"
    assert "ledger stop (" in detail["error_detail"]


def test_stop_through_the_file_alone(tmp_path):
    """No signal at all: the launcher reads the request file (as across containers)."""
    home = tmp_path / "home"
    launcher = start_run(home, "sleep", "300")
    run = wait_run(home)
    (agent,) = child_pids(launcher.pid)
    t0 = time.monotonic()
    assert stopmod.write_stop_request(run, {"user": "someone", "host": "container-2", "pid": 7})
    ev = _assert_stopped(run, launcher, agent, t0, False)
    assert ev["stopped_by"] == "ledger stop (someone@container-2, pid 7)"


def test_stop_no_signal_option_uses_the_file(tmp_path):
    home = tmp_path / "home"
    launcher = start_run(home, "sh", "-c", "trap '' TERM; sleep 300 & sleep 300; wait")
    run = wait_run(home)
    (agent,) = child_pids(launcher.pid)
    t0 = time.monotonic()
    p = ledger_cli(["stop", run.name, "--no-signal", "--json"], env=_env(home))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["signalled"] is False
    # the shell ignores SIGTERM: SIGKILL after the grace period; its background sleep too
    launcher.wait(15)
    assert read_terminal(str(run)).outcome == "interrupted"
    assert group_members(agent) == []
    assert result_event(run)["killed"] is True
    assert time.monotonic() - t0 < 10


def test_stop_settled_run_is_a_no_op(tmp_path):
    home = tmp_path / "home"
    p = ledger_cli(["run", "--", "true"], env=_env(home))
    assert p.returncode == 0
    run = wait_run(home)
    before = sorted(os.listdir(run))
    p = ledger_cli(["stop", run.name], env=_env(home))
    assert p.returncode == 0
    assert "already settled (completed): nothing to stop" in p.stdout.decode()
    assert sorted(os.listdir(run)) == before  # no stop request left in a settled run
    assert read_terminal(str(run)).outcome == "completed"


def _fake_running(home: Path, **manifest_changes) -> Path:
    """A published, unsettled run whose manifest says what the test needs (host, launcher)."""
    from ledger.records.writer import publish_run

    m = publish_run(home, harness="command")
    run = next(home.glob(f"runs/*/{m.run_id}"))
    path = run / "manifest.json"
    body = jsonio.loads(path.read_bytes())
    body.update(manifest_changes)
    os.chmod(path, 0o600)
    path.write_bytes(jsonio.dumps_pretty(body))
    return run


def test_stop_run_on_another_host(tmp_path):
    home = tmp_path / "home"
    run = _fake_running(home, host="elsewhere-7")
    p = ledger_cli(["stop", run.name, "--wait", "0.3"], env=_env(home))
    p.stderr = p.stderr.decode()
    assert p.returncode == 1
    assert "Error: " in p.stderr and "runs on host 'elsewhere-7'" in p.stderr
    assert "Hint: run `ledger stop " in p.stderr and "on elsewhere-7" in p.stderr
    assert "Traceback" not in p.stderr
    # the request is left for a launcher sharing the home
    assert stopmod.read_stop_request(run)["requested_by"]["pid"] > 0


def test_stop_abandoned_run(tmp_path):
    home = tmp_path / "home"
    dead = subprocess.Popen(["true"])
    dead.wait()
    from ledger.records.liveness import hostname

    run = _fake_running(home, host=hostname(), launcher={"pid": dead.pid, "start_ticks": 1})
    p = ledger_cli(["stop", run.name], env=_env(home))
    assert p.returncode == 1 and b"is abandoned" in p.stderr and b"Hint:" in p.stderr
    assert not os.path.exists(stopmod.stop_file(run))


def test_a_reused_pid_is_never_signalled(tmp_path):
    """The manifest's pid is alive but started at another time: another process."""
    victim = subprocess.Popen(["sleep", "30"])
    try:
        from ledger.records.liveness import process_start_ticks
        from ledger.records.model import Manifest

        ticks = process_start_ticks(victim.pid)
        m = Manifest(run_id="run_x", created_at="", harness="command", surface="headless", cwd="/", host="",
                     subjects=[], launcher={"pid": victim.pid, "start_ticks": ticks + 1})
        assert stopmod._signal_launcher(m) is False
        time.sleep(0.2)
        assert victim.poll() is None
        m.launcher = {"pid": victim.pid, "start_ticks": ticks}
        assert stopmod._signal_launcher(m) is True
        assert victim.wait(5) == -signal.SIGTERM
    finally:
        victim.kill()
        victim.wait()


def test_second_request_keeps_the_first(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    assert stopmod.write_stop_request(run, {"user": "a"})
    assert not stopmod.write_stop_request(run, {"user": "b"})
    assert stopmod.read_stop_request(run)["requested_by"] == {"user": "a"}


@pytest.mark.agents
def test_stop_a_real_claude_print_run(tmp_path):
    """`claude -p` waiting on a slow provider: stopped from another process within 5 s,
    nothing of its process group left (Claude Code's node process and its children)."""
    from agentenv import agent_cwd, claude_argv, claude_available, claude_env
    from mockprovider import MockProvider, slow

    if not claude_available():
        if os.environ.get("CI"):
            pytest.fail("claude is required under CI")
        pytest.skip("node_modules/.bin/claude is not installed")
    home = tmp_path / "ledger-home"
    with MockProvider([slow(120)]) as mp:
        env = {**claude_env(tmp_path, mp), "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home)}
        launcher = subprocess.Popen([*LEDGER, "run", "--json", "--", *claude_argv("take your time")], env=env,
                                    cwd=str(agent_cwd(tmp_path)), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        run = wait_run(home)
        (agent,) = child_pids(launcher.pid)
        end = time.monotonic() + 60
        while not mp.main_requests("anthropic") and time.monotonic() < end:  # the agent is waiting on the mock
            time.sleep(0.1)
        assert mp.main_requests("anthropic")
        t0 = time.monotonic()
        p = ledger_cli(["stop", run.name], env=_env(home))
        assert p.returncode == 0, p.stderr
        assert b"stopped: interrupted" in p.stdout
        _assert_stopped(run, launcher, agent, t0, True)
    doc = json.loads(launcher.stdout.read())
    assert doc["outcome"] == "interrupted" and doc["stop_reason"] == "stop_request"
    assert doc["exit_code"] == stopmod.EXIT_STOPPED
