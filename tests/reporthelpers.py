"""Helpers for the report tests: runs with given start times, streams, receipts and costs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

import orjson
from typer.testing import CliRunner

from ledger.cli.app import app
from ledger.records import RunCapture, read_run

runner = CliRunner()
STREAMS = Path(__file__).resolve().parent / "data" / "streams"

# Figures of a real Claude Code 2.1.328 result (tests/data/streams/claude-tool-then-answer.jsonl):
# per-model usage and the client's own cost for this run, which is the stream's final receipt.
CLAUDE_RESULT = {"input_tokens": 203, "output_tokens": 43, "cache_read_tokens": 3000,
                 "cache_write_tokens": 150, "cost_usd": 0.0027165}


def cli(*args: str) -> Any:
    return runner.invoke(app, list(args))


def report_json(*args: str) -> tuple[dict[str, Any], str]:
    res = cli("report", *args, "--json")
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return json.loads(res.stdout), res.stderr


def make(home: Path, created_at: str, streams: Sequence[dict[str, Any]] = (), *, harness: str = "claude",
         model: str | None = "claude-sonnet-4-5", outcome: str | None = "completed", subjects: Sequence[str] = (),
         skill: str | None = None, repo: str | None = None, ended_at: str | None = None) -> Path:
    """A run recorded with the real writer. Each stream: {provider, model, counters, final}
    where counters may hold cost_usd (written with the last observation)."""
    cap = RunCapture(home, harness=harness, model=model, subjects=list(subjects), skill=skill, repo=repo,
                     created_at=created_at)
    for i, s in enumerate(streams):
        attempt = cap.start_attempt(s.get("provider", "anthropic"), s.get("model", model))
        st = cap.usage_stream(provider=s.get("provider", "anthropic"), model=s.get("model", model),
                              attempt_key=attempt, turn_key=f"turn-{i + 1}")
        counters = dict(s["counters"])
        half = {k: v // 2 for k, v in counters.items() if k != "cost_usd" and isinstance(v, int)}
        if half:
            st.observe(half)  # a provisional observation first, like a real stream
        st.observe(counters, final_receipt=s.get("final", False))
    if outcome is None:
        cap.detach()  # leave it unsettled
    else:
        cap.settle(outcome, ended_at=ended_at)
    return Path(cap.path)


def claude_stream(**over: Any) -> dict[str, Any]:
    counters = dict(CLAUDE_RESULT)
    counters.update(over.pop("counters", {}))
    return {"provider": "anthropic", "model": over.pop("model", "claude-sonnet-4-5"), "counters": counters,
            "final": over.pop("final", True)}


def make_abandoned(home: Path, created_at: str) -> Path:
    """An unsettled run whose launcher's boot is over: liveness says abandoned."""
    path = make(home, created_at, [claude_stream(final=False, counters={"cost_usd": None})], outcome=None)
    mpath = path / "manifest.json"
    m = orjson.loads(mpath.read_bytes())
    m["boot_id"] = "00000000-0000-0000-0000-000000000000"
    os.chmod(mpath, 0o600)
    mpath.write_bytes(orjson.dumps(m))
    return path


def add_gap(path: Path) -> None:
    """One evidence gap: a torn last line."""
    with open(path / "events.jsonl", "ab") as f:
        f.write(b'{"schema_version":1,"seq":999')


def snapshot(path: Path):
    return read_run(path)
