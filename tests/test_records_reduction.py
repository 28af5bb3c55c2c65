"""Usage reduction and the evidence-gap rules of the v1 read side, one test per rule.

Every damaged record starts from the spec's golden case (0 gaps) and changes one thing, so
each test proves that exactly that rule adds exactly one gap (and what happens to the data).
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest

import recordkit as rk
from ledger.errors import RecordError
from ledger.records import RunCapture, publish_run, read_run, settle
from ledger.records.fold import fold_file, new_state, reduce_usage
from ledger.records.model import I64_MAX

S1 = "attempt-1/turn-1/claude-sonnet-4-5"
S2 = "attempt-2/turn-1/claude-sonnet-4-5"


def snap_of(home, events, **kw):
    return read_run(rk.write_record(home, events=events, **kw))


def golden_with(*extra):
    """The golden events plus `extra` events (renumbered to seq 100, 101, ...)."""
    evs = rk.golden_events()
    seq = 100
    for ev in extra:
        if isinstance(ev, dict):
            ev = {**ev, "seq": seq}
        seq += 1
        evs.append(ev)
    return evs


def assert_golden_usage(u):
    assert (u.streams, u.final_streams, u.input_tokens, u.output_tokens, u.cost_usd) == (2, 1, 27, 7, 0.25)


# --- golden case -------------------------------------------------------------------------

def test_golden_reduction_from_handwritten_record(home):
    snap = snap_of(home, rk.golden_events(), term=rk.terminal())
    u = snap.usage
    assert_golden_usage(u)
    assert u.gaps == 0 and snap.evidence_gaps == 0
    # counters nobody reported stay unknown (None), never 0
    assert u.reasoning_tokens is None and u.cache_read_tokens is None and u.total_input_tokens is None
    assert snap.outcome == "completed" and snap.state == "settled"


def test_golden_reduction_through_the_writer(home):
    with RunCapture(home, harness="claude", subjects=["task:LOO-265"], env={}) as run:
        a1 = run.start_attempt("anthropic", "claude-sonnet-4-5")
        s1 = run.usage_stream(provider="anthropic", model="claude-sonnet-4-5", attempt_key=a1, turn_key="turn-1")
        s1.observe({"input_tokens": 10})
        s1.observe({"input_tokens": 15, "output_tokens": 4})
        run.emit("provider_attempt_finished", attempt_key=a1, outcome="failed")
        a2 = run.start_attempt("anthropic", "claude-sonnet-4-5")
        s2 = run.usage_stream(provider="anthropic", model="claude-sonnet-4-5", attempt_key=a2, turn_key="turn-1")
        s2.observe({"input_tokens": 12, "output_tokens": 3})
        s2.observe({"input_tokens": 12, "output_tokens": 3, "cost_usd": 0.25}, final_receipt=True)
        run.emit("result", outcome="completed", duration_secs=1.0)
    snap = read_run(run.path)
    assert_golden_usage(snap.usage)
    assert snap.usage.gaps == 0 and snap.evidence_gaps == 0
    assert snap.outcome == "completed"


def test_peak_and_context_window_take_the_max_across_streams(home):
    snap = snap_of(home, [
        rk.usage(0, S1, 1, {"peak_input_tokens": 100, "context_window_tokens": 200000, "reasoning_tokens": 5}),
        rk.usage(1, S2, 1, {"peak_input_tokens": 70, "context_window_tokens": 200000, "reasoning_tokens": 6}),
    ])
    u = snap.usage
    assert (u.peak_input_tokens, u.context_window_tokens, u.reasoning_tokens) == (100, 200000, 11)
    assert u.gaps == 0


def test_measured_zero_cost_stays_zero_and_unknown_cost_stays_none(home):
    zero = snap_of(home, [rk.usage(0, S1, 1, {"input_tokens": 1, "cost_usd": 0.0}, final=True)])
    none = snap_of(home, [rk.usage(0, S1, 1, {"input_tokens": 1})])
    assert zero.usage.cost_usd == 0.0 and none.usage.cost_usd is None


def test_no_events_file_is_no_usage_and_no_gap(home):
    snap = snap_of(home, None)
    assert snap.usage.streams == 0 and snap.usage.input_tokens is None and snap.evidence_gaps == 0


def test_missing_terminal_is_unterminated_without_gap(home):
    snap = snap_of(home, rk.golden_events())
    assert snap.outcome is None and snap.ended is None and snap.evidence_gaps == 0


# --- context ref --------------------------------------------------------------------------

def test_gap_context_ref_size_mismatch(home):
    doc = rk.pretty(rk.context_doc())
    ref = {"path": "context.json", "content_sha256": hashlib.sha256(doc).hexdigest(), "bytes": len(doc) + 1}
    snap = snap_of(home, rk.golden_events(), term=rk.terminal(), context=doc, context_ref=ref)
    assert snap.evidence_gaps == 1 and snap.usage.gaps == 0
    assert_golden_usage(snap.usage)


def test_gap_context_ref_sha_mismatch(home):
    doc = rk.pretty(rk.context_doc())
    ref = {"path": "context.json", "content_sha256": hashlib.sha256(doc + b"x").hexdigest(), "bytes": len(doc)}
    snap = snap_of(home, rk.golden_events(), term=rk.terminal(), context=doc, context_ref=ref)
    assert snap.evidence_gaps == 1


def test_valid_context_ref_is_no_gap(home):
    snap = snap_of(home, rk.golden_events(), term=rk.terminal(), context=rk.context_doc())
    assert snap.evidence_gaps == 0


def test_gap_tampered_context_is_exactly_one_gap(home):
    m = publish_run(home, harness="claude", env={},
                    context=rk.context_doc(task="Fix LOO-265")["context"])
    path = rk.record_dir(home, m.run_id)
    assert read_run(path).evidence_gaps == 0
    data = (path / "context.json").read_bytes()
    tampered = data.replace(b"LOO-265", b"LOO-266")  # same size, different bytes
    assert tampered != data and len(tampered) == len(data)
    (path / "context.json").write_bytes(tampered)
    assert read_run(path).evidence_gaps == 1


def test_gap_context_ref_but_context_file_missing(home):
    d = rk.write_record(home, events=rk.golden_events(), context=rk.context_doc())
    (d / "context.json").unlink()
    assert read_run(d).evidence_gaps == 1


def test_gap_context_ref_naming_another_file_is_invalid_and_never_followed(home):
    # A ref must name context.json: a ref to /dev/zero (or ../..) is one gap, not a hang.
    doc = rk.pretty(rk.context_doc())
    for bad in ("/dev/zero", "../../../../etc/hostname", "other.json"):
        ref = {"path": bad, "content_sha256": hashlib.sha256(doc).hexdigest(), "bytes": len(doc)}
        assert snap_of(home, [], context=doc, context_ref=ref).evidence_gaps == 1


# --- terminal receipt -------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    pytest.param(b'{"schema_version": 1, "outcome": "compl', id="unparseable"),
    pytest.param(rk.pretty({"schema_version": 2, "outcome": "completed", "ended_at": "2026-03-08T06:45:10Z",
                            "result_ref": None}), id="wrong-schema"),
    pytest.param(rk.pretty(rk.terminal("succeeded")), id="unknown-outcome"),
    pytest.param(rk.pretty({"schema_version": 1, "outcome": "completed", "result_ref": None}), id="no-ended_at"),
    pytest.param(rk.pretty([1, 2]), id="not-an-object"),
])
def test_gap_terminal_present_but_invalid_is_one_gap_and_outcome_unknown(home, body):
    snap = snap_of(home, rk.golden_events(), term=body)
    assert snap.evidence_gaps == 1
    assert snap.outcome is None
    assert snap.usage.gaps == 0
    assert_golden_usage(snap.usage)


@pytest.mark.parametrize("case", ["unparseable", "wrong_schema", "unknown_outcome"])
def test_gap_terminal_rule_each_case(home, case):
    body = {"unparseable": b"not json\n",
            "wrong_schema": rk.pretty({**rk.terminal(), "schema_version": 3}),
            "unknown_outcome": rk.pretty(rk.terminal("cancelled"))}[case]
    snap = snap_of(home, [], term=body)
    assert (snap.evidence_gaps, snap.outcome) == (1, None)


def test_terminal_ended_at_is_normalised_to_utc(home):
    snap = snap_of(home, [], term=rk.terminal(ended_at="2026-03-08T01:45:10.5-05:00"))
    assert snap.ended == "2026-03-08T06:45:10.500000Z" and snap.evidence_gaps == 0


# --- events.jsonl line rules -------------------------------------------------------------

def test_gap_final_line_without_newline_is_not_counted_and_stops(home):
    evs = rk.events_bytes(rk.golden_events())
    torn = rk.compact(rk.usage(9, S2, 3, {"input_tokens": 500, "output_tokens": 500}))  # no "\n"
    snap = snap_of(home, evs + torn)
    assert snap.usage.gaps == 1 and snap.evidence_gaps == 1
    assert_golden_usage(snap.usage)  # the torn line's 500s are not counted


def test_torn_final_line_is_one_gap_and_not_counted(home):
    # A writer killed mid-line: a prefix of a valid line (not even JSON) is the last thing.
    full = rk.compact(rk.usage(9, S2, 3, {"input_tokens": 500})) + b"\n"
    for cut in (1, len(full) // 2, len(full) - 1):
        snap = snap_of(home, rk.events_bytes(rk.golden_events()) + full[:cut])
        assert snap.evidence_gaps == 1, cut
        assert snap.usage.input_tokens == 27


def test_torn_line_after_a_real_capture(home):
    with RunCapture(home, harness="command", env={}) as run:
        st = run.usage_stream(provider="p", model="m", attempt_key=run.start_attempt("p", "m"), turn_key="t")
        st.observe({"input_tokens": 3})
    with open(run.path / "events.jsonl", "ab") as f:
        f.write(b'{"schema_version":1,"seq":99,"type":"usa')
    snap = read_run(run.path)
    assert snap.evidence_gaps == 1 and snap.usage.input_tokens == 3


def test_trailing_whitespace_without_newline_is_not_a_torn_line(home):
    snap = snap_of(home, rk.events_bytes(rk.golden_events()) + b"  ")
    assert snap.evidence_gaps == 0


def test_blank_lines_are_skipped_without_gap(home):
    evs = rk.golden_events()
    data = b"\n".join(rk.compact(e) for e in evs[:3]) + b"\n\n   \n" + rk.events_bytes(evs[3:])
    snap = snap_of(home, data)
    assert snap.evidence_gaps == 0
    assert_golden_usage(snap.usage)


def test_gap_envelope_schema_not_1_is_counted_and_still_used(home):
    evs = rk.golden_events()
    evs.append({**rk.usage(9, "attempt-3/turn-1/m", 1, {"input_tokens": 100}), "schema_version": 2})
    snap = snap_of(home, evs)
    assert snap.usage.gaps == 1
    assert snap.usage.input_tokens == 127 and snap.usage.streams == 3  # still used


def test_gap_non_increasing_seq(home):
    evs = rk.golden_events()
    evs.append(rk.envelope(8, "text", text="same seq as the last event"))
    assert snap_of(home, evs).usage.gaps == 1


def test_gap_seq_going_backwards_counts_once_per_line_and_holes_are_fine(home):
    evs = [rk.envelope(0, "text", text="a"), rk.envelope(10, "text", text="b"),
           rk.envelope(5, "text", text="c"),   # below the max seen: +1
           rk.envelope(11, "text", text="d"),  # above the max: fine (holes are allowed)
           rk.usage(7, S1, 1, {"input_tokens": 4})]  # below the max: +1, still used
    snap = snap_of(home, evs)
    assert snap.usage.gaps == 2 and snap.usage.input_tokens == 4


def test_gap_unknown_event_type_is_counted_and_skipped(home):
    evs = golden_with({**rk.usage(0, "attempt-9/turn-1/m", 1, {"input_tokens": 1000}), "type": "usage_v2"})
    snap = snap_of(home, evs)
    assert snap.usage.gaps == 1
    assert_golden_usage(snap.usage)  # skipped: its counters are not read


def test_gap_non_cumulative_counter_kind_is_counted_and_skipped(home):
    evs = golden_with(rk.usage(0, "attempt-9/turn-1/m", 1, {"input_tokens": 1000}, counter_kind="delta"))
    snap = snap_of(home, evs)
    assert snap.usage.gaps == 1
    assert_golden_usage(snap.usage)  # skipped: no stream, no tokens


def test_gap_start_known_false_is_counted_and_used(home):
    evs = golden_with(rk.usage(0, "attempt-9/turn-1/m", 1, {"input_tokens": 1000}, start_known=False))
    snap = snap_of(home, evs)
    assert snap.usage.gaps == 1
    assert snap.usage.input_tokens == 1027 and snap.usage.streams == 3  # used


def test_gap_non_increasing_observation_seq_within_a_stream(home):
    evs = golden_with(rk.usage(0, S2, 2, {"input_tokens": 12, "output_tokens": 3}))  # obs 2 again
    snap = snap_of(home, evs)
    assert snap.usage.gaps == 1
    assert_golden_usage(snap.usage)


def test_observation_seq_is_per_stream(home):
    # obs 1 in two different streams is not a repeat
    snap = snap_of(home, [rk.usage(0, S1, 1, {"input_tokens": 1}), rk.usage(1, S2, 1, {"input_tokens": 2})])
    assert snap.usage.gaps == 0 and snap.usage.input_tokens == 3


def test_gap_counter_below_its_stream_running_max_keeps_the_max(home):
    evs = golden_with(rk.usage(0, S1, 3, {"input_tokens": 11, "output_tokens": 4}))  # 11 < 15
    snap = snap_of(home, evs)
    assert snap.usage.gaps == 1
    assert_golden_usage(snap.usage)


def test_counter_below_max_counts_per_counter(home):
    # Loopflow's rule is per counter: two counters going backwards in one observation = 2 gaps
    evs = golden_with(rk.usage(0, S1, 3, {"input_tokens": 1, "output_tokens": 1}))
    assert snap_of(home, evs).usage.gaps == 2


def test_gap_non_finite_cost_written_as_null_is_counted_and_ignored(home):
    evs = golden_with(rk.usage(0, "attempt-9/turn-1/m", 1, {"input_tokens": 1, "cost_usd": None}))
    snap = snap_of(home, evs)
    assert snap.usage.gaps == 1
    assert snap.usage.cost_usd == 0.25  # the null cost is ignored, not 0 and not unknown-izing
    assert snap.usage.input_tokens == 28


def test_null_cost_alone_leaves_cost_unknown(home):
    snap = snap_of(home, [rk.usage(0, S1, 1, {"input_tokens": 1, "cost_usd": None}, final=True)])
    assert snap.usage.cost_usd is None and snap.usage.gaps == 1


def test_gap_overflow_past_i64_makes_that_total_unknown(home):
    evs = golden_with(rk.usage(0, "attempt-9/turn-1/m", 1, {"input_tokens": I64_MAX + 1, "output_tokens": 1}))
    snap = snap_of(home, evs)
    assert snap.usage.gaps == 1
    assert snap.usage.input_tokens is None  # that total is unknown
    assert snap.usage.output_tokens == 8    # the others are not


def test_one_stream_past_i64_or_u64_is_one_gap_each_and_unknown(home):
    """The single-stream shortcut of reduce_usage keeps the overflow rules."""
    data = (b'{"schema_version":1,"seq":0,"observed_at":"2026-03-08T06:30:01Z","type":"usage",'
            b'"usage_stream_id":"' + S1.encode() + b'","provider":"p","model":"m","attempt_key":"attempt-1",'
            b'"turn_key":"t","observation_seq":1,"counter_kind":"cumulative","start_known":true,'
            b'"final_receipt":false,"usage":{"input_tokens":100000000000000000000,"output_tokens":'
            + str(I64_MAX + 1).encode() + b',"cache_read_tokens":7,"cost_usd":0.5}}\n')
    snap = snap_of(home, data)
    assert snap.usage.streams == 1
    assert snap.usage.gaps == 2 and snap.usage.input_tokens is None and snap.usage.output_tokens is None
    assert snap.usage.cache_read_tokens == 7 and snap.usage.cost_usd == 0.5


def test_overflow_of_the_sum_across_streams_is_one_gap(home):
    half = I64_MAX // 2 + 1
    snap = snap_of(home, [rk.usage(0, S1, 1, {"input_tokens": half}), rk.usage(1, S2, 1, {"input_tokens": half})])
    assert snap.usage.gaps == 1 and snap.usage.input_tokens is None


def test_overflow_beyond_u64_is_one_gap(home):
    data = rk.events_bytes([rk.usage(0, S1, 1, {"output_tokens": 2})])
    data += (b'{"schema_version":1,"seq":1,"observed_at":"2026-03-08T06:30:01Z","type":"usage",'
             b'"usage_stream_id":"' + S2.encode() + b'","provider":"p","model":"m","attempt_key":"attempt-2",'
             b'"turn_key":"t","observation_seq":1,"counter_kind":"cumulative","start_known":true,'
             b'"final_receipt":false,"usage":{"input_tokens":100000000000000000000,"output_tokens":1}}\n')
    snap = snap_of(home, data)
    assert snap.usage.gaps == 1 and snap.usage.input_tokens is None and snap.usage.output_tokens == 3


def test_gaps_add_up_across_rules(home):
    doc = rk.pretty(rk.context_doc())
    ref = {"path": "context.json", "content_sha256": "0" * 64, "bytes": len(doc)}
    evs = rk.events_bytes(golden_with(rk.envelope(0, "mystery"), rk.usage(0, S1, 9, {"input_tokens": 1})))
    snap = snap_of(home, evs + b'{"torn', context=doc, context_ref=ref, term=b"{")
    # context 1 + terminal 1 + unknown type 1 + counter below max 1 + torn line 1
    assert snap.evidence_gaps == 5 and snap.usage.gaps == 3


# --- malformed complete lines ------------------------------------------------------------

def test_malformed_complete_line_makes_the_record_unreadable_naming_the_line(home):
    evs = rk.events_bytes(rk.golden_events()[:2]) + b'{"schema_version":1,"seq":2,\n' + \
        rk.events_bytes(rk.golden_events()[2:])
    d = rk.write_record(home, events=evs)
    with pytest.raises(RecordError) as info:
        read_run(d)
    assert info.value.path == str(d / "events.jsonl")
    assert "line 3" in info.value.reason


@pytest.mark.parametrize("line", [b"[1, 2]", b"42", b"NaN", b'{"a": Infinity}', b"\xff\xfe{}", b'"text"'])
def test_non_object_or_invalid_json_lines_are_malformed(home, line):
    d = rk.write_record(home, events=rk.events_bytes(rk.golden_events()) + line + b"\n")
    with pytest.raises(RecordError) as info:
        read_run(d)
    assert "line 10" in info.value.reason


@pytest.mark.parametrize("bad_usage", ["input_tokens", [1, 2], 5, None, True])
def test_usage_payload_that_is_not_an_object_never_crashes(home, bad_usage):
    ev = rk.usage(0, S1, 1, {})
    ev["usage"] = bad_usage
    snap = snap_of(home, [ev])
    assert snap.usage.input_tokens is None and snap.usage.streams == 1


@pytest.mark.parametrize("kind", [["usage"], {"a": 1}, 5, None, True])
def test_event_type_that_is_not_a_string_is_an_unknown_type_gap(home, kind):
    ev = rk.envelope(0, "text", text="x")
    ev["type"] = kind
    assert snap_of(home, [ev]).usage.gaps == 1


def test_ill_typed_text_fields_never_reach_the_snapshot(home):
    s = "attempt-1/t/m"
    evs = [rk.envelope(0, "provider_attempt_started", provider=["x"], model={"m": 1}, account_id=None,
                       attempt_key="attempt-1", observed_at=5),
           rk.usage(1, s, 1, {"input_tokens": 1, "model": 7}, model=None),
           rk.envelope(2, "result", outcome=3, duration_secs="long", api_retries=2**70),
           rk.envelope(3, "provider_attempt_finished", attempt_key="attempt-1", outcome=[1])]
    evs[1]["turn_key"] = [1]
    evs[1]["provider"] = {"p": 1}
    snap = snap_of(home, evs)
    (stream,) = snap.streams
    assert (stream.provider, stream.model, stream.turn_key) == (None, None, None)
    assert snap.attempts == [{"attempt_key": "attempt-1", "provider": None, "model": None, "started_at": None,
                              "finished_at": "2026-03-08T06:30:01.123456789Z", "outcome": None}]
    assert snap.api_retries == 0
    assert snap.usage.input_tokens == 1 and snap.usage.gaps == 0


@pytest.mark.parametrize("field,value", [("schema_version", True), ("schema_version", 1.0), ("seq", "3"),
                                         ("seq", None)])
def test_envelope_with_ill_typed_schema_or_seq_is_a_gap_not_a_crash(home, field, value):
    ev = rk.envelope(0, "text", text="x")
    ev[field] = value
    assert snap_of(home, [ev]).usage.gaps == 1


# --- incremental folding (the indexer resumes from a byte offset) ------------------------

def test_fold_resumes_from_offset_exactly_like_a_full_read(home):
    evs = rk.golden_events()
    d = rk.write_record(home, events=evs[:4])
    path = str(d / "events.jsonl")
    state = new_state()
    off, torn = fold_file(path, state)
    assert not torn and off == os.path.getsize(path)
    # append the rest in two steps, the first one torn
    rest = rk.events_bytes(evs[4:])
    with open(path, "ab") as f:
        f.write(rest[:50])
    off2, torn = fold_file(path, state, off)
    assert torn and off2 == off  # the torn fragment is neither counted nor consumed
    with open(path, "ab") as f:
        f.write(rest[50:])
    off3, torn = fold_file(path, state, off2)
    assert not torn and off3 == os.path.getsize(path)
    inc = reduce_usage(state)
    full = read_run(d).usage
    assert inc == full
    assert json.loads(json.dumps(state)) == state  # the state is plain JSON


def test_fold_file_honours_a_size_bound(home):
    evs = rk.golden_events()
    first = rk.events_bytes(evs[:3])
    d = rk.write_record(home, events=first + rk.events_bytes(evs[3:]))
    state = new_state()
    off, torn = fold_file(str(d / "events.jsonl"), state, size=len(first))
    assert off == len(first) and not torn
    assert reduce_usage(state).input_tokens == 15


def test_settled_run_reads_events_appended_after_terminal(home):
    m = publish_run(home, harness="command", env={})
    path = rk.record_dir(home, m.run_id)
    settle(path, "completed")
    (path / "events.jsonl").write_bytes(rk.events_bytes(rk.golden_events()))
    snap = read_run(path)
    assert snap.outcome == "completed"
    assert_golden_usage(snap.usage)


def test_loopflow_activity_and_account_events_are_known_not_gaps(tmp_path):
    """Current Loopflow writes `activity` and `provider_account_selected` events: reading a
    real Loopflow home must not count them as unknown-type gaps."""
    from ledger.records.fold import fold_event, new_state

    state = new_state()
    fold_event(state, {"schema_version": 1, "seq": 0, "observed_at": "2026-01-01T00:00:00Z", "type": "activity"})
    fold_event(state, {"schema_version": 1, "seq": 1, "observed_at": "2026-01-01T00:00:00Z",
                       "type": "provider_account_selected", "account_id": "a"})
    fold_event(state, {"schema_version": 1, "seq": 2, "observed_at": "2026-01-01T00:00:00Z", "type": "bogus"})
    assert state["gaps"] == 1
