"""Bounded raw capture and strict parsing of a child's stdout (ledger.launch.capture)."""

from __future__ import annotations

import hashlib

import pytest

import orjson

from launchkit import replay, result_event
from ledger.launch.capture import LineSplitter, RawCapture, StrictParser, TailBuffer


def test_line_splitter_handles_chunk_boundaries():
    sp = LineSplitter()
    assert sp.feed(b'{"a"') == []
    assert sp.feed(b':1}\n{"b":2}\n{"c"') == [b'{"a":1}', b'{"b":2}']
    assert sp.feed(b"") == []
    assert sp.finish() == b'{"c"'
    assert sp.finish() is None


def _feed(cap: RawCapture, data: bytes, size: int) -> None:
    for i in range(0, len(data), size):
        cap.add(data[i:i + size])


def test_raw_capture_keeps_everything_within_the_bound():
    cap = RawCapture(limit=1000, tail_reserve=200)
    data = b"".join(b"x" * 9 + b"\n" for _ in range(50))
    _feed(cap, data, 7)
    assert cap.data() == data and not cap.truncated
    assert cap.describe()["total_lines"] == 50


@pytest.mark.parametrize("chunk", [1, 7, 10, 64, 333, 5000])
def test_raw_capture_overflow_keeps_head_and_tail_at_line_boundaries(chunk):
    cap = RawCapture(limit=1000, tail_reserve=200)
    lines = [b"%04d" % i + b"." * 5 + b"\n" for i in range(500)]  # 10 bytes each, 5000 bytes
    _feed(cap, b"".join(lines), chunk)
    data = cap.data()
    assert len(data) <= 1000 and cap.truncated
    kept = data.split(b"\n")[:-1]
    assert all(len(k) == 9 for k in kept)  # whole lines only
    assert kept[0].startswith(b"0000") and kept[-1].startswith(b"0499")  # first and last lines kept
    nums = [int(k[:4]) for k in kept]
    assert nums == sorted(nums)
    d = cap.describe()
    assert d["omitted_bytes"] + len(data) == d["total_bytes"] == 5000
    assert d["omitted_lines"] + len(kept) == d["total_lines"] == 500


def test_raw_capture_final_line_without_newline():
    cap = RawCapture(limit=1000, tail_reserve=200)
    cap.add(b'{"a":1}\n{"b":2}')
    assert cap.data() == b'{"a":1}\n{"b":2}' and cap.describe()["total_lines"] == 2


def test_tail_buffer_keeps_the_end_from_a_line_start():
    t = TailBuffer(limit=64)
    for i in range(100):
        t.add(b"line %03d\n" % i)
    data = t.data()
    assert data.endswith(b"line 099\n") and data.startswith(b"line ") and len(data) <= 64
    assert t.truncated and t.total_bytes == 900


def test_strict_parser():
    p = StrictParser()
    assert p.parse(b'{"a": 1}\n') == {"a": 1}
    assert p.parse(b"   \n") is None  # blank: not junk
    assert p.parse(b'{"v": NaN}\n') is None
    assert p.parse(b'{"v": Infinity}\n') is None
    assert p.parse(b"[1]\n") is None
    assert p.parse(b'{"s": "\xff"}\n') is None
    assert p.parse(b"plain text\n") is None
    st = p.stats
    assert (st.lines, st.objects, st.junk) == (6, 1, 5)
    assert st.first_junk_line == 3


def test_overflowing_stream_is_flagged_and_still_fully_parsed(home, tmp_path):
    lines = [{"type": "system", "subtype": "init", "session_id": "s", "model": "claude-sonnet-4-5"}]
    for i in range(3000):
        lines.append({"type": "assistant", "message": {"id": f"m{i}", "model": "claude-sonnet-4-5", "content": [],
                                                       "usage": {"input_tokens": 1, "output_tokens": 2}}})
    lines.append({"type": "result", "subtype": "success", "is_error": False, "session_id": "s", "result": "ok",
                  "total_cost_usd": 0.1, "usage": {"input_tokens": 3000, "output_tokens": 6000,
                                                   "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}})
    stream = b"".join(orjson.dumps(o) + b"\n" for o in lines)
    result, snap = replay(home, tmp_path, "claude", stream, capture_bytes=64 * 1024)
    ev = result_event(snap.path)
    ref = ev["raw_stream"]
    assert ref["truncated"] is True and ref["total_bytes"] == len(stream)
    assert ref["bytes"] <= 64 * 1024 and ref["omitted_bytes"] == len(stream) - ref["bytes"]
    data = (snap.path and open(f"{snap.path}/{ref['path']}", "rb").read())
    assert hashlib.sha256(data).hexdigest() == ref["sha256"]
    assert data.rstrip(b"\n").rsplit(b"\n", 1)[-1].startswith(b'{"type":"result"')  # the result line is kept
    assert snap.usage.input_tokens == 3000 and snap.usage.output_tokens == 6000  # nothing lost
    assert result.evidence == "verified"
