"""`ledger run` process control with real processes: exit codes, stdin/stdout pass-through,
timeouts, signals to ledger (interrupted), SIGKILL to ledger (abandoned), redaction."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launchkit import LEDGER, REPO, events, home_bytes, jsonl, ledger_cli, replay, result_event
from ledger.launch.runner import RunOptions, launch
from ledger.records import read_run, scan


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LF_", "LEDGER_"))}
    env.update({"LEDGER_HOME": str(home), "PYTHONPATH": str(REPO)}, **extra)
    return env


def _only_run(home: Path):
    runs = [s for s in scan(home) if hasattr(s, "id")]
    assert len(runs) == 1, runs
    return runs[0]


def _wait_for_run(home: Path, timeout: float = 10.0) -> Path:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = list((home / "runs").glob("*/run_*/manifest.json")) if (home / "runs").exists() else []
        if found:
            return found[0].parent
        time.sleep(0.02)
    raise AssertionError("no run was published")


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_true_completes_and_passes_stdout_through_unchanged(home):
    p = ledger_cli(["run", "--", sys.executable, "-c",
                    "import sys; sys.stdout.buffer.write(b'bin\\x00ary\\xff no newline')"], env=_env(home))
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"bin\x00ary\xff no newline"
    snap = _only_run(home)
    assert (snap.outcome, snap.harness, snap.state) == ("completed", "command", "settled")
    ev = result_event(snap.path)
    assert ev["exit_code"] == 0 and ev["evidence"] == "not_applicable"
    tail = Path(snap.path, ev["stdout_tail"]["path"]).read_bytes()
    assert tail == b"bin\x00ary\xff no newline"


def test_exit_code_and_stderr_tail(home):
    p = ledger_cli(["run", "--", "sh", "-c", "echo oops >&2; exit 7"], env=_env(home))
    assert p.returncode == 7 and b"oops" in p.stderr
    snap = _only_run(home)
    assert snap.outcome == "failed"
    ev = result_event(snap.path)
    assert ev["exit_code"] == 7 and ev["returncode"] == 7
    assert Path(snap.path, ev["stderr_tail"]["path"]).read_bytes() == b"oops\n"


def test_stdin_passes_through(home):
    p = ledger_cli(["run", "--", "cat"], env=_env(home), input=b"hello\nworld\n")
    assert p.returncode == 0 and p.stdout == b"hello\nworld\n"


def test_child_gets_the_run_identity_and_nested_runs_link(home):
    p = ledger_cli(["run", "--subject", "task:LOO-1", "--", *LEDGER, "run", "--", "sh", "-c",
                    'echo "$LF_RUN_ID $LEDGER_RUN_ID $LF_PARENT_RUN_ID"'], env=_env(home))
    assert p.returncode == 0, p.stderr
    inner_id, inner_id2, parent = p.stdout.decode().split()
    assert inner_id == inner_id2
    runs = {s.id: s for s in scan(home)}
    assert set(runs) == {inner_id, parent}
    assert runs[inner_id].parent_run_id == parent
    assert [s.selector for s in runs[inner_id].subjects] == ["task:LOO-1"]  # inherited


def test_timeout_stops_the_whole_group(home, tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    t = time.monotonic()
    p = ledger_cli(["run", "--timeout", "0.5", "--", "sh", "-c", f"sleep 300 & echo $! > {pidfile}; wait"],
                   env=_env(home))
    assert p.returncode == 124
    assert time.monotonic() - t < 10
    snap = _only_run(home)
    assert snap.outcome == "interrupted"
    ev = result_event(snap.path)
    assert ev["stop_reason"] == "timeout" and ev["exit_code"] == 124
    grandchild = int(pidfile.read_text())
    for _ in range(100):
        if _gone(grandchild):
            break
        time.sleep(0.02)
    assert _gone(grandchild)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_to_ledger_stops_the_child_and_settles_interrupted(home, tmp_path, sig, code):
    pidfile = tmp_path / "child.pid"
    proc = subprocess.Popen([*LEDGER, "run", "--", "sh", "-c", f"echo $$ > {pidfile}; exec sleep 30"],
                            env=_env(home), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for_run(home)
        for _ in range(200):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            time.sleep(0.02)
        t = time.monotonic()
        proc.send_signal(sig)
        assert proc.wait(timeout=15) == code
        assert time.monotonic() - t < 5  # sleep dies on SIGTERM: no grace period needed
    finally:
        if proc.poll() is None:
            proc.kill()
    snap = _only_run(home)
    assert (snap.outcome, snap.state) == ("interrupted", "settled")
    ev = result_event(snap.path)
    assert ev["stop_reason"] == "signal" and ev["stopped_by"] == f"signal:{sig.name}"
    assert _gone(int(pidfile.read_text()))


def test_sigkill_to_ledger_leaves_an_abandoned_run(home, tmp_path):
    pidfile = tmp_path / "child.pid"
    proc = subprocess.Popen([*LEDGER, "run", "--", "sh", "-c", f"echo $$ > {pidfile}; exec sleep 30"],
                            env=_env(home), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    child = None
    try:
        run_path = _wait_for_run(home)
        for _ in range(200):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            time.sleep(0.02)
        child = int(pidfile.read_text())
        assert read_run(run_path).state == "running"
        proc.kill()
        proc.wait(timeout=10)
        snap = read_run(run_path)
        assert snap.state == "abandoned" and snap.outcome is None
        p = ledger_cli(["runs", "--json", "--all"], env=_env(home))
        assert p.returncode == 0, p.stderr
        rows = json.loads(p.stdout)
        assert [(r["id"], r["state"], r["outcome"]) for r in rows] == [(snap.id, "abandoned", None)]
    finally:
        if proc.poll() is None:
            proc.kill()
        if child is not None:
            try:
                os.killpg(child, signal.SIGKILL)  # the orphaned child we started (its own group)
            except ProcessLookupError:
                pass


def test_child_ignoring_sigterm_is_killed_after_the_grace(home):
    t = time.monotonic()
    result = launch(RunOptions(argv=["sh", "-c", "trap '' TERM; sleep 30"], home=home, timeout=0.3,
                               grace_secs=0.5, progress=False))
    assert result.exit_code == 124 and result.outcome == "interrupted"
    assert time.monotonic() - t < 5
    assert result_event(result.path)["killed"] is True


def test_background_process_holding_stdout_does_not_hang_the_run(home):
    t = time.monotonic()
    result = launch(RunOptions(argv=["sh", "-c", "sleep 4 & echo started"], home=home, progress=False,
                               drain_secs=0.3, stdout_fd=os.open(os.devnull, os.O_WRONLY)))
    assert result.outcome == "completed"
    assert time.monotonic() - t < 3


def test_missing_command(home):
    p = ledger_cli(["run", "--", "no-such-command-xyz"], env=_env(home))
    assert p.returncode == 127
    assert b"cannot start" in p.stderr
    snap = _only_run(home)
    assert snap.outcome == "failed"


@pytest.mark.parametrize("args", [["run"], ["run", "--bogus", "--", "true"], ["run", "--timeout", "x", "--", "true"],
                                  ["run", "--harness", "nope", "--", "true"], ["run", "--timeout"]])
def test_usage_errors_exit_2(home, args):
    p = ledger_cli(args, env=_env(home))
    assert p.returncode == 2, p.stderr
    assert not (home / "runs").exists()


def test_json_output_keeps_stdout_one_document(home):
    p = ledger_cli(["run", "--json", "--subject", "task:X-1", "--", "sh", "-c", "echo child-output"], env=_env(home))
    assert p.returncode == 0
    doc = json.loads(p.stdout)
    assert doc["outcome"] == "completed" and doc["exit_code"] == 0 and doc["harness"] == "command"
    assert doc["evidence"] == "not_applicable" and doc["cost_usd"] is None
    assert b"child-output" in p.stderr  # the command's own stdout went to stderr
    assert _only_run(home).id == doc["run_id"]


def test_help_lists_the_options(home):
    p = ledger_cli(["run", "--help"], env=_env(home))
    assert p.returncode == 0
    for opt in ("--harness", "--subject", "--timeout", "--max-cost", "--expect-skill", "--redact", "--json"):
        assert opt.encode() in p.stdout


def test_secrets_in_env_argv_and_output_are_never_persisted(home):
    canary = "canary-SECRET-4f1d2e3c9b8a7f6e"
    env = _env(home, MY_SERVICE_TOKEN=canary, WEIRD_NAME=canary + "-x")
    p = ledger_cli(["run", "--redact", "WEIRD_NAME", "--", "sh", "-c",
                    f'echo "$MY_SERVICE_TOKEN $WEIRD_NAME"; echo "$MY_SERVICE_TOKEN" >&2; echo {canary}'],
                   env=env)
    assert p.returncode == 0 and canary.encode() in p.stdout  # the user still sees it
    files = home_bytes(home)
    assert files
    for path, data in files:
        assert canary.encode() not in data, path


def test_progress_reports_api_retries_loudly(home, tmp_path, capfd):
    from launchkit import stream_bytes

    replay(home, tmp_path, "claude", stream_bytes("claude-all-500.jsonl"), exit_code=1, progress=True)
    err = capfd.readouterr().err
    assert "API retry #1" in err and "API retry #2" in err


def test_max_cost_stops_the_agent(home, tmp_path):
    line = {"type": "assistant", "message": {"id": "m{}", "model": "claude-sonnet-4-5", "content": [],
                                             "usage": {"input_tokens": 100000, "output_tokens": 1000}},
            "session_id": "s"}
    script = tmp_path / "claude"
    script.write_text("#!/bin/sh\n"
                      + "".join(f"echo '{json.dumps(line).replace('m{}', f'm{i}')}'; sleep 0.05\n" for i in range(100))
                      + "sleep 30\n")
    script.chmod(0o755)
    t = time.monotonic()
    result = launch(RunOptions(argv=[str(script), "--output-format", "stream-json", "--verbose"], home=home,
                               max_cost=1.0, progress=False, grace_secs=1))
    assert time.monotonic() - t < 15
    assert result.outcome == "interrupted" and result.stop_reason == "max_cost" and result.exit_code == 125
    ev = result_event(result.path)
    assert ev["max_cost"]["limit_usd"] == 1.0 and ev["max_cost"]["observed_usd"] > 1.0
    assert ev["max_cost"]["basis"] == "estimated"
    snap = read_run(result.path)
    assert snap.outcome == "interrupted" and snap.usage.final_streams == 0
    # $3/M input: 100k input + 1k output is ~$0.315 a message: stopped after 4, long before 100
    assert snap.usage.input_tokens < 20 * 100000


def test_unwritable_home_is_a_ledger_error(tmp_path):
    p = ledger_cli(["run", "--home", "/dev/null/home", "--", "true"], env=_env(tmp_path / "unused"))
    assert p.returncode == 1
    assert b"Error: cannot create a run record" in p.stderr and b"Hint:" in p.stderr


def test_hot_path_imports_no_database_or_price_table(home):
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "ledger", "run", "--", "true"],
                       env=_env(home), capture_output=True, timeout=60)
    assert p.returncode == 0
    imported = {line.split("|")[-1].strip() for line in p.stderr.decode().splitlines() if "|" in line}
    for heavy in ("sqlalchemy", "alembic", "genai_prices", "rich", "ledger.index"):
        assert not any(m == heavy or m.startswith(heavy + ".") for m in imported), heavy


def test_main_fast_runs_without_typer_parsing(home):
    code = "import sys; from ledger.cli.run_cmd import main_fast; main_fast(sys.argv[1:]); print('typer')"
    p = subprocess.run([sys.executable, "-c", code, "--json", "--", "sh", "-c", "exit 4"], env=_env(home),
                       capture_output=True, timeout=60)
    assert p.returncode == 4 and json.loads(p.stdout)["exit_code"] == 4
    p = subprocess.run([sys.executable, "-c", code, "--timeout", "nope", "--", "true"], env=_env(home),
                       capture_output=True, timeout=60)
    assert p.returncode == 2 and b"--timeout expects a number" in p.stderr
    p = subprocess.run([sys.executable, "-c", code, "--help"], env=_env(home), capture_output=True, timeout=60)
    # --help: left to Typer (issue 34: in every command's Rich style, tests/test_help.py), nothing done
    assert p.returncode == 0 and p.stdout == b"typer\n"
    p = subprocess.run([sys.executable, "-c", code, "--home", "/dev/null/x", "--", "true"], env=_env(home),
                       capture_output=True, timeout=60)
    assert p.returncode == 1 and p.stderr.startswith(b"Error: cannot create a run record")


def test_a_stop_before_the_command_starts_is_not_lost(home):
    import ledger.launch.runner as runner

    launcher = runner.Launcher(RunOptions(argv=["sleep", "30"], home=home, progress=False))
    launcher.signals.received.append(signal.SIGTERM)  # as if SIGTERM came while publishing
    original = launcher.signals.install
    launcher.signals.install = lambda: (original(), None)[1]  # keep the recorded signal
    t = time.monotonic()
    result = launcher.run()
    assert time.monotonic() - t < 5
    assert (result.outcome, result.exit_code, result.stop_reason) == ("interrupted", 143, "signal")
    assert read_run(result.path).outcome == "interrupted"
