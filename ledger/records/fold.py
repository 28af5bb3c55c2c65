"""Streaming fold of events.jsonl into a run's usage and facts.

The fold state is a plain JSON-able dict so the indexer can store it in its cursor and
resume from a byte offset: reading an appended file continues exactly where it stopped.
The rules are the v1 evidence-gap and reduction rules (DESIGN §2):
per usage stream each counter keeps its running max; across streams counters are summed
(max for peak_input_tokens / context_window_tokens); unknown stays None.
"""

from __future__ import annotations

import errno
import math
import os
import stat
from typing import Any, BinaryIO


from ledger.errors import RecordError
from ledger.records import jsonio
from ledger.records.model import (
    ALL_INT_COUNTERS, EVENT_TYPES, I64_MAX, INT_COUNTERS, MAX_ACROSS_STREAMS, UsageStreamTotals,
    UsageTotals,
)

OVERFLOW = -1  # sentinel in a stream's counters: a value beyond u64 (the total is unknown)
U64_MAX = 2**64 - 1
_READ_CHUNK = 1 << 20


def open_regular_fd(path: str) -> int:
    """Open a record file for reading, refusing anything but a regular file; a raw fd.

    O_NONBLOCK so that a FIFO planted in a record cannot hang a scan; a directory raises
    IsADirectoryError, any other non-regular file OSError.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", path)
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_regular(path: str) -> BinaryIO:
    """open_regular_fd() as a buffered binary file object."""
    fd = open_regular_fd(path)
    try:
        return open(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
_SMALL_MAX = 64 << 20  # a manifest / receipt bigger than this is not one ledger wrote
_SMALL_READ = 64 << 10


def read_regular(path: str) -> bytes:
    """The whole content of a small record file (manifest, receipt...), with open_regular()'s
    checks, in raw os calls: no buffered file object for a few hundred bytes.

    One read of up to _SMALL_READ bytes first: a short, non-empty result is a small file read
    whole (without O_NONBLOCK's help a FIFO could not get here; with it a FIFO reads empty;
    a device fills the buffer). Only an empty or full first read is checked with fstat()."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        data = os.read(fd, _SMALL_READ)
        if 0 < len(data) < _SMALL_READ:
            return data
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory", path)
            raise OSError(errno.EINVAL, "not a regular file", path)
        if st.st_size > _SMALL_MAX:
            raise OSError(errno.EFBIG, "file too large for a record file", path)
        parts = [data]
        total = len(data)
        while chunk := os.read(fd, 1 << 20):
            parts.append(chunk)
            total += len(chunk)
            if total > _SMALL_MAX:
                raise OSError(errno.EFBIG, "file too large for a record file", path)
        return b"".join(parts)
    finally:
        os.close(fd)


def new_state() -> dict[str, Any]:
    return {
        "seq": None, "gaps": 0, "lines": 0, "streams": {}, "attempts": {}, "session": None,
        "tools": {}, "retries": 0, "result": None, "turns": {}, "answer": None,
        "answer_exact": None, "skill_invoked": None,
        "tool_status": {},  # tool name -> [ok, error, semantic-error] results (verdict.py)
    }


COMMAND_MAX_ARGS = 64
COMMAND_MAX_CHARS = 4000


def command_of(v: Any) -> tuple[list[str] | None, bool]:
    """The result event's `command` (the launched argv, redacted) as kept in the state, and
    whether it was cut: a non-empty list of str, else None. An argument with a NUL is no argv
    (the kernel passes C strings): None too. Bounded, since it travels in every cursor's fold
    state: the first COMMAND_MAX_ARGS arguments, COMMAND_MAX_CHARS characters in all."""
    if type(v) is not list or not v:
        return None, False
    for arg in v:
        if type(arg) is not str or "\x00" in arg:
            return None, False
    out: list[str] = []
    room = COMMAND_MAX_CHARS
    for arg in v[:COMMAND_MAX_ARGS]:
        if len(arg) > room:
            if room:
                out.append(arg[:room])
            return out, True
        out.append(arg)
        room -= len(arg)
    return out, len(v) > COMMAND_MAX_ARGS


def command_text(result: dict[str, Any] | None) -> str | None:
    """A run's command for display, from its folded result: the argv joined with shlex.join
    (it pastes into a shell), ` …` after a cut one; None when not known. (A state folded
    before the command was kept has no key: None.)"""
    args = result.get("command") if result else None
    if not args:
        return None
    import shlex  # (only a projection or a reader joins: not every command that folds)

    return shlex.join(args) + (" \u2026" if result.get("command_cut") else "")  # type: ignore[union-attr]


def exit_code_of(result: dict[str, Any] | None) -> int | None:
    """A run's exit code from its folded result, None when not known or beyond a 32-bit
    integer (the index's column; no process exits with such a code)."""
    code = result.get("exit_code") if result else None
    return code if type(code) is int and -2**31 <= code < 2**31 else None


def _counter_value(v: Any) -> int | None:
    """A counter as reported: a non-negative int (kept up to u64, like Loopflow's u64 fields),
    OVERFLOW for a number beyond u64 (orjson yields a float there), None when not a counter."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        if v < 0:
            return None
        return OVERFLOW if v > U64_MAX else v
    if isinstance(v, float) and math.isfinite(v) and v > U64_MAX:
        return OVERFLOW
    return None


def _str(v: Any) -> str | None:
    """A text field as recorded, or None: junk of another JSON type never reaches the state
    (the indexer stores these in text columns)."""
    return v if type(v) is str else None


def _rank(v: int) -> float | int:
    """Order counters with OVERFLOW above every representable value."""
    return math.inf if v == OVERFLOW else v


_COUNTER_SET = frozenset(ALL_INT_COUNTERS)
_INT_COUNTER_SET = frozenset(INT_COUNTERS)


def _fold_usage(state: dict[str, Any], ev: dict[str, Any]) -> None:
    get = ev.get
    if get("counter_kind") != "cumulative":
        state["gaps"] += 1
        return
    if get("start_known") is False:
        state["gaps"] += 1
    sid = get("usage_stream_id")
    if type(sid) is not str:
        sid = f"{get('attempt_key')}/{get('turn_key')}/{get('model')}"
    usage = get("usage")
    if type(usage) is not dict:
        usage = {}  # no counters we can read (a v1 writer always writes an object)
    streams = state["streams"]
    st = streams.get(sid)
    if st is None:
        st = streams[sid] = {
            "provider": _str(get("provider")), "model": _str(get("model")) or _str(usage.get("model")),
            "attempt": _str(get("attempt_key")), "turn": _str(get("turn_key")),
            "obs": None, "final": False, "n": 0, "c": {}, "cost": None,
        }
    st["n"] += 1
    obs = get("observation_seq")
    if type(obs) is int:
        prev_obs = st["obs"]
        if prev_obs is not None and obs <= prev_obs:
            state["gaps"] += 1  # still used: the counters below keep their max
        else:
            st["obs"] = obs
    if get("final_receipt") is True:
        st["final"] = True
    if st["model"] is None and type(usage.get("model")) is str:
        st["model"] = usage["model"]
    counters = st["c"]
    for name, raw in usage.items():
        if name not in _COUNTER_SET:
            continue
        prev = counters.get(name)
        if type(raw) is int and 0 <= raw <= U64_MAX:
            # fast path: a plain non-negative int within u64 (what every writer produces);
            # OVERFLOW ranks above every value
            value = raw
            if prev is not None and (value < prev or prev == OVERFLOW):
                state["gaps"] += 1  # a cumulative counter went backwards: keep the max
                continue
        else:
            value = _counter_value(raw)
            if value is None:
                continue
            if prev is not None and _rank(value) < _rank(prev):
                state["gaps"] += 1
                continue
        # Values past i64 are kept (up to u64) and only make the *total* unknown, with one
        # gap, when the run is reduced: exactly Loopflow's rule.
        counters[name] = value
    if "cost_usd" in usage:
        cost = usage["cost_usd"]
        # serde_json (Loopflow) writes NaN/inf as null: a present-but-invalid cost is a gap.
        if isinstance(cost, (int, float)) and not isinstance(cost, bool) and math.isfinite(cost) and cost >= 0:
            cost = float(cost)
            if st["cost"] is not None and cost < st["cost"]:
                state["gaps"] += 1
            else:
                st["cost"] = cost
        else:
            state["gaps"] += 1


def _fold_conversation(state: dict[str, Any], ev: dict[str, Any]) -> None:
    inner = ev.get("event")
    if not isinstance(inner, dict):
        return
    kind = inner.get("type")
    if kind == "tool_result":  # ledger's addition: one tool use's result status
        _fold_tool_result(state, inner)
        return
    turn_id = str(inner.get("turn_id"))
    turns = state["turns"]
    turn = turns.setdefault(turn_id, {"final": None, "msg": None, "deltas": ""})
    if kind == "item_completed":
        item = inner.get("item") if isinstance(inner.get("item"), dict) else inner
        text = item.get("text")
        if isinstance(text, str):
            phase = item.get("phase")
            if phase == "final_answer":
                turn["final"] = text
            elif phase is None:
                turn["msg"] = text
    elif kind == "text_delta":
        delta = inner.get("delta", inner.get("text"))
        if isinstance(delta, str):
            turn["deltas"] += delta
    elif kind == "turn_completed":
        turns.pop(turn_id, None)
        if inner.get("status") == "completed":
            if turn["final"] is not None:
                state["answer"], state["answer_exact"] = turn["final"], True
            elif turn["msg"] is not None:
                state["answer"], state["answer_exact"] = turn["msg"], True
            elif turn["deltas"]:
                state["answer"], state["answer_exact"] = turn["deltas"], False


_STATUS_POS = {"ok": 0, "error": 1, "semantic-error": 2}


def _fold_tool_result(state: dict[str, Any], inner: dict[str, Any]) -> None:
    status = inner.get("status")
    pos = _STATUS_POS.get(status) if type(status) is str else None
    if pos is None:
        return  # unknown status: the use stays unknown
    name = inner.get("name")
    if type(name) is not str:
        name = str(name)
    counts = state.setdefault("tool_status", {}).setdefault(name, [0, 0, 0])
    counts[pos] += 1


def fold_event(state: dict[str, Any], ev: Any) -> None:
    """Apply one parsed envelope to the state."""
    if type(ev) is not dict:
        raise ValueError("expected a JSON object")
    get = ev.get
    version = get("schema_version")
    if type(version) is not int or version != 1:  # (True == 1 in Python)
        state["gaps"] += 1  # still used
    seq = get("seq")
    if type(seq) is int:  # (bool is not int here: type() is exact)
        last = state["seq"]
        if last is not None and seq <= last:
            state["gaps"] += 1
        else:
            state["seq"] = seq
    else:
        state["gaps"] += 1
    _fold_body(state, ev, get("type"))


def _fold_body(state: dict[str, Any], ev: dict[str, Any], kind: Any) -> None:
    """Everything fold_event does after the envelope (schema_version / seq) checks."""
    if kind == "usage":
        _fold_usage(state, ev)
        return
    if kind == "tool_use":
        name = ev.get("name")
        if type(name) is not str:
            name = str(name)
        tools = state["tools"]
        tools[name] = tools.get(name, 0) + 1
        return
    if type(kind) is not str or kind not in EVENT_TYPES:  # (a list/dict type is unhashable)
        state["gaps"] += 1
        return
    if kind == "conversation":
        _fold_conversation(state, ev)
    elif kind == "provider_attempt_started":
        key = str(ev.get("attempt_key"))
        state["attempts"][key] = {
            "attempt_key": key, "provider": _str(ev.get("provider")), "model": _str(ev.get("model")),
            "started_at": _str(ev.get("observed_at")), "finished_at": None, "outcome": None,
        }
    elif kind == "provider_attempt_finished":
        key = str(ev.get("attempt_key"))
        att = state["attempts"].setdefault(key, {
            "attempt_key": key, "provider": None, "model": None, "started_at": None,
            "finished_at": None, "outcome": None,
        })
        att["finished_at"] = _str(ev.get("observed_at"))
        att["outcome"] = _str(ev.get("outcome"))
    elif kind == "provider_session_observed":
        if isinstance(ev.get("provider_session_id"), str):
            state["session"] = ev["provider_session_id"]
    elif kind == "result":
        duration = ev.get("duration_secs")
        if type(duration) not in (int, float) or not math.isfinite(duration):
            duration = None
        reasons = ev.get("evidence_reasons")
        state["result"] = {
            "outcome": _str(ev.get("outcome")), "duration_secs": duration,
            # ledger additions the verdict reads (ledger.records.verdict)
            "stop_reason": _str(ev.get("stop_reason")), "stopped_by": _str(ev.get("stopped_by")),
            "evidence": _str(ev.get("evidence")),
            "evidence_reason": _str(reasons[0]) if type(reasons) is list and reasons else None,
            "error": (_str(ev.get("error")) or "")[:1000] or None, "expected_skill": _str(ev.get("expected_skill")),
            "exit_code": ev.get("exit_code") if type(ev.get("exit_code")) is int else None,
        }
        # (ledger run writes the redacted argv; a bounded copy for `ledger runs`/`show`)
        state["result"]["command"], state["result"]["command_cut"] = command_of(ev.get("command"))
        # ledger additions on the result event (optional for v1 readers)
        retries = ev.get("api_retries")
        if type(retries) is int and 0 <= retries <= I64_MAX:
            state["retries"] = retries
        if isinstance(ev.get("skill_invoked"), bool):
            state["skill_invoked"] = ev["skill_invoked"]


def fold_events_list(state: dict[str, Any], events: list[dict[str, Any]]) -> None:
    """Fold parsed envelopes (all dicts) in order: exactly fold_event() on each.

    Fast path for what writers produce (every schema_version the int 1, seq strictly
    increasing ints): the envelope is checked for the whole list at once and only the
    bodies are folded one by one. Anything else takes fold_event() per envelope."""
    if not events:
        return
    seqs = [e.get("seq") for e in events]
    versions = [e.get("schema_version") for e in events]
    last = state["seq"]
    if (versions.count(1) == len(versions) and set(map(type, versions)) == _INT_ONLY
            and set(map(type, seqs)) == _INT_ONLY and (last is None or seqs[0] > last)
            and all(map(int.__lt__, seqs, seqs[1:]))):
        state["seq"] = seqs[-1]
        tools = state["tools"]
        for ev in events:
            kind = ev.get("type")
            if kind == "usage":
                _fold_usage(state, ev)
            elif kind == "tool_use":
                name = ev.get("name")
                if type(name) is not str:
                    name = str(name)
                tools[name] = tools.get(name, 0) + 1
            else:
                _fold_body(state, ev, kind)
        return
    for ev in events:
        fold_event(state, ev)


_INT_ONLY = {int}
_DICT_ONLY = {dict}
# Put between lines in the fast path's JSON array. Random per process so that no record can
# hold it: where it comes back at every odd index, each line parsed as exactly one value
# (a line torn or joined across a newline would swallow a separator and break the pattern).
_LINE_SEP = os.urandom(12).hex()
_LINE_SEP_JSON = b',"' + _LINE_SEP.encode() + b'",'


def fold_file(path: str, state: dict[str, Any], offset: int = 0, *, size: int | None = None,
              head: list[bytes] | None = None) -> tuple[int, bool]:
    """Fold the complete lines of `path` from byte `offset`; return (new_offset, torn).

    `new_offset` is just past the last complete line. `torn` is True when the file ends with
    bytes and no newline: that partial line is not counted (the caller adds one gap).
    A malformed complete line raises RecordError naming the file and line number.
    Memory stays bounded: the file is read in chunks, never whole. With `size`, bytes at or
    past that file offset are not read (an indexer folds up to the size it stat()ed). `head`
    receives the first chunk read (the indexer hashes the file's prefix from it).
    """
    fold = fold_event
    fold_list = fold_events_list
    import orjson  # (here: importing it costs a warm `ledger runs` ~44 M instructions)

    loads = orjson.loads
    pos = offset
    line_no = state["lines"]
    fd = open_regular_fd(path)  # raw reads: no buffered file object for a few KiB
    try:
        read = os.read
        if offset:
            os.lseek(fd, offset, os.SEEK_SET)
        rest = b""
        remaining = None if size is None else max(0, size - offset)
        while True:
            if remaining is None:
                chunk = read(fd, _READ_CHUNK)
            else:
                chunk = read(fd, min(_READ_CHUNK, remaining)) if remaining else b""
                remaining -= len(chunk)
            if not chunk:
                break
            if head is not None and not head:
                head.append(chunk)
            data = rest + chunk if rest else chunk
            start = 0
            last_nl = data.rfind(b"\n")
            if last_nl > 0:
                # Fast path: parse every complete line of the chunk in one orjson call (a
                # JSON array). Only when each line is exactly one element; any blank or
                # malformed line sends the chunk through the exact line-by-line path below.
                block = data[:last_nl]
                n_lines = block.count(b"\n") + 1
                try:
                    parsed = loads(b"[" + block.replace(b"\n", _LINE_SEP_JSON) + b"]")
                except jsonio.JSONDecodeError:
                    parsed = None
                events = None
                if parsed is not None and len(parsed) == 2 * n_lines - 1 and parsed[1::2].count(_LINE_SEP) == n_lines - 1:
                    events = parsed[0::2]
                if events is not None and set(map(type, events)) == _DICT_ONLY:
                    fold_list(state, events)
                    line_no += n_lines
                    pos += last_nl + 1
                    start = last_nl + 1
            while True:
                nl = data.find(b"\n", start)
                if nl < 0:
                    break
                line = data[start:nl]
                line_no += 1
                if line.strip():
                    try:
                        fold(state, loads(line))
                    except (jsonio.JSONDecodeError, ValueError) as exc:
                        state["lines"] = line_no
                        raise RecordError(path, f"line {line_no}: malformed event ({exc}); expected one JSON object per line") from None
                pos += nl + 1 - start
                start = nl + 1
            rest = data[start:]
    finally:
        os.close(fd)
    state["lines"] = line_no
    # A final fragment without its newline is torn (the caller adds one gap); whitespace alone
    # is not evidence of anything (Loopflow skips it too).
    return pos, bool(rest.strip())


def _known(v: int) -> int | None:
    return None if v == OVERFLOW or v > I64_MAX else v


def stream_totals(state: dict[str, Any]) -> list[UsageStreamTotals]:
    out = []
    for sid, st in state["streams"].items():
        out.append(UsageStreamTotals(
            stream_id=sid, provider=st["provider"], model=st["model"], attempt_key=st["attempt"],
            turn_key=st["turn"], observations=st["n"], final_receipt=st["final"],
            counters={k: _known(v) for k, v in st["c"].items()},
            cost_usd=st["cost"],
        ))
    return out


def run_model(declared: str | None, state: dict[str, Any]) -> str | None:
    """The run's model: the one its launch named, else the one its usage streams name (a
    Claude run without `--model`: the stream says which). Several models (e.g. subagents on
    a smaller one): the main one, the model with the most input + output tokens (ties: the
    first name). The record is unchanged; the records reader and the index both use this."""
    if declared:
        return declared
    weight: dict[str, int] = {}
    for _, st in sorted(state["streams"].items()):
        model = st.get("model")
        if isinstance(model, str) and model:
            c = st["c"]
            inp = c["total_input_tokens"] if "total_input_tokens" in c else c.get("input_tokens", 0)
            weight[model] = weight.get(model, 0) + (_known(inp) or 0) + (_known(c.get("output_tokens", 0)) or 0)
    if not weight:
        return None
    return max(sorted(weight), key=weight.__getitem__)


def reduce_usage(state: dict[str, Any], extra_gaps: int = 0) -> UsageTotals:
    """Reduce per-stream maxima across streams. `extra_gaps` adds run-level gaps (torn line).

    Per counter: sum across streams (max for peak_input_tokens / context_window_tokens). A
    counter no stream reported stays None. A total that does not fit i64 (or a stream value
    beyond u64) is one gap and that total is None. Streams are reduced in stream-id order, so
    the float sum of costs is the same however the events were appended.
    """
    totals = UsageTotals()
    gaps = state["gaps"] + extra_gaps
    streams = [st for _, st in sorted(state["streams"].items())]
    totals.streams = len(streams)
    totals.final_streams = sum(1 for st in streams if st["final"])
    if len(streams) == 1:  # the common case: each total is that stream's value
        st = streams[0]
        for name, v in st["c"].items():
            if name not in _INT_COUNTER_SET:
                continue
            if v == OVERFLOW or v > I64_MAX:
                gaps += 1
                continue
            setattr(totals, name, v)
        totals.cost_usd = st["cost"]
        totals.gaps = gaps
        return totals
    for name in INT_COUNTERS:
        values = [st["c"][name] for st in streams if name in st["c"]]
        if not values:
            continue
        if OVERFLOW in values:
            gaps += 1
            continue
        total = max(values) if name in MAX_ACROSS_STREAMS else sum(values)
        if total > I64_MAX:
            gaps += 1  # the total overflowed i64: unknown
            continue
        setattr(totals, name, total)
    cost: float | None = None
    for st in streams:
        if st["cost"] is not None:
            cost = st["cost"] if cost is None else cost + st["cost"]
    totals.cost_usd = cost
    totals.gaps = gaps
    return totals
