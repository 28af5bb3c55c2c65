"""Stream adapters, one per harness, and how a harness is chosen and configured.

`adapter_class(harness)` gives the class; `detect_harness(argv)` picks one from the
executable's basename (`--harness auto`); `model_from_argv(harness, argv)` reads the model
flag of harnesses that have one; `prompt_from_argv(harness, argv)` finds the task prompt.
"""

from __future__ import annotations

import os
from typing import Sequence

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ledger.launch.adapters.base import Adapter

HARNESSES = ("claude", "codex", "gemini", "command")
# imported on demand: a run pays only for its own harness's module
_CLASSES = {"claude": ("claude", "ClaudeAdapter"), "codex": ("codex", "CodexAdapter"),
            "gemini": ("gemini", "GeminiAdapter"), "command": ("command", "CommandAdapter")}
_BASENAMES = {"claude": "claude", "claude-code": "claude", "codex": "codex", "gemini": "gemini"}


def adapter_class(harness: str) -> "type[Adapter]":
    module, name = _CLASSES[harness]
    return getattr(importlib.import_module(f"ledger.launch.adapters.{module}"), name)


def detect_harness(argv: Sequence[str]) -> str:
    """The harness for `--harness auto`: from the executable's basename (`npx`-style
    wrappers such as `npx claude` / `node .../claude` look at the next argument)."""
    if not argv:
        return "command"
    names = [os.path.basename(argv[0])]
    if names[0] in ("npx", "node", "bunx", "pnpx") and len(argv) > 1:
        names.append(os.path.basename(argv[1]).split("@")[0])
    for n in names:
        for suffix in (".js", ".mjs", ".cmd", ".exe"):
            if n.endswith(suffix):
                n = n[: -len(suffix)]
        if n in _BASENAMES:
            return _BASENAMES[n]
    return "command"


def stream_format_ok(harness: str, argv: Sequence[str]) -> bool:
    """Is the agent asked for the machine-readable stream its adapter reads?

    claude: `--output-format stream-json` (which needs `--verbose` with `-p`); codex:
    `exec ... --json`; gemini: `--output-format stream-json` / `-o stream-json`."""
    argv = list(argv)
    if harness == "claude":
        return _option_value(argv, ("--output-format",)) == "stream-json"
    if harness == "codex":
        args = argv[1:]
        return ("exec" in args or "e" in args) and ("--json" in args or "--experimental-json" in args)
    if harness == "gemini":
        return _option_value(argv, ("--output-format", "-o")) == "stream-json"
    return True


def model_from_argv(harness: str, argv: Sequence[str]) -> str | None:
    argv = list(argv)
    if harness == "claude":
        return _option_value(argv, ("--model",))
    if harness in ("codex", "gemini"):
        value = _option_value(argv, ("-m", "--model"))
        if harness == "codex":
            for i, a in enumerate(argv[1:], start=1):  # -c model=NAME overrides the config
                if a in ("-c", "--config") and i + 1 < len(argv):
                    kv = argv[i + 1].replace(" ", "")
                    if kv.startswith("model="):
                        value = kv.split("=", 1)[1].strip("\"'")
        return value
    return None


def _option_value(argv: list[str], names: tuple[str, ...]) -> str | None:
    """The last value given to one of `names` (`--opt VALUE` or `--opt=VALUE`)."""
    value = None
    for i, a in enumerate(argv[1:], start=1):
        if a in names and i + 1 < len(argv):
            value = argv[i + 1]
        else:
            for n in names:
                if n.startswith("--") and a.startswith(n + "="):
                    value = a[len(n) + 1:]
    return value


# options that take a value, per harness (so their values are not taken for the prompt)
_VALUE_OPTS = {
    "claude": {"--output-format", "--input-format", "--model", "--resume", "-r", "--max-turns",
               "--system-prompt", "--append-system-prompt", "--permission-mode", "--session-id",
               "--fallback-model", "--settings", "--mcp-config", "--agents", "--max-budget-usd",
               "--json-schema", "--setting-sources", "--permission-prompt-tool", "--agent",
               "--system-prompt-file", "--append-system-prompt-file", "--betas", "--debug-file"},
    "codex": {"-m", "--model", "-c", "--config", "-p", "--profile", "-s", "--sandbox", "-C", "--cd",
              "--output-schema", "-o", "--output-last-message", "-i", "--image", "--color",
              "-a", "--ask-for-approval", "--add-dir", "--local-provider", "--enable", "--disable"},
    "gemini": {"-m", "--model", "--output-format", "-o", "--approval-mode", "--include-directories",
               "--allowed-tools", "--allowed-mcp-server-names", "-e", "--extensions", "--resume", "-r",
               "--telemetry-target", "--proxy"},
}
_VARIADIC = {"claude": {"--allowedTools", "--allowed-tools", "--disallowedTools", "--disallowed-tools",
                        "--add-dir", "--tools", "--plugin-dir", "--mcp-config", "--file"}}


def prompt_from_argv(harness: str, argv: Sequence[str]) -> tuple[str | None, str | None]:
    """(system prompt, task prompt) as given on the command line, when they can be found."""
    argv = list(argv)
    system = None
    task = None
    if harness == "claude":
        for i, a in enumerate(argv):
            if a in ("--system-prompt", "--append-system-prompt") and i + 1 < len(argv):
                system = argv[i + 1]
            if a in ("-p", "--print") and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                task = argv[i + 1]
    elif harness == "gemini":
        for i, a in enumerate(argv):
            if a in ("-p", "--prompt", "-i", "--prompt-interactive") and i + 1 < len(argv):
                task = argv[i + 1]
            elif a.startswith("--prompt="):
                task = a.split("=", 1)[1]
    if task is None and harness in ("claude", "codex", "gemini"):
        positional = _positionals(harness, argv[1:])
        if harness == "codex":
            positional = [p for p in positional if p not in ("exec", "e", "resume")]
            if "resume" in argv and len(positional) >= 2:
                positional = positional[1:]  # the first positional of `resume` is the thread id
        if positional and positional[-1] != "-":
            task = positional[-1]
    return system, task


def _positionals(harness: str, args: list[str]) -> list[str]:
    value_opts = _VALUE_OPTS.get(harness, set())
    variadic = _VARIADIC.get(harness, set())
    out: list[str] = []
    i = 0
    in_variadic = False
    while i < len(args):
        a = args[i]
        if a == "--":
            out.extend(args[i + 1:])
            break
        if a.startswith("-") and a != "-":
            in_variadic = a in variadic
            if a in value_opts and "=" not in a:
                i += 1
            i += 1
            continue
        if not in_variadic:
            out.append(a)
        i += 1
    return out
