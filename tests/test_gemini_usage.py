"""The Gemini CLI chats-log reducer (ledger/sources/gemini_usage.py) on hand-written logs in
Gemini CLI 0.61's shape, with hand-checked totals; the import's discovery of those logs."""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import pytest

from ledger.sources import archivesummary, discovery, logdirs
from ledger.sources.gemini_usage import GeminiUsage, normalise

SID = "c3ffe06d-a7a6-407b-86ee-58538428000d"
F = "tmp/work/chats/session-2026-12-01T00-01-c3ffe06d.jsonl"


def header(sid: str = SID, kind: str = "main", start: str = "2026-12-01T00:01:57.703Z") -> dict:
    return {"sessionId": sid, "projectHash": "789e", "startTime": start, "lastUpdated": start, "kind": kind}


def gem(mid: str, tokens: dict | None, ts: str = "2026-12-01T00:02:00.000Z", model: str = "gemini-2.5-flash",
        **extra) -> dict:
    m = {"id": mid, "timestamp": ts, "type": "gemini", "content": "", "thoughts": [], "model": model, **extra}
    if tokens is not None:
        m["tokens"] = tokens
    return m


def tok(inp: int, out: int, cached: int = 0, thoughts: int = 0, tool: int = 0) -> dict:
    return {"input": inp, "output": out, "cached": cached, "thoughts": thoughts, "tool": tool,
            "total": inp + out + thoughts + tool}


def user(mid: str, ts: str = "2026-12-01T00:01:58.000Z") -> dict:
    return {"id": mid, "timestamp": ts, "type": "user", "content": [{"text": "hi"}]}


def lines(*objs: dict) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objs)


def feed_all(files: dict[str, bytes]) -> GeminiUsage:
    u = GeminiUsage()
    for f, data in files.items():
        u.feed(f, data)
    return u


def row(u: GeminiUsage, *by: str) -> dict:
    return u.totals(by or ("model",))


# a tool turn as 0.61 writes it: the message, then the same message again with its tool
# calls; the answer; a $set that replaces the list (copies); a patch of lastUpdated
SESSION = lines(
    header(),
    {"$set": {"messages": [user("ctx")], "lastUpdated": "2026-12-01T00:01:57.704Z"}},
    user("u1"),
    gem("g1", tok(301, 41, cached=10, thoughts=2)),
    gem("g1", tok(301, 41, cached=10, thoughts=2),
        toolCalls=[{"id": "call-1", "name": "run_shell_command", "args": {"command": "echo hi"}}]),
    user("u2", ts="2026-12-01T00:02:01.000Z"),
    gem("g2", tok(302, 42, cached=20, thoughts=4), ts="2026-12-01T00:02:02.000Z"),
    {"$set": {"lastUpdated": "2026-12-01T00:02:02.500Z"}},
)


def test_a_tool_turn_counts_each_response_once_in_ledgers_shape():
    u = feed_all({F: SESSION})
    assert u.problems == []
    (r,) = row(u).values()
    # uncached input (301-10)+(302-20) = 573, cached 30, output (41+2)+(42+4) = 89, thoughts 6
    assert (r["input_tokens"], r["cache_read_tokens"], r["output_tokens"], r["reasoning_tokens"]) == (573, 30, 89, 6)
    assert r["cache_write_tokens"] is None and r["cost_usd"] is None and r["responses"] == 2
    (s,) = u.sessions().values()
    assert s.session_id == SID and s.kind == "main" and s.tools == {"run_shell_command": 1}
    assert (s.started, s.ended) == ("2026-12-01T00:01:57.703000Z", "2026-12-01T00:02:02.500000Z")
    assert s.files == (F,)


def test_normalise_by_hand():
    # tool-use prompt tokens are input outside the prompt count; thoughts are output
    assert normalise({"input": 100, "cached": 30, "output": 7, "thoughts": 5, "tool": 4, "total": 116}) == {
        "input_tokens": 74, "cache_read_tokens": 30, "cache_write_tokens": None, "output_tokens": 12,
        "reasoning_tokens": 5}
    # a cached count above the prompt is not believable: the uncached input is unknown, not negative
    assert normalise({"input": 10, "cached": 30, "output": 1})["input_tokens"] is None


def test_set_messages_replaces_a_message_and_its_last_tokens_count():
    data = lines(
        header(),
        gem("g1", None),  # streamed before its usage arrived
        gem("g1", tok(100, 10)),
        {"$set": {"messages": [user("u1"), gem("g1", tok(120, 12, cached=20, thoughts=3))]}},
        gem("g2", tok(200, 20, cached=50), ts="2026-12-01T00:03:00.000Z"),
        {"$rewindTo": "g2"},  # the conversation is cut back: the call was still made
    )
    u = feed_all({F: data})
    assert u.problems == []
    (r,) = row(u).values()
    # g1 once, with its last tokens (120/20/12/3); g2 after the rewind still counted
    assert (r["input_tokens"], r["cache_read_tokens"], r["output_tokens"], r["reasoning_tokens"]) == (
        100 + 150, 20 + 50, 15 + 20, 3)
    assert r["responses"] == 2


def test_a_copy_without_tokens_does_not_undo_the_tokens():
    data = lines(header(), gem("g1", tok(100, 10)), {"$set": {"messages": [gem("g1", None)]}})
    (r,) = row(feed_all({F: data})).values()
    assert (r["input_tokens"], r["output_tokens"], r["responses"]) == (100, 10, 1)


def test_duplicated_lines_and_files_count_once_and_split_feeds_change_nothing():
    copy = "tmp/work/chats/session-2026-12-01T00-01-c3ffe06d.gen2.jsonl"
    once = row(feed_all({F: SESSION}), "day", "model", "session")
    twice = row(feed_all({F: SESSION + SESSION, copy: SESSION}), "day", "model", "session")
    assert twice == once
    rng = random.Random(16)
    for _ in range(20):
        u = GeminiUsage()
        files = [(F, SESSION), (copy, SESSION[: len(SESSION) // 2])]
        rng.shuffle(files)
        for f, data in files:
            cut = 0
            while cut < len(data):
                cut = min(len(data), cut + rng.randint(1, 400))
                u = GeminiUsage(orjson.loads(orjson.dumps(u.state())))  # through the serialised state
                u.feed(f, data[u.offset(f):cut], u.offset(f))  # a torn tail waits for the next feed
        assert row(u, "day", "model", "session") == once


def test_junk_lines_and_a_torn_tail_are_problems_not_exceptions():
    data = (lines(header()) + b"not json\n" + b"[1, 2]\n" + b"\xff\xfe\n" + lines({"what": 1})
            + lines(gem("g0", {"cached": 3})) + lines(gem("g1", tok(10, 1))) + b'{"id": "g2", "tim')
    u = GeminiUsage()
    end = u.feed(F, data)
    assert end == len(data) - len(b'{"id": "g2", "tim')
    reasons = [(p.line, p.reason.split(":")[0]) for p in u.problems]
    assert reasons == [(2, "not JSON"), (3, "not a JSON object"), (4, "not UTF-8"),
                       (5, "not a session header, message, $set or $rewindTo record"),
                       (6, "gemini message whose tokens are not a usage object"),
                       (8, "torn last line (no newline yet)")]
    (r,) = row(u).values()
    assert (r["input_tokens"], r["output_tokens"], r["responses"]) == (10, 1, 1)
    # the torn line is read whole once its newline arrives
    rest = b'estamp": "2026-12-01T00:04:00Z", "type": "gemini", "tokens": {"input": 5, "output": 2}}\n'
    u2 = GeminiUsage(u.state())
    u2.feed(F, data[end:] + rest, end)
    assert u2.problems == []
    (r,) = row(u2, "day").values()
    assert (r["input_tokens"], r["output_tokens"], r["responses"]) == (15, 3, 2)


def test_a_subagent_file_belongs_to_its_parent_session_and_models_stay_apart():
    sub = f"tmp/work/chats/{SID}/9f1e2d3c-sub.jsonl"
    u = feed_all({F: SESSION, sub: lines(header("9f1e2d3c-sub", kind="subagent"),
                                         gem("s1", tok(50, 5), model="gemini-2.5-flash-lite"))})
    assert set(u.sessions()) == {SID}
    by = row(u, "session", "model")
    assert by[(SID, "gemini-2.5-flash-lite")]["input_tokens"] == 50
    assert by[(SID, "gemini-2.5-flash")]["input_tokens"] == 573
    assert sorted(u.sessions()[SID].files) == sorted([F, sub])


def test_a_file_without_header_is_keyed_by_its_name():
    u = feed_all({F: lines(gem("g1", tok(10, 1)))})
    assert set(row(u, "session")) == {("session-2026-12-01T00-01-c3ffe06d",)}


def test_an_unknown_state_version_is_refused():
    with pytest.raises(ValueError):
        GeminiUsage({"v": 99})


# ---------------------------------------------------------------- where the import looks

def test_the_import_finds_chats_logs_only(tmp_path):
    root = tmp_path / ".gemini"
    chats = root / "tmp" / "work" / "chats"
    (chats / SID).mkdir(parents=True)
    (chats / "session-2026-12-01T00-01-c3ffe06d.jsonl").write_bytes(SESSION)
    (chats / SID / "sub.jsonl").write_bytes(lines(header("sub", kind="subagent")))
    (root / "tmp" / "work" / "other.jsonl").write_bytes(b"{}\n")  # not a chats log
    (root / "tmp" / "work" / "logs.json").write_bytes(b"[]")
    client = logdirs.CLIENTS["gemini"]
    found = discovery.discover(client, root, archivesummary.ClientSummary("gemini"))
    assert sorted(f.rel for f in found) == [f"tmp/work/chats/{SID}/sub.jsonl",
                                            "tmp/work/chats/session-2026-12-01T00-01-c3ffe06d.jsonl"]


def test_gemini_cli_home_names_the_home_that_holds_dot_gemini(tmp_path):
    client = logdirs.CLIENTS["gemini"]
    assert logdirs.default_roots(client, {"GEMINI_CLI_HOME": str(tmp_path)}) == [tmp_path / ".gemini"]
    assert logdirs.default_roots(client, {"HOME": str(tmp_path)}) == [tmp_path / ".gemini"]
    # the other clients' variables name the config dir itself
    assert logdirs.default_roots(logdirs.CLIENTS["codex"], {"CODEX_HOME": str(tmp_path)}) == [Path(tmp_path)]


def test_ledger_import_gemini_without_history_says_where_it_looked(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from ledger.cli.app import app

    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.delenv("GEMINI_CLI_HOME", raising=False)
    monkeypatch.setenv("LEDGER_HOME", str(tmp_path / "ledger-home"))
    res = CliRunner().invoke(app, ["import", "gemini"])
    assert res.exit_code == 1
    assert "no Gemini CLI history found" in res.stderr and "GEMINI_CLI_HOME" in res.stderr
    res = CliRunner().invoke(app, ["import", "all", "--json"])  # with all: a note, not an error
    assert res.exit_code == 0 and "gemini: no Gemini CLI history found" in res.stderr
