"""`ledger demo`: record a few runs from recorded real client streams (shipped with ledger)
through `ledger run`'s own path (process control, capture, adapters, the record writer), so
`runs`, `show` and `report` have something real-looking to show without an agent or a key."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from ledger.launch.runner import RunOptions, RunResult, launch

STREAMS = Path(__file__).resolve().parent / "demostreams"
# (stream, client name, its headless flags, subject)
DEMO_RUNS = (
    ("claude-tool-then-answer.jsonl", "claude", ["-p", "list the files", "--output-format", "stream-json",
                                                 "--verbose"], "task:demo-1"),
    ("claude-subagent.jsonl", "claude", ["-p", "review with a subagent", "--output-format", "stream-json",
                                         "--verbose"], "task:demo-2"),
    ("codex-tool-then-answer.jsonl", "codex", ["exec", "--json", "-m", "gpt-5", "list the files"], "task:demo-1"),
)


def demo_home() -> Path:
    """The demo's own home, next to (never inside) the user's real one."""
    import platformdirs

    return Path(platformdirs.user_data_dir("ledger-demo", appauthor=False))


def record_demo(home: Path) -> list[RunResult]:
    results = []
    with tempfile.TemporaryDirectory(prefix="ledger-demo-") as tmp:
        for stream, client, flags, subject in DEMO_RUNS:
            d = Path(tmp) / stream.removesuffix(".jsonl")
            d.mkdir()
            exe = d / client  # named like the client: `ledger run` picks its adapter by the name
            exe.write_text(f"#!/bin/sh\ncat '{STREAMS / stream}'\n")
            exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
            results.append(launch(RunOptions(
                argv=[str(exe), *flags], home=home, subjects=[subject], progress=False,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})))
    return results
