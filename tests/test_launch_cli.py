"""`ledger run` argument handling: ledger's options vs the command, harness detection, the
model and prompt found on the agent's command line."""

from __future__ import annotations

import pytest
import typer

from ledger.cli.run_cmd import parse_run_args
from ledger.launch.adapters import detect_harness, model_from_argv, prompt_from_argv, stream_format_ok


def test_options_then_command():
    opts, cmd = parse_run_args(["--harness", "claude", "--subject", "task:A-1", "--subject=task:B-2", "--json",
                                "--timeout=30", "claude", "-p", "hi", "--model", "m", "--json"])
    assert opts["harness"] == "claude" and opts["subject"] == ["task:A-1", "task:B-2"] and opts["json"]
    assert opts["timeout"] == "30"
    assert cmd == ["claude", "-p", "hi", "--model", "m", "--json"]  # the command keeps its own options


def test_double_dash_separates():
    opts, cmd = parse_run_args(["--model", "x", "--", "--weird-command", "arg"])
    assert opts["model"] == "x" and cmd == ["--weird-command", "arg"]


@pytest.mark.parametrize("args", [["--nope", "true"], ["--timeout"], ["--json=yes", "true"]])
def test_bad_options(args):
    with pytest.raises(typer.BadParameter):
        parse_run_args(args)


@pytest.mark.parametrize("argv, harness", [
    (["claude", "-p", "x"], "claude"), (["/opt/bin/claude"], "claude"), (["codex", "exec"], "codex"),
    (["gemini", "-p", "x"], "gemini"), (["npx", "@anthropic-ai/claude-code", "-p", "x"], "claude"),
    (["npx", "@openai/codex@0.169.0", "exec"], "codex"), (["sh", "-c", "claude"], "command"),
    (["true"], "command"), ([], "command"),
])
def test_detect_harness(argv, harness):
    assert detect_harness(argv) == harness


@pytest.mark.parametrize("harness, argv, model", [
    ("claude", ["claude", "-p", "x", "--model", "claude-sonnet-4-5"], "claude-sonnet-4-5"),
    ("claude", ["claude", "--model=opus"], "opus"),
    ("claude", ["claude", "-m", "x"], None),
    ("codex", ["codex", "exec", "-m", "gpt-5.5", "go"], "gpt-5.5"),
    ("codex", ["codex", "exec", "-c", "model=\"o3\"", "go"], "o3"),
    ("gemini", ["gemini", "-m", "gemini-2.5-pro"], "gemini-2.5-pro"),
    ("command", ["x", "--model", "y"], None),
])
def test_model_from_argv(harness, argv, model):
    assert model_from_argv(harness, argv) == model


@pytest.mark.parametrize("harness, argv, prompts", [
    ("claude", ["claude", "-p", "fix it", "--output-format", "stream-json", "--allowedTools", "Bash", "Read"],
     (None, "fix it")),
    ("claude", ["claude", "--system-prompt", "be brief", "--output-format", "stream-json", "-p", "--", "do x"],
     ("be brief", "do x")),
    ("codex", ["codex", "exec", "--json", "-m", "gpt-5.5", "do it"], (None, "do it")),
    ("codex", ["codex", "exec", "resume", "--json", "019a-thread", "again"], (None, "again")),
    ("gemini", ["gemini", "-p", "hello", "-o", "stream-json"], (None, "hello")),
])
def test_prompt_from_argv(harness, argv, prompts):
    assert prompt_from_argv(harness, argv) == prompts


@pytest.mark.parametrize("harness, argv, ok", [
    ("claude", ["claude", "-p", "x", "--output-format", "stream-json", "--verbose"], True),
    ("claude", ["claude", "-p", "x", "--output-format=stream-json"], True),
    ("claude", ["claude", "-p", "x", "--output-format", "json"], False),
    ("codex", ["codex", "exec", "--json", "x"], True), ("codex", ["codex", "x"], False),
    ("gemini", ["gemini", "-p", "x", "-o", "stream-json"], True), ("gemini", ["gemini", "-p", "x"], False),
    ("command", ["anything"], True),
])
def test_stream_format_ok(harness, argv, ok):
    assert stream_format_ok(harness, argv) is ok
