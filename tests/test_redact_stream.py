"""A secret a client streams in pieces across delta lines is masked in the raw stream copy
(issue 16): `DeltaWindow` / `Redactor.stream` on hand-made lines, and on the real Claude Code
with `--include-partial-messages` (the Gemini CLI case is in tests/test_launch_gemini.py)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ledger.launch.redact import MASK, DeltaWindow, Redactor

SECRET = "AIzaSy-canary-7e6d5c4b3a2f1e0d9c8b"
OTHER = "canary-token-2b3c4d5e6f7a8b9c0d1e"


def gem(text: str, ts: int = 0, role: str = "assistant") -> bytes:
    """A Gemini CLI 0.61 delta line, as the client writes it (compact, non-ASCII kept)."""
    return json.dumps({"type": "message", "timestamp": f"2026-01-01T00:00:{ts:02d}.000Z", "role": role,
                       "content": text, "delta": True}, ensure_ascii=False, separators=(",", ":")).encode()


def cl(text: str, index: int = 0, kind: str = "text_delta") -> bytes:
    """A Claude Code `--include-partial-messages` delta line."""
    field = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}[kind]
    return json.dumps({"type": "stream_event", "event": {"type": "content_block_delta", "index": index,
                                                         "delta": {"type": kind, field: text}},
                       "session_id": "s-1", "parent_tool_use_id": None, "uuid": "u"},
                      separators=(",", ":")).encode()


INIT = b'{"type":"init","session_id":"s-1","model":"gemini-2.5-flash"}'
RESULT = b'{"type":"result","status":"success","stats":{"total_tokens":3}}'


def stream(*lines: bytes) -> bytes:
    return b"\n".join(lines) + b"\n"


def redact(data: bytes, *secrets: str) -> bytes:
    return Redactor(secrets or (SECRET, OTHER)).stream(data)


def texts(data: bytes) -> list[str]:
    """Every line parses (valid JSONL); the delta texts, in order."""
    out = []
    for line in data.splitlines():
        obj = json.loads(line)
        if obj.get("delta") is True:
            out.append(obj["content"])
        elif obj.get("type") == "stream_event":
            d = obj["event"]["delta"]
            out.append(d.get("text", d.get("thinking", d.get("partial_json"))))
    return out


def no_piece(data: bytes, secret: str = SECRET) -> None:
    """No piece of 4+ characters of the secret's random tail is left anywhere."""
    tail = secret[-20:]
    for i in range(len(tail) - 3):
        assert tail[i:i + 4].encode() not in data, tail[i:i + 4]


def test_split_in_two():
    data = stream(INIT, gem("Your key is AIzaSy-canary-7e6"), gem("d5c4b3a2f1e0d9c8b, keep it."), RESULT)
    out = redact(data)
    assert texts(out) == [f"Your key is {MASK}", f"{MASK}, keep it."]
    no_piece(out)
    lines, before = out.splitlines(), data.splitlines()
    assert lines[0] == before[0] and lines[-1] == before[-1]  # lines taking no part: byte for byte
    # the rewritten lines differ only inside their content string
    assert lines[1].startswith(before[1][:before[1].index(b'"content":')])
    assert lines[1].endswith(b'","delta":true}')


def test_split_in_three_and_a_second_secret_across_the_same_lines():
    data = stream(INIT, gem("Your key is AIzaSy-canary-7e6d5c"), gem("4b3a2f1e0d9c8b and the token can"),
                  gem("ary-token-2b3c4d5e6f7a8b9c0d1e."), RESULT)
    out = redact(data)
    assert texts(out) == [f"Your key is {MASK}", f"{MASK} and the token {MASK}", f"{MASK}."]
    no_piece(out)
    no_piece(out, OTHER)


def test_one_character_a_line():
    pieces = ["x"] + list(SECRET) + ["y"]
    out = redact(stream(INIT, *(gem(p, i) for i, p in enumerate(pieces)), RESULT))
    assert texts(out) == ["x"] + [MASK] * len(SECRET) + ["y"]


def test_partial_false_match_that_does_not_complete_is_kept_byte_for_byte():
    # "AIzaSy-canary-7e6d" ends a line and the next line goes on differently
    data = stream(INIT, gem("look: AIzaSy-canary-7e6d"), gem("-no, that was not it"), gem("AIzaSy-"), RESULT)
    assert redact(data) == data
    # ... also when the stream (or the chain) ends inside the partial match
    data = stream(INIT, gem("AIzaSy-canary"), gem("-7e6d5c4b3a"), RESULT)
    assert redact(data) == data
    assert redact(stream(INIT, gem("AIzaSy-canary"), gem("-7e6d5c4b3a"))[:-1]) == stream(
        INIT, gem("AIzaSy-canary"), gem("-7e6d5c4b3a"))[:-1]


def test_false_start_then_the_real_secret():
    # a partial match fails, and the real occurrence starts inside the held text
    data = stream(gem("AIzaSy-AIzaSy-canary-7e"), gem("6d5c4b3a2f1e0d9c8b!"))
    assert texts(redact(data)) == [f"AIzaSy-{MASK}", f"{MASK}!"]


def test_secret_whole_in_one_line_is_left_to_the_per_line_pass():
    data = stream(INIT, gem(f"a {SECRET} b"), gem("next"), RESULT)
    window = DeltaWindow([SECRET])
    out = [x for line in data.split(b"\n") for x in window.feed(line)] + window.finish()
    assert b"\n".join(out) == data and window.rewritten == 0
    assert texts(redact(data)) == [f"a {MASK} b", "next"]


def test_non_ascii_and_escapes_around_the_piece_survive():
    data = stream(gem('naïve "quote" \\ \u2028 AIzaSy-canary-7e6'), gem("d5c4b3a2f1e0d9c8b ✓ \t end"))
    out = redact(data)
    assert texts(out) == [f'naïve "quote" \\ \u2028 {MASK}', f"{MASK} ✓ \t end"]


def test_json_escaped_secret_in_partial_json_deltas():
    weird = 'pa"ss\\word-0123456789'  # in tool input JSON it travels escaped
    escaped = json.dumps(weird)[1:-1]
    data = stream(cl('{"command": "echo ' + escaped[:6], 1, "input_json_delta"),
                  cl(escaped[6:] + '"}', 1, "input_json_delta"))
    out = redact(data, weird)
    assert texts(out) == ['{"command": "echo ' + MASK, MASK + '"}']


def test_claude_text_deltas_and_channels():
    data = stream(cl("key AIzaSy-canary-7e6d"), cl("5c4b3a2f1e0d9c8b."),
                  # another content block (index 1) is another text: no joining across it
                  cl("AIzaSy-canary-7e6d", 0), cl("5c4b3a2f1e0d9c8b", 1))
    out = redact(data)
    assert texts(out) == [f"key {MASK}", f"{MASK}.", "AIzaSy-canary-7e6d", "5c4b3a2f1e0d9c8b"]
    assert out.splitlines()[2:] == data.splitlines()[2:]


def test_a_line_between_deltas_ends_the_chain():
    # deltas are contiguous in the clients' streams; joining across other lines would mean
    # holding back an unbounded number of them
    data = stream(gem("AIzaSy-canary-7e6d"), INIT, gem("5c4b3a2f1e0d9c8b"))
    assert redact(data) == data


def test_lines_held_back_are_bounded_by_the_longest_secret():
    lines = [gem(c, 1) for c in ("ab" + SECRET[:-1] + "!" + SECRET) * 3]  # one character a line
    window = DeltaWindow([SECRET, OTHER])
    worst = 0
    written = 0
    for n, line in enumerate(lines, 1):
        written += len(window.feed(line))
        worst = max(worst, n - written)
    written += len(window.finish())
    assert written == len(lines)
    assert worst == len(SECRET) - 1  # at most the secret but its last character, one a line
    assert texts(b"\n".join(lines)).count("!") == 3


def test_a_run_of_empty_deltas_inside_a_partial_match_is_bounded_and_still_masked():
    window = DeltaWindow([SECRET], max_held=8)
    lines = [gem("x AIzaSy-ca")] + [gem("")] * 50 + [gem("nary-7e6d5c4b3a2f1e0d9c8b y")]
    out, worst, fed = [], 0, 0
    for line in lines:
        out += window.feed(line)
        fed += 1
        worst = max(worst, fed - len(out))
    out += window.finish()
    assert worst <= 9 and len(out) == len(lines)
    got = texts(b"\n".join(out))
    assert got[0] == f"x {MASK}" and got[-1] == f"{MASK} y"  # forced out early: its piece masked anyway
    no_piece(b"\n".join(out))


def test_no_secrets_or_no_deltas_take_the_plain_path():
    data = stream(INIT, gem("AIzaSy-canary-7e6d"), gem("5c4b3a2f1e0d9c8b"), RESULT)
    assert Redactor([]).stream(data) == data
    plain = stream(INIT, RESULT, b"not json at all", b"")
    r = Redactor([SECRET])
    assert r.stream(plain) == r.bytes(plain)


def test_junk_and_odd_lines_do_not_break_it():
    data = stream(b"\xff\xfe junk delta", gem("AIzaSy-canary-7e6d"), b'{"delta": [1, 2]}',
                  gem("AIzaSy-canary-7e6d"), gem("5c4b3a2f1e0d9c8b"), b"[1]", b"")
    out = redact(data)
    assert out.split(b"\n")[:3] == data.split(b"\n")[:3]
    assert out.split(b"\n")[3:5] == [gem(MASK), gem(MASK)]
    assert out.split(b"\n")[5:] == data.split(b"\n")[5:]


def test_spacing_and_duplicate_keys_are_handled():
    line1 = (b'{ "type" : "message" , "content" : "old", "role":"assistant", '
             b'"content" : "AIzaSy-canary-7e" , "delta" : true }')
    line2 = b'{"type":"message","role":"assistant","content":"6d5c4b3a2f1e0d9c8b","delta":true}'
    out = redact(stream(line1, line2)).split(b"\n")
    assert out[0] == line1.replace(b'"AIzaSy-canary-7e"', b'"[REDACTED]"')
    assert out[1] == line2.replace(b'"6d5c4b3a2f1e0d9c8b"', b'"[REDACTED]"')


def test_the_common_path_stays_fast():
    # ~8 MiB (the capture bound) of Gemini deltas with a secret-like start now and then
    secret_env = {"GEMINI_API_KEY": SECRET, "DEPLOY_TOKEN": OTHER, "GITHUB_TOKEN": "ghp_" + "x" * 36}
    r = Redactor.from_env(secret_env)
    words = "the answer is a long text about canary birds and AIza things " * 2
    data = stream(*(gem(words[i % 50:i % 50 + 40], i % 60) for i in range(60_000)))
    assert len(data) > 7 * 1024 * 1024
    t = time.perf_counter()
    out = r.stream(data)
    elapsed = time.perf_counter() - t
    assert out == r.bytes(data)  # partial matches ("canary", "AIza") held and let go unchanged
    assert elapsed < 5.0  # ~0.6 s here, ~0.3 s of it the per-line pass; generous for loaded CI machines


# -- the real Claude Code client -----------------------------------------------------------------


@pytest.mark.agents
def test_claude_partial_messages_canary_split_across_deltas_is_in_no_file_of_the_home(tmp_path, monkeypatch):
    import subprocess
    import sys

    from agentenv import agent_cwd, claude_argv, claude_available, claude_env
    from launchkit import REPO, home_bytes
    from mockprovider import MockProvider, answer, tool_call

    if not claude_available():
        if os.environ.get("CI"):
            pytest.fail("claude is required under CI: run `npm install` (node_modules/.bin/claude)")
        pytest.skip("node_modules/.bin/claude is not installed")
    home = tmp_path / "ledger-home"
    canary = "sk-ant-canary-9d8c7b6a5f4e3d2c1b0a"
    other = "canary-token-1a2b3c4d5e6f7a8b9c0d"
    script = [tool_call("Bash", {"command": "echo $ANTHROPIC_API_KEY $DEPLOY_TOKEN"}),
              answer(f"Your key is {canary} and the token {other}.")]  # the mock streams it in 3 pieces
    with MockProvider(script) as mp:
        env = {**claude_env(tmp_path, mp, extra={"ANTHROPIC_API_KEY": canary, "DEPLOY_TOKEN": other}),
               "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home)}
        argv = claude_argv(f"use {canary} and {other}", extra_args=["--include-partial-messages"])
        p = subprocess.run([sys.executable, "-m", "ledger", "run", "--json", "--", *argv], env=env,
                           cwd=str(agent_cwd(tmp_path)), stdin=subprocess.DEVNULL, capture_output=True, timeout=90)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    raw = (Path(doc["path"]) / "streams" / "stdout.jsonl").read_bytes()
    deltas = [json.loads(x)["event"]["delta"]["text"] for x in raw.splitlines() if b'"text_delta"' in x]
    assert len(deltas) >= 3 and MASK in "".join(deltas)  # the client really streamed the answer in pieces
    files = home_bytes(home)
    assert any(path.name == "stdout.jsonl" for path, _ in files)
    for path, data in files:
        assert canary.encode() not in data and other.encode() not in data, path
        assert b"9d8c7b6a5f4e3d2c1b0a" not in data and b"1a2b3c4d5e6f7a8b9c0d" not in data, path
    no_piece("".join(deltas).encode(), canary)
    no_piece("".join(deltas).encode(), other)
