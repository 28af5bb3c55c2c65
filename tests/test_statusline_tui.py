"""The real Claude Code TUI (2.1.328, in tmux) with `ledger statusline` as its status line,
against the loopback mock (issue 29): the line appears, it updates after each response, a bad
stdin shows the placeholder without breaking the TUI, and the session figure it showed last
is the session's cost in `ledger report session` after the session ended.

A small tmux driver of its own: the client's onboarding, trust and API-key dialogs are
answered in its config (`.claude.json`), keys are sent with `send-keys`, the screen read with
`capture-pane`. The status-line command is a shell wrapper that keeps each stdin document
(`stdin.jsonl`) and, while a flag file exists, feeds `ledger statusline` garbage instead.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentenv import CLAUDE_BIN, DUMMY_ANTHROPIC_KEY, agent_cwd, claude_available, claude_env
from conftest import REPO
from mockprovider import MockProvider, anthropic_usage, answer

pytestmark = [pytest.mark.agents,
              pytest.mark.skipif(not claude_available() or shutil.which("tmux") is None,
                                 reason="needs node_modules/.bin/claude and tmux")]


class Tui:
    def __init__(self, name: str, cmd: str) -> None:
        self.name = name
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
        subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "160", "-y", "50", cmd], check=True)

    def screen(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True).stdout

    def alive(self) -> bool:
        return subprocess.run(["tmux", "has-session", "-t", self.name], capture_output=True).returncode == 0

    def wait(self, pred, what: str, timeout: float = 120) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            s = self.screen()
            if pred(s):
                return s
            time.sleep(0.4)
        raise AssertionError(f"timed out waiting for {what}:\n{self.screen()}")

    def type(self, text: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, "-l", text], check=True)
        time.sleep(0.6)
        subprocess.run(["tmux", "send-keys", "-t", self.name, "Enter"], check=True)

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def _status(screen: str) -> str | None:
    lines = [ln.strip() for ln in screen.splitlines() if ln.strip().startswith(("Sonnet 4.5 |", "ledger: no status"))]
    return lines[-1] if lines else None


def _session_figure(line: str) -> str:
    return line.split("| session ")[1].split(" |")[0]


def test_the_status_line_in_the_real_tui(tmp_path):
    mp = MockProvider({"anthropic": [answer("first answer", usage=anthropic_usage(1)),
                                     answer("second answer", usage=anthropic_usage(2)),
                                     answer("third answer", usage=anthropic_usage(3))],
                       "after": answer("(mock: script exhausted)", usage=anthropic_usage(9))}).start()
    try:
        env = claude_env(tmp_path, mp, extra={"TZ": "UTC"})
        cwd = agent_cwd(tmp_path)
        cfg = Path(env["CLAUDE_CONFIG_DIR"])
        cfg.mkdir(parents=True, exist_ok=True)
        ledger_home = tmp_path / "ledger-home"
        keep, bad = tmp_path / "stdin.jsonl", tmp_path / "bad-stdin"
        wrapper = tmp_path / "statusline.sh"
        wrapper.write_text("#!/bin/sh\n"
                           f"doc=$(cat); printf '%s\\n' \"$doc\" >> {shlex.quote(str(keep))}\n"
                           f"if [ -e {shlex.quote(str(bad))} ]; then doc='{{not json'; fi\n"
                           f"printf '%s' \"$doc\" | env LEDGER_HOME={shlex.quote(str(ledger_home))} "
                           f"PYTHONPATH={shlex.quote(str(REPO))} {shlex.quote(sys.executable)} -m ledger statusline\n")
        wrapper.chmod(0o755)
        (cfg / ".claude.json").write_text(json.dumps({
            "hasCompletedOnboarding": True, "theme": "dark", "numStartups": 3,
            "customApiKeyResponses": {"approved": [DUMMY_ANTHROPIC_KEY[-20:]], "rejected": []},
            "projects": {str(cwd): {"hasTrustDialogAccepted": True}}}))
        (cfg / "settings.json").write_text(json.dumps({"statusLine": {"type": "command", "command": str(wrapper)}}))
        tenv = {**env, "TERM": "xterm-256color"}
        tenv.pop("NO_COLOR", None)
        cmd = " ".join(["cd", shlex.quote(str(cwd)), "&&", "exec", "env", "-i",
                        *(f"{k}={shlex.quote(v)}" for k, v in tenv.items()), str(CLAUDE_BIN), "--model", "claude-sonnet-4-5"])
        tui = Tui(f"ledger-sl-{os.getpid()}", cmd)
        try:
            tui.wait(lambda s: "❯" in s and _status(s) is not None, "the prompt and a status line", 120)
            shown = []
            for k, prompt in enumerate(("say one", "say two"), 1):
                tui.type(prompt)
                s = tui.wait(lambda s, k=k: ("first answer", "second answer")[k - 1] in s and _status(s)
                             and "| session $" in _status(s) and _session_figure(_status(s)) not in shown,
                             f"the status line after response {k}")
                shown.append(_session_figure(_status(s)))
            assert len(set(shown)) == 2  # it updated after each response
            # a bad stdin: the placeholder, and the TUI goes on answering
            before_bad = [json.loads(ln) for ln in keep.read_text().splitlines() if ln.strip()]
            bad.touch()
            tui.type("say three")
            tui.wait(lambda s: "third answer" in s and _status(s) == "ledger: no status", "the placeholder")
            bad.unlink()
            tui.type("/exit")
            tui.wait(lambda s: not tui.alive() or "❯" not in s, "exit", 60)
            end = time.monotonic() + 30
            while tui.alive() and time.monotonic() < end:
                time.sleep(0.3)
        finally:
            tui.close()
        docs = [json.loads(ln) for ln in keep.read_text().splitlines() if ln.strip()]
        sid = docs[-1]["session_id"]
        assert all(d["session_id"] == sid for d in docs)
        from ledger.report.statusline import money

        # during the session: the figure after two responses is the client's own total then
        # (estimated from the tokens: the client writes its cost-state lines at exit)
        assert shown[1] == f"{money(max(d['cost']['total_cost_usd'] for d in before_bad))} estimated"
        # after it: the session's cost in the report (the client's cost, reported) is what the
        # status line says for it
        lenv = {**os.environ, "LEDGER_HOME": str(ledger_home), "PYTHONPATH": str(REPO)}
        p = subprocess.run([sys.executable, "-m", "ledger", "report", "session", "--json"], capture_output=True,
                           env=lenv, timeout=120)
        assert p.returncode == 0, p.stderr
        final = {r["key"]: r for r in json.loads(p.stdout)["rows"]}[sid]
        assert final["cost_basis"] == "reported"
        assert final["cost_usd"] == pytest.approx(docs[-1]["cost"]["total_cost_usd"])
        p = subprocess.run([sys.executable, "-m", "ledger", "statusline"], input=json.dumps(docs[-1]).encode(),
                           capture_output=True, env=lenv, timeout=120)
        assert _session_figure(p.stdout.decode()) == f"{money(final['cost_usd'])} reported"
    finally:
        mp.stop()
