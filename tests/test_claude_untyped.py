"""Claude lines without a `type` field (the shape of ccusage's test data: `message.role`,
`message.id`, `message.usage`, `requestId`, `costUSD`): each such response is counted like an
assistant line (before, a history of them imported as 0 sessions without a word). The
fixture, tests/data/untyped-claude/, is ours, in that shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.sources.claude_usage import ClaudeUsage
from test_conformance_claude import cli

DATA = Path(__file__).parent / "data" / "untyped-claude"


def test_untyped_response_lines_are_counted_once_and_other_untyped_lines_are_not_problems():
    r = ClaudeUsage()
    for f in sorted(DATA.rglob("*.jsonl")):
        r.feed(str(f.relative_to(DATA)), f.read_bytes(), 0)
    assert r.problems == []
    got = {x.message_id: (x.session_id, x.model, x.counters["input_tokens"], x.cost_usd) for x in r.responses()}
    assert got == {"msg-one-a": ("sess-one", "claude-sonnet-4-20250514", 120, 0.25),
                   "msg-one-b": ("sess-one", "claude-opus-4-20250514", 7, 0.5),
                   "msg-two-a": ("sess-two", "claude-haiku-4-5-20251001", 60, 0.125)}
    bad = ClaudeUsage()
    bad.feed("p/s.jsonl", b'{"timestamp": "2026-03-02T09:00:00.000Z", "sessionId": "s"}\n', 0)
    assert [p.reason for p in bad.problems] == ["a line without a type and without a message: not counted"]


def test_an_untyped_history_imports_as_its_sessions(home, db_url):
    cli("import", "claude", "--from", str(DATA), "--json")
    rep = json.loads(cli("report", "session", "--tz", "UTC", "--json", "--db", db_url).stdout)
    rows = {r["key"]: r for r in rep["rows"]}
    assert set(rows) == {"sess-one", "sess-two"}
    one, two = rows["sess-one"], rows["sess-two"]
    assert (one["input_tokens"], one["output_tokens"], one["cache_read_tokens"], one["cache_write_tokens"]) == (
        127, 340, 9500, 30)
    assert (two["input_tokens"], two["output_tokens"], two["cache_read_tokens"], two["cache_write_tokens"]) == (
        60, 20, 0, 10)
    assert one["cost_usd"] == pytest.approx(0.75, abs=1e-12) and two["cost_usd"] == pytest.approx(0.125, abs=1e-12)
    assert one["cost_basis"] == "reported"
    daily = {r["key"]: r["input_tokens"] for r in json.loads(
        cli("report", "daily", "--tz", "UTC", "--json", "--db", db_url).stdout)["rows"]}
    assert daily == {"2026-03-02": 120, "2026-03-03": 7, "2026-03-04": 60}
