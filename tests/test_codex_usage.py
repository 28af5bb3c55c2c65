"""Counting rules for Codex rollout files (ledger.sources.codex_usage).

The generator (tests/codexhistory.py) computes its truth from its own list of model calls;
the hand-made cases below pin each hazard's rule one at a time."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codexhistory import generate
from ledger.sources.codex_usage import CodexUsage, thread_of_path

P = "11111111-1111-4111-8111-111111111111"
C = "22222222-2222-4222-8222-222222222222"
G = "33333333-3333-4333-8333-333333333333"


def feed_all(files: dict[str, bytes], order: list[str] | None = None) -> CodexUsage:
    r = CodexUsage()
    for rel in order or list(files):
        r.feed(rel, files[rel], 0)
    return r


def jl(*objs) -> bytes:
    return b"".join(o if isinstance(o, bytes) else orjson.dumps(o) + b"\n" for o in objs)


def meta(tid, ts="2026-03-10T10:00:00.000Z", parent=None, **kw):
    p = {"id": tid, "timestamp": ts, "cwd": "/w", "originator": "codex_cli_rs", "source": "cli",
         "cli_version": "0.169.0", "git": {"branch": "main", "repository_url": "https://example.invalid/r.git"}, **kw}
    if parent:
        p["forked_from_id"] = parent
    return {"timestamp": ts, "type": "session_meta", "payload": p}


def ctx(model, ts="2026-03-10T10:00:00.000Z"):
    return {"timestamp": ts, "type": "turn_context", "payload": {"model": model, "cwd": "/w"}}


def tc(ts, inp, cached=0, out=0, reason=None, write=None, model=None):
    total = {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out}
    if reason is not None:
        total["reasoning_output_tokens"] = reason
    if write is not None:
        total["cache_write_input_tokens"] = write
    info = {"total_token_usage": total, "last_token_usage": {"input_tokens": 1}, "model_context_window": 258400}
    if model:
        info["model"] = model
    return {"timestamp": ts, "type": "event_msg", "payload": {"type": "token_count", "info": info}}


def path(tid, day="2026/03/10", stamp="2026-03-10T10-00-00"):
    return f"sessions/{day}/rollout-{stamp}-{tid}.jsonl"


def deltas(r: CodexUsage):
    return sorted((d.time, d.session_id, d.counters["input_tokens"], d.counters["output_tokens"]) for d in r.deltas())


# ---- the generator's ground truth --------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_reducer_equals_ground_truth(tmp_path, seed):
    h = generate(tmp_path, threads=12, seed=seed)
    files = {str(p.relative_to(tmp_path)): p.read_bytes() for p in tmp_path.rglob("*.jsonl")}
    assert files == h.files
    r = feed_all(files)
    assert r.totals() == h.truth()
    assert r.totals(("session",)) == h.truth(("session",))
    assert r.totals(("day",)) == h.truth(("day",))
    # the hazards are real: summing every token_count's last call would overcount
    raw = sum(d.count(b'"total_token_usage"') for d in files.values())
    assert raw > 1.3 * len(h.calls)
    assert any(s.forked_from_id for s in r.sessions())
    # every junk line and the torn tail are reported with their file, none raised
    assert len(r.problems) == h.junk_lines + len(h.torn_files)
    assert any(p.file == h.torn_files[0] and "torn" in p.reason for p in r.problems)
    # tool calls: each once, under the thread that made it, although fork copies, repeats and
    # the archived copy put far more call lines in the files
    assert r.tools() == h.tools
    assert {s.session_id: s.tools for s in r.sessions() if s.tools} == h.tools
    assert r.tool_results() == h.results
    assert {s.session_id: s.tool_results for s in r.sessions() if s.tool_results} == h.results
    # every kind of result is in the history, and calls without one
    assert all(sum(t[name][i] for t in h.results.values() for name in t) for i in range(3))
    assert sum(map(sum, (v for t in h.results.values() for v in t.values()))) < sum(
        n for t in h.tools.values() for n in t.values())
    lines = sum(d.count(b'"type":"response_item"') for d in files.values())  # (the generator writes calls only)
    assert lines > 1.3 * sum(sum(t.values()) for t in h.tools.values())


def test_generator_covers_restarts_and_forks_of_forks():
    seen_restart = seen_grandchild = seen_archived_fork = False
    for seed in range(6):
        r = feed_all(generate(None, threads=12, seed=seed).files)
        seen_restart |= any(d.restart for d in r.deltas())
        forks = {s.session_id: s.forked_from_id for s in r.sessions() if s.forked_from_id}
        seen_grandchild |= any(parent in forks for parent in forks.values())
        # a fork (that kept the original times) under archived_sessions/: it sorts before its parent
        seen_archived_fork |= any(s.forked_from_id and s.files[0].startswith("archived_sessions/")
                                  for s in r.sessions())
    assert seen_restart and seen_grandchild and seen_archived_fork


def test_small_history_hand_checked():
    """One exec session (two calls, the last token_count repeated) and a fork of another thread,
    numbers worked out by hand."""
    a = jl(meta(P, "2026-03-09T23:59:58.000Z", source="exec", originator="codex_exec"),
           ctx("gpt-5.5", "2026-03-09T23:59:58.100Z"),
           {"timestamp": "2026-03-09T23:59:58.200Z", "type": "event_msg",
            "payload": {"type": "token_count", "info": None, "rate_limits": {}}},
           tc("2026-03-09T23:59:59.200Z", 19200, 12160, 60, 32),                 # call 1
           tc("2026-03-10T00:00:00.900Z", 38451, 31104, 72, 32),                 # call 2 (next day)
           tc("2026-03-10T00:00:00.912Z", 38451, 31104, 72, 32))                 # exact repeat
    parent = jl(meta(G), ctx("gpt-5.2"), tc("2026-03-10T08:01:00.000Z", 1000, 100, 200, 20, write=50))
    branch = jl(meta(C, "2026-03-10T09:00:00.000Z", parent=G), meta(G), ctx("gpt-5.2"),
                tc("2026-03-10T09:00:00.001Z", 1000, 100, 200, 20, write=50),     # copied at fork time
                ctx("gpt-5.3-codex", "2026-03-10T09:00:05.000Z"),
                tc("2026-03-10T09:01:00.000Z", 1600, 300, 450, 40, write=70))
    r = feed_all({path(P): a, path(G): parent, path(C, stamp="2026-03-10T09-00-00"): branch})
    assert r.totals() == {
        ("2026-03-09", "gpt-5.5"): {"input_tokens": 19200 - 12160, "cache_read_tokens": 12160,
                                    "cache_write_tokens": None, "output_tokens": 60, "reasoning_tokens": 32,
                                    "deltas": 1, "cost_usd": None},
        ("2026-03-10", "gpt-5.5"): {"input_tokens": (38451 - 19200) - (31104 - 12160), "cache_read_tokens": 18944,
                                    "cache_write_tokens": None, "output_tokens": 12, "reasoning_tokens": 0,
                                    "deltas": 1, "cost_usd": None},
        ("2026-03-10", "gpt-5.2"): {"input_tokens": 1000 - 100 - 50, "cache_read_tokens": 100,
                                    "cache_write_tokens": 50, "output_tokens": 200, "reasoning_tokens": 20,
                                    "deltas": 1, "cost_usd": None},
        ("2026-03-10", "gpt-5.3-codex"): {"input_tokens": 600 - 200 - 20, "cache_read_tokens": 200,
                                          "cache_write_tokens": 20, "output_tokens": 250, "reasoning_tokens": 20,
                                          "deltas": 1, "cost_usd": None},
    }
    by_session = r.totals(("session",))
    assert by_session[(G,)]["output_tokens"] == 200 and by_session[(C,)]["output_tokens"] == 250
    s = {x.session_id: x for x in r.sessions()}
    assert (s[P].source, s[P].originator, s[P].started, s[P].ended) == (
        "exec", "codex_exec", "2026-03-09T23:59:58.000000Z", "2026-03-10T00:00:00.912000Z")
    assert s[C].forked_from_id == G and s[C].git_branch == "main"
    assert s[C].files == (path(C, stamp="2026-03-10T09-00-00"),)
    assert s[C].started == "2026-03-10T09:00:00.000000Z"  # not the copied parent lines' time
    assert r.problems == []


# ---- properties -----------------------------------------------------------------------------

_prop = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_prop
@given(seed=st.integers(0, 10_000), shuffle=st.randoms(use_true_random=False))
def test_file_order_does_not_change_totals(seed, shuffle):
    h = generate(None, threads=5, seed=seed)
    order = list(h.files)
    shuffle.shuffle(order)
    r = feed_all(h.files, order)
    assert r.totals() == h.truth() and r.totals(("session",)) == h.truth(("session",))
    assert r.tools() == h.tools and r.tool_results() == h.results


@_prop
@given(seed=st.integers(0, 10_000), pick=st.randoms(use_true_random=False), copy_file=st.booleans())
def test_duplicating_any_line_or_file_does_not_change_totals(seed, pick, copy_file):
    h = generate(None, threads=4, seed=seed)
    files = dict(h.files)
    rel = pick.choice(sorted(files))
    lines = files[rel].splitlines(keepends=True)
    i = pick.randrange(len(lines))
    if lines[i].endswith(b"\n"):
        lines.insert(i + 1, lines[i])
    else:
        lines.insert(i, lines[i] + b"\n")  # the torn tail, completed once before it: junk
    files[rel] = b"".join(lines)
    if copy_file:  # a rollout moved to archived_sessions/ while the old copy stayed
        other = pick.choice(sorted(f for f in files if f.startswith("sessions/")))
        files["archived_sessions/" + other.rsplit("/", 1)[1]] = files[other]
    r = feed_all(files)
    assert r.totals() == h.truth() and r.tools() == h.tools and r.tool_results() == h.results
    # (a copy under archived_sessions/ sorts first: a tie on time must not move usage between threads)
    assert r.totals(("session",)) == h.truth(("session",))


@_prop
@given(seed=st.integers(0, 10_000), cuts=st.lists(st.floats(0, 1), max_size=6), mid_line=st.booleans())
def test_split_feed_from_serialised_state_gives_the_same_result(seed, cuts, mid_line):
    h = generate(None, threads=4, seed=seed)
    whole = feed_all(h.files)
    state = None
    for rel, data in h.files.items():
        if mid_line:
            points = sorted({int(c * len(data)) for c in cuts})  # anywhere, even inside a line
        else:
            ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
            points = sorted({ends[int(c * (len(ends) - 1))] for c in cuts}) if ends else []
        for p in [*points, len(data)]:
            r = CodexUsage(orjson.loads(orjson.dumps(state)) if state else None)
            off = r.offset(rel)
            if p > off:
                r.feed(rel, data[off:p], off)
            state = r.state()
    r = CodexUsage(state)
    assert r.totals() == whole.totals() == h.truth()
    assert sorted(r.deltas(), key=repr) == sorted(whole.deltas(), key=repr)
    assert r.sessions() == whole.sessions()
    assert r.tools() == whole.tools() == h.tools
    assert r.tool_results() == whole.tool_results() == h.results


@_prop
@given(seed=st.integers(0, 10_000), cuts=st.lists(st.floats(0, 1), max_size=4))
def test_an_adopted_state_and_state_json_match_the_copying_path(seed, cuts):
    """The index hands the reducer a freshly parsed state (`adopt`: no copy) and stores
    `state_json()` (no copy): the same bytes and the same answers as `state()` and a copy."""
    h = generate(None, threads=4, seed=seed)
    copied = adopted = None
    for rel, data in h.files.items():
        ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
        points = sorted({ends[int(c * (len(ends) - 1))] for c in cuts}) if ends else []
        for p in [*points, len(data)]:
            a = CodexUsage(orjson.loads(copied) if copied else None)
            b = CodexUsage(orjson.loads(adopted) if adopted else None, adopt=True)
            for r in (a, b):
                off = r.offset(rel)
                if p > off:
                    r.feed(rel, data[off:p], off)
            copied, adopted = orjson.dumps(a.state()), b.state_json()
            assert adopted == copied
    r = CodexUsage(orjson.loads(adopted), adopt=True)
    assert r.totals() == feed_all(h.files).totals() == h.truth()


# ---- one regression test per hazard ----------------------------------------------------------

def test_cumulative_totals_become_deltas():
    r = feed_all({path(P): jl(meta(P), ctx("m"), tc("2026-03-10T10:00:01.000Z", 100, 0, 10),
                              tc("2026-03-10T10:00:02.000Z", 250, 0, 25))})
    assert deltas(r) == [("2026-03-10T10:00:01.000000Z", P, 100, 10), ("2026-03-10T10:00:02.000000Z", P, 150, 15)]


@pytest.mark.parametrize("later_ms", [0, 12])
def test_exact_repeat_counts_once(later_ms):
    first = tc("2026-03-10T10:00:01.000Z", 100, 0, 10)
    again = dict(first, timestamp=f"2026-03-10T10:00:01.{later_ms:03d}Z")
    r = feed_all({path(P): jl(meta(P), ctx("m"), first, again, tc("2026-03-10T10:00:02.000Z", 130, 0, 11))})
    assert deltas(r) == [("2026-03-10T10:00:01.000000Z", P, 100, 10), ("2026-03-10T10:00:02.000000Z", P, 30, 1)]


@pytest.mark.parametrize("rewrite", [False, True])
def test_fork_copying_the_parent_lines_counts_them_once(rewrite):
    copied_ts = "2026-03-11T09:00:00.00{}Z" if rewrite else "2026-03-10T10:00:0{}.000Z"
    parent = jl(meta(P), ctx("m"), tc("2026-03-10T10:00:01.000Z", 100, 0, 10),
                tc("2026-03-10T10:00:02.000Z", 200, 0, 20))
    child = jl(meta(C, "2026-03-11T09:00:00.000Z", parent=P), meta(P), ctx("m"),
               tc(copied_ts.format(1), 100, 0, 10), tc(copied_ts.format(2), 200, 0, 20),
               tc("2026-03-11T09:00:05.000Z", 260, 0, 26))
    files = {path(P): parent, path(C, "2026/03/11", "2026-03-11T09-00-00"): child}
    for order in (list(files), list(files)[::-1]):
        r = feed_all(files, order)
        assert deltas(r) == [("2026-03-10T10:00:01.000000Z", P, 100, 10), ("2026-03-10T10:00:02.000000Z", P, 100, 10),
                             ("2026-03-11T09:00:05.000000Z", C, 60, 6)]


@pytest.mark.parametrize("rewrite", [False, True])
def test_a_fork_tied_on_time_with_its_parent_takes_none_of_the_parents_usage(rewrite):
    """A fork whose copies share their timestamps (with the parent's lines when it kept the
    original times, with its own first call when the client wrote them at fork time), its file
    under archived_sessions/ (which sorts before the parent's sessions/ path): the parent keeps
    its 200 input / 20 output, the fork has its own 60 / 6, whatever the feed order."""
    fork_t = "2026-03-10T10:00:02.000Z"  # the fork was made at the parent's last call
    copied = ["2026-03-10T10:00:01.000Z", "2026-03-10T10:00:02.000Z"] if not rewrite else [fork_t, fork_t]
    parent = jl(meta(P), ctx("m"), tc("2026-03-10T10:00:01.000Z", 100, 0, 10),
                tc("2026-03-10T10:00:02.000Z", 200, 0, 20))
    child = jl(meta(C, fork_t, parent=P), meta(P), ctx("m"), tc(copied[0], 100, 0, 10), tc(copied[1], 200, 0, 20),
               tc(fork_t, 260, 0, 26))  # its own call, at the copies' time
    for cpath in ("archived_sessions/" + path(C, stamp="2026-03-10T10-00-02").rsplit("/", 1)[1],
                  path(C, stamp="2026-03-10T10-00-02")):
        files = {path(P): parent, cpath: child}
        for order in (list(files), list(files)[::-1]):
            r = feed_all(files, order)
            got = {k[0]: (v["input_tokens"], v["output_tokens"]) for k, v in r.totals(("session",)).items()}
            assert got == {P: (200, 20), C: (60, 6)}, (cpath, order)
            assert r.totals(())[()]["input_tokens"] == 260


def test_fork_of_a_fork_counts_every_copy_once():
    g = jl(meta(G), ctx("m"), tc("2026-03-10T10:00:01.000Z", 100, 0, 10))
    p = jl(meta(P, "2026-03-10T11:00:00.000Z", parent=G), meta(G), ctx("m"), tc("2026-03-10T10:00:01.000Z", 100, 0, 10),
           tc("2026-03-10T11:00:01.000Z", 150, 0, 15))
    c = jl(meta(C, "2026-03-10T12:00:00.000Z", parent=P), meta(P, "2026-03-10T11:00:00.000Z", parent=G), meta(G),
           ctx("m"), tc("2026-03-10T10:00:01.000Z", 100, 0, 10), tc("2026-03-10T11:00:01.000Z", 150, 0, 15),
           tc("2026-03-10T12:00:01.000Z", 170, 0, 17))
    files = {path(G, stamp="2026-03-10T10-00-00"): g, path(P, stamp="2026-03-10T11-00-00"): p,
             path(C, stamp="2026-03-10T12-00-00"): c}
    for order in (list(files), list(files)[::-1]):
        assert sorted((s, i) for _, s, i, _ in deltas(feed_all(files, order))) == sorted([(C, 20), (G, 100), (P, 50)])


def test_fork_without_a_copied_parent_meta_is_keyed_to_its_parent():
    parent = jl(meta(P), ctx("m"), tc("2026-03-10T10:00:01.000Z", 100, 0, 10))
    child = jl(meta(C, parent=P), ctx("m"), tc("2026-03-10T10:00:01.000Z", 100, 0, 10),
               tc("2026-03-10T10:05:00.000Z", 120, 0, 12))
    r = feed_all({path(C): child, path(P): parent})
    assert [(s, i) for _, s, i, _ in deltas(r)] == [(P, 100), (C, 20)]


def test_rollouts_without_session_meta_share_totals():
    """The ccusage fork fixture's shape: no session_meta at all, the branch copies the parent."""
    parent = jl(ctx("gpt-5.2"), tc("2026-05-12T08:01:00.000Z", 1000, 100, 200, 20))
    branch = jl(ctx("gpt-5.2"), tc("2026-05-12T08:01:00.000Z", 1000, 100, 200, 20),
                tc("2026-05-12T08:02:00.000Z", 1600, 300, 450, 40))
    t = feed_all({"sessions/x/parent.jsonl": parent, "sessions/x/branch.jsonl": branch}).totals(())
    assert (t[()]["input_tokens"] + t[()]["cache_read_tokens"], t[()]["output_tokens"]) == (1600, 450)


def test_threads_with_the_same_totals_are_not_merged():
    """Two identical exec runs (same prompt, same usage) are two threads: both count."""
    one = jl(meta(P), ctx("m"), tc("2026-03-10T10:00:01.000Z", 100, 0, 10))
    two = jl(meta(C), ctx("m"), tc("2026-03-10T10:00:01.000Z", 100, 0, 10))
    assert feed_all({path(P): one, path(C): two}).totals(())[()]["input_tokens"] == 200


def test_resumed_thread_in_the_same_file_continues_its_total():
    data = jl(meta(P), ctx("m"), tc("2026-03-10T23:50:00.000Z", 100, 0, 10),
              ctx("m2", "2026-03-13T08:00:00.000Z"), tc("2026-03-13T08:00:01.000Z", 180, 0, 12))
    t = feed_all({path(P): data}).totals()
    assert t[("2026-03-10", "m")]["input_tokens"] == 100 and t[("2026-03-13", "m2")]["input_tokens"] == 80


def test_a_total_that_went_down_is_a_restart_charged_whole():
    data = jl(meta(P), ctx("m"), tc("2026-03-10T10:00:01.000Z", 100, 0, 10),
              tc("2026-03-12T10:00:01.000Z", 40, 0, 30), tc("2026-03-12T10:00:02.000Z", 90, 0, 31))
    r = feed_all({path(P): data})
    assert [(i, o) for _, _, i, o in deltas(r)] == [(100, 10), (40, 30), (50, 1)]
    assert [d.restart for d in sorted(r.deltas(), key=lambda d: d.time)] == [False, True, False]


def test_a_stale_copy_of_an_older_level_neither_counts_nor_becomes_the_level_below():
    data = jl(meta(P), ctx("m"), tc("2026-03-10T10:00:01.000Z", 100, 0, 10), tc("2026-03-10T10:00:02.000Z", 200, 0, 20),
              tc("2026-03-10T10:00:01.000Z", 100, 0, 10), tc("2026-03-10T10:00:03.000Z", 260, 0, 26))
    assert [i for _, _, i, _ in deltas(feed_all({path(P): data}))] == [100, 100, 60]


def test_a_partial_copy_takes_the_nearest_level_below_whatever_the_order():
    full = jl(meta(P), ctx("m"), tc("2026-03-10T10:00:01.000Z", 100, 0, 10), tc("2026-03-10T10:00:02.000Z", 200, 0, 20),
              tc("2026-03-10T10:00:03.000Z", 300, 0, 30))
    partial = jl(meta(P), ctx("m"), tc("2026-03-10T10:00:01.000Z", 100, 0, 10),
                 tc("2026-03-10T10:00:03.000Z", 300, 0, 30))
    files = {path(P): full, "archived_sessions/partial.jsonl": partial}
    for order in (list(files), list(files)[::-1]):
        assert feed_all(files, order).totals(())[()]["input_tokens"] == 300


def test_model_from_turn_context_and_info_model():
    data = jl(meta(P), ctx("gpt-a"), tc("2026-03-10T10:00:01.000Z", 100, 0, 10),
              ctx("gpt-b"), tc("2026-03-10T10:00:02.000Z", 150, 0, 15),
              tc("2026-03-10T10:00:03.000Z", 170, 0, 17, model="gpt-c"))
    t = feed_all({path(P): data}).totals(("model",))
    assert {k[0]: v["input_tokens"] for k, v in t.items()} == {"gpt-a": 100, "gpt-b": 50, "gpt-c": 20}
    nomodel = feed_all({path(C): jl(meta(C), tc("2026-03-10T10:00:01.000Z", 5, 0, 1))}).totals(("model",))
    assert list(nomodel) == [(None,)]  # unknown, not guessed


def test_counters_are_normalised_like_ledger_run():
    """input = input - cached - cache write; an absent counter is None; no cost."""
    r = feed_all({path(P): jl(meta(P), ctx("m"), tc("2026-03-10T10:00:01.000Z", 1000, 600, 50, write=100))})
    (d,) = r.deltas()
    assert d.counters == {"input_tokens": 300, "cache_read_tokens": 600, "cache_write_tokens": 100,
                          "output_tokens": 50, "reasoning_tokens": None}
    assert r.totals(())[()]["cost_usd"] is None


def test_time_is_the_first_appearance_and_the_earliest_copy_is_attributed():
    early = jl(meta(P), ctx("m"), tc("2026-03-10T23:59:00.000Z", 100, 0, 10))
    late = jl(meta(C, parent=P), meta(P), ctx("m"), tc("2026-03-11T09:00:00.000Z", 100, 0, 10))
    for order in ([path(C), path(P)], [path(P), path(C)]):
        (d,) = feed_all({path(P): early, path(C): late}, order).deltas()
        assert (d.day, d.session_id, d.file) == ("2026-03-10", P, path(P))


def test_bad_lines_are_skipped_and_reported_with_file_and_line():
    data = jl(meta(P), b"not json\n", b"\xff\xfe\n", b"[1]\n", {"type": "x-new-record", "payload": {}}, b"\n",
              {"timestamp": "2026-03-10T10:00:00.000Z", "type": "event_msg",
               "payload": {"type": "token_count", "info": {"last_token_usage": {}}}},
              {"type": "event_msg", "payload": "nope"},
              {"type": "session_meta", "payload": {"cwd": "/x"}},
              {"type": "event_msg", "payload": {"type": "some_future_event"}},
              tc("2026-03-10T10:00:01.000Z", 100, 0, 10))
    r = feed_all({path(P): data})
    assert [(p.file, p.line) for p in r.problems] == [(path(P), n) for n in (2, 3, 4, 5, 7, 8, 9)]
    reasons = [p.reason for p in r.problems]
    assert reasons[0].startswith("not JSON") and reasons[1] == "not UTF-8" and "x-new-record" in reasons[3]
    assert [i for _, _, i, _ in deltas(r)] == [100] and r.problem_count == 7


def test_legacy_pre_envelope_rollout_is_read_without_problems():
    data = jl({"id": G, "timestamp": "2026-01-04T05:06:07.000Z"},
              {"type": "message", "role": "user", "content": []}, {"type": "reasoning", "summary": []})
    r = feed_all({path(G): data})
    assert r.problems == [] and list(r.deltas()) == []


def test_torn_last_line_is_left_for_the_next_pass():
    line = orjson.dumps(tc("2026-03-10T10:00:02.000Z", 150, 0, 15)) + b"\n"
    head = jl(meta(P), ctx("m"), tc("2026-03-10T10:00:01.000Z", 100, 0, 10))
    r = CodexUsage()
    off = r.feed(path(P), head + line[:30], 0)
    assert off == len(head) and [i for _, _, i, _ in deltas(r)] == [100]
    assert "torn" in r.problems[-1].reason and r.problems[-1].line == 4
    r2 = CodexUsage(orjson.loads(orjson.dumps(r.state())))
    assert r2.feed(path(P), line, off) == len(head) + len(line)
    assert [i for _, _, i, _ in deltas(r2)] == [100, 50] and r2.problems == []


def test_state_is_json_versioned_and_bounded_by_distinct_levels():
    # 200 lines, 5 distinct totals (each repeated 40 times in a row)
    lines = [tc("2026-03-10T10:00:01.000Z", 100 * (i // 40 + 1), 0, 1) for i in range(200)]
    r = feed_all({path(P): jl(meta(P), ctx("m"), *lines)})
    s = r.state()
    assert orjson.loads(orjson.dumps(s)) == s
    assert sum(len(v) for v in s["chains"].values()) == 5
    with pytest.raises(ValueError):
        CodexUsage(s).feed(path(P), b"", 0)  # a caller that lost its offset is told
    with pytest.raises(ValueError):
        CodexUsage({**s, "v": 99})


def test_thread_of_path():
    assert thread_of_path(path(P.upper())) == P
    assert thread_of_path("x/other.jsonl") == "x/other.jsonl"
    assert thread_of_path(path(P)[:-6] + ".gen2.jsonl") == P  # an archive generation


# ---- tool calls ---------------------------------------------------------------------------------

def call(ts, kind, name=None, call_id=None, **payload):
    p = {"type": kind, **payload}
    if name is not None:
        p["name"] = name
    if call_id is not None:
        p["call_id"] = call_id
    return {"timestamp": ts, "type": "response_item", "payload": p}


def search(ts, query):
    return call(ts, "web_search_call", status="completed", action={"type": "search", "query": query})


def tools_history(rewrite: bool) -> dict[str, bytes]:
    """A parent thread with 6 calls (one line written twice, one call id written again later,
    one id-less search written twice), its fork copying 4 of them (at fork time, or with the
    original times) and making 2 of its own; a call's output is no call."""
    ex1 = call("2026-03-10T10:00:01.000Z", "function_call", "exec_command", "c1", arguments="{}")
    patch = call("2026-03-10T10:00:02.000Z", "custom_tool_call", "apply_patch", "c2", input="*** Begin Patch")
    s1 = search("2026-03-10T10:00:03.000Z", "ledger docs")
    shell = call("2026-03-10T10:00:04.000Z", "local_shell_call", call_id="c3", status="completed",
                 action={"type": "exec", "command": ["ls"]})
    mcp = call("2026-03-10T10:00:05.000Z", "function_call", "mcp__git__status", "c4", arguments="{}")
    ex2 = call("2026-03-10T10:00:06.000Z", "function_call", "exec_command", "c5", arguments="{}")
    parent = jl(meta(P), ctx("m"), ex1, ex1, patch, dict(patch, timestamp="2026-03-10T10:00:02.005Z"), s1, s1,
                shell, tc("2026-03-10T10:00:04.500Z", 100, 0, 10), mcp, ex2, tc("2026-03-10T10:00:07.000Z", 200, 0, 20),
                {"timestamp": "2026-03-10T10:00:08.000Z", "type": "response_item",
                 "payload": {"type": "function_call_output", "call_id": "c5", "output": "Process exited with code 1"}})
    copies = [ex1, patch, s1, shell, tc("2026-03-10T10:00:04.500Z", 100, 0, 10)]
    if rewrite:  # the client writes the copies at fork time
        copies = [dict(x, timestamp=f"2026-03-11T09:00:00.00{i}Z") for i, x in enumerate(copies)]
    child = jl(meta(C, "2026-03-11T09:00:00.000Z", parent=P), meta(P), ctx("m"), *copies,
               call("2026-03-11T09:00:01.000Z", "function_call", "exec_command", "c9", arguments="{}"),
               search("2026-03-11T09:00:02.000Z", "other"),
               tc("2026-03-11T09:00:03.000Z", 150, 0, 15))
    return {path(P): parent, path(C, "2026/03/11", "2026-03-11T09-00-00"): child}


PARENT_TOOLS = {"exec_command": 2, "apply_patch": 1, "web_search": 1, "local_shell": 1, "mcp__git__status": 1}
CHILD_TOOLS = {"exec_command": 1, "web_search": 1}


@pytest.mark.parametrize("rewrite", [False, True])
def test_tool_calls_count_once_per_call_hand_checked(rewrite):
    files = tools_history(rewrite)
    # the same child also under archived_sessions/ (it sorts before sessions/)
    files["archived_sessions/" + path(C, "2026/03/11", "2026-03-11T09-00-00").rsplit("/", 1)[1]] = files[
        path(C, "2026/03/11", "2026-03-11T09-00-00")]
    for order in (list(files), list(files)[::-1]):
        r = feed_all(files, order)
        assert r.tools() == {P: PARENT_TOOLS, C: CHILD_TOOLS}
        assert {s.session_id: s.tools for s in r.sessions()} == {P: PARENT_TOOLS, C: CHILD_TOOLS}
        assert r.problems == []


def test_tool_call_names_and_bad_calls():
    data = jl(meta(P), call("2026-03-10T10:00:01.000Z", "tool_search_call", call_id="t1"),
              call("2026-03-10T10:00:02.000Z", "image_generation_call", id="ig_1", status="completed"),
              call("2026-03-10T10:00:03.000Z", "image_generation_call", id="ig_1", status="completed"),
              call("2026-03-10T10:00:04.000Z", "function_call", call_id="c1", arguments="{}"),    # no name: problem
              call("2026-03-10T10:00:05.000Z", "function_call", "", "c2"),                         # empty name: problem
              {"timestamp": "2026-03-10T10:00:06.000Z", "type": "response_item", "payload": {"type": ["x"]}},
              call("2026-03-10T10:00:07.000Z", "reasoning", summary=[]),
              call("2026-03-10T10:00:08.000Z", "custom_tool_call_output", call_id="c3", output="ok"))
    r = feed_all({path(P): data})
    assert r.tools() == {P: {"tool_search": 1, "image_generation": 1}}
    assert [(p.line, p.reason) for p in r.problems] == [(5, "function_call without a name: not counted"),
                                                        (6, "function_call without a name: not counted")]


def test_tool_calls_without_session_meta_belong_to_the_files_thread():
    r = feed_all({path(G): jl(call("2026-03-10T10:00:01.000Z", "function_call", "shell", "c1"))})
    assert r.tools() == {G: {"shell": 1}} and r.sessions() == []


@pytest.mark.parametrize("rewrite", [False, True])
def test_tool_counts_survive_the_state_round_trip_at_every_line(rewrite):
    """Appending the files line by line through serialised state counts what one read does."""
    files = tools_history(rewrite)
    state = None
    for rel, data in files.items():
        ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
        for p in ends:
            r = CodexUsage(orjson.loads(orjson.dumps(state)) if state else None)
            off = r.offset(rel)
            r.feed(rel, data[off:p], off)
            state = r.state()
    r = CodexUsage(state)
    assert r.tools() == feed_all(files).tools() == {P: PARENT_TOOLS, C: CHILD_TOOLS}


def test_a_version_1_state_is_refused_it_has_no_tool_calls():
    r = feed_all(tools_history(False))
    v1 = {k: v for k, v in r.state().items() if k != "calls"} | {"v": 1}
    with pytest.raises(ValueError):
        CodexUsage(v1)


def test_real_0_169_line_types_are_known():
    """Codex 0.169 writes `world_state` and `token_usage_record` lines: not problems."""
    data = jl(meta(P), {"timestamp": "2026-03-10T10:00:00.000Z", "type": "world_state", "payload": {"full": True}},
              {"timestamp": "2026-03-10T10:00:01.000Z", "type": "token_usage_record",
               "payload": {"response_id": "r1", "usage": {"input_tokens": 5}}})
    assert feed_all({path(P): data}).problems == []
