"""`ledger replay RUN` (issue 33): a recorded headless run's launch request run again as a
new run whose parent it is, subjects inherited; `--dry-run` prints the command; each
refusal (no launch request, a redacted prompt, the harness not installed, an interactive
run) is `Error:` + `Hint:`, exit 1.

Fake agents (tests/launchkit.py) cover the refusals and the parent link; the real clients
against the mock prove the same prompt reaches the provider again (marked `agents`).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from launchkit import REPO, fake_agent, ledger_cli, replay, result_event, stream_bytes
from ledger.records import read_run


def _env(home: Path, path: str | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home)}
    for k in ("LF_RUN_ID", "LF_RUN_DIR", "LEDGER_RUN_ID", "LEDGER_RUN_DIR"):
        env.pop(k, None)
    if path is not None:
        env["PATH"] = path
    return env


def _runs(home: Path) -> dict[str, dict]:
    p = ledger_cli(["runs", "--json", "--all"], env=_env(home))
    assert p.returncode == 0, p.stderr
    return {r["id"]: r for r in json.loads(p.stdout)}


def _refused(p, *words: str) -> str:
    err = p.stderr.decode()
    assert p.returncode == 1, err
    assert err.startswith("Error: ") and "\nHint: " in err and "Traceback" not in err, err
    for w in words:
        assert w in err, err
    return err


def _recorded_claude(tmp_path: Path, home: Path, prompt: str = "fix the test"):
    result, snap = replay(home, tmp_path, "claude", stream_bytes("claude-tool-then-answer.jsonl"),
                          ["-p", prompt], subjects=["task:LOO-9"], skill="fixer",
                          cwd=str(tmp_path))
    assert result.outcome == "completed"
    return result, snap


def test_replay_makes_a_child_run_with_the_same_command(tmp_path):
    home = tmp_path / "home"
    src, snap = _recorded_claude(tmp_path, home)
    exe = result_event(src.path)["command"][0]
    dry = ledger_cli(["replay", src.run_id, "--dry-run"], env=_env(home))
    assert dry.returncode == 0, dry.stderr
    assert shlex.split(dry.stdout.decode()) == result_event(src.path)["command"]
    assert shlex.split(dry.stdout.decode())[:3] == [exe, "-p", "fix the test"]
    doc = json.loads(ledger_cli(["replay", src.run_id[:12], "--dry-run", "--json"], env=_env(home)).stdout)
    assert doc["parent_run_id"] == src.run_id and doc["cwd"] == str(tmp_path) and doc["harness"] == "auto"
    assert len(list(home.glob("runs/*/run_*"))) == 1  # a dry run runs nothing

    p = ledger_cli(["replay", src.run_id, "--json"], env=_env(home), cwd="/")
    assert p.returncode == 0, p.stderr
    new = json.loads(p.stdout)
    assert new["run_id"] != src.run_id and new["outcome"] == "completed"
    child = read_run(new["path"])
    assert child.parent_run_id == src.run_id
    assert [(s.selector, s.source) for s in child.subjects] == [("task:LOO-9", "inherited")]
    assert child.skill == "fixer" and child.harness == "claude" and child.model == snap.model
    assert child.cwd == str(tmp_path)  # the source run's directory, not the caller's
    assert result_event(new["path"])["command"] == result_event(src.path)["command"]
    manifest = json.loads((Path(new["path"]) / "manifest.json").read_text())
    assert manifest["launch"]["task_prompt"] == "fix the test"
    assert _runs(home)[new["run_id"]]["parent_run_id"] == src.run_id


def test_replay_refuses_a_run_without_launch_request(tmp_path):
    home = tmp_path / "home"
    p = ledger_cli(["run", "--", "true"], env=_env(home))
    assert p.returncode == 0
    (run,) = home.glob("runs/*/run_*")
    _refused(ledger_cli(["replay", run.name], env=_env(home)), "no launch request was recorded",
             "a plain command has none")


def test_replay_refuses_a_redacted_prompt(tmp_path):
    home = tmp_path / "home"
    secret = "sk-ant-api03-" + "x" * 30
    src, _ = _recorded_claude(tmp_path, home, prompt=f"use the key {secret}")
    manifest = json.loads((Path(src.path) / "manifest.json").read_text())
    assert secret not in manifest["launch"]["task_prompt"]  # (the record never held it)
    err = _refused(ledger_cli(["replay", src.run_id], env=_env(home)), "was redacted", "never guesses")
    assert secret not in err
    _refused(ledger_cli(["replay", src.run_id, "--dry-run"], env=_env(home)), "was redacted")


def test_replay_refuses_when_the_harness_is_not_installed(tmp_path):
    home = tmp_path / "home"
    src, _ = _recorded_claude(tmp_path, home)
    exe = Path(result_event(src.path)["command"][0])
    exe.unlink()
    _refused(ledger_cli(["replay", src.run_id], env=_env(home)), "harness is not installed here",
             "install claude")
    # a bare name that is not on PATH
    result, _ = replay(home, tmp_path, "claude", stream_bytes("claude-tool-then-answer.jsonl"), ["-p", "hi"])
    cmd = result_event(result.path)["command"]
    exe_dir = str(Path(cmd[0]).parent)
    from ledger.launch.replay import plan_replay
    from ledger.errors import LedgerError

    env = {"PATH": "/nonexistent"}
    # the recorded argv names an absolute path: PATH does not matter, the file does
    assert plan_replay(home, result.run_id, env).argv[0] == cmd[0]
    os.rename(exe_dir, exe_dir + "-gone")
    with pytest.raises(LedgerError) as e:
        plan_replay(home, result.run_id, env)
    assert "not installed" in e.value.message and e.value.hint


def test_replay_refuses_an_interactive_run(tmp_path):
    from ledger.records.writer import publish_run

    home = tmp_path / "home"
    m = publish_run(home, harness="claude", surface="interactive", launch={"agent": "claude", "task_prompt": ""})
    _refused(ledger_cli(["replay", m.run_id], env=_env(home)), "is an interactive run", "ledger run -- claude")


def test_replay_unknown_run(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    _refused(ledger_cli(["replay", "run_ffff"], env=_env(home)), "was not found")


# ---------------------------------------------------------------- the real clients

from agentenv import (  # noqa: E402
    agent_cwd, claude_argv, claude_available, claude_env, codex_argv, codex_available, codex_env,
)
from mockprovider import MockProvider, answer  # noqa: E402


def _require(available: bool, name: str) -> None:
    if not available:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is required under CI")
        pytest.skip(f"node_modules/.bin/{name} is not installed")


def _user_text(req: dict) -> str:
    """The last user message's text of a request body (Anthropic messages / OpenAI input)."""
    body = req["body"]
    items = body.get("messages") or body.get("input") or []
    users = [m for m in items if isinstance(m, dict) and m.get("role") == "user"]
    content = users[-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(c.get("text", "") for c in content if isinstance(c, dict))


def _real_replay(tmp_path: Path, env: dict, argv: list[str], api: str, mp: MockProvider) -> tuple[dict, dict]:
    import subprocess

    home = tmp_path / "ledger-home"
    full = {**env, "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home)}
    cwd = agent_cwd(tmp_path)
    p = subprocess.run([sys.executable, "-m", "ledger", "run", "--json", "--subject", "task:R-1", "--", *argv],
                       env=full, cwd=str(cwd), stdin=subprocess.DEVNULL, capture_output=True, timeout=180)
    src = json.loads(p.stdout)
    assert src["outcome"] == "completed", p.stderr
    p = subprocess.run([sys.executable, "-m", "ledger", "replay", src["run_id"], "--json"], env=full, cwd="/",
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=180)
    assert p.returncode == 0, p.stderr
    new = json.loads(p.stdout)
    reqs = mp.main_requests(api)
    assert len(reqs) == 2
    assert _user_text(reqs[1]) == _user_text(reqs[0])
    assert "replay me exactly" in _user_text(reqs[1])
    child = read_run(new["path"])
    assert new["outcome"] == child.outcome == "completed" and child.parent_run_id == src["run_id"]
    assert [(s.selector, s.source) for s in child.subjects] == [("task:R-1", "inherited")]
    assert child.usage.output_tokens > 0 and new["cost_usd"] is not None
    return src, new


@pytest.mark.agents
def test_replay_real_claude(tmp_path):
    _require(claude_available(), "claude")
    with MockProvider([answer("first"), answer("second")]) as mp:
        src, new = _real_replay(tmp_path, claude_env(tmp_path, mp), claude_argv("replay me exactly"), "anthropic", mp)
    assert src["final_answer"] == "first" and new["final_answer"] == "second"
    assert new["provider_session_id"] != src["provider_session_id"]


@pytest.mark.agents
def test_replay_real_codex(tmp_path):
    _require(codex_available(), "codex")
    with MockProvider([answer("first"), answer("second")]) as mp:
        src, new = _real_replay(tmp_path, codex_env(tmp_path, mp), codex_argv("replay me exactly"), "openai", mp)
    assert src["final_answer"] == "first" and new["final_answer"] == "second"


def test_runs_tree_and_show_list_children(tmp_path):
    home = tmp_path / "home"
    src, _ = _recorded_claude(tmp_path, home)
    kids = []
    for _ in range(2):
        p = ledger_cli(["replay", src.run_id, "--json"], env=_env(home))
        assert p.returncode == 0, p.stderr
        kids.append(json.loads(p.stdout)["run_id"])
    grand = json.loads(ledger_cli(["replay", kids[0], "--json"], env=_env(home)).stdout)["run_id"]
    other = ledger_cli(["run", "--", "true"], env=_env(home))
    assert other.returncode == 0
    show = json.loads(ledger_cli(["show", src.run_id, "--json"], env=_env(home)).stdout)
    assert [c["id"] for c in show["children"]] == kids
    assert all(c["outcome"] == "completed" and c["harness"] == "claude" for c in show["children"])
    assert json.loads(ledger_cli(["show", grand, "--json"], env=_env(home)).stdout)["children"] == []
    text = ledger_cli(["show", src.run_id], env=_env(home)).stdout.decode()
    assert [line.split()[1] for line in text.splitlines() if line.startswith("child: ")] == kids
    nested = json.loads(ledger_cli(["runs", "--tree", "--json"], env=_env(home)).stdout)
    (top,) = [r for r in nested if r["id"] == src.run_id]
    assert [c["id"] for c in top["children"]] == kids
    assert [c["id"] for c in top["children"][0]["children"]] == [grand]
    assert len(nested) == 2  # the source and the plain command at the top; the rest nested
    table = ledger_cli(["runs", "--tree"], env={**_env(home), "COLUMNS": "200"}).stdout.decode()
    ids = [line.split()[0:2] for line in table.splitlines() if "run_" in line]
    flat = [" ".join(x) for x in ids]
    i = next(n for n, x in enumerate(flat) if x.startswith(src.run_id[:12]))
    assert flat[i + 1:i + 4] == [f"└ {kids[0][:12]}", f"└ {grand[:12]}", f"└ {kids[1][:12]}"]
    assert f"  └ {grand[:12]}" in table  # (the grandchild one level deeper)


def test_run_tree_order():
    from types import SimpleNamespace as S

    from ledger.cli.runs_cmd import run_tree

    a, b = S(id="a", parent_run_id=None, started="3"), S(id="b", parent_run_id="a", started="2")
    c, d = S(id="c", parent_run_id="b", started="1"), S(id="d", parent_run_id="gone", started="0")
    e, f = S(id="e", parent_run_id="f", started="5"), S(id="f", parent_run_id="e", started="6")  # a cycle
    assert [(n, s.id) for n, s in run_tree([d, c, b, a, e, f])] == [
        (0, "d"), (0, "a"), (1, "b"), (2, "c"), (0, "e"), (1, "f")]


def test_replay_refuses_an_unsettled_run(tmp_path):
    from ledger.records.writer import publish_run

    home = tmp_path / "home"
    m = publish_run(home, harness="claude", launch={"agent": "claude", "task_prompt": "go"})
    _refused(ledger_cli(["replay", m.run_id], env=_env(home)), "no launch request was recorded",
             "has not settled yet")
