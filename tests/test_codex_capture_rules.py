"""The Codex counting rules of issue 25 on the real captures (tests/data/captures/codex/), read
by the reducer itself (ledger.sources.codex_usage), each rule on the shape it comes from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.sources.codex_usage import CodexUsage

CAPTURES = Path(__file__).parent / "data" / "captures" / "codex"
V169 = CAPTURES / "v0169"


def files(capture: Path) -> dict[str, bytes]:
    return {str(p.relative_to(capture)): p.read_bytes() for p in sorted(capture.rglob("*.jsonl"))}


def truth(capture: Path) -> list[dict]:
    return [r for r in json.loads((capture / "truth.json").read_text())["responses"] if r["logged"] is not False]


def fed(data: dict[str, bytes], order=None) -> CodexUsage:
    u = CodexUsage()
    for name in order or sorted(data):
        u.feed(name, data[name])
    return u


def by_session(u: CodexUsage) -> dict[str, tuple[int, int, int]]:
    out = {}
    for (sid,), t in u.totals(by=("session",)).items():
        out[sid] = (t["input_tokens"], t["cache_read_tokens"], t["output_tokens"])
    return out


def want_by_session(rows: list[dict]) -> dict[str, tuple[int, int, int]]:
    out: dict[str, list[int]] = {}
    for r in rows:
        t = out.setdefault(r["thread"], [0, 0, 0])
        t[0] += r["input_tokens"] - r["cached_input_tokens"]
        t[1] += r["cached_input_tokens"]
        t[2] += r["output_tokens"]
    return {k: tuple(v) for k, v in out.items()}


def without_records(data: dict[str, bytes]) -> dict[str, bytes]:
    """The capture as a build that writes no token_usage_record would have left it."""
    return {k: b"".join(line for line in v.splitlines(keepends=True) if b'"type":"token_usage_record"' not in line)
            for k, v in data.items()}


def fork_files(data: dict[str, bytes]) -> list[str]:
    return [k for k, v in data.items() if b'"forked_from_ordinal_exclusive"' in v.split(b"\n", 1)[0]]


def test_every_call_is_counted_once_by_its_response_id():
    assert by_session(fed(files(V169))) == want_by_session(truth(V169))


@pytest.mark.parametrize("reverse", [False, True])
def test_a_paginated_forks_totals_are_taken_over_the_parents_level_at_the_fork_point(reverse):
    """Without the per-call records, the cumulative totals alone: a 0.169 fork's levels go on
    from its parent's total at forked_from_ordinal_exclusive (not from zero), and the parent's
    total it re-emits at fork time is the parent's; in either feed order."""
    data = without_records(files(V169))
    assert len(fork_files(data)) == 3
    order = sorted(data, reverse=reverse)
    assert by_session(fed(data, order)) == want_by_session(truth(V169))


def test_a_fork_read_without_its_parent_counts_only_its_own_calls():
    data = files(V169)
    rows = truth(V169)
    for fork in fork_files(data):
        (meta,) = [json.loads(data[fork].split(b"\n", 1)[0])["payload"]]
        got = by_session(fed({fork: data[fork]}))
        assert got == {meta["id"]: want_by_session(rows)[meta["id"]]}, fork
        # records stripped too: the fork's first record is gone, so is its stated base; the
        # re-emitted parent total is then a level of the fork's own: not knowable, never lost
        assert by_session(fed(without_records({fork: data[fork]})))[meta["id"]][2] >= \
            want_by_session(rows)[meta["id"]][2]


def test_a_forks_call_before_its_first_turn_context_ran_on_the_parents_model():
    """`codex exec fork -m gpt-5.5` of a thread last on gpt-5.6-luna: the compaction call the
    model change makes comes before the fork's first turn_context and ran on luna (the truth)."""
    u = fed(files(V169))
    rows = truth(V169)
    want: dict[tuple[str, str], int] = {}
    for r in rows:
        want[(r["thread"], r["model"])] = want.get((r["thread"], r["model"]), 0) + r["output_tokens"]
    got = {(s, m): t["output_tokens"] for (s, m), t in u.totals(by=("session", "model")).items()}
    assert got == want
    assert len({m for (_s, m) in got}) == 2


def test_each_call_keeps_the_service_tier_its_thread_settings_applied():
    u = fed(files(V169))
    tiers = {d.response_id: d.service_tier for d in u.deltas()}
    want = {r["response_id"]: r["service_tier"] for r in truth(V169)}
    assert tiers == {k: (None if v in (None, "default") else v) for k, v in want.items()}
    assert "priority" in tiers.values()


def test_the_same_rollout_archived_and_live_counts_once():
    data = files(V169)
    (arch,) = [k for k in data if k.startswith("archived_sessions/")]
    both = {**data, "sessions/2026/12/01/" + arch.split("/")[-1]: data[arch]}
    assert by_session(fed(both)) == want_by_session(truth(V169))


def test_state_round_trip_keeps_the_rules():
    data = files(V169)
    names = sorted(data)
    u = CodexUsage()
    for n in names[:3]:
        u.feed(n, data[n])
    u = CodexUsage(json.loads(json.dumps(u.state())))
    for n in names[3:]:
        u.feed(n, data[n])
    assert by_session(u) == want_by_session(truth(V169))


def test_a_0130_forks_copies_count_once_for_the_parent():
    cap = CAPTURES / "v0130"
    assert by_session(fed(files(cap))) == want_by_session(truth(cap))


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_generated_history_in_the_real_fork_shapes_is_exact(seed):
    """tests/codexhistory.py with real_shapes: 0.169 paginated forks (records, re-emits, the
    compaction of a model change, tiers, archived flat) and 0.130 copied forks: every counter
    per day, model and session equals the generator's own calls, and each call's tier."""
    import codexhistory

    h = codexhistory.generate(None, threads=24, seed=seed, real_shapes=True)
    data = h.files
    assert any(b'"history_mode":"paginated","forked_from_ordinal_exclusive"' in v or
               b'"forked_from_ordinal_exclusive"' in v.split(b"\n", 1)[0] for v in data.values())
    assert any(v.count(b'"type":"session_meta"') > 1 for v in data.values())  # a 0.130 copied fork
    for order in (sorted(data), sorted(data, reverse=True)):
        u = fed(data, order)
        want = {k: {c: v[c] for c in codexhistory.COUNTERS} for k, v in h.truth(("day", "model", "session")).items()}
        got = {k: {c: v[c] for c in codexhistory.COUNTERS}
               for k, v in u.totals(by=("day", "model", "session")).items()}
        assert got == want
    tiers: dict[str | None, int] = {}
    for d in u.deltas():
        tiers[d.service_tier] = tiers.get(d.service_tier, 0) + (d.counters["output_tokens"] or 0)
    want_tiers: dict[str | None, int] = {}
    for c in h.calls:
        want_tiers[c.service_tier] = want_tiers.get(c.service_tier, 0) + c.counters["output_tokens"]
    assert tiers == want_tiers
