"""`ledger run --repeat N --jobs K` with real processes (issue 30): N trials, at most K at once,
each its own run with its trial number under one parent run; Ctrl-C (a real SIGINT) stops
every trial and settles each, the ones not yet started included, and leaves no process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launchkit import REPO
from ledger.records import read_run
from ledger.records.reader import read_manifest


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LF_", "LEDGER_"))}
    env.update(PYTHONPATH=str(REPO), LEDGER_HOME=str(home))
    return env


def _ledger(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ledger", *args], env=_env(home), stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=timeout)


def _records(home: Path) -> list[Path]:
    return sorted(p for p in (home / "runs").glob("*/run_*") if p.is_dir())


def _descendants(pid: int) -> set[int]:
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            parents[int(d.name)] = int(stat.rpartition(")")[2].split()[1])
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for child, parent in parents.items():
            if parent == p and child not in out:
                out.add(child)
                todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_repeat_runs_n_trials_k_at_a_time_under_one_parent(home):
    p = _ledger(home, "run", "--json", "--repeat", "4", "--jobs", "2", "--arm", "b", "--subject", "task:t1",
                "--", "sh", "-c", "sleep 0.6")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["trials"] == 4 and doc["jobs"] == 2 and doc["outcome"] == "completed" and doc["arm"] == "b"
    parent = read_manifest(Path(home) / "runs" / doc["run_id"][4:6] / doc["run_id"])
    assert parent.repeat == {"trials": 4, "jobs": 2} and parent.trial is None and parent.surface == "repeat"
    trials = [read_manifest(r["path"]) for r in doc["runs"]]
    assert [t.trial for t in trials] == [{"number": i, "of": 4} for i in range(1, 5)]
    assert {t.parent_run_id for t in trials} == {doc["run_id"]}
    assert {t.arm for t in trials} == {"b"}
    assert all([(s.selector, s.source) for s in t.subjects] == [("task:t1", "declared")] for t in trials)
    assert parent.subjects == [] and parent.skill is None  # a grouping run: the trials are for the task
    assert len(_records(home)) == 5
    # at most 2 at once, and 2 did run at once (from the records' own start and end times)
    spans = [(read_run(r["path"]).started, read_run(r["path"]).ended) for r in doc["runs"]]
    points = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
    live = peak = 0
    for _, d in points:
        live += d
        peak = max(peak, live)
    assert peak == 2 and doc["max_running"] == 2
    # the index: arm, trial and trials per run
    q = _ledger(home, "sql", "SELECT run_id, arm, trial, trials FROM runs_v ORDER BY trial", "--json")
    rows = json.loads(q.stdout)
    assert [(r["arm"], r["trial"], r["trials"]) for r in rows] == [("b", None, 4)] + [("b", i, 4) for i in range(1, 5)]
    # `ledger runs --json` and `ledger show` say them too
    listed = json.loads(_ledger(home, "runs", "--all", "--json").stdout)
    assert sorted((r["arm"], r["trial"], r["trials"]) for r in listed if r["trial"]) == [("b", i, 4) for i in range(1, 5)]
    shown = _ledger(home, "show", doc["runs"][1]["run_id"]).stdout.decode()
    assert "arm: b\n" in shown and "trial: 2 of 4\n" in shown
    assert "trial: repeat of 4 trials\n" in _ledger(home, "show", doc["run_id"]).stdout.decode()


def test_timeout_applies_to_each_trial(home):
    t0 = time.monotonic()
    p = _ledger(home, "run", "--json", "--repeat", "2", "--jobs", "2", "--timeout", "1", "--", "sleep", "30")
    assert p.returncode == 124 and time.monotonic() - t0 < 20, p.stderr
    doc = json.loads(p.stdout)
    assert [(r["stop_reason"], r["exit_code"], r["error_kind"]) for r in doc["runs"]] == [("timeout", 124, "timeout")] * 2
    assert doc["outcome"] == "completed"  # (the repeat itself was not stopped: its trials were)


def test_repeat_exit_code_is_the_first_failing_trials(home):
    p = _ledger(home, "run", "--repeat", "2", "--", "sh", "-c", "exit 3")
    assert p.returncode == 3
    assert b"trial 1/2" in p.stderr and b"trial 2/2" in p.stderr and b"2 trials, 0 ok" in p.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_stops_every_trial_and_settles_each(home, sig):
    proc = subprocess.Popen([sys.executable, "-m", "ledger", "run", "--json", "--repeat", "3", "--jobs", "2",
                             "--", "sleep", "30"], env=_env(home), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        sleeps: set[int] = set()
        while time.monotonic() < deadline:  # both running trials have started their `sleep 30`
            sleeps = {p for p in _descendants(proc.pid)
                      if Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"30"]}
            if len(sleeps) == 2:
                break
            time.sleep(0.1)
        assert len(sleeps) == 2, "the two first trials did not start"
        everything = _descendants(proc.pid)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, err
    doc = json.loads(out)
    assert doc["outcome"] == "interrupted" and len(doc["runs"]) == 3
    for r in doc["runs"]:
        snap = read_run(Path(home) / "runs" / r["run_id"][4:6] / r["run_id"])
        assert snap.outcome == "interrupted" and snap.error_kind == "cancelled", snap
        assert snap.parent_run_id == doc["run_id"]
    assert [read_manifest(Path(home) / "runs" / r["run_id"][4:6] / r["run_id"]).trial["number"]
            for r in doc["runs"]] == [1, 2, 3]
    # the third never started: recorded all the same, settled interrupted
    third = Path(home) / "runs" / doc["runs"][2]["run_id"][4:6] / doc["runs"][2]["run_id"]
    (result,) = [e for e in map(json.loads, (third / "events.jsonl").read_text().splitlines()) if e["type"] == "result"]
    assert result["error"] == f"stopped by {sig.name} before the trial started" and result["stop_reason"] == "signal"
    parent = read_run(Path(home) / "runs" / doc["run_id"][4:6] / doc["run_id"])
    assert parent.outcome == "interrupted"
    assert len(_records(home)) == 4
    time.sleep(0.2)
    assert not [p for p in everything if _alive(p)], "a process outlived the repeat"


def test_a_trial_killed_hard_is_settled_by_the_repeat(home):
    proc = subprocess.Popen([sys.executable, "-m", "ledger", "run", "--json", "--repeat", "1", "--", "sleep", "30"],
                            env=_env(home), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        trial_ledger = None
        while time.monotonic() < deadline and trial_ledger is None:
            for p in _descendants(proc.pid):
                try:
                    if b"--trial" in Path(f"/proc/{p}/cmdline").read_bytes():
                        trial_ledger = p
                except OSError:
                    pass
            time.sleep(0.1)
        assert trial_ledger is not None
        while time.monotonic() < deadline and len(_records(home)) < 2:
            time.sleep(0.05)
        sleeper = [p for p in _descendants(trial_ledger)]
        os.kill(trial_ledger, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in sleeper:
            try:
                os.kill(p, signal.SIGKILL)  # (a SIGKILLed launcher leaves its agent running: docs/run.md)
            except ProcessLookupError:
                pass
    doc = json.loads(out)
    (trial,) = doc["runs"]
    snap = read_run(Path(home) / "runs" / trial["run_id"][4:6] / trial["run_id"])
    assert snap.outcome == "interrupted" and snap.ok is False
    assert proc.returncode != 0


@pytest.mark.parametrize("args,message", [
    (["--repeat", "0"], "--repeat must be at least 1"),
    (["--repeat", "x"], "--repeat expects a whole number"),
    (["--repeat", "2", "--trial", "1/2"], "given by --repeat"),
    (["--trial", "3/2"], "--trial expects I/N"),
    (["--jobs", "2"], "--jobs goes with --repeat"),
])
def test_repeat_usage_errors(home, args, message):
    p = _ledger(home, "run", *args, "--", "true")
    assert p.returncode == 2 and message in p.stderr.decode(), p.stderr


def test_ctrl_c_at_the_terminal_reaches_each_trial_once(tmp_path):
    """^C typed at a real pseudo-terminal: the terminal signals the foreground process group,
    which holds the repeat only (each trial runs in its own group), and the repeat forwards
    it once, so every trial's agent gets the usual grace (its TERM trap runs and prints)."""
    import pty
    import select

    home = tmp_path / "h"
    agent = "trap 'sleep 1; echo graceful-$LEDGER_RUN_ID; exit 0' TERM; echo started; sleep 30 & wait"
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home), "TERM": "xterm"}
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(sys.executable, [sys.executable, "-m", "ledger", "run", "--repeat", "3", "--jobs", "2", "--",
                                   "sh", "-c", agent], env)
    out = bytearray()
    sent = False
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < 90:
            if not sent and out.count(b"started") >= 2:
                time.sleep(0.3)  # (the traps are set before `started` is printed)
                os.write(fd, b"\x03")
                sent = True
            r, _, _ = select.select([fd], [], [], 0.2)
            if not r:
                continue
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            out += data
    finally:
        if time.monotonic() - t0 >= 90:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert sent, bytes(out)
    assert os.waitstatus_to_exitcode(status) == 130, bytes(out)
    assert out.count(b"graceful-run_") == 2, bytes(out)  # both running agents stopped with grace
    runs = [read_run(p) for p in _records(home)]
    assert len(runs) == 4 and {r.outcome for r in runs} == {"interrupted"}
    assert {r.error_detail for r in runs if r.parent_run_id} == {"stopped by signal:SIGINT"}
