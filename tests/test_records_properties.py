"""Property tests: the reduction rule on random valid streams, and scan() over random damage.

Example counts are modest so the module stays well under a minute.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import recordkit as rk
from ledger.errors import RecordError
from ledger.records import RunCapture, RunSnapshot, ScanProblem, read_run, scan
from ledger.records.fold import fold_event, fold_events_list, fold_file, new_state, reduce_usage
from ledger.records.model import EVENT_TYPES, INT_COUNTERS, MAX_ACROSS_STREAMS

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- random valid streams ---------------------------------------------------------------

@st.composite
def stream_plan(draw):
    """Streams (attempt, turn, model) each with cumulative observations; maybe a final receipt."""
    n_streams = draw(st.integers(1, 4))
    keys = draw(st.lists(st.tuples(st.integers(1, 3), st.sampled_from(["turn-1", "turn-2"]),
                                   st.sampled_from(["m-a", "m-b"])),
                         min_size=n_streams, max_size=n_streams, unique=True))
    streams = []
    for attempt, turn, model in keys:
        running: dict[str, int] = {}
        cost = None
        obs = []
        for _ in range(draw(st.integers(1, 5))):
            counters = {}
            for name in draw(st.lists(st.sampled_from(INT_COUNTERS), unique=True, max_size=4)):
                running[name] = running.get(name, 0) + draw(st.integers(0, 10**9))
                counters[name] = running[name]
            if draw(st.booleans()):
                cost = (cost or 0.0) + draw(st.floats(0, 5, allow_nan=False, allow_infinity=False))
                counters["cost_usd"] = cost
            if not counters:  # a usage event with no counter is not written
                counters["input_tokens"] = running.setdefault("input_tokens", 0)
            obs.append(counters)
        final = draw(st.booleans())
        streams.append({"id": f"attempt-{attempt}/{turn}/{model}", "attempt": f"attempt-{attempt}",
                        "turn": turn, "model": model, "obs": obs, "final": final})
    # interleave observations of different streams, keeping each stream's order
    order = draw(st.permutations([i for i, s in enumerate(streams) for _ in s["obs"]]))
    return streams, order


def expected_totals(streams):
    """The rule, computed independently: per stream max, sum across (max for peak/window)."""
    exp: dict[str, object] = {"streams": len(streams), "final_streams": sum(1 for s in streams if s["final"])}
    for name in INT_COUNTERS:
        per_stream = [max(o[name] for o in s["obs"] if name in o) for s in streams
                      if any(name in o for o in s["obs"])]
        if not per_stream:
            exp[name] = None
        elif name in MAX_ACROSS_STREAMS:
            exp[name] = max(per_stream)
        else:
            exp[name] = sum(per_stream)
    costs = [max(o["cost_usd"] for o in s["obs"] if "cost_usd" in o) for s in streams
             if any("cost_usd" in o for o in s["obs"])]
    exp["cost_usd"] = math.fsum(costs) if costs else None
    return exp


def events_for(streams, order, holes):
    next_obs = [0] * len(streams)
    evs = []
    seq = 0
    for k, i in enumerate(order):
        s = streams[i]
        j = next_obs[i]
        next_obs[i] += 1
        last = j == len(s["obs"]) - 1
        evs.append(rk.usage(seq, s["id"], j + 1, s["obs"][j], final=s["final"] and last,
                            attempt=s["attempt"], turn=s["turn"], model=s["model"]))
        seq += 1 + holes[k % len(holes)]
        if k % 3 == 0:
            evs.append(rk.envelope(seq, "text", text=f"noise {k}"))
            seq += 1
    return evs


def assert_matches(usage, exp):
    assert usage.gaps == 0
    assert (usage.streams, usage.final_streams) == (exp["streams"], exp["final_streams"])
    for name in INT_COUNTERS:
        assert getattr(usage, name) == exp[name], name
    if exp["cost_usd"] is None:
        assert usage.cost_usd is None
    else:
        assert usage.cost_usd == pytest.approx(exp["cost_usd"], rel=1e-12, abs=1e-12)


@SETTINGS
@given(plan=stream_plan(), holes=st.lists(st.integers(0, 3), min_size=1, max_size=5))
def test_random_valid_streams_reduce_to_max_per_stream_sum_across(plan, holes):
    streams, order = plan
    with tempfile.TemporaryDirectory() as tmp:
        d = rk.write_record(Path(tmp), events=events_for(streams, order, holes), term=rk.terminal())
        snap = read_run(d)
    assert snap.evidence_gaps == 0
    assert_matches(snap.usage, expected_totals(streams))


@SETTINGS
@given(plan=stream_plan(), cuts=st.lists(st.integers(0, 10**6), max_size=4))
def test_incremental_fold_equals_a_full_read(plan, cuts):
    streams, order = plan
    with tempfile.TemporaryDirectory() as tmp:
        d = rk.write_record(Path(tmp), events=[])
        data = rk.events_bytes(events_for(streams, order, [0]))
        path = str(d / "events.jsonl")
        state, off = new_state(), 0
        for cut in sorted(c % (len(data) + 1) for c in cuts) + [len(data)]:
            with open(path, "wb") as f:  # the file grows (a writer appending, maybe mid-line)
                f.write(data[:cut])
            off, _ = fold_file(path, state, off)
            state = orjson.loads(orjson.dumps(state))  # the indexer stores the state as JSON
        assert reduce_usage(state) == read_run(d).usage
    assert_matches(reduce_usage(state), expected_totals(streams))


@settings(max_examples=15, deadline=None)
@given(plan=stream_plan())
def test_random_streams_written_by_the_writer_reduce_the_same(plan):
    streams, order = plan
    with tempfile.TemporaryDirectory() as tmp:
        with RunCapture(tmp, harness="command", env={}) as run:
            handles = [run.usage_stream(provider="p", model=s["model"], attempt_key=s["attempt"], turn_key=s["turn"])
                       for s in streams]
            next_obs = [0] * len(streams)
            for i in order:
                s, j = streams[i], next_obs[i]
                next_obs[i] += 1
                handles[i].observe(s["obs"][j], final_receipt=s["final"] and j == len(s["obs"]) - 1)
        snap = read_run(run.path)
    assert snap.evidence_gaps == 0
    assert_matches(snap.usage, expected_totals(streams))


# --- random damage ------------------------------------------------------------------------

json_leaf = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
             | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8))
json_value = st.recursive(json_leaf, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                          max_leaves=8)
# Each envelope field is either a plausible value (so the fold gets past its first checks and
# reaches the deep paths) or any JSON value at all.
FIELDS = {
    "schema_version": st.just(1), "seq": st.integers(0, 50), "observed_at": st.just("2026-03-08T06:30:00Z"),
    "usage_stream_id": st.sampled_from(["s1", "s2"]), "observation_seq": st.integers(0, 5),
    "counter_kind": st.just("cumulative"), "start_known": st.booleans(), "final_receipt": st.booleans(),
    "attempt_key": st.sampled_from(["attempt-1", "attempt-2"]), "turn_key": st.just("t"),
    "model": st.sampled_from(["m", None]), "name": st.just("Bash"), "provider_session_id": st.just("s"),
    "outcome": st.sampled_from(["completed", "failed"]), "api_retries": st.integers(0, 3),
    "skill_invoked": st.booleans(),
    "event": st.fixed_dictionaries({"type": st.sampled_from(["turn_started", "turn_completed", "item_completed",
                                                             "text_delta"]),
                                    "turn_id": json_leaf},
                                   optional={"status": st.just("completed") | json_value, "delta": json_value,
                                             "item": json_value, "text": json_value, "phase": json_value}),
}
COUNTER_KEYS = list(INT_COUNTERS) + ["cost_usd", "model", "cache_write_5m_tokens"]
counter_value = st.integers(0, 2**64 + 10) | json_value
junk_envelope = st.builds(
    lambda t, fields, usage: {"type": t, **fields, **({"usage": usage} if usage is not None else {})},
    st.sampled_from(["usage"] * 6 + sorted(EVENT_TYPES) + ["mystery"]) | json_value,  # usage: the deepest paths
    st.fixed_dictionaries({}, optional={k: v | json_value for k, v in FIELDS.items()}),
    st.one_of(st.none(), json_leaf, st.lists(json_leaf, min_size=1, max_size=2),
              st.dictionaries(st.sampled_from(COUNTER_KEYS), counter_value, max_size=4)),
)
junk_line = (st.binary(max_size=40) | junk_envelope.map(lambda e: json.dumps(e).encode())
             | st.sampled_from([b"", b"{}", b"[]", b"null", b'{"type":"usage"}', b"\xff", b'{"a":1'])).map(
    lambda b: b.replace(b"\n", b" "))

FILES = ["manifest.json", "context.json", "events.jsonl", "terminal.json", "provider-session.json"]
damage_op = st.one_of(
    st.tuples(st.just("truncate"), st.sampled_from(FILES), st.integers(0, 10**6)),
    st.tuples(st.just("flip"), st.sampled_from(FILES), st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)),
                                                                min_size=1, max_size=4)),
    st.tuples(st.just("junk"), st.sampled_from(FILES), st.lists(st.tuples(st.integers(0, 10**6), junk_line),
                                                                min_size=1, max_size=4)),
    st.tuples(st.just("delete"), st.sampled_from(FILES + ["<run>"]), st.none()),
    st.tuples(st.just("dir"), st.sampled_from(FILES), st.none()),
)

_TEMPLATE: dict[str, Path] = {}


def template_home() -> Path:
    """Three healthy runs (context, events, terminal, provider session), built once."""
    if "home" not in _TEMPLATE:
        home = Path(tempfile.mkdtemp(prefix="ledger-template-"))
        for i in range(3):
            d = rk.write_record(home, events=rk.golden_events(), term=rk.terminal(), context=rk.context_doc(task=f"t{i}"))
            (d / "provider-session.json").write_bytes(rk.pretty(
                {"schema_version": 1, "provider_session_id": f"s{i}", "account_id": None}))
        _TEMPLATE["home"] = home
    return _TEMPLATE["home"]


def apply(run: Path, op) -> None:
    kind, name, arg = op
    path = run / name
    if kind == "delete":
        if name == "<run>":
            shutil.rmtree(run, ignore_errors=True)
        elif path.is_file():
            path.unlink()
        return
    if not path.is_file():
        return
    data = bytearray(path.read_bytes())
    if kind == "truncate":
        data = data[: arg % (len(data) + 1)]
    elif kind == "flip":
        for pos, x in arg:
            if data:
                data[pos % len(data)] ^= x
    elif kind == "junk":
        lines = bytes(data).split(b"\n")
        for pos, line in arg:
            lines.insert(pos % (len(lines) + 1), line)
        data = bytearray(b"\n".join(lines))
    elif kind == "dir":
        path.unlink()
        path.mkdir()
        return
    path.write_bytes(bytes(data))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.tuples(st.integers(0, 2), damage_op), min_size=1, max_size=6))
def test_random_damage_never_crashes_scan(ops):
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        shutil.copytree(template_home(), home)
        runs = sorted(p for shard in (home / "runs").iterdir() for p in shard.iterdir())
        for which, op in ops:
            apply(runs[which], op)
        items = list(scan(home))
        for item in items:
            assert isinstance(item, (RunSnapshot, ScanProblem))
            if isinstance(item, RunSnapshot):
                orjson.dumps(item.to_dict())
                assert item.evidence_gaps >= 0 and item.usage.gaps >= 0
            else:
                assert item.path and item.reason
        present = [r for r in runs if r.is_dir()]
        assert len(items) == len(present)  # every record is reported, readable or not
        # read_run itself raises only RecordError (scan's catch-all is defence in depth)
        for r in present:
            try:
                read_run(r)
            except RecordError:
                pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(junk_line, max_size=12))
def test_random_event_lines_fold_or_raise_record_error(lines):
    with tempfile.TemporaryDirectory() as tmp:
        d = rk.write_record(Path(tmp), events=b"".join(line + b"\n" for line in lines))
        try:
            snap = read_run(d)
        except RecordError as exc:
            assert "line " in exc.reason
        else:
            assert snap.usage.gaps >= 0
            for name in INT_COUNTERS:
                v = getattr(snap.usage, name)
                assert v is None or (isinstance(v, int) and 0 <= v < 2**63)
            assert snap.usage.cost_usd is None or math.isfinite(snap.usage.cost_usd)


# Mostly well-formed envelopes (so the list fast path is taken), sometimes a bad version or seq.
list_envelope = st.builds(
    lambda env, version, seq: {**env, **({"schema_version": version} if version != "absent" else {}),
                               **({"seq": seq} if seq != "absent" else {})},
    junk_envelope,
    st.sampled_from([1] * 60 + [True, 1.0, 2, "1", "absent"]),
    st.integers(-1, 3) | st.integers(-1, 3) | st.integers(-1, 3) | st.integers(-1, 3)
    | st.sampled_from([True, 1.5, None, "absent", 2**70]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(envs=st.lists(list_envelope, max_size=10), start=st.none() | st.integers(0, 5), steps=st.booleans())
@example(envs=[{"type": "text", "schema_version": 1, "seq": 1}, {"type": "text", "schema_version": 2, "seq": 2}],
         start=None, steps=False)
@example(envs=[{"type": "text", "schema_version": True, "seq": 1}], start=None, steps=False)
@example(envs=[{"type": "text", "schema_version": 1, "seq": 3}], start=3, steps=False)
def test_folding_a_list_equals_folding_each_envelope(envs, start, steps):
    """fold_events_list (the chunk fast path) == fold_event on each envelope in turn."""
    if steps:  # strictly increasing seqs: the fast path's case
        seq = 0
        for e in envs:
            if type(e.get("seq")) is int:
                seq += 1 + abs(e["seq"])
                e["seq"] = seq
    one_by_one, listed = new_state(), new_state()
    one_by_one["seq"] = listed["seq"] = start
    data = json.dumps(envs).encode()  # parsed as the fold parses records: with orjson
    for e in orjson.loads(data):
        fold_event(one_by_one, e)
    fold_events_list(listed, orjson.loads(data))
    assert listed == one_by_one


@settings(max_examples=400, deadline=None)
@given(y=st.integers(0, 10000), mo=st.integers(0, 13), d=st.integers(0, 32), h=st.integers(0, 25),
       mi=st.integers(0, 61), sec=st.integers(0, 61), us=st.integers(0, 999999))
def test_canonical_timestamps_parse_like_the_general_parser(y, mo, d, h, mi, sec, us):
    """parse_rfc3339's fast path for ledger's own form agrees with the general parser (value
    or refusal), and format_utc gives the text back."""
    from ledger.records import timefmt

    text = f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{sec:02d}.{us:06d}Z"[-27:]
    assert timefmt.is_canonical_utc(text) == (len(text) == 27)
    try:
        general = timefmt._parse(text)
    except ValueError:
        general = None
    try:
        fast = timefmt.parse_rfc3339(text)
    except ValueError:
        fast = None
    assert fast == general
    if fast is not None:
        assert fast.tzinfo is general.tzinfo and timefmt.format_utc(fast) == text


def teardown_module(module):
    if "home" in _TEMPLATE:
        shutil.rmtree(_TEMPLATE.pop("home"), ignore_errors=True)
