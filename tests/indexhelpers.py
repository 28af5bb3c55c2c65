"""Helpers for the index tests: make homes with varied records, compare with the records path."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
from typer.testing import CliRunner

from ledger.cli.app import app
from ledger.records import RunCapture, publish_run, settle
from ledger.records.ids import run_dir
from ledger.views import scan_records, select_runs, snapshot_detail

runner = CliRunner()


def cli(*args: str, input: str | None = None) -> Any:
    return runner.invoke(app, list(args), input=input)


def make_run(home: Path, *, model: str = "claude-sonnet-4-5", subjects=("task:A",), skill: str | None = None,
             outcome: str | None = "completed", usage=((10, 3), (15, 4)), cost: float | None = 0.25,
             tools=("Bash",), harness: str = "claude", created_at: str | None = None) -> Path:
    """A run recorded with the real writer; `outcome=None` leaves it unsettled (running)."""
    cap = RunCapture(home, harness=harness, model=model, subjects=list(subjects), skill=skill,
                     created_at=created_at)
    attempt = cap.start_attempt("anthropic", model)
    stream = cap.usage_stream(provider="anthropic", model=model, attempt_key=attempt, turn_key="turn-1")
    for i, (inp, out) in enumerate(usage):
        last = i == len(usage) - 1
        counters = {"input_tokens": inp, "output_tokens": out, "cache_read_tokens": 5 * (i + 1),
                    "cache_write_5m_tokens": 2 * (i + 1)}
        if last and cost is not None:
            counters["cost_usd"] = cost
        stream.observe(counters, final_receipt=last and cost is not None)
    for t in tools:
        cap.emit("tool_use", name=t, summary="x")
    cap.emit("conversation", event={"type": "item_completed", "turn_id": "t1", "item": {"text": "done", "phase": "final_answer"}})
    cap.emit("conversation", event={"type": "turn_completed", "turn_id": "t1", "status": "completed"})
    if outcome is None:
        cap.detach()  # leave it unsettled (its launcher, this process, is alive)
    else:
        cap.settle(outcome)
    return Path(cap.path)


def append_event(run: Path, **fields: Any) -> None:
    with open(run / "events.jsonl", "rb") as f:
        last = f.read().splitlines()[-1]
    seq = orjson.loads(last)["seq"] + 1
    env = {"schema_version": 1, "seq": seq, "observed_at": "2026-01-01T00:00:00.000000Z"}
    env.update(fields)
    with open(run / "events.jsonl", "ab") as f:
        f.write(orjson.dumps(env) + b"\n")


def append_usage(run: Path, inp: int, out: int) -> None:
    append_event(run, type="usage", usage_stream_id="attempt-9/turn-9/m", provider="anthropic", model="m",
                 attempt_key="attempt-9", turn_key="turn-9", observation_seq=1, counter_kind="cumulative",
                 start_known=True, final_receipt=False, usage={"input_tokens": inp, "output_tokens": out})


def damaged_home(home: Path) -> dict[str, Path]:
    """A home with every kind of record: ok, unsettled, gaps, and damaged ones."""
    runs: dict[str, Path] = {}
    runs["ok"] = make_run(home, subjects=("task:A", "task:B"), skill="review")
    runs["failed"] = make_run(home, outcome="failed", model="gpt-5", harness="codex", cost=None)
    runs["running"] = make_run(home, outcome=None)
    runs["old"] = make_run(home, created_at="2020-01-02T03:04:05.123456Z")
    runs["nousage"] = make_run(home, usage=(), cost=None, tools=())
    # a torn last line: one evidence gap, still readable
    runs["torn"] = make_run(home)
    with open(runs["torn"] / "events.jsonl", "ab") as f:
        f.write(b'{"schema_version":1,"seq":99')
    # an unparseable terminal: one gap, outcome unknown
    runs["badterm"] = make_run(home, outcome=None)
    (runs["badterm"] / "terminal.json").write_bytes(b"{not json")
    # damaged: malformed complete line
    runs["malformed"] = make_run(home)
    with open(runs["malformed"] / "events.jsonl", "ab") as f:
        f.write(b"this is not json\n")
    # damaged: manifest not JSON
    m = publish_run(home, harness="command")
    (run_dir(home, m.run_id) / "manifest.json").write_bytes(b"garbage")
    runs["badmanifest"] = run_dir(home, m.run_id)
    # a non-run directory and a staging directory are ignored
    (home / "runs" / "zz" / "not-a-run").mkdir(parents=True)
    (home / "runs" / "zz" / ".run_x.staging").mkdir(parents=True)
    return runs


def json_stream(items) -> bytes:
    """Exactly what print_json_stream writes."""
    out = []
    first = True
    for item in items:
        out.append(b"[\n" if first else b",\n")
        first = False
        out.append(orjson.dumps(item, option=orjson.OPT_INDENT_2))
    out.append(b"[]\n" if first else b"\n]\n")
    return b"".join(out)


def records_runs_json(home: Path, all_: bool = True) -> str:
    snaps, _ = scan_records(Path(os.path.abspath(home)))
    return json_stream(s.to_dict() for s in select_runs(snaps, all_)).decode()


def records_show_json(run: Path) -> str:
    from ledger.records.reader import read_run

    return (orjson.dumps(snapshot_detail(read_run(run)), option=orjson.OPT_INDENT_2) + b"\n").decode()


def settle_run(run: Path, outcome: str = "completed") -> None:
    settle(run, outcome)


def sa_reading(url: str) -> Any:
    """An SQLAlchemy connection in a read transaction (ledger.index.dbadmin.schema_connection),
    for tests written in Core: the runtime's reading() gives a DB-API Conn."""
    from ledger.index.dbadmin import schema_connection

    return schema_connection(url)


def sa_writing(url: str) -> Any:
    """An SQLAlchemy connection in a write transaction (the locks of ops.writing)."""
    from ledger.index.dbadmin import schema_connection

    return schema_connection(url, write=True)
