"""Helpers for the launch / adapter tests: replay a stream through `ledger run`.

`fake_agent()` writes an executable named like the real client (`claude`, `codex`,
`gemini`) that prints a given stream and exits with a given code, so a recorded stream goes
through the whole launch path: process control, capture, strict parsing, the adapter, the
record writer, and back through `ledger.records.read_run`.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

import orjson

from ledger.launch.runner import RunOptions, RunResult, launch
from ledger.records import read_run
from ledger.records.model import RunSnapshot

REPO = Path(__file__).resolve().parent.parent
STREAMS = REPO / "tests" / "data" / "streams"
LEDGER = [sys.executable, "-m", "ledger"]


def stream_lines(name: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (STREAMS / name).read_bytes().splitlines() if line.strip()]


def stream_bytes(name: str) -> bytes:
    return (STREAMS / name).read_bytes()


def jsonl(objs: Sequence[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objs)


def fake_agent(tmp_path: Path, name: str, stream: bytes, exit_code: int = 0) -> Path:
    """An executable `tmp_path/bin-<n>/<name>` that prints `stream` and exits `exit_code`."""
    n = 0
    while (tmp_path / f"bin-{n}").exists():
        n += 1
    d = tmp_path / f"bin-{n}"
    d.mkdir()
    data = d / "stream.jsonl"
    data.write_bytes(stream)
    exe = d / name
    exe.write_text(f"#!/bin/sh\ncat '{data}'\nexit {int(exit_code)}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


STREAM_FLAGS = {"claude": ["--output-format", "stream-json", "--verbose"], "codex": ["exec", "--json"],
                "gemini": ["--output-format", "stream-json"]}


def replay(home: Path, tmp_path: Path, name: str, stream: bytes, args: Sequence[str] = (),
           exit_code: int = 0, stream_flags: bool = True, **opts: Any) -> tuple[RunResult, RunSnapshot]:
    """Run a fake `name` printing `stream` under ledger (in process); return the result and
    the record as read back. The agent's stream flags are added to `args` unless present."""
    exe = fake_agent(tmp_path, name, stream, exit_code)
    args = list(args)
    if stream_flags:
        for flag in STREAM_FLAGS.get(name, []):
            if flag not in args:
                args.append(flag)
    opts.setdefault("progress", False)
    opts.setdefault("env", {"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    result = launch(RunOptions(argv=[str(exe), *args], home=home, **opts))
    return result, read_run(result.path)


def events(run_path: str | Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (Path(run_path) / "events.jsonl").read_bytes().splitlines()]


def result_event(run_path: str | Path) -> dict[str, Any]:
    return [e for e in events(run_path) if e["type"] == "result"][-1]


def assert_stream_bound(run_path: str | Path) -> dict[str, Any]:
    """The raw stream in the record re-hashes to the sha256 and size the result binds."""
    ev = result_event(run_path)
    ref = ev["raw_stream"]
    data = (Path(run_path) / ref["path"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == ref["sha256"]
    assert len(data) == ref["bytes"]
    return ev


def ledger_cli(args: Sequence[str], *, env: dict[str, str] | None = None, cwd: str | Path | None = None,
               input: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """`python -m ledger ARGS` in a real process (signals, exit codes, stdio as users see them)."""
    full_env = dict(os.environ if env is None else env)
    full_env.setdefault("PYTHONPATH", str(REPO))
    return subprocess.run([*LEDGER, *args], env=full_env, cwd=cwd, input=input, capture_output=True,
                          timeout=timeout, stdin=None if input is not None else subprocess.DEVNULL)


def home_bytes(home: Path) -> list[tuple[Path, bytes]]:
    """Every file under a ledger home, with its bytes (for leak checks)."""
    out = []
    for root, _dirs, files in os.walk(home):
        for f in files:
            p = Path(root) / f
            out.append((p, p.read_bytes()))
    return out
