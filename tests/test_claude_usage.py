"""Counting rules for Claude Code transcripts (ledger.sources.claude_usage).

The generator (tests/claudehistory.py) computes its truth from its own list of distinct
responses; the hand-made cases below pin each hazard's rule one at a time."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claudehistory import generate
from ledger.sources.claude_usage import ClaudeUsage, session_of_path


def feed_all(files: dict[str, bytes], order: list[str] | None = None) -> ClaudeUsage:
    r = ClaudeUsage()
    for rel in order or list(files):
        r.feed(rel, files[rel], 0)
    return r


def jl(*objs) -> bytes:
    return b"".join(o if isinstance(o, bytes) else orjson.dumps(o) + b"\n" for o in objs)


def asst(mid, ts, *, out=10, inp=3, read=0, write=0, model="claude-sonnet-4-5", session="s1",
         ref=None, rid=None, side=False, agent=None, cost=None, split=None):
    usage = {"input_tokens": inp, "cache_read_input_tokens": read, "cache_creation_input_tokens": write,
             "output_tokens": out}
    if split:
        usage["cache_creation"] = {"ephemeral_5m_input_tokens": split[0], "ephemeral_1h_input_tokens": split[1]}
    line = {"type": "assistant", "timestamp": ts, "sessionId": session, "isSidechain": side,
            "message": {"id": mid, "model": model, "usage": usage}}
    if ref:
        line["requestRef"] = ref
    if rid:
        line["requestId"] = rid
    if agent:
        line["agentId"] = agent
    if cost is not None:
        line["costUSD"] = cost
    return line


def cost_state(session, total, per_model, unknown=False):
    line = {"type": "cost-state", "sessionId": session, "totalCostUSD": total,
            "modelUsage": {m: {"inputTokens": t, "outputTokens": 1, "cacheReadInputTokens": 0,
                               "cacheCreationInputTokens": 0, "costUSD": c} for m, (t, c) in per_model.items()}}
    if unknown:
        line["hasUnknownModelCost"] = True
    return line


def only(r: ClaudeUsage):
    rs = list(r.responses())
    assert len(rs) == 1, rs
    return rs[0]


# ---- the generator's ground truth --------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_reducer_equals_ground_truth(tmp_path, seed):
    h = generate(tmp_path, sessions=12, seed=seed)
    files = {str(p.relative_to(tmp_path)): p.read_bytes() for p in tmp_path.rglob("*.jsonl")}
    assert files == h.files
    assert any("/subagents/" in f for f in files)
    r = feed_all(files)
    assert r.totals() == h.truth()
    assert r.totals(("model",)) == h.truth(("model",))
    # the hazards are real: summing raw assistant lines would overcount
    raw_lines = sum(d.count(b'"type":"assistant"') for d in files.values())
    assert raw_lines > 1.5 * len(h.responses)
    # every junk line and the torn tail are reported with their file, none raised
    assert len(r.problems) == h.junk_lines + len(h.torn_files)
    assert any(p.file == h.torn_files[0] and "torn" in p.reason for p in r.problems)


def test_small_history_hand_checked():
    """One 2.1.x session and one 2.0.x session, numbers worked out by hand."""
    a = jl(
        {"type": "api-request", "id": "rr1", "params": {"model": "claude-opus-5-5"}},
        asst("m1", "2026-01-09T23:59:59.500Z", out=2, inp=5, read=100, write=30, split=(20, 10),
             ref="rr1", model="claude-opus-5-5", session="A"),            # snapshot
        asst("m1", "2026-01-10T00:00:00.200Z", out=40, inp=5, read=100, write=30, split=(20, 10),
             ref="rr1", model="claude-opus-5-5", session="A"),            # block 1 (final)
        asst("m1", "2026-01-10T00:00:00.300Z", out=40, inp=5, read=100, write=30, split=(20, 10),
             ref="rr1", model="claude-opus-5-5", session="A"),            # block 2
        cost_state("A", 0.001845, {"claude-opus-5-5": (5, 0.001845)}),
        asst("m2", "2026-01-11T08:00:00.000Z", out=7, inp=1, read=200, write=0, split=(0, 0),
             ref="rr2", model="claude-opus-5-5", session="A"),
        cost_state("A", 0.0027225, {"claude-opus-5-5": (6, 0.0027225)}),
    )
    b = jl(
        asst("m3", "2026-01-10T12:00:00.000Z", out=9, inp=4, rid="req_3", model="claude-sonnet-4", session="B",
             cost=0.03),
        asst("m3", "2026-01-10T12:00:01.000Z", out=9, inp=4, rid="req_3", model="claude-sonnet-4", session="B",
             cost=0.03),
    )
    r = feed_all({"p/A.jsonl": a, "p/B.jsonl": b})
    t = r.totals()
    # m1: first appearance 2026-01-09 (the snapshot line), max output 40, split 20/10; the
    # cost-state after it is written on the 10th, but its level is m1's cost: booked on m1's day
    assert t[("2026-01-09", "claude-opus-5-5")] == {
        "input_tokens": 5, "cache_read_tokens": 100, "cache_write_tokens": 30, "cache_write_5m_tokens": 20,
        "cache_write_1h_tokens": 10, "output_tokens": 40, "reasoning_tokens": None, "responses": 1,
        "cost_usd": 0.001845}
    assert t[("2026-01-11", "claude-opus-5-5")]["output_tokens"] == 7
    assert t[("2026-01-11", "claude-opus-5-5")]["cost_usd"] == pytest.approx(0.0008775, abs=1e-15)
    assert t[("2026-01-10", "claude-sonnet-4")] == {
        "input_tokens": 4, "cache_read_tokens": 0, "cache_write_tokens": 0, "cache_write_5m_tokens": None,
        "cache_write_1h_tokens": None, "output_tokens": 9, "reasoning_tokens": None, "responses": 1,
        "cost_usd": 0.03}
    assert len(t) == 3


# ---- properties -----------------------------------------------------------------------------

_prop = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_prop
@given(seed=st.integers(0, 10_000), shuffle=st.randoms(use_true_random=False))
def test_file_order_does_not_change_totals(seed, shuffle):
    h = generate(None, sessions=5, seed=seed)
    order = list(h.files)
    shuffle.shuffle(order)
    assert feed_all(h.files, order).totals() == h.truth()


@_prop
@given(seed=st.integers(0, 10_000), pick=st.randoms(use_true_random=False))
def test_duplicating_any_line_does_not_change_totals(seed, pick):
    h = generate(None, sessions=4, seed=seed)
    files = dict(h.files)
    rel = pick.choice(sorted(files))
    lines = files[rel].splitlines(keepends=True)
    i = pick.randrange(len(lines))
    if not lines[i].endswith(b"\n"):
        lines[i] += b"\n"  # duplicating the torn tail completes one copy: keep it torn
        dup = lines[i][:-1]
        lines.append(dup)
    else:
        lines.insert(i + 1, lines[i])
    files[rel] = b"".join(lines)
    # an assistant line copied into another file (a replay) changes nothing either
    other = pick.choice(sorted(files))
    asst_lines = [x for x in lines if b'"type":"assistant"' in x and x.endswith(b"\n")]
    if asst_lines and h.torn_files[0] != other:
        files[other] += pick.choice(asst_lines)
    assert feed_all(files).totals() == h.truth()


@_prop
@given(seed=st.integers(0, 10_000), cuts=st.lists(st.floats(0, 1), max_size=6), mid_line=st.booleans())
def test_split_feed_from_serialised_state_gives_the_same_result(seed, cuts, mid_line):
    h = generate(None, sessions=4, seed=seed)
    whole = feed_all(h.files)
    state = None
    for rel, data in h.files.items():
        if mid_line:
            points = sorted({int(c * len(data)) for c in cuts})  # anywhere, even inside a line
        else:
            ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
            points = sorted({ends[int(c * (len(ends) - 1))] for c in cuts}) if ends else []
        for p in [*points, len(data)]:
            r = ClaudeUsage(orjson.loads(orjson.dumps(state)) if state else None)
            off = r.offset(rel)
            if p > off:
                r.feed(rel, data[off:p], off)
            state = r.state()
    r = ClaudeUsage(state)
    assert r.totals() == whole.totals() == h.truth()
    assert sorted(r.responses(), key=lambda x: x.message_id) == sorted(whole.responses(), key=lambda x: x.message_id)
    assert r.cost_deltas() == whole.cost_deltas()


# ---- one regression test per hazard ----------------------------------------------------------

def test_content_blocks_of_one_response_count_once():
    blocks = [asst("m1", f"2026-01-10T10:00:0{i}.000Z", out=50, ref="r1") for i in range(3)]
    r = feed_all({"p/s1.jsonl": jl(*blocks)})
    assert only(r).counters["output_tokens"] == 50
    assert r.totals()[("2026-01-10", "claude-sonnet-4-5")]["responses"] == 1


def test_streaming_snapshot_keeps_the_max_per_counter_whatever_the_order():
    final = asst("m1", "2026-01-10T10:00:01.000Z", out=50, read=7, ref="r1")
    snapshot = asst("m1", "2026-01-10T10:00:00.000Z", out=3, read=7, ref="r1")
    for files in ({"p/s1.jsonl": jl(snapshot, final)},                       # first-wins would undercount
                  {"p/s1.jsonl": jl(final), "p/s2.jsonl": jl(snapshot)}):     # last-wins would undercount
        resp = only(feed_all(files))
        assert resp.counters["output_tokens"] == 50
        assert resp.time == "2026-01-10T10:00:00.000000Z"


def test_resumed_session_replay_in_a_new_file_counts_once():
    orig = asst("m1", "2026-01-10T10:00:00.000Z", out=50, rid="q1", session="old", cost=0.5)
    replay = dict(orig, sessionId="new", uuid="u2")
    new = asst("m2", "2026-01-12T09:00:00.000Z", out=5, rid="q2", session="new", cost=0.25)
    r = feed_all({"p/new.jsonl": jl(replay, new), "p/old.jsonl": jl(orig)})
    assert sorted(x.message_id for x in r.responses()) == ["m1", "m2"]
    t = r.totals(("day",))
    assert t[("2026-01-10",)]["output_tokens"] == 50 and t[("2026-01-10",)]["cost_usd"] == 0.5
    assert t[("2026-01-12",)]["cost_usd"] == 0.25


def test_a_session_holds_every_file_with_its_lines_not_only_those_of_its_counted_responses():
    """A session resumed into a new file (older clients) replays its responses there verbatim,
    timestamps and all: the copy that is counted may be the resumer's ("a" < "b"), so the
    original's file holds none of its counted responses. It is still that session's file (the
    index counts a damaged one as its evidence gap), and so is a file of only non-usage lines."""
    orig = asst("m1", "2026-01-10T10:00:00.000Z", out=50, session="b")
    files = {"p/b.jsonl": jl({"type": "summary", "summary": "A task"}, orig),
             "p/a.jsonl": jl(dict(orig, sessionId="a"), asst("m2", "2026-01-12T09:00:00.000Z", session="a")),
             "p/b/subagents/agent-x.jsonl": jl({"type": "user", "timestamp": "2026-01-10T10:00:01.000Z",
                                                "sessionId": "b", "isSidechain": True,
                                                "message": {"role": "user", "content": "go"}})}
    r = feed_all(files)
    assert {x.message_id: x.session_id for x in r.responses()} == {"m1": "a", "m2": "a"}  # (counted once)
    want = {"a": ("p/a.jsonl",), "b": ("p/b.jsonl", "p/b/subagents/agent-x.jsonl")}
    assert {sid: info.files for sid, info in r.sessions().items()} == want
    again = ClaudeUsage(orjson.loads(orjson.dumps(r.state())))  # (kept in the state)
    assert {sid: info.files for sid, info in again.sessions().items()} == want


def test_fork_copies_belong_to_the_parent_and_the_fork_adds_only_its_own():
    """Claude Code 2.1.328 `--resume P --fork-session` (tests/data/captures/claude/fork): the
    fork's file copies the parent's lines with `sessionId` rewritten and `requestSessionId: P`
    on the copied assistant lines, copies no cost-state, and its own cost-state starts from the
    parent's total (0.5 + its own 0.25 = 0.75)."""
    parent = jl(asst("m1", "2026-01-10T10:00:00.000Z", ref="r1", session="P"),
                cost_state("P", 0.5, {"claude-sonnet-4-5": (3, 0.5)}))
    child = jl(dict(orjson.loads(parent.splitlines()[0]), sessionId="C", requestSessionId="P"),
               asst("m2", "2026-01-11T10:00:00.000Z", ref="r2", session="C"),
               cost_state("C", 0.75, {"claude-sonnet-4-5": (6, 0.75)}))
    for order in (["p/P.jsonl", "p/C.jsonl"], ["p/C.jsonl", "p/P.jsonl"]):
        r = feed_all({"p/P.jsonl": parent, "p/C.jsonl": child}, order)
        t = r.totals(("day",))
        assert t[("2026-01-10",)]["cost_usd"] == 0.5
        assert t[("2026-01-11",)]["cost_usd"] == 0.25
        assert t[("2026-01-10",)]["responses"] == 1
        by = r.totals(("session",))
        assert (by[("P",)]["responses"], by[("P",)]["cost_usd"]) == (1, 0.5)
        assert (by[("C",)]["responses"], by[("C",)]["cost_usd"]) == (1, 0.25)
        assert r.sessions()["C"].started == "2026-01-11T10:00:00.000000Z"  # not the copies' time


def test_compaction_relog_keeps_the_first_appearance():
    first = asst("m1", "2026-01-10T23:00:00.000Z", out=50, ref="r1")
    relog = dict(first, timestamp="2026-01-12T08:00:00.000Z", uuid="u9")
    # the re-log is fed first (another file of the same history): the day is still the 10th
    r = feed_all({"p/s2.jsonl": jl({"type": "system", "subtype": "compact_boundary"}, relog),
                  "p/s1.jsonl": jl(first)})
    resp = only(r)
    assert resp.day == "2026-01-10" and resp.file == "p/s1.jsonl"


def test_subagent_transcripts_count_and_attribute_to_their_session():
    main = jl(asst("m1", "2026-01-10T10:00:00.000Z", ref="r1", session="S"))
    sub = jl(asst("m2", "2026-01-10T10:00:05.000Z", ref="r2", session="S", side=True, agent="a1", out=7))
    r = feed_all({"proj/S.jsonl": main, "proj/S/subagents/agent-a1.jsonl": sub})
    by_id = {x.message_id: x for x in r.responses()}
    assert by_id["m2"].session_id == "S" and by_id["m2"].agent_id == "a1" and by_id["m2"].sidechain
    assert r.totals(("session",))[("S",)]["responses"] == 2
    assert session_of_path("proj/S/subagents/workflows/w1/agent-a9.jsonl") == ("S", "a9")


def test_non_sidechain_copy_is_preferred_for_attribution():
    side = asst("m1", "2026-01-10T10:00:00.000Z", ref="r1", session="S", side=True, agent="a1")
    main = asst("m1", "2026-01-10T10:00:03.000Z", ref="r1", session="S")
    r = feed_all({"proj/S/subagents/agent-a1.jsonl": jl(side), "proj/S.jsonl": jl(main)})
    resp = only(r)
    assert not resp.sidechain and resp.agent_id is None and resp.file == "proj/S.jsonl"
    assert resp.time == "2026-01-10T10:00:00.000000Z"  # the time is still the first appearance


@pytest.mark.parametrize("field", ["requestRef", "requestId"])
def test_request_key_separates_responses_sharing_a_message_id(field):
    lines = [asst("m1", "2026-01-10T10:00:00.000Z", out=5), asst("m1", "2026-01-10T10:00:01.000Z", out=6)]
    lines[0][field], lines[1][field] = "k1", "k2"
    r = feed_all({"p/s.jsonl": jl(*lines)})
    assert sorted((x.request_key, x.counters["output_tokens"]) for x in r.responses()) == [("k1", 5), ("k2", 6)]


def test_cache_write_split_only_when_it_accounts_for_every_write():
    ok = asst("m1", "2026-01-10T10:00:00.000Z", write=30, split=(20, 10), ref="a")
    partial = asst("m2", "2026-01-10T10:00:00.000Z", write=30, split=(20, 0), ref="b")
    got = {x.message_id: x.counters for x in feed_all({"p/s.jsonl": jl(ok, partial)}).responses()}
    assert (got["m1"]["cache_write_5m_tokens"], got["m1"]["cache_write_1h_tokens"]) == (20, 10)
    assert (got["m2"]["cache_write_5m_tokens"], got["m2"]["cache_write_1h_tokens"]) == (None, None)
    assert got["m2"]["cache_write_tokens"] == 30


def test_lines_without_request_key_dedupe_on_message_id():
    r = feed_all({"p/s.jsonl": jl(*[asst("m1", "2026-01-10T10:00:00.000Z", out=5)] * 3)})
    assert only(r).request_key is None


def test_day_is_the_utc_day_of_the_first_line():
    a = asst("m1", "2026-01-11T00:30:00.000+02:00", out=5, ref="r")   # 22:30 UTC on the 10th
    b = asst("m1", "2026-01-11T00:00:00.100Z", out=9, ref="r")
    assert only(feed_all({"p/s.jsonl": jl(a, b)})).day == "2026-01-10"


def test_cost_state_charges_each_run_its_increment():
    """A resumed 2.1.x session's file holds both runs' cumulative states (0.001845, then
    0.0027225 as recorded from the real client): each day is charged what it added."""
    data = jl(asst("m1", "2026-01-10T10:00:00.000Z", ref="r1", session="S"),
              cost_state("S", 0.001845, {"claude-sonnet-4-5": (3, 0.001845)}),
              asst("m2", "2026-01-12T10:00:00.000Z", ref="r2", session="S"),
              cost_state("S", 0.0027225, {"claude-sonnet-4-5": (6, 0.0027225)}))
    r = feed_all({"p/S.jsonl": data})
    t = r.totals(("day",))
    assert t[("2026-01-10",)]["cost_usd"] == 0.001845
    assert t[("2026-01-12",)]["cost_usd"] == pytest.approx(0.0027225 - 0.001845, abs=0)
    assert sum(d.cost_usd for d in r.cost_deltas()) == pytest.approx(0.0027225, abs=1e-18)
    assert {d.session_id for d in r.cost_deltas()} == {"S"}


def test_cost_state_without_model_usage_uses_the_total():
    data = jl(asst("m1", "2026-01-10T10:00:00.000Z", ref="r1", session="S"),
              {"type": "cost-state", "sessionId": "S", "totalCostUSD": 0.5})
    d = feed_all({"p/S.jsonl": data}).cost_deltas()
    assert [(x.model, x.cost_usd, x.day) for x in d] == [(None, 0.5, "2026-01-10")]


def test_unknown_model_cost_is_unknown_not_zero():
    data = jl(asst("m1", "2026-01-10T10:00:00.000Z", ref="r1", session="S", model="acme-1"),
              asst("m2", "2026-01-10T10:00:01.000Z", ref="r2", session="S"),
              cost_state("S", 0.25, {"acme-1": (3, 0.0), "claude-sonnet-4-5": (3, 0.25)}, unknown=True))
    r = feed_all({"p/S.jsonl": data})
    t = r.totals()
    assert t[("2026-01-10", "acme-1")]["cost_usd"] is None
    assert t[("2026-01-10", "claude-sonnet-4-5")]["cost_usd"] == 0.25
    assert [d.cost_usd for d in r.cost_deltas() if d.model == "acme-1"] == [None]


def test_a_measured_zero_cost_is_zero():
    data = jl(asst("m1", "2026-01-10T10:00:00.000Z", ref="r1", session="S", model="free-1"),
              cost_state("S", 0.0, {"free-1": (3, 0.0)}))
    assert feed_all({"p/S.jsonl": data}).totals()[("2026-01-10", "free-1")]["cost_usd"] == 0.0


def test_cost_state_is_dated_by_the_latest_line_before_it():
    """An increment no response explains is charged at the level's time: the latest timestamp
    before it in its file (an older line between the levels does not move the charge back)."""
    data = jl(asst("m2", "2026-01-12T10:00:00.000Z", ref="r2", session="S"),
              cost_state("S", 0.5, {"claude-sonnet-4-5": (3, 0.5)}),
              {"type": "user", "timestamp": "2026-01-10T10:00:00.000Z", "sessionId": "S"},
              cost_state("S", 0.75, {"claude-sonnet-4-5": (3, 0.75)}))
    assert [(d.day, d.cost_usd) for d in feed_all({"p/S.jsonl": data}).cost_deltas()] == [
        ("2026-01-12", 0.5), ("2026-01-12", 0.25)]


def test_a_level_is_booked_on_the_days_of_its_responses():
    """Claude Code writes a session's cost-state at exit only (tests/data/captures/claude/
    midnight): the increment is split over the responses it covers at list-price proportions,
    so a session across 00:00 UTC is charged on both days."""
    data = jl(asst("m1", "2026-01-10T23:59:58.000Z", ref="r1", session="S", inp=100, out=20),
              asst("m2", "2026-01-11T00:00:02.000Z", ref="r2", session="S", inp=300, out=60),
              cost_state("S", 0.0024, {"claude-sonnet-4-5": (400, 0.0024)}))
    t = feed_all({"p/S.jsonl": data}).totals(("day",))
    assert t[("2026-01-10",)]["cost_usd"] == pytest.approx(0.0006, abs=1e-15)
    assert t[("2026-01-11",)]["cost_usd"] == pytest.approx(0.0018, abs=1e-15)


def test_usage_only_a_cost_state_shows_is_a_response_at_the_compaction():
    """`/compact` (tests/data/captures/claude/compact): its calls are in no assistant line, only
    in the next cost-state's cumulative per-model usage; the excess is one response, at the
    compaction, with the cache split, and the increment's cost is shared with it."""
    mu = {"claude-sonnet-4-5": {"inputTokens": 110, "outputTokens": 25, "cacheReadInputTokens": 1000,
                                "cacheCreationInputTokens": 90, "cacheCreationEphemeral5mInputTokens": 70,
                                "cacheCreationEphemeral1hInputTokens": 20, "costUSD": 0.003}}
    data = jl(asst("m1", "2026-01-10T10:00:00.000Z", ref="r1", session="S", inp=10, out=5, read=0, write=20,
                   split=(20, 0)),
              {"type": "system", "subtype": "compact_boundary", "timestamp": "2026-01-10T10:05:00.000Z",
               "sessionId": "S"},
              {"type": "user", "isCompactSummary": True, "timestamp": "2026-01-10T10:05:00.000Z", "sessionId": "S"},
              asst("m2", "2026-01-10T10:06:00.000Z", ref="r2", session="S", inp=0, out=0, read=0, write=0,
                   split=(0, 0)),
              {"type": "cost-state", "sessionId": "S", "totalCostUSD": 0.003, "modelUsage": mu})
    r = feed_all({"p/S.jsonl": data})
    (extra,) = [x for x in r.responses() if x.message_id.startswith("cost-state:")]
    assert extra.time == "2026-01-10T10:05:00.000000Z" and extra.session_id == "S"
    assert extra.counters == {"input_tokens": 100, "cache_read_tokens": 1000, "cache_write_tokens": 70,
                              "cache_write_5m_tokens": 50, "cache_write_1h_tokens": 20, "output_tokens": 20,
                              "reasoning_tokens": None}
    assert r.totals(("session",))[("S",)]["responses"] == 3
    assert sum(d.cost_usd for d in r.cost_deltas()) == pytest.approx(0.003, abs=1e-18)


def test_cost_usd_per_line_is_deduped_by_response():
    lines = [asst("m1", f"2026-01-10T10:00:0{i}.000Z", rid="q", cost=c) for i, c in enumerate((0.01, 0.12, 0.12))]
    assert feed_all({"p/s.jsonl": jl(*lines)}).totals(("day",))[("2026-01-10",)]["cost_usd"] == 0.12


def test_no_reported_cost_is_none_not_zero():
    r = feed_all({"p/s.jsonl": jl(asst("m1", "2026-01-10T10:00:00.000Z"))})
    assert r.totals()[("2026-01-10", "claude-sonnet-4-5")]["cost_usd"] is None
    assert only(r).cost_usd is None


def test_bad_lines_are_skipped_and_reported_with_file_and_line():
    data = jl(b"not json\n", b"\xff\xfe\n", b"[1]\n", {"type": "x-new-thing"}, b"\n",
              asst("", "2026-01-10T10:00:00.000Z"), asst("m1", "2026-01-10T10:00:00.000Z", out=4),
              {"type": "assistant", "message": "not a dict"}, {"type": "assistant", "message": {"id": "m9"}},
              asst("m8", "2026-01-10T10:00:00.000Z", model="<synthetic>"))
    r = feed_all({"p/s.jsonl": data})
    assert [(p.file, p.line) for p in r.problems] == [("p/s.jsonl", n) for n in (1, 2, 3, 4, 6)]
    reasons = [p.reason for p in r.problems]
    assert reasons[0].startswith("not JSON") and reasons[1] == "not UTF-8" and "x-new-thing" in reasons[3]
    assert only(r).message_id == "m1" and r.problem_count == 5


def test_torn_last_line_is_left_for_the_next_pass():
    line = orjson.dumps(asst("m1", "2026-01-10T10:00:00.000Z", out=5, ref="r")) + b"\n"
    head = jl(asst("m0", "2026-01-10T09:00:00.000Z", ref="r0"))
    r = ClaudeUsage()
    off = r.feed("p/s.jsonl", head + line[:20], 0)
    assert off == len(head) and [x.message_id for x in r.responses()] == ["m0"]
    assert "torn" in r.problems[-1].reason and r.problems[-1].line == 2
    r2 = ClaudeUsage(r.state())
    assert r2.feed("p/s.jsonl", line, off) == len(head) + len(line)
    assert sorted(x.message_id for x in r2.responses()) == ["m0", "m1"] and r2.problems == []


def test_state_is_json_and_bounded_by_distinct_responses():
    lines = [asst(f"m{i % 5}", "2026-01-10T10:00:00.000Z", ref=f"r{i % 5}") for i in range(200)]
    r = feed_all({"p/s.jsonl": jl(*lines)})
    s = r.state()
    assert orjson.loads(orjson.dumps(s)) == s
    assert len(s["responses"]) == 5
    with pytest.raises(ValueError):
        ClaudeUsage(s).feed("p/s.jsonl", b"", 0)  # a caller that lost its offset is told



def test_gen_script_writes_a_config_dir_and_its_truth(tmp_path):
    import subprocess
    import sys

    from conftest import REPO
    out = tmp_path / "claude"
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_claude_history.py"), "--sessions", "5",
                          "--seed", "2", "--out", str(out)], capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr
    truth = orjson.loads(res.stdout)
    files = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*.jsonl")}
    assert all(f.startswith("projects/") for f in files) and truth["files"] == len(files)
    got = feed_all(files).totals()
    assert [{"day": d, "model": m, **v} for (d, m), v in sorted(got.items())] == truth["daily_by_model"]


def test_claude_timestamps_take_a_fast_path_to_the_same_canonical_utc():
    """Claude Code's `...T10:00:00.000Z` form is canonicalised without the general parser
    (issue 15); valid or not, the answer is the general parser's."""
    import random

    from ledger.records import timefmt
    from ledger.sources import claude_usage

    def general(v):
        try:
            return timefmt.format_utc(timefmt.parse_rfc3339(v))
        except (ValueError, OverflowError):
            return None

    r = random.Random(7)
    cases = ["2026-01-12T10:00:00.000Z", "2024-02-29T12:00:00.123Z", "2023-02-29T12:00:00.123Z",
             "2026-01-12T23:59:60.000Z", "0000-01-01T00:00:00.000Z", "2026-01-12T10:00:00.000+01:00",
             "2026-01-12T10:00:00Z", "2026-01-12t10:00:00.000z"]
    cases += [f"{r.randint(0, 9999):04d}-{r.randint(0, 13):02d}-{r.randint(0, 32):02d}T{r.randint(0, 25):02d}:"
              f"{r.randint(0, 61):02d}:{r.randint(0, 61):02d}.{r.randint(0, 999):03d}Z" for _ in range(3000)]
    assert [claude_usage._utc(v) for v in cases] == [general(v) for v in cases]
    assert timefmt._MILLIS_Z.fullmatch(cases[0])  # (the fast path is the one taken)
    # (Codex writes the same form on every rollout line: one rule, ledger.records.timefmt)
    from ledger.sources import codex_usage

    assert claude_usage._utc is codex_usage._utc is timefmt.utc_text
