"""Stream adapters, one per harness, and the registry that names them (the one home of the
list of harnesses: the runner, `ledger run`'s choices and help, and detection read it).

Adding a harness is one adapter module (a subclass of `base.Adapter`, which also knows the
harness's command line: `stream_format_ok`, `model_from_argv`, `prompt_from_argv`) plus one
`HarnessSpec` line in `REGISTRY`. This module stays cheap to import: an adapter's module is
imported only when a run uses it (`adapter_class`), so `ledger run -- true` pays for the
`command` adapter alone (the launch budget, DESIGN §7).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from ledger.launch.adapters.base import Adapter


@dataclass(frozen=True)
class HarnessSpec:
    """One harness: where its adapter lives and how `--harness auto` recognizes it."""

    name: str                  # the --harness value, recorded in the manifest
    module: str                # ledger.launch.adapters.<module>
    class_name: str            # the Adapter subclass in that module
    label: str = ""            # how help text names it ("" for the plain-command fallback)
    executables: tuple[str, ...] = ()  # basenames that `--harness auto` maps to it
    stream_hint: str = ""      # the flags that ask the agent for the stream its adapter reads


COMMAND = "command"  # any other command: no stream to parse (the fallback of `auto`)
REGISTRY: tuple[HarnessSpec, ...] = (
    HarnessSpec("claude", "claude", "ClaudeAdapter", "Claude Code", ("claude", "claude-code"),
                "--output-format stream-json --verbose"),
    HarnessSpec("codex", "codex", "CodexAdapter", "Codex", ("codex",), "exec --json"),
    HarnessSpec("gemini", "gemini", "GeminiAdapter", "Gemini", ("gemini",), "--output-format stream-json"),
    HarnessSpec(COMMAND, "command", "CommandAdapter"),
)

HARNESSES = tuple(s.name for s in REGISTRY)
AGENT_LABELS = tuple(s.label for s in REGISTRY if s.label)
_SPECS = {s.name: s for s in REGISTRY}
_BASENAMES = {exe: s.name for s in REGISTRY for exe in s.executables}
_LAUNCHERS = ("npx", "node", "bunx", "pnpx")  # wrappers whose next argument is the agent
_SUFFIXES = (".js", ".mjs", ".cmd", ".exe")


def harness_spec(harness: str) -> HarnessSpec:
    return _SPECS[harness]


def adapter_class(harness: str) -> "type[Adapter]":
    """The adapter class of a registered harness, its module imported on demand."""
    spec = _SPECS[harness]
    return getattr(importlib.import_module(f"{__name__}.{spec.module}"), spec.class_name)


def detect_harness(argv: Sequence[str]) -> str:
    """The harness for `--harness auto`: from the executable's basename (`npx`-style
    wrappers such as `npx claude` / `node .../claude` look at the next argument)."""
    if not argv:
        return COMMAND
    names = [os.path.basename(argv[0])]
    if names[0] in _LAUNCHERS and len(argv) > 1:
        names.append(os.path.basename(argv[1]).split("@")[0])
    for n in names:
        for suffix in _SUFFIXES:
            if n.endswith(suffix):
                n = n[: -len(suffix)]
        if n in _BASENAMES:
            return _BASENAMES[n]
    return COMMAND


# The per-harness command-line readers, kept as functions for their callers: each asks the
# harness's adapter class.

def stream_format_ok(harness: str, argv: Sequence[str]) -> bool:
    """Is the agent asked for the machine-readable stream its adapter reads?"""
    return adapter_class(harness).stream_format_ok(list(argv))


def model_from_argv(harness: str, argv: Sequence[str]) -> str | None:
    """The model named by the harness's own model flag, if it has one."""
    return adapter_class(harness).model_from_argv(list(argv))


def prompt_from_argv(harness: str, argv: Sequence[str]) -> tuple[str | None, str | None]:
    """(system prompt, task prompt) as given on the command line, when they can be found."""
    return adapter_class(harness).prompt_from_argv(list(argv))
