"""Tests written to kill mutants that survived `mutmut` on records/fold.py, report/costs.py and
report/buckets.py (docs/testing.md has the commands and scores). Each pins a behaviour the
rest of the suite did not: the mutant named in the comment changes it."""

from __future__ import annotations

import builtins
import errno
import os
import time
import zoneinfo
from datetime import date, datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import orjson
import pytest

from ledger.records import fold
from ledger.records.fold import fold_event, new_state, open_regular, reduce_usage, stream_totals
from ledger.records.model import I64_MAX
from ledger.report import buckets
from ledger.report.buckets import (
    Buckets, ReportError, epoch, local_midnight_utc, make_buckets, next_period, parse_day, period_start,
    resolve_zone, utc_range,
)
from ledger.report.costs import group_basis
from ledger.report.models import ESTIMATED, MIXED, REPORTED

# --- records/fold.py ---------------------------------------------------------------------


def usage(seq: int, counters: dict, **fields) -> dict:
    """A v1 usage envelope of one stream (`s1` unless given)."""
    ev = {"schema_version": 1, "seq": seq, "type": "usage", "counter_kind": "cumulative",
          "usage_stream_id": "s1", "usage": counters}
    ev.update(fields)
    return ev


def fold_all(events: list[dict]) -> dict:
    state = new_state()
    for ev in events:
        fold_event(state, ev)
    return state


def test_open_regular_file_object_owns_its_fd():
    # closefd=False would leave the descriptor open after the file object is closed.
    f = open_regular(__file__)
    fd = f.fileno()
    f.close()
    with pytest.raises(OSError) as exc:
        os.fstat(fd)
    assert exc.value.errno == errno.EBADF


def test_open_regular_closes_the_fd_and_keeps_the_error_when_wrapping_fails(monkeypatch):
    # The cleanup closes the raw fd it opened (os.close(None) would raise TypeError instead).
    opened: list[int] = []
    real_open_fd = fold.open_regular_fd

    def tracking(path):
        fd = real_open_fd(path)
        opened.append(fd)
        return fd

    def failing_open(*args, **kwargs):
        raise MemoryError("no buffer")

    monkeypatch.setattr(fold, "open_regular_fd", tracking)
    monkeypatch.setattr(fold, "open", failing_open, raising=False)
    with pytest.raises(MemoryError):
        open_regular(__file__)
    with pytest.raises(OSError) as exc:
        os.fstat(opened[0])
    assert exc.value.errno == errno.EBADF


def test_open_regular_fd_names_what_it_refuses(tmp_path):
    # A directory and a FIFO are refused with an errno, a reason and the path: callers
    # turn these into the message the user reads.
    with pytest.raises(IsADirectoryError) as exc:
        fold.open_regular_fd(str(tmp_path))
    assert (exc.value.errno, exc.value.strerror, exc.value.filename) == (
        errno.EISDIR, "is a directory", str(tmp_path))
    fifo = tmp_path / "events.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(OSError) as exc:
        fold.open_regular_fd(str(fifo))
    assert type(exc.value) is OSError
    assert (exc.value.errno, exc.value.strerror, exc.value.filename) == (
        errno.EINVAL, "not a regular file", str(fifo))


def test_json_booleans_and_fractions_are_not_counters():
    # `true` is not 1 token and 3.5 is not a count: both are ignored, not taken as a value
    # (nor as an overflow). Kills _counter_value's `and`/`or` mutants.
    state = fold_all([usage(1, {"input_tokens": True, "output_tokens": 3.5, "reasoning_tokens": 7})])
    assert state["streams"]["s1"]["c"] == {"reasoning_tokens": 7}
    totals = reduce_usage(state)
    assert (totals.input_tokens, totals.output_tokens, totals.reasoning_tokens) == (None, None, 7)
    assert totals.gaps == 0


def test_an_int_beyond_u64_is_kept_as_the_overflow_sentinel_so_the_state_stays_json():
    # The indexer stores the fold state with orjson, which refuses ints past u64: the fold
    # must keep OVERFLOW (-1), never the raw int.
    state = fold_all([usage(1, {"input_tokens": 2**64 + 5})])
    assert state["streams"]["s1"]["c"] == {"input_tokens": fold.OVERFLOW}
    assert orjson.loads(orjson.dumps(state)) == state
    totals = reduce_usage(state)
    assert totals.input_tokens is None and totals.gaps == 1


def test_an_overflowed_counter_ranks_above_the_known_value_it_follows():
    # 5 tokens, then a value past u64 (orjson reads it as a float): the counter grew, so it is
    # now unknown (one gap at reduction), not "went backwards" with 5 kept. Kills _rank mutants.
    state = fold_all([usage(1, {"input_tokens": 5}), usage(2, {"input_tokens": 2.0**70})])
    assert state["gaps"] == 0
    assert state["streams"]["s1"]["c"]["input_tokens"] == fold.OVERFLOW
    totals = reduce_usage(state)
    assert totals.input_tokens is None and totals.gaps == 1


def test_stream_totals_carry_every_field_of_the_stream():
    state = fold_all([
        usage(1, {"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.25}, provider="anthropic",
              model="claude-x", attempt_key="a1", turn_key="t1"),
        usage(2, {"input_tokens": 12, "output_tokens": 3, "cost_usd": 0.5}, provider="anthropic",
              model="claude-x", attempt_key="a1", turn_key="t1", final_receipt=True),
        usage(3, {"input_tokens": 2**63}, usage_stream_id="s2", provider="openai", model="gpt-y",
              attempt_key="a2", turn_key="t9"),
    ])
    s1, s2 = stream_totals(state)
    assert (s1.stream_id, s1.provider, s1.model, s1.attempt_key, s1.turn_key) == (
        "s1", "anthropic", "claude-x", "a1", "t1")
    assert (s1.observations, s1.final_receipt, s1.cost_usd) == (2, True, 0.5)
    assert s1.counters == {"input_tokens": 12, "output_tokens": 3}
    assert (s2.stream_id, s2.provider, s2.model, s2.attempt_key, s2.turn_key) == (
        "s2", "openai", "gpt-y", "a2", "t9")
    assert (s2.observations, s2.final_receipt, s2.cost_usd) == (1, False, None)
    assert s2.counters == {"input_tokens": None}  # beyond i64: unknown


def conversation(seq: int, **event) -> dict:
    return {"schema_version": 1, "seq": seq, "type": "conversation", "event": event}


def test_the_answer_comes_from_the_turn_that_completed():
    # Turns are kept apart by turn_id: turn t1's final answer must not answer turn t2.
    state = fold_all([
        conversation(1, type="item_completed", turn_id="t1", item={"text": "first", "phase": "final_answer"}),
        conversation(2, type="text_delta", turn_id="t2", delta="sec"),
        conversation(3, type="text_delta", turn_id="t2", delta="ond"),
        conversation(4, type="turn_completed", turn_id="t2", status="completed"),
    ])
    assert (state["answer"], state["answer_exact"]) == ("second", False)
    assert list(state["turns"]) == ["t1"]  # t1 has not completed: still open


def test_streams_without_an_id_are_told_apart_by_attempt():
    # No usage_stream_id: the stream is attempt/turn/model, so two attempts are two streams.
    ev1 = usage(1, {"input_tokens": 10}, attempt_key="a1", turn_key="t", model="m")
    ev2 = usage(2, {"input_tokens": 4}, attempt_key="a2", turn_key="t", model="m")
    del ev1["usage_stream_id"], ev2["usage_stream_id"]
    state = fold_all([ev1, ev2])
    assert sorted(state["streams"]) == ["a1/t/m", "a2/t/m"]
    totals = reduce_usage(state)
    assert (totals.streams, totals.input_tokens, totals.gaps) == (2, 14, 0)


def test_a_stream_learns_its_model_from_a_later_usage_object():
    state = fold_all([usage(1, {"input_tokens": 1}), usage(2, {"input_tokens": 2, "model": "gpt-z"})])
    assert state["streams"]["s1"]["model"] == "gpt-z"


def test_a_counter_going_backwards_does_not_stop_the_other_counters():
    # input_tokens goes back (one gap, 10 kept); output_tokens after it still advances to 7.
    state = fold_all([usage(1, {"input_tokens": 10, "output_tokens": 5}),
                      usage(2, {"input_tokens": 8, "output_tokens": 7})])
    assert state["streams"]["s1"]["c"] == {"input_tokens": 10, "output_tokens": 7}
    assert state["gaps"] == 1


def test_a_completed_turn_without_final_phase_answers_with_its_message():
    state = fold_all([
        conversation(1, type="item_completed", turn_id="t1", item={"text": "hello"}),
        conversation(2, type="turn_completed", turn_id="t1", status="completed"),
    ])
    assert (state["answer"], state["answer_exact"]) == ("hello", True)


def test_attempt_events_fold_into_one_row_per_attempt():
    state = fold_all([
        {"schema_version": 1, "seq": 1, "type": "provider_attempt_started", "attempt_key": "a1",
         "provider": "anthropic", "model": "claude-x", "observed_at": "2026-03-08T10:00:00Z"},
        {"schema_version": 1, "seq": 2, "type": "provider_attempt_finished", "attempt_key": "a1",
         "outcome": "ok", "observed_at": "2026-03-08T10:01:00Z"},
        {"schema_version": 1, "seq": 3, "type": "provider_attempt_finished", "attempt_key": "a2",
         "outcome": "error", "observed_at": "2026-03-08T10:02:00Z"},
    ])
    assert state["attempts"] == {
        "a1": {"attempt_key": "a1", "provider": "anthropic", "model": "claude-x",
               "started_at": "2026-03-08T10:00:00Z", "finished_at": "2026-03-08T10:01:00Z", "outcome": "ok"},
        "a2": {"attempt_key": "a2", "provider": None, "model": None, "started_at": None,
               "finished_at": "2026-03-08T10:02:00Z", "outcome": "error"},
    }


# the result event's verdict facts (ledger additions), absent from these events
NO_VERDICT_FACTS = {"stop_reason": None, "stopped_by": None, "evidence": None,
                    "evidence_reason": None, "error": None, "expected_skill": None, "exit_code": None,
                    "command": None, "command_cut": False}


def test_result_event_outcome_and_duration():
    state = fold_all([{"schema_version": 1, "seq": 1, "type": "result", "outcome": "success",
                       "duration_secs": 12.5, "api_retries": 2, "skill_invoked": True}])
    assert state["result"] == {"outcome": "success", "duration_secs": 12.5, **NO_VERDICT_FACTS}
    assert (state["retries"], state["skill_invoked"], state["gaps"]) == (2, True, 0)
    state = fold_all([{"schema_version": 1, "seq": 1, "type": "result", "outcome": "error",
                       "duration_secs": float("inf")}])
    assert state["result"] == {"outcome": "error", "duration_secs": None, **NO_VERDICT_FACTS}
    state = fold_all([{"schema_version": 1, "seq": 1, "type": "text"}])
    assert state["result"] is None
    # the launched command (redacted argv) and the exit code are kept (issue 12)
    state = fold_all([{"schema_version": 1, "seq": 1, "type": "result", "outcome": "failed", "exit_code": 3,
                       "command": ["sh", "-c", "exit 3"]}])
    assert state["result"] == {**NO_VERDICT_FACTS, "outcome": "failed", "duration_secs": None, "exit_code": 3,
                               "command": ["sh", "-c", "exit 3"]}
    assert fold.command_text(state["result"]) == "sh -c 'exit 3'"


def _events_bytes() -> bytes:
    lines = [orjson.dumps(usage(i, {"input_tokens": 10 * i, "output_tokens": i})) for i in range(1, 4)]
    # a blank first line and a blank line in the middle send chunks through the line-by-line path
    return b"\n" + lines[0] + b"\n\n" + lines[1] + b"\n" + lines[2] + b"\n"


@pytest.mark.parametrize("chunk", [1 << 20, 7])
def test_fold_file_offsets_and_line_count(tmp_path, monkeypatch, chunk):
    # Small chunks make lines span reads (rest + chunk); the offset is the whole file and
    # every line (blank ones too) is counted, whatever the chunk size.
    monkeypatch.setattr(fold, "_READ_CHUNK", chunk)
    data = _events_bytes()
    path = tmp_path / "events.jsonl"
    path.write_bytes(data)
    state = new_state()
    pos, torn = fold.fold_file(str(path), state)
    assert (pos, torn, state["lines"], state["seq"]) == (len(data), False, 5, 3)
    assert state["streams"]["s1"]["c"] == {"input_tokens": 30, "output_tokens": 3}


def test_read_regular_refuses_a_file_too_large_for_a_record(tmp_path):
    path = tmp_path / "manifest.json"
    with open(path, "wb") as f:
        f.truncate((64 << 20) + 1)  # sparse: one byte past the limit
    with pytest.raises(OSError) as exc:
        fold.read_regular(str(path))
    assert (exc.value.errno, exc.value.strerror, exc.value.filename) == (
        errno.EFBIG, "file too large for a record file", str(path))


def _write_events(tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "events.jsonl"
    path.write_bytes(data)
    return str(path)


def _line(seq: int, tokens: int) -> bytes:
    return orjson.dumps(usage(seq, {"input_tokens": tokens})) + b"\n"


def test_a_line_that_is_json_but_not_an_object_is_named_in_the_error(tmp_path):
    # Message text of fold_event's refusal, as the user reads it through fold_file.
    # The state keeps the number of the line that stopped the fold.
    path = _write_events(tmp_path, _line(1, 5) + b"[1]\n")
    state = new_state()
    with pytest.raises(fold.RecordError) as exc:
        fold.fold_file(path, state)
    assert exc.value.reason == ("line 2: malformed event (expected a JSON object); "
                                "expected one JSON object per line")
    assert state["lines"] == 2


def test_envelope_gaps_add_up():
    # Two envelopes with a wrong schema_version are two gaps; a missing seq and a seq that
    # does not advance are one more each (4 in all), not "some gap".
    state = fold_all([
        {"schema_version": 2, "seq": 1, "type": "text"},
        {"schema_version": "1", "seq": 2, "type": "text"},
        {"schema_version": 1, "type": "text"},
        {"schema_version": 1, "seq": 2, "type": "text"},
    ])
    assert (state["gaps"], state["seq"]) == (4, 2)


def test_fold_file_reads_nothing_at_or_past_size(tmp_path):
    # An indexer folds up to the size it stat()ed: bytes appended after that are not read,
    # even when the cursor (offset) is already at or past that size.
    first, second, third = _line(1, 5), _line(2, 9), _line(3, 14)
    path = _write_events(tmp_path, first + second + third)
    state = new_state()
    assert fold.fold_file(path, state, len(first), size=len(first)) == (len(first), False)
    assert fold.fold_file(path, state, len(first), size=len(first) - 3) == (len(first), False)
    assert (state["lines"], state["streams"]) == (0, {})
    # from the first line's end up to the second's: only the second line is folded
    end = len(first) + len(second)
    assert fold.fold_file(path, state, len(first), size=end) == (end, False)
    assert (state["lines"], state["seq"], state["streams"]["s1"]["c"]) == (1, 2, {"input_tokens": 9})


@pytest.mark.parametrize("chunk", [1 << 20, 7])
def test_fold_file_hands_back_the_first_chunk_read(tmp_path, monkeypatch, chunk):
    # The indexer hashes the file's prefix from `head`: the first chunk, and only it.
    monkeypatch.setattr(fold, "_READ_CHUNK", chunk)
    data = _line(1, 5) + _line(2, 9)
    path = _write_events(tmp_path, data)
    head: list[bytes] = []
    fold.fold_file(path, new_state(), head=head)
    assert head == [data[:chunk]]


@pytest.mark.parametrize("data, line_no", [
    (_line(1, 5)[:-1] + b"," + _line(2, 9), 1),
    (b'{"schema_version": 1, "seq": 1\n"type": "text"}\n', 1),
    (b'{"schema_version": 1\n"seq": 1\n"type": "text"}\n', 1),
    (_line(1, 5)[:-1] + b",\n" + _line(2, 9), 1),
    (_line(1, 5) + _line(2, 9)[:-1] + b",\n" + _line(3, 14), 2),
    # Two malformed lines whose element count still equals the line count once joined: one
    # line holds an object and a half, the next the rest (the old fast path folded these).
    (_line(1, 5)[:-1] + b',{"schema_version": 1, "seq": 2, "type": "text", "x": [1\n'
     b'2]}\n', 1),
    (b'{"schema_version": 1, "seq": 1, "type": "text", "a": "}\n'
     b'{"}\n' + _line(2, 9)[:-1] + b"," + _line(3, 14), 1),
], ids=["two-objects-on-a-line", "object-over-2-lines", "object-over-3-lines",
        "trailing-comma-first", "trailing-comma-second", "object-and-a-half-then-rest",
        "string-over-2-lines-with-a-doubled-line"])
def test_each_line_must_be_exactly_one_object(tmp_path, data, line_no):
    # Lines that only parse when joined with commas (an object split where a comma would
    # go, a line ending in a comma) or a line holding two objects are malformed: the error
    # names the first bad line, whichever of fold_file's two parsing paths the chunk takes.
    path = _write_events(tmp_path, data)
    with pytest.raises(fold.RecordError) as exc:
        fold.fold_file(path, new_state())
    assert exc.value.reason.startswith(f"line {line_no}: malformed event (")


def test_item_completed_without_an_item_object_carries_its_text_itself():
    state = fold_all([
        conversation(1, type="item_completed", turn_id="t1", text="inline", phase="final_answer"),
        conversation(2, type="turn_completed", turn_id="t1", status="completed"),
    ])
    assert (state["answer"], state["answer_exact"]) == ("inline", True)


def test_text_deltas_may_carry_their_text_under_text():
    state = fold_all([
        conversation(1, type="text_delta", turn_id="t1", text="par"),
        conversation(2, type="text_delta", turn_id="t1", delta="tial"),
        conversation(3, type="turn_completed", turn_id="t1", status="completed"),
    ])
    assert (state["answer"], state["answer_exact"]) == ("partial", False)


def test_a_final_answer_is_exact():
    state = fold_all([
        conversation(1, type="item_completed", turn_id="t1", item={"text": "done", "phase": "final_answer"}),
        conversation(2, type="turn_completed", turn_id="t1", status="completed"),
    ])
    assert (state["answer"], state["answer_exact"]) == ("done", True)


def test_i64_max_is_still_a_known_value():
    # The limit is inclusive: 2**63 - 1 fits i64, in a stream and as a total.
    one = fold_all([usage(1, {"input_tokens": I64_MAX})])
    assert stream_totals(one)[0].counters == {"input_tokens": I64_MAX}
    totals = reduce_usage(one)
    assert (totals.input_tokens, totals.gaps) == (I64_MAX, 0)
    two = fold_all([usage(1, {"input_tokens": I64_MAX - 10}),
                    usage(2, {"input_tokens": 10}, usage_stream_id="s2")])
    totals = reduce_usage(two)
    assert (totals.input_tokens, totals.gaps) == (I64_MAX, 0)


def test_an_extra_counter_does_not_hide_the_counters_after_it():
    # cache_write_5m_tokens is kept per stream but has no run total; input_tokens after it
    # in the same usage object still reduces (single-stream path).
    state = fold_all([usage(1, {"cache_write_5m_tokens": 3, "input_tokens": 5, "output_tokens": 2})])
    totals = reduce_usage(state)
    assert (totals.input_tokens, totals.output_tokens, totals.gaps) == (5, 2, 0)


def test_overflow_gaps_add_to_the_gaps_already_counted():
    # Across streams: one counter past u64 and one total past i64 are one gap each, added
    # to the torn-line gap and the fold's own gap (a counter going backwards): 4.
    state = fold_all([
        usage(1, {"input_tokens": 2**64 + 1, "output_tokens": 2**62}),
        usage(2, {"input_tokens": 1, "output_tokens": 2**62}, usage_stream_id="s2"),
        usage(3, {"input_tokens": 0, "output_tokens": 2**62}, usage_stream_id="s2"),
    ])
    assert state["gaps"] == 1
    totals = reduce_usage(state, extra_gaps=1)
    assert (totals.input_tokens, totals.output_tokens, totals.gaps) == (None, None, 4)


def test_small_record_files_that_are_not_regular_or_exactly_at_the_limit(tmp_path):
    # An empty FIFO read (O_NONBLOCK, no writer) is b"" and must still be refused, naming
    # why; a file of exactly 64 MiB is still read (the limit is "bigger than").
    fifo = tmp_path / "receipt.json"
    os.mkfifo(fifo)
    with pytest.raises(OSError) as exc:
        fold.read_regular(str(fifo))
    assert type(exc.value) is OSError
    assert (exc.value.errno, exc.value.strerror, exc.value.filename) == (
        errno.EINVAL, "not a regular file", str(fifo))
    path = tmp_path / "manifest.json"
    with open(path, "wb") as f:
        f.truncate(64 << 20)  # sparse
    assert len(fold.read_regular(str(path))) == 64 << 20


def test_a_run_without_an_answer_has_unknown_exactness():
    state = fold_all([{"schema_version": 1, "seq": 1, "type": "text"}])
    assert (state["answer"], state["answer_exact"]) == (None, None)


# --- report/buckets.py -------------------------------------------------------------------


def _tokyo_file() -> Path:
    for base in zoneinfo.TZPATH:
        p = Path(base) / "Asia" / "Tokyo"
        if p.is_file():
            return p
    from importlib.resources import files
    return Path(str(files("tzdata.zoneinfo") / "Asia" / "Tokyo"))


def test_weekly_buckets_start_on_monday_by_default():
    b = make_buckets(datetime(2026, 3, 8, 12, tzinfo=timezone.utc), datetime(2026, 3, 10, tzinfo=timezone.utc),
                     ZoneInfo("UTC"), "weekly")
    assert b.labels == ["2026-03-02", "2026-03-09"]


def test_next_month_starts_on_the_first():
    assert next_period(date(2026, 3, 1), "monthly") == date(2026, 4, 1)
    assert next_period(date(2026, 12, 1), "monthly") == date(2027, 1, 1)
    b = make_buckets(datetime(2026, 3, 8, tzinfo=timezone.utc), datetime(2026, 4, 8, tzinfo=timezone.utc),
                     ZoneInfo("UTC"), "monthly")
    assert b.starts[1] == epoch(datetime(2026, 4, 1, tzinfo=timezone.utc))


def test_open_range_bounds_are_none():
    assert utc_range(None, None, ZoneInfo("UTC")) == (None, None)


def test_local_midnight_is_in_utc_whatever_the_process_zone(monkeypatch):
    # astimezone() without an argument would return the process's local zone instead.
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        m = local_midnight_utc(date(2026, 3, 8), ZoneInfo("America/New_York"))
        assert m.utcoffset().total_seconds() == 0
        assert m.replace(tzinfo=None) == datetime(2026, 3, 8, 5, 0)
    finally:
        monkeypatch.undo()
        time.tzset()


def test_parse_day_names_since_by_default():
    with pytest.raises(ReportError) as exc:
        parse_day("soon")
    assert exc.value.message == "--since 'soon' is not a date; expected YYYY-MM-DD or YYYYMMDD"
    assert exc.value.hint == "for example `ledger report --since 2026-03-01`"


def test_weeks_start_on_monday_by_default():
    # 2026-03-08 is a Sunday: its Monday week began 2026-03-02 (a Sunday week on the 8th itself).
    assert period_start(date(2026, 3, 8), "weekly") == date(2026, 3, 2)
    assert period_start(date(2026, 3, 8), "weekly", "sunday") == date(2026, 3, 8)


def test_unknown_period_is_named():
    with pytest.raises(ReportError) as exc:
        period_start(date(2026, 3, 8), "yearly")
    assert exc.value.message == "unknown period 'yearly'"


def test_bucket_lookup_outside_the_covered_span_is_none():
    b = make_buckets(datetime(2026, 3, 8, 12, tzinfo=timezone.utc), datetime(2026, 3, 9, 12, tzinfo=timezone.utc),
                     ZoneInfo("UTC"), "daily")
    assert b.labels == ["2026-03-08", "2026-03-09"] and b.slot == 86400
    end = b.starts[-1]  # the end of the last bucket is outside it
    assert b.label_of_epoch(end) is None and b.label_of_epoch(end - 1) == "2026-03-09"
    assert b.label_of_epoch(b.starts[0] - 1) is None
    assert b.label_of_slot(end // 86400) is None and b.label_of_slot(end // 86400 - 1) == "2026-03-09"
    assert b.label_of_slot(b.starts[0] // 86400 - 1) is None
    assert isinstance(b, Buckets)


@pytest.mark.parametrize("name", ["z", "Z", "utc"])
def test_tz_option_utc_spellings(name):
    zone, label = resolve_zone(name)
    assert (zone, label) == (ZoneInfo("UTC"), "UTC")


def test_unknown_tz_option_hint():
    with pytest.raises(ReportError) as exc:
        resolve_zone("Mars/Olympus")
    assert exc.value.hint == "for example `ledger report --tz America/New_York` (or `--tz UTC`)"


@pytest.mark.parametrize("raw", ["UTC", "utc", "Z", "z", ":UTC", ":z"])
def test_tz_env_utc_spellings_are_utc_without_warning(raw):
    warnings: list[str] = []
    zone, label = resolve_zone(None, env={"TZ": raw}, warn=warnings.append)
    assert (zone, label, warnings) == (ZoneInfo("UTC"), "UTC", [])


def test_unusable_tz_env_warns_with_the_fix():
    warnings: list[str] = []
    zone, label = resolve_zone(None, env={"TZ": "Nowhere/Bogus"}, warn=warnings.append)
    assert (zone, label) == (ZoneInfo("UTC"), "UTC")
    assert warnings == ["warning: $TZ='Nowhere/Bogus' is not a usable time zone; using UTC "
                        "(set TZ to an IANA name such as Europe/Paris, or pass --tz)"]


def _fake_readlink(target: str | None):
    real = os.readlink

    def readlink(path, *args, **kwargs):
        if path != "/etc/localtime":
            return real(path, *args, **kwargs)
        if target is None:
            raise OSError(errno.EINVAL, "not a symlink", path)
        return target
    return readlink


@pytest.mark.parametrize("target", ["/usr/share/zoneinfo/Asia/Tokyo", "zoneinfo/Asia/Tokyo",
                                    "../usr/share/zoneinfo/Asia/Tokyo"])
def test_local_zone_from_the_localtime_symlink(monkeypatch, target):
    monkeypatch.setattr(os, "readlink", _fake_readlink(target))
    assert resolve_zone(None, env={}) == (ZoneInfo("Asia/Tokyo"), "Asia/Tokyo")


def test_local_zone_from_the_localtime_file_when_it_is_not_a_symlink(monkeypatch):
    tokyo = _tokyo_file()
    seen: list[tuple] = []

    def fake_open(path, *args, **kwargs):
        seen.append((path, *args))
        if path != "/etc/localtime":
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        return builtins.open(tokyo, *args, **kwargs)

    monkeypatch.setattr(os, "readlink", _fake_readlink(None))
    monkeypatch.setattr(buckets, "open", fake_open, raising=False)
    zone, label = resolve_zone(None, env={})
    assert label == "localtime" and str(zone) == "localtime"
    assert seen == [("/etc/localtime", "rb")]
    assert datetime(2026, 1, 1, tzinfo=zone).utcoffset().total_seconds() == 9 * 3600


def test_local_zone_is_utc_when_localtime_is_missing(monkeypatch):
    def fake_open(path, *args, **kwargs):
        raise FileNotFoundError(errno.ENOENT, "no such file", path)

    monkeypatch.setattr(os, "readlink", _fake_readlink(None))
    monkeypatch.setattr(buckets, "open", fake_open, raising=False)
    zone, label = resolve_zone(None, env={})
    assert (zone, label) == (ZoneInfo("UTC"), "UTC")
    assert str(zone) == "UTC"


# --- report/costs.py ---------------------------------------------------------------------


def test_group_basis_with_every_run_known():
    assert group_basis(2, 2, REPORTED, REPORTED) == "reported"
    assert group_basis(2, 2, ESTIMATED, ESTIMATED) == "estimated"
    assert group_basis(2, 2, MIXED, MIXED) == "mixed"
    assert group_basis(2, 2, REPORTED, ESTIMATED) == "mixed"


def test_group_basis_without_both_codes_is_unknown():
    # Every run counted as known but a code missing: nothing to name the basis by.
    assert group_basis(1, 1, None, None) == "unknown"
    assert group_basis(2, 2, None, REPORTED) == "unknown"
    assert group_basis(2, 2, REPORTED, None) == "unknown"


def test_group_basis_of_a_code_it_has_no_name_for_is_mixed():
    code = max(REPORTED, ESTIMATED, MIXED) + 1
    assert group_basis(1, 1, code, code) == "mixed"
