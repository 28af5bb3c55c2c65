"""Exact per-response usage from Gemini CLI session logs
(`tmp/<project>/chats/session-<time>-<id8>.jsonl`, subagents in `chats/<parent>/<id>.jsonl`):
a pure, incremental reducer, the Gemini counterpart of claude_usage.

Gemini CLI 0.61 appends records to a session's file (its ChatRecordingService):

- a header, `{sessionId, projectHash, startTime, lastUpdated, kind}` (`kind` main or
  subagent), written first (and again on a resume of a legacy `.json` session);
- message records `{id, timestamp, type, content, ...}`: `type` user or gemini; a `gemini`
  message holds one API response's `tokens` {input, output, cached, thoughts, tool, total}
  (the response's usageMetadata) and its `model`. The same message is appended again, whole,
  each time it changes (its tool calls and their results are added later);
- `{"$set": {...}}` patches of the session: `lastUpdated`, `summary`, `directories`, ... and
  `messages`, which replaces the whole message list (the messages in it are copies);
- `{"$rewindTo": id}`: the conversation is cut back to that message. The responses after it
  were still made (and paid for), so a rewind does not uncount them.

Counting rules:

* **One API response is one `gemini` message id, counted once** across every file fed, with
  its **last** tokens and model: the copy with tokens over one without (tokens are only ever
  added), then the latest timestamp, then the latest file / line. Its time is its first
  appearance (the earliest timestamp of any copy), so the day does not depend on feed order.
* Tokens use ledger's shape (ledger.records.model), as `ledger run` normalises Gemini:
  `input_tokens` = input - cached + tool (the prompt counts cached input; tool-use prompt
  tokens are input outside it), `cache_read_tokens` = cached, `output_tokens` = output +
  thoughts (Gemini's candidates leave thoughts out; ledger's output includes reasoning),
  `reasoning_tokens` = thoughts. Cache writes are not reported by Gemini: None (unknown).
* A response's session is the `sessionId` of its file's header; a subagent file (kind
  subagent, in `chats/<parent session>/`) belongs to its parent session. A file without a
  header is keyed by its file name.
* **No cost**: the log carries none (`cost_usd` is None); the estimate is made elsewhere.
* Bad input (not JSON, not an object, non-UTF-8, a line that is none of the records above,
  a `gemini` message whose `tokens` is not a usage object, a torn last line) is skipped and
  reported in `problems` with file, line number and reason; never an exception.

Incremental use: `state()` is a dict of plain JSON values; `GeminiUsage(state)` continues from
it, and `feed(file, data, offset)` takes the bytes of `file` from `offset` (the value the
previous `feed` returned for it). Only complete lines are consumed: a torn tail is left for
the next pass. Memory is bounded by the number of distinct responses plus one cursor per file
and one summary per session.

Not read: legacy whole-file `session-*.json` logs (before 0.4x's JSONL); the runtime dir
`~/.cache/.gemini` used under macOS `sandbox-exec`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from ledger.records.timefmt import format_utc, parse_rfc3339
from ledger.sources.jsonlines import TORN, Problem, Timed, _count, complete_end, json_objects

STATE_VERSION = 1
PUBLIC_COUNTERS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
                   "reasoning_tokens")
RAW = ("input", "cached", "output", "thoughts", "tool", "total")

# A response entry in the state (a list, to keep it small):
# [raw tokens x6 (None: absent), has tokens, model, first ts, rank ts, session, file, line]
_HAS, _MODEL, _TS, _RTS, _SESSION, _FILE, _LINE = range(6, 13)


@dataclass(frozen=True)
class Response(Timed):
    """One API response (one `gemini` message), counted once."""

    message_id: str
    model: str | None
    time: str | None            # first appearance, canonical UTC
    session_id: str
    counters: dict[str, int | None]
    raw: dict[str, int | None]  # the log's own tokens {input, cached, output, thoughts, tool, total}
    file: str                   # where the winning copy is
    line: int


@dataclass(frozen=True)
class SessionInfo:
    session_id: str
    started: str | None
    ended: str | None
    kind: str | None            # "main", or "subagent" when only subagent files were seen
    project_hash: str | None
    tools: dict[str, int]
    files: tuple[str, ...]


def _utc(v: Any) -> str | None:
    if type(v) is not str:
        return None
    try:
        return format_utc(parse_rfc3339(v))
    except (ValueError, OverflowError):
        return None


def _str(v: Any) -> str | None:
    return v if type(v) is str and v else None


def parent_of_path(file: str) -> str | None:
    """`chats/<parent>/<id>.jsonl` (a subagent's file): the parent session id."""
    parts = file.replace("\\", "/").split("/")
    return parts[-2] if len(parts) >= 3 and parts[-3] == "chats" else None


def normalise(raw: dict[str, int | None]) -> dict[str, int | None]:
    """Gemini's tokens -> ledger's counters (see the module's rules)."""
    inp, cached, out, thoughts, tool = (raw.get(k) for k in ("input", "cached", "output", "thoughts", "tool"))
    uncached = None
    if inp is not None:
        uncached = inp - (cached or 0) if (cached or 0) <= inp else None
        if uncached is not None and tool:
            uncached += tool
    return {
        "input_tokens": uncached,
        "cache_read_tokens": cached,
        "cache_write_tokens": None,
        "output_tokens": None if out is None else out + (thoughts or 0),
        "reasoning_tokens": thoughts,
    }


class GeminiUsage:
    """The reducer. Feed lines of one or several sessions' files; read `responses()`,
    `sessions()`, `totals()`; persist `state()`."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        if s and s.get("v") != STATE_VERSION:
            raise ValueError(f"unsupported gemini usage state version {s.get('v')!r}")
        # file -> [offset, lines consumed, session id (from its header), kind]
        self._files: dict[str, list[Any]] = {k: list(v) for k, v in s.get("files", {}).items()}
        # message id -> entry (layout above)
        self._responses: dict[str, list[Any]] = {k: list(v) for k, v in s.get("responses", {}).items()}
        # session id -> [started, ended, kind, project hash, {tool: uses}]
        self._sessions: dict[str, list[Any]] = {k: [*v[:4], dict(v[4])] for k, v in s.get("sessions", {}).items()}
        self._tool_ids: set[str] = set(s.get("tool_ids", ()))
        self.problem_count: int = s.get("problem_count", 0)
        self.problems: list[Problem] = []  # found by this object (this pass), not persisted

    # ---- persistence -----------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"v": STATE_VERSION, "files": {k: list(v) for k, v in self._files.items()},
                "responses": {k: list(v) for k, v in self._responses.items()},
                "sessions": {k: [*v[:4], dict(v[4])] for k, v in self._sessions.items()},
                "tool_ids": sorted(self._tool_ids), "problem_count": self.problem_count}

    def state_json(self) -> bytes:
        """`state()` as the index stores it (every reducer has one; Codex's writes its own
        lists without a copy)."""
        import orjson

        return orjson.dumps(self.state())

    def offset(self, file: str) -> int:
        """Bytes of `file` consumed so far (where the next `feed` must start)."""
        f = self._files.get(file)
        return f[0] if f else 0

    # ---- feeding -----------------------------------------------------------------------
    def _problem(self, file: str, line: int, reason: str) -> None:
        self.problem_count += 1
        self.problems.append(Problem(file, line, reason))

    def feed(self, file: str, data: bytes, offset: int = 0) -> int:
        """Consume the complete lines of `data`, the bytes of `file` starting at `offset`.
        Returns the new offset (after the last complete line); a torn tail is not consumed
        and is reported as a problem (it is read whole once its newline arrives)."""
        cur = self._files.get(file)
        if cur is None:
            cur = self._files[file] = [0, 0, None, None]
        if offset != cur[0]:
            raise ValueError(f"{file}: feed at offset {offset}, but {cur[0]} bytes were consumed")
        end = complete_end(data)
        lineno = cur[1] + data.count(b"\n", 0, end)
        for n, obj in json_objects(data, end, cur[1], lambda n, why: self._problem(file, n, why)):
            if _str(obj.get("sessionId")) and _str(obj.get("projectHash")):
                self._header(obj, cur, file)
            elif type(obj.get("id")) is str:
                self._message(obj, cur, file, n)
            elif isinstance(obj.get("$set"), dict):
                self._set(obj["$set"], cur, file, n)
            elif type(obj.get("$rewindTo")) is str:
                pass  # the responses after it were made: still counted
            else:
                self._problem(file, n, "not a session header, message, $set or $rewindTo record")
        if end < len(data):
            self._problem(file, lineno + 1, TORN)
        cur[0], cur[1] = offset + end, lineno
        return offset + end

    def _session_of(self, cur: list[Any], file: str) -> str:
        if cur[3] == "subagent":
            parent = parent_of_path(file)
            if parent:
                return parent
        if cur[2]:
            return cur[2]
        name = file.replace("\\", "/").rsplit("/", 1)[-1]
        return name[:-6] if name.endswith(".jsonl") else name

    def _meta(self, sid: str) -> list[Any]:
        m = self._sessions.get(sid)
        if m is None:
            m = self._sessions[sid] = [None, None, None, None, {}]
        return m

    def _seen(self, sid: str, ts: str | None) -> None:
        if ts is None:
            return
        m = self._meta(sid)
        if m[0] is None or ts < m[0]:
            m[0] = ts
        if m[1] is None or ts > m[1]:
            m[1] = ts

    def _header(self, obj: dict[str, Any], cur: list[Any], file: str) -> None:
        if cur[2] is None:
            cur[2] = obj["sessionId"]
        if cur[3] is None and _str(obj.get("kind")):
            cur[3] = obj["kind"]
        sid = self._session_of(cur, file)
        m = self._meta(sid)
        if cur[3] == "main" or (m[2] is None and cur[3] is not None):
            m[2] = cur[3]
        if m[3] is None and cur[3] != "subagent":
            m[3] = obj["projectHash"]
        self._seen(sid, _utc(obj.get("startTime")))

    def _set(self, patch: dict[str, Any], cur: list[Any], file: str, lineno: int) -> None:
        sid = self._session_of(cur, file)
        self._seen(sid, _utc(patch.get("lastUpdated")))
        msgs = patch.get("messages")
        if isinstance(msgs, list):
            for msg in msgs:  # the whole list, replaced: its messages are copies
                if isinstance(msg, dict) and type(msg.get("id")) is str:
                    self._message(msg, cur, file, lineno)

    def _message(self, obj: dict[str, Any], cur: list[Any], file: str, lineno: int) -> None:
        sid = self._session_of(cur, file)
        ts = _utc(obj.get("timestamp"))
        self._seen(sid, ts)
        if obj.get("type") != "gemini":
            return
        calls = obj.get("toolCalls")
        if type(calls) is list:
            self._tools(sid, calls)
        tokens = obj.get("tokens")
        if tokens is None:
            raw: list[int | None] = [None] * len(RAW)
            has = 0
        elif isinstance(tokens, dict) and (_count(tokens.get("input")) is not None
                                           or _count(tokens.get("output")) is not None):
            raw = [_count(tokens.get(k)) for k in RAW]
            has = 1
        else:
            self._problem(file, lineno, "gemini message whose tokens are not a usage object: not counted")
            return
        model = _str(obj.get("model"))
        e = self._responses.get(obj["id"])
        if e is None:
            self._responses[obj["id"]] = [*raw, has, model, ts, ts, sid, file, lineno]
            return
        if ts is not None and (e[_TS] is None or ts < e[_TS]):
            e[_TS] = ts
        # the last copy wins: with tokens, then latest timestamp, then latest file / line
        new_rank = (has, ts or "", file, lineno)
        old_rank = (e[_HAS], e[_RTS] or "", e[_FILE], e[_LINE])
        if new_rank > old_rank:
            e[:len(RAW)] = raw
            e[_HAS], e[_RTS], e[_SESSION], e[_FILE], e[_LINE] = has, ts, sid, file, lineno
            if model is not None:
                e[_MODEL] = model
        elif e[_MODEL] is None:
            e[_MODEL] = model

    def _tools(self, sid: str, calls: list[Any]) -> None:
        """Tool calls by name, each call id once (a message is re-appended as calls complete)."""
        for c in calls:
            if type(c) is dict and type(c.get("id")) is str and type(c.get("name")) is str:
                if c["id"] in self._tool_ids:
                    continue
                self._tool_ids.add(c["id"])
                tools = self._meta(sid)[4]
                tools[c["name"]] = tools.get(c["name"], 0) + 1

    # ---- results -----------------------------------------------------------------------
    def responses(self) -> Iterator[Response]:
        """Every response that carried tokens (a message without them made no known call)."""
        for mid, e in self._responses.items():
            if not e[_HAS]:
                continue
            raw = dict(zip(RAW, e[:len(RAW)]))
            yield Response(mid, e[_MODEL], e[_TS], e[_SESSION], normalise(raw), raw, e[_FILE], e[_LINE])

    def sessions(self) -> dict[str, SessionInfo]:
        files: dict[str, set[str]] = {}
        for f, cur in self._files.items():
            files.setdefault(self._session_of(cur, f), set()).add(f)
        out = {}
        for sid, m in self._sessions.items():
            out[sid] = SessionInfo(sid, m[0], m[1], m[2], m[3], dict(m[4]), tuple(sorted(files.get(sid, ()))))
        return out

    def totals(self, by: Iterable[str] = ("day", "model")) -> dict[tuple, dict[str, Any]]:
        """Sums grouped by any of `day`, `model`, `session`: each counter (None when no
        response reported it), `responses`, and `cost_usd` (always None: not in the log)."""
        by = tuple(by)
        out: dict[tuple, dict[str, Any]] = {}
        for r in self.responses():
            f = {"day": r.day, "model": r.model, "session": r.session_id}
            k = tuple(f[b] for b in by)
            row = out.get(k)
            if row is None:
                row = out[k] = {c: None for c in PUBLIC_COUNTERS}
                row["responses"] = 0
                row["cost_usd"] = None
            row["responses"] += 1
            for c, v in r.counters.items():
                if v is not None:
                    row[c] = (row[c] or 0) + v
        return out
