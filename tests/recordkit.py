"""Build run records by hand, byte for byte as the v1 spec (and Loopflow) writes them.

Tests use these to create records the writer under test never produced: damaged ones,
Loopflow-style ones (offsets, nanoseconds, seq holes), and thousands of small ones fast.
Nothing here imports the writer; it only knows the format (reference/run-record-v1.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any, Iterable


def new_id() -> str:
    return "run_" + uuid.uuid4().hex


def record_dir(home: Path, run_id: str) -> Path:
    return Path(home) / "runs" / run_id[4:6] / run_id


def pretty(obj: Any) -> bytes:
    """serde_json::to_vec_pretty style: two-space indent."""
    return json.dumps(obj, indent=2).encode()


def compact(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def manifest(run_id: str, **over: Any) -> dict[str, Any]:
    m: dict[str, Any] = {
        "schema_version": 1,
        "run_id": run_id,
        "parent_run_id": None,
        "created_at": "2026-03-08T06:30:00Z",
        "harness": "claude",
        "model": "claude-sonnet-4-5",
        "surface": "headless",
        "cwd": "/work/repo",
        "repo": "/work/repo",
        "worktree": None,
        "skill": None,
        "subjects": [{"selector": "task:LOO-265", "source": "declared"}],
        "launch": None,
        "context": None,
        "runtime_path": None,
        "runtime_digest": None,
        "host": "loopflow-host-that-is-not-this-one",
        "boot_id": None,
    }
    m.update(over)
    return m


def envelope(seq: int, type_: str, observed_at: str = "2026-03-08T06:30:01.123456789Z", **fields: Any
             ) -> dict[str, Any]:
    ev = {"schema_version": 1, "seq": seq, "observed_at": observed_at, "type": type_}
    ev.update(fields)
    return ev


def usage(seq: int, stream: str, obs: int, counters: dict[str, Any], *, final: bool = False,
          attempt: str | None = None, turn: str = "turn-1", model: str = "claude-sonnet-4-5",
          counter_kind: str = "cumulative", start_known: bool = True, **extra: Any) -> dict[str, Any]:
    return envelope(
        seq, "usage", usage_stream_id=stream, provider="anthropic", model=model,
        attempt_key=attempt or stream.split("/")[0], turn_key=turn, observation_seq=obs,
        counter_kind=counter_kind, start_known=start_known, final_receipt=final, usage=counters,
        **extra,
    )


def events_bytes(events: Iterable[dict[str, Any] | bytes]) -> bytes:
    out = []
    for ev in events:
        out.append(ev if isinstance(ev, bytes) else compact(ev) + b"\n")
    return b"".join(out)


def golden_events() -> list[dict[str, Any]]:
    """The spec's golden case: attempt 1 reports (in 10) then (in 15, out 4); attempt 2
    reports (in 12, out 3); the provider result (cost 0.25) is attempt 2's final receipt."""
    s1, s2 = "attempt-1/turn-1/claude-sonnet-4-5", "attempt-2/turn-1/claude-sonnet-4-5"
    return [
        envelope(0, "provider_attempt_started", provider="anthropic", model="claude-sonnet-4-5",
                 account_id=None, attempt_key="attempt-1"),
        usage(1, s1, 1, {"input_tokens": 10}),
        usage(2, s1, 2, {"input_tokens": 15, "output_tokens": 4}),
        envelope(3, "provider_attempt_finished", attempt_key="attempt-1", outcome="failed"),
        envelope(4, "provider_attempt_started", provider="anthropic", model="claude-sonnet-4-5",
                 account_id=None, attempt_key="attempt-2"),
        usage(5, s2, 1, {"input_tokens": 12, "output_tokens": 3}),
        usage(6, s2, 2, {"input_tokens": 12, "output_tokens": 3, "cost_usd": 0.25}, final=True),
        envelope(7, "result", outcome="completed", duration_secs=12.5),
        envelope(8, "provider_attempt_finished", attempt_key="attempt-2", outcome="completed"),
    ]


def terminal(outcome: str = "completed", ended_at: str = "2026-03-08T06:45:10.123456789Z") -> dict[str, Any]:
    return {"schema_version": 1, "outcome": outcome, "ended_at": ended_at, "result_ref": None}


def context_doc(system: str | None = "You are careful.", task: str = "Fix LOO-265") -> dict[str, Any]:
    def part(text: str) -> dict[str, Any]:
        return {"text": text, "tokens": len(text.split()), "assets": []}
    return {"schema_version": 1, "context": {
        "system": None if system is None else part(system), "task": part(task),
        "decisions": [], "coverage": "assembled", "tokenizer": "cl100k_base"}}


def write_file(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def write_record(home: Path, run_id: str | None = None, *, events: Iterable[dict[str, Any] | bytes] | bytes | None = (),
             term: dict[str, Any] | bytes | None = None, context: dict[str, Any] | bytes | None = None,
             context_ref: dict[str, Any] | None = None, manifest_bytes: bytes | None = None,
             **manifest_over: Any) -> Path:
    """Write one record byte by byte, without ledger's writer (for damaged and foreign records;
    tests/indexhelpers.make_run records a run with the real writer). `events=None` writes no
    events.jsonl; bytes are written raw.

    With `context`, context.json is written and the manifest binds its exact sha256 + size
    (unless `context_ref` overrides the binding).
    """
    run_id = run_id or new_id()
    d = record_dir(home, run_id)
    d.mkdir(parents=True, mode=0o700)
    if context is not None:
        data = context if isinstance(context, bytes) else pretty(context)
        write_file(d / "context.json", data)
        manifest_over.setdefault("context", context_ref or {
            "path": "context.json", "content_sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)})
    write_file(d / "manifest.json", manifest_bytes if manifest_bytes is not None
               else pretty(manifest(run_id, **manifest_over)))
    if events is not None:
        write_file(d / "events.jsonl", events if isinstance(events, bytes) else events_bytes(events))
    if term is not None:
        write_file(d / "terminal.json", term if isinstance(term, bytes) else pretty(term))
    return d


def read_events(run_path: Path) -> list[dict[str, Any]]:
    with open(Path(run_path) / "events.jsonl", "rb") as f:
        return [json.loads(line) for line in f if line.strip()]


def all_files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        out.extend(Path(dirpath) / n for n in filenames)
    return out
