"""Interactive runs (issue 33): `ledger run -- claude --model …` and `ledger run -- codex -m …`
without headless flags, typed into a real terminal (tmux) against tests/mockprovider.py.

The agent gets the terminal (Ctrl-C reaches it, not ledger), ledger records one run with
surface `interactive`, a `handoff` event, the agent's exit code, and the usage its session
log holds (= what the mock served on the session), counted once after a later
`ledger import`; the terminal is usable afterwards.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentenv import (
    CLAUDE_BIN, CLAUDE_MODEL, CODEX_BIN, CODEX_MODEL, DUMMY_ANTHROPIC_KEY, agent_cwd, claude_available, claude_env,
    codex_available, codex_env,
)
from launchkit import REPO, events, result_event
from ledger.records import read_run
from mockprovider import MockProvider, answer
from tmuxterm import Terminal, tmux_available

pytestmark = pytest.mark.agents


def _require(available: bool, name: str) -> None:
    if available:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{name} is required under CI")
    pytest.skip(f"{name} is not installed")


def _ledger(home: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    full = {**env, "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home)}
    p = subprocess.run([sys.executable, "-m", "ledger", *args], env=full, capture_output=True, timeout=180,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, (args, p.stdout[-2000:], p.stderr[-3000:])
    return p


def _claude_ready(env: dict, cwd: Path) -> None:
    """What a person answers once in a fresh Claude Code config dir: onboarding done, the
    API key from the environment approved, the directory trusted (no network check)."""
    cfg = Path(env["CLAUDE_CONFIG_DIR"])
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True, "lastOnboardingVersion": "2.1.328", "theme": "dark",
        "customApiKeyResponses": {"approved": [DUMMY_ANTHROPIC_KEY[-20:]], "rejected": []},
        "projects": {str(cwd): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True,
                                "allowedTools": []}}}))


def _codex_ready(env: dict) -> None:
    """Codex 0.169 asks once whether to move to a newer model: answered `existing`."""
    with open(Path(env["CODEX_HOME"]) / "config.toml", "a") as f:
        f.write(f'\n[notice.model_migrations]\n"{CODEX_MODEL}" = "gpt-6-sol"\n')


def _after_exit(term: Terminal) -> int:
    """The agent has exited: ledger's summary line, then the shell prompt; ledger's exit code."""
    term.wait_for(r"^ledger: run_[0-9a-f]{8} ", 60)
    term.type_line("echo EXIT=$?")
    code = int(term.wait_for(r"^EXIT=(\d+)", 20).group(1))
    # the terminal is usable: canonical mode and echo are back, a typed line echoes
    term.type_line("stty -a | tr ' ' '\\n' | grep -E '^-?(icanon|echo|isig|icrnl)$' | tr '\\n' ' '; echo")
    modes = term.wait_for(r"^(-?icanon -?isig -?icrnl -?echo|[-a-z ]*icanon[-a-z ]*)$", 20).group(0).split()
    assert "icanon" in modes and "echo" in modes and "isig" in modes and "icrnl" in modes, modes
    term.type_line("echo typed-$((6*7))")
    term.wait_for(r"^typed-42$", 20)
    return code


def _stop_codex_daemon(codex_home: Path) -> None:
    """Codex 0.169's TUI starts a background app-server from $CODEX_HOME/packages that
    outlives it (its own session): the test's own is ended (found by its executable's path)."""
    import signal
    import time

    prefix = str(codex_home) + os.sep
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            argv0 = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0", 1)[0].decode()
        except (OSError, UnicodeDecodeError):
            continue
        if argv0.startswith(prefix):
            pids.append(int(name))
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    time.sleep(0.5)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _wait_cleared(term: Terminal, timeout: float = 20) -> None:
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        screen = term.screen()
        assert not re.search(r"^ledger: run_", screen, re.M), screen  # ledger did not stop the agent
        if "Choose what happens to the current task" in screen:
            term.keys("Escape")
        elif not re.search(r"^› a draft to clear", screen, re.M) and re.search(r"^› ", screen, re.M):
            return
        time.sleep(0.3)
    raise AssertionError(f"Ctrl-C did not clear Codex's draft:\n{term.screen()}")


def _submit(term: Terminal, text: str, answer: str, tries: int = 4) -> None:
    """Type `text`, then Enter once it shows; Enter again if the agent was not ready for it
    yet (Gemini CLI draws its input box before it takes Enter)."""
    term.text(text)
    term.wait_for(r"> " + re.escape(text), 20)
    for _ in range(tries):
        import time

        time.sleep(1.0)
        term.keys("Enter")
        try:
            term.wait_for(answer, 15)
            return
        except AssertionError:
            continue
    term.wait_for(answer, 30)


def _submit_codex(term: Terminal, text: str, answer: str, tries: int = 4) -> None:
    """Type `text` into Codex's composer, then Enter once it shows there; Enter again only
    while the text still sits in the composer (the bottom `› ` line), which is what a lost
    Enter looks like (Codex 0.169 drops one while it is still starting, seen in CI): a
    second Enter on a submitted prompt would hit an empty composer, which Codex ignores."""
    import time

    term.text(text)
    term.wait_for(r"^› " + re.escape(text), 20)
    for _ in range(tries):
        time.sleep(1.0)  # (Codex takes text and Enter in one burst for a paste)
        term.keys("Enter")
        end = time.monotonic() + 15
        while time.monotonic() < end:
            screen = term.screen()
            if re.search(answer, screen, re.M):
                return
            composer = re.findall(r"^› ?(.*)$", screen, re.M)
            if composer and composer[-1].strip() == text and time.monotonic() > end - 10:
                break  # 5 s on and still in the composer: the Enter was lost
            time.sleep(0.2)
    term.wait_for(answer, 30)


def _one_run(home: Path) -> Path:
    runs = list(home.glob("runs/*/run_*"))
    assert len(runs) == 1, runs
    return runs[0]


def _common_checks(run: Path, exit_code: int, harness: str) -> dict:
    snap = read_run(run)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["surface"] == "interactive" and manifest["harness"] == harness
    assert [s["selector"] for s in manifest["subjects"]] == ["task:TUI-1"] and manifest["skill"] == "chat"
    assert manifest["launch"]["agent"] == harness
    evs = events(run)
    assert [e for e in evs if e["type"] == "handoff"] == [
        {**[e for e in evs if e["type"] == "handoff"][0], "surface": "interactive"}]
    res = result_event(run)
    assert res["exit_code"] == exit_code == 0 and snap.outcome == "completed"
    assert res["provider_session"]["status"] == "resolved" and res["evidence"] == "verified"
    assert snap.provider_session_id == res["provider_session"]["session_id"]
    return res


def _counted_once(home: Path, env: dict, client: str, root: str, run_id: str, sid: str) -> dict:
    before = json.loads(_ledger(home, env, "report", "daily", "--tz", "UTC", "--json").stdout)
    _ledger(home, env, "import", client, "--from", root, "--json")
    after = json.loads(_ledger(home, env, "report", "daily", "--tz", "UTC", "--json").stdout)
    assert after["totals"] == before["totals"] and after["totals"]["runs"] == 1
    assert json.loads(_ledger(home, env, "runs", "--all", "--json", "--source", f"{client}-log").stdout) == []
    linked = json.loads(_ledger(home, env, "sql", "--json",
                                "SELECT row_id, linked_run_id, counted_as FROM sessions_v").stdout)
    assert linked == [{"row_id": f"{client}-{sid}", "linked_run_id": run_id, "counted_as": run_id}]
    return after


def test_claude_interactive_two_prompts_and_exit(tmp_path):
    _require(tmux_available(), "tmux")
    _require(claude_available(), "claude")
    home = tmp_path / "ledger-home"
    cwd = agent_cwd(tmp_path)
    with MockProvider([answer("first answer"), answer("second answer")]) as mp:
        env = {**claude_env(tmp_path, mp), "TERM": "xterm-256color", "PYTHONPATH": str(REPO),
               "LEDGER_HOME": str(home)}
        _claude_ready(env, cwd)
        term = Terminal(tmp_path, env, cwd)
        try:
            term.type_line(f"{sys.executable} -m ledger run --subject task:TUI-1 --skill chat -- "
                           f"{CLAUDE_BIN} --model {CLAUDE_MODEL}")
            term.wait_for(r"Claude Code v", 60)
            term.wait_for(r"^❯", 60)
            term.type_line("say one", pause=0.5)
            term.wait_for(r"first answer", 60)
            # Ctrl-C reaches the agent (it asks for a second one), not ledger (the run goes on)
            term.keys("C-c")
            term.wait_for(r"Press Ctrl-C again to exit", 20)
            term.type_line("say two", pause=0.5)
            term.wait_for(r"second answer", 60)
            term.type_line("/exit", pause=0.5)
            code = _after_exit(term)
        finally:
            term.close()
        served = mp.served_usage("anthropic")
    assert code == 0
    run = _one_run(home)
    res = _common_checks(run, code, "claude")
    snap = read_run(run)
    u = snap.usage
    assert len(served) == 2
    assert u.input_tokens == sum(s["input_tokens"] for s in served) == 203
    assert u.output_tokens == sum(s["output_tokens"] for s in served) == 43
    assert u.cache_read_tokens == sum(s["cache_read_input_tokens"] for s in served) == 3000
    assert u.cache_write_tokens == sum(s["cache_creation_input_tokens"] for s in served) == 150
    # the cost is the client's own (its cost-state), the same as `claude -p` reports for these calls
    assert u.cost_usd == pytest.approx(0.0027165, rel=1e-12) and u.final_streams == 1
    # the session was pinned: ledger passed --session-id, the transcript has that name
    assert res["command"][1] == "--session-id" and res["command"][2] == snap.provider_session_id
    assert Path(res["provider_session"]["files"][0]).name == f"{snap.provider_session_id}.jsonl"
    show = json.loads(_ledger(home, env, "show", run.name, "--json").stdout)
    assert show["surface"] == "interactive" and show["usage"]["cost_usd"] == u.cost_usd
    assert show["usage"]["input_tokens"] == 203 and show["exit_code"] == 0 and show["ok"] is True
    _counted_once(home, env, "claude", env["CLAUDE_CONFIG_DIR"], run.name, snap.provider_session_id)


def test_codex_interactive_two_prompts_and_exit(tmp_path):
    _require(tmux_available(), "tmux")
    _require(codex_available(), "codex")
    home = tmp_path / "ledger-home"
    cwd = agent_cwd(tmp_path)
    with MockProvider([answer("first answer"), answer("second answer"), answer("third answer")]) as mp:
        env = {**codex_env(tmp_path, mp), "TERM": "xterm-256color", "PYTHONPATH": str(REPO),
               "LEDGER_HOME": str(home)}
        _codex_ready(env)
        term = Terminal(tmp_path, env, cwd)
        try:
            term.type_line(f"{sys.executable} -m ledger run --subject task:TUI-1 --skill chat -- "
                           f"{CODEX_BIN} -m {CODEX_MODEL}")
            term.wait_for(r"OpenAI Codex", 60)
            term.wait_for(r"^› ", 60)
            _submit_codex(term, "say one", r"• first answer")
            # Ctrl-C reaches Codex, not ledger: it clears the draft in Codex's composer (or,
            # while Codex still has a task running, asks what to do with it: esc goes back)
            term.text("a draft to clear")
            term.wait_for(r"^› a draft to clear", 20)
            term.keys("C-c")
            _wait_cleared(term)
            # (the next scripted answer, or a later one: the title requests take steps too)
            _submit_codex(term, "say two", r"› say two\n(?:.*\n)*?• \S")
            term.wait_for(r"Worked for(?:.*\n)+(?:.*\n)*?.*Worked for", 60)
            term.type_line("/exit", pause=1.0)
            code = _after_exit(term)
        finally:
            term.close()
            _stop_codex_daemon(Path(env["CODEX_HOME"]))
        requests = mp.main_requests("openai")
        served = mp.served["openai"]
    assert code == 0
    run = _one_run(home)
    _common_checks(run, code, "codex")
    snap = read_run(run)
    sid = snap.provider_session_id
    # what the mock served on the session's own thread (Codex also asks for a thread title on
    # a thread of its own, which no rollout records: see docs/run.md)
    on_session = [u for (step, u), r in zip(served, requests)
                  if r["body"].get("client_metadata", {}).get("thread_id") == sid]
    titles = [r for r in requests if r["body"].get("client_metadata", {}).get("thread_id") != sid]
    assert len(on_session) == 2 and all('"thread_source\\":\\"thread_title' in json.dumps(r["body"]) or
                                        "thread_title" in json.dumps(r["body"]) for r in titles)
    u = snap.usage
    assert u.total_input_tokens == sum(s["input_tokens"] for s in on_session)
    assert u.cache_read_tokens == sum(s["input_tokens_details"]["cached_tokens"] for s in on_session)
    assert u.output_tokens == sum(s["output_tokens"] for s in on_session)
    assert u.reasoning_tokens == sum(s["output_tokens_details"]["reasoning_tokens"] for s in on_session)
    assert u.cost_usd is None  # (a rollout reports no cost: estimated by the reports, as for `codex exec`)
    show = json.loads(_ledger(home, env, "show", run.name, "--json").stdout)
    assert show["surface"] == "interactive" and show["usage"]["output_tokens"] == u.output_tokens
    _counted_once(home, env, "codex", env["CODEX_HOME"], run.name, sid)


def test_gemini_interactive_two_prompts_and_quit(tmp_path):
    from agentenv import GEMINI_BIN, GEMINI_MODEL, gemini_available, gemini_env

    _require(tmux_available(), "tmux")
    _require(gemini_available(), "gemini")
    home = tmp_path / "ledger-home"
    cwd = agent_cwd(tmp_path)
    with MockProvider([answer("first answer"), answer("second answer")]) as mp:
        env = {**gemini_env(tmp_path, mp), "TERM": "xterm-256color", "PYTHONPATH": str(REPO),
               "LEDGER_HOME": str(home)}
        term = Terminal(tmp_path, env, cwd)
        try:
            term.type_line(f"{sys.executable} -m ledger run --subject task:TUI-1 --skill chat -- "
                           f"{GEMINI_BIN} -m {GEMINI_MODEL}")
            term.wait_for(r"Type your message", 90)
            _submit(term, "say one", r"✦ first answer")
            _submit(term, "say two", r"✦ second answer")
            term.type_line("/quit", pause=1.0)
            code = _after_exit(term)
        finally:
            term.close()
        served = mp.served_usage("gemini")
    assert code == 0 and len(served) == 2
    run = _one_run(home)
    _common_checks(run, code, "gemini")
    snap = read_run(run)
    u = snap.usage
    assert u.total_input_tokens == sum(s["promptTokenCount"] for s in served)
    assert u.cache_read_tokens == sum(s["cachedContentTokenCount"] for s in served)
    assert u.output_tokens == sum(s["candidatesTokenCount"] + s["thoughtsTokenCount"] for s in served)
    assert u.reasoning_tokens == sum(s["thoughtsTokenCount"] for s in served)
    _counted_once(home, env, "gemini", str(Path(env["HOME"]) / ".gemini"), run.name, snap.provider_session_id)
