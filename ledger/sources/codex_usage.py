"""Exact token usage from Codex rollout files (`sessions/YYYY/MM/DD/rollout-*.jsonl`,
`archived_sessions/`): a pure, incremental reducer, the Codex counterpart of claude_usage.

A rollout line is `{"timestamp", "type", "payload"}` (0.169 adds an `ordinal`). Usage is in
`token_usage_record` lines (0.169: one per API call, `response_id` + that call's `usage` +
`thread_token_usage`) and in `event_msg` lines whose `payload.type` is `token_count`:
`payload.info.total_token_usage` is the thread's **cumulative** total (`info` is null on the
turn-start event); `last_token_usage` (the last call alone) is not used, because summing it
double counts repeats. The model is in `turn_context.payload.model` (or `info.model` on some
builds); the service tier in `thread_settings_applied.thread_settings.service_tier`.

Counting rules (DESIGN §4b, reference/stream-formats.md §C.2; each taken from a capture of the
real client, tests/data/captures/codex/README.md, and listed with it in docs/import.md):

* **A call with a record is its record.** A `token_usage_record` is charged its own `usage`,
  keyed by `response_id` (its earliest copy names time, model, session, tier: the rank of
  levels below). Its `thread_token_usage` is a level of the chain, marked as reached by that
  call, so the `token_count` repeating it (and a copy, and the post-compaction `token_count`
  whose `last_token_usage` is all 0) charges nothing again. Levels no record reached are
  charged as below.
* **A paginated fork** (0.169: `forked_from_id` with `forked_from_ordinal_exclusive` /
  `history_mode: "paginated"` / `history_base`; none of the parent's lines copied) is a chain
  of its own whose zero is its parent's level at the fork point: the parent thread's last
  level whose line `ordinal` is below `forked_from_ordinal_exclusive` (else the fork's first
  record's thread total less its usage). A level equal to that zero (the parent's total,
  re-emitted by a fork on another model) is the parent's. A record before the fork's first
  `turn_context` (that fork's compaction call) ran on the zero level's model.
* **The model** of a call is the latest `turn_context`'s: a model change writes
  `thread_settings_applied` with the new model before the compaction call that still runs
  on the old one. Its **tier** is the latest `thread_settings_applied` `service_tier`
  (`default`/null: None).

* **Deltas of the cumulative total, per chain.** Each distinct cumulative total (a *level*:
  input, cached input, cache write, output, reasoning) of a chain is charged once: its
  increment over the level before it. A chain is the thread whose totals the line
  continues: the id of the latest `session_meta` line before it in its file (its
  `forked_from_id` when it has one; a paginated fork: its own id). A 0.130 forked rollout
  starts with its own `session_meta`, then copies the parent's lines (re-stamped to the fork
  instant) including the parent's `session_meta`, so the copied lines
  and the fork's own later lines (whose totals continue from the copied ones) are all keyed
  to the same chain as in the parent's file: **fork copies count once**, and the fork's own
  calls count as the increments over the fork point. Lines before any `session_meta` (real
  rollouts start with one; stripped copies and test fixtures may not) share one chain, keyed
  by their totals alone: the same cumulative totals in two such files are taken as copies.
* **Exact repeats count once** (consecutive identical `token_count` lines occur): a level
  already seen adds nothing. The same rollout under `sessions/` and `archived_sessions/`
  therefore adds nothing either.
* The level below is the previous level of the chain **in the same file** (a level's copies
  are preceded by the same level, so it does not matter which copy is read first). When
  copies disagree (a partial copy skipped a level), the nearest level at or below wins. A
  total below the previous one on some counter is a **restart** (a resumed thread whose
  client did not restore the total): charged whole. A line repeating an older level after a
  newer one is a stale copy: it is not a restart and does not become the level below.
* **Resumed threads** append to the same rollout with totals continuing: nothing special.
* A level's time is its **first appearance** (the smallest timestamp of any copy: a fork's
  copies are written later, at fork time); its attribution (model, session = the file's own
  thread, file, line) comes from the earliest copy; on a tie (a fork that kept the original
  times) the thread that started first (its `session_meta` time), then the smallest file /
  line (a total order, so feed order changes nothing). Without the thread rule a fork whose
  file sorts first (`archived_sessions/` < `sessions/`) took its parent's usage.
* Counters use ledger's shape, as `ledger run` normalises Codex (ledger.records.model):
  `input_tokens` = input - cached input - cache write (OpenAI counts both inside input),
  `cache_read_tokens` = cached input, `cache_write_tokens` (newer builds only),
  `output_tokens` (reasoning included), `reasoning_tokens`. A counter the client did not
  write stays None (unknown, not 0).
* **No cost**: rollouts carry none, so `cost_usd` is always None (unknown); the estimate from a
  price table is made elsewhere (per call, at its `service_tier`).
* **Tool calls** are the `response_item` lines whose payload is a call: `function_call` and
  `custom_tool_call` (counted under their `name`: `exec_command`, `apply_patch`,
  `mcp__server__tool`, ...), `local_shell_call` (`local_shell`), `web_search_call`
  (`web_search`), `tool_search_call` (`tool_search`), `image_generation_call`
  (`image_generation`). A call is counted once per chain: its key is its `call_id` (else its
  `id`), so a fork's copies of the parent's calls, exact repeats, and the same rollout under
  `sessions/` and `archived_sessions/` add nothing. A call with neither (a `web_search_call`)
  is keyed by its whole payload: a fork writes its copies at fork time, so the line's own
  timestamp cannot be part of the key; two identical such calls of one chain (the same search
  twice in one turn: the payload holds the turn id on current builds) count once. Like a
  level, a call belongs to the thread whose file holds its earliest copy (time, then the
  earliest started thread, then file and line: a fork that kept the original times is not
  the caller).
* **Tool results** are read only where the rollout says in a field whether the call failed
  (the output text, `Process exited with code 1` or `unsupported call: ...`, is not read):
  an `event_msg` `item_completed` whose item (`CommandExecution`, `FileChange`,
  `McpToolCall`, `DynamicToolCall`, `ImageGeneration`; its `id` is the call id) has a
  status `completed` (ok) or `failed` / `declined` (error), a command without a status
  by its `exit_code`; `patch_apply_end` (`success`), `exec_command_end` (`exit_code`),
  `mcp_tool_call_end` (`result` `Err`, or `Ok` with `isError`); a `function_call_output`
  whose output is an object with a boolean `success`, or the JSON text of the old `shell`
  tool (`{"output", "metadata": {"exit_code"}}`). An MCP result without `isError` whose
  content is an error envelope is a `semantic-error` (ledger.records.verdict). A call
  without any such result is **unknown**, never ok. Results are keyed like calls (per
  chain, by call id), so a fork's copies add nothing; a call with results that disagree
  keeps the worse (error, then semantic-error, then ok); a result whose call is not in the
  history is not counted.
* Bad input (not JSON, not an object, non-UTF-8, an unknown line type, a `token_count` whose
  total is not a usage object, a call without a name, a torn last line) is skipped and reported in `problems` with
  file, line number and reason; never an exception. Legacy pre-envelope rollouts (a bare
  `{id, timestamp}` line, then bare items) carry no usage and are read without complaint.

Incremental use: `state()` is a dict of plain JSON values; `CodexUsage(state)` continues from
it, and `feed(file, data, offset)` takes the bytes of `file` from `offset` (the value the
previous `feed` returned for it). Only complete lines are consumed: a torn tail is left for
the next pass. Memory is bounded by the number of distinct levels (about one per model call)
and of distinct tool calls, plus one small cursor and one session summary per file.

Open questions (not decided here): a fork whose copy holds no `session_meta` of the parent
(none seen in Codex's source; the ccusage fixtures strip them) is keyed by its own
`forked_from_id`, which is right for one level of forking only; a restart whose first total is
above the previous total on every counter cannot be told from a continuation.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Iterable, Iterator

import orjson

from ledger.records.timefmt import utc_text
from ledger.records.verdict import TOOL_STATUSES
from ledger.sources.codex_levels import (_L_FILE, _L_LINE, _L_MODEL, _L_ORD, _L_PREDS, _L_RESP, _L_SESSION,
                                         _L_START, _L_TIER, _L_TS, _R_CHAIN, _R_FILE, _R_LINE, _R_MODEL, _R_SESSION,
                                         _R_START, _R_TIER, _R_TS, _le, _level, _level_key, PagedFork, _str,
                                         level_deltas)
from ledger.sources.codex_results import Delta, Session
from ledger.sources.codex_tools import CALL_NAMES, NAMED_CALLS, _EVENT_RESULTS, _WORSE, _output_status, event_result
from ledger.sources.jsonlines import TORN, Problem, complete_end, json_objects

STATE_VERSION = 5  # 2: tool calls; 3: tool results, a level's thread start; 4: calls by response id, tiers; 5: a copy's restart read again (seed 2525)

PUBLIC_COUNTERS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
                   "reasoning_tokens")

# Envelope kinds Codex writes; anything else is reported. Legacy pre-envelope rollouts hold
# bare ResponseItems, whose kinds are known too (they carry no usage).
KNOWN_TYPES = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted",
                         # written by 0.169: a context snapshot (nothing to count), and one
                         # record per API call (its response id and usage: counted)
                         "world_state", "token_usage_record"})
LEGACY_ITEM_TYPES = frozenset({
    "message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
    "custom_tool_call_output", "local_shell_call", "web_search_call", "tool_search_call",
    "tool_search_output", "image_generation_call", "ghost_snapshot", "compaction", "other",
})
# the thread uuid ends a rollout's name; an archive generation adds `.genN` (`.genN.M`)
_UUID_TAIL = re.compile(
    r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})(?:\.gen\d+(?:\.\d+)?)?\.jsonl$")

# Tool call entry layout (its earliest copy): [time, session, file, line, tool name, the file's thread start]
_C_TS, _C_SESSION, _C_FILE, _C_LINE, _C_NAME, _C_START = range(6)

_utc = utc_text  # (ledger.records.timefmt: the one rule for a log line's timestamp)


def thread_of_path(file: str) -> str:
    """The thread a rollout path names (`rollout-<time>-<uuid>.jsonl`), else the path itself."""
    m = _UUID_TAIL.search(file.replace("\\", "/"))
    return m.group(1).lower() if m else file


def sharer() -> Any:
    """`share(key, part)`: one str object for each session id, file, model, thread start, tool
    name and tier in `part`, a dict of the state's top-level `key` (all of it, or some of its
    entries), the same object across the parts given: JSON gives every entry its own copy (a
    10,000-thread state held ~280 MB as parsed, most of it these repeats; issue 28's peak
    memory). Values are unchanged, so the state written back is the same bytes."""
    memo: dict[str, str] = {}
    one = memo.setdefault

    def entries(rows: Any, slots: tuple[int, ...]) -> None:
        for e in rows:
            n = len(e)
            for i in slots:
                if i < n and e[i].__class__ is str:
                    e[i] = one(e[i], e[i])

    def share(key: str, part: Any) -> None:
        if key == "chains":
            for lv in part.values():
                entries(lv.values(), (_L_MODEL, _L_SESSION, _L_FILE, _L_START, _L_TIER))
        elif key == "responses":
            entries(part.values(), (_R_MODEL, _R_SESSION, _R_FILE, _R_START, _R_TIER, _R_CHAIN))
        elif key == "calls":
            for calls in part.values():
                entries(calls.values(), (_C_SESSION, _C_FILE, _C_NAME, _C_START))
        elif key == "sessions":
            for v in part.values():
                v["files"] = [one(f, f) for f in v["files"]]

    return share


class _Cursor:
    """Where a file's reading is, and what its lines so far set; kept in the state as the list
    [offset, lines consumed, own thread, chain, previous level key, model, own thread's start
    (its session_meta's time), service tier]."""

    __slots__ = ("offset", "lines", "own", "chain", "prev", "model", "start", "tier")

    def __init__(self, offset: int = 0, lines: int = 0, own: str | None = None, chain: str = "",
                 prev: str | None = None, model: str | None = None, start: str | None = None,
                 tier: str | None = None) -> None:
        self.offset, self.lines, self.own, self.chain = offset, lines, own, chain
        self.prev, self.model, self.start, self.tier = prev, model, start, tier

    def to_state(self) -> list[Any]:
        return [self.offset, self.lines, self.own, self.chain, self.prev, self.model, self.start, self.tier]


class CodexUsage:
    """The reducer. Feed rollout files (any order, any split); read `deltas()`, `totals()`,
    `sessions()`; persist `state()`."""

    def __init__(self, state: dict[str, Any] | None = None, adopt: bool = False, shared: bool = False) -> None:
        """From `state()` (or empty). `adopt`: the caller hands `state` over (freshly parsed,
        never used again), so its lists and dicts become the reducer's own instead of being
        copied: a first index of a 10,000-thread history holds one copy, not two (issue 28).
        `shared`: `sharer()` already ran on each part of `state` as it was parsed."""
        s = state or {}
        if s and s.get("v") != STATE_VERSION:
            raise ValueError(f"unsupported codex usage state version {s.get('v')!r}")
        self._files: dict[str, _Cursor] = {k: _Cursor(*v) for k, v in s.get("files", {}).items()}
        self._forks: dict[str, PagedFork] = {k: PagedFork(*e) for k, e in s.get("forks", {}).items()}
        if adopt:
            self._chains: dict[str, dict[str, list[Any]]] = s.get("chains", {})
            self._responses: dict[str, list[Any]] = s.get("responses", {})
            self._sessions: dict[str, dict[str, Any]] = s.get("sessions", {})
            self._calls: dict[str, dict[str, list[Any]]] = s.get("calls", {})
            self._results: dict[str, dict[str, str]] = s.get("results", {})
        else:
            # chain -> level key -> entry (layout: codex_levels._L_*)
            self._chains = {c: {k: [*e[:_L_PREDS], list(e[_L_PREDS]), *e[_L_PREDS + 1:]] for k, e in lv.items()}
                            for c, lv in s.get("chains", {}).items()}
            # response id -> the call's earliest record (layout: codex_levels._R_*)
            self._responses = {k: list(e) for k, e in s.get("responses", {}).items()}
            # own thread id -> session summary fields (from the file's first session_meta)
            self._sessions = {k: {**v, "files": list(v["files"])} for k, v in s.get("sessions", {}).items()}
            # chain -> call key -> entry (layout above)
            self._calls = {c: {k: list(e) for k, e in calls.items()} for c, calls in s.get("calls", {}).items()}
            # chain -> call key -> its result's status ("ok", "error", "semantic-error")
            self._results = {c: dict(r) for c, r in s.get("results", {}).items()}
        # (paginated fork chain -> its link to its parent: _forks)
        if s and not (adopt and shared):
            self._share_strings()
        self.problem_count: int = s.get("problem_count", 0)
        self.problems: list[Problem] = []   # found by this object (this pass), not persisted
        self._ordinal = 0  # the ordinal of the line being read

    def _share_strings(self) -> None:
        """One str object for each session id, file, model, thread start, tool name and tier
        of a loaded state (see `sharer`)."""
        share = sharer()
        for key, d in (("chains", self._chains), ("responses", self._responses), ("calls", self._calls),
                       ("sessions", self._sessions)):
            share(key, d)

    # ---- persistence -----------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"v": STATE_VERSION, "files": {k: v.to_state() for k, v in self._files.items()},
                "chains": {c: {k: [*e[:_L_PREDS], list(e[_L_PREDS]), *e[_L_PREDS + 1:]] for k, e in lv.items()}
                           for c, lv in self._chains.items()},
                "responses": {k: list(e) for k, e in self._responses.items()},
                "forks": {k: e.to_state() for k, e in self._forks.items()},
                "sessions": {k: {**v, "files": list(v["files"])} for k, v in self._sessions.items()},
                "calls": {c: {k: list(e) for k, e in calls.items()} for c, calls in self._calls.items()},
                "results": {c: dict(r) for c, r in self._results.items()},
                "problem_count": self.problem_count}

    def state_view(self) -> dict[str, Any]:
        """What `state()` holds, without the copy: the reducer's own lists, to be written (the
        index stores a 10,000-thread state of ~75 MB; issue 28's peak memory), not kept."""
        return {"v": STATE_VERSION, "files": {k: v.to_state() for k, v in self._files.items()},
                "chains": self._chains, "responses": self._responses,
                "forks": {k: e.to_state() for k, e in self._forks.items()},
                "sessions": self._sessions, "calls": self._calls, "results": self._results,
                "problem_count": self.problem_count}

    def state_json(self) -> bytes:
        """`orjson.dumps(state())` without the copy (see `state_view`)."""
        return orjson.dumps(self.state_view())

    def offset(self, file: str) -> int:
        """Bytes of `file` consumed so far (where the next `feed` must start)."""
        f = self._files.get(file)
        return f.offset if f else 0

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
            # before any session_meta: the shared chain "" (see the module's rules)
            cur = self._files[file] = _Cursor()
        if offset != cur.offset:
            raise ValueError(f"{file}: feed at offset {offset}, but {cur.offset} bytes were consumed")
        end = complete_end(data)
        lineno = cur.lines + data.count(b"\n", 0, end)  # after the chunk
        for n, obj in json_objects(data, end, cur.lines, lambda n, why: self._problem(file, n, why)):
            self._line(obj, cur, file, n)
        if end < len(data):
            self._problem(file, lineno + 1, TORN)
        cur.offset, cur.lines = offset + end, lineno
        return offset + end

    def _line(self, obj: dict[str, Any], cur: _Cursor, file: str, lineno: int) -> None:
        kind = obj.get("type")
        payload = obj.get("payload")
        if kind not in KNOWN_TYPES:
            if kind in LEGACY_ITEM_TYPES or (kind is None and "id" in obj and lineno == 1):
                return  # a legacy (pre-envelope) rollout: no usage in it
            self._problem(file, lineno, f"unknown line type {str(kind)[:60]!r}")
            return
        if not isinstance(payload, dict):
            self._problem(file, lineno, f"{kind} line without a payload object")
            return
        ts = _utc(obj.get("timestamp"))
        o = obj.get("ordinal")
        self._ordinal = o if type(o) is int else lineno - 1
        if kind == "session_meta":
            self._session_meta(payload, ts, cur, file, lineno)
        elif kind == "turn_context":
            cur.model = _str(payload.get("model")) or cur.model
        elif kind == "token_usage_record":
            self._record(payload, ts, cur, file, lineno)
        elif kind == "event_msg":
            ptype = payload.get("type")
            if ptype == "token_count":
                self._token_count(payload, ts, cur, file, lineno)
            elif ptype == "thread_settings_applied":
                settings = payload.get("thread_settings")
                if isinstance(settings, dict) and "service_tier" in settings:
                    tier = _str(settings.get("service_tier"))
                    cur.tier = None if tier == "default" else tier
            elif ptype in _EVENT_RESULTS:
                result = event_result(ptype, payload)
                if result is not None:
                    self._result(*result, cur)
        elif kind == "response_item":
            self._call(payload, ts, cur, file, lineno)
        own = cur.own
        if own is not None and ts is not None:
            s = self._sessions[own]
            if s["ended"] is None or ts > s["ended"]:
                s["ended"] = ts

    def _session_meta(self, p: dict[str, Any], ts: str | None, cur: _Cursor, file: str, lineno: int) -> None:
        sid = _str(p.get("id"))
        if sid is None:
            self._problem(file, lineno, "session_meta without an id")
            return
        parent = _str(p.get("forked_from_id"))
        # a 0.169 fork (`history_mode: paginated`, `history_base`): it copies none of its parent's
        # lines; its totals go on from the parent's at the fork point: its own chain, whose zero
        # is the parent's level at the fork point (codex_levels.fork_bases)
        paged = parent is not None and cur.own is None and (
            p.get("history_mode") == "paginated" or isinstance(p.get("history_base"), dict)
            or "forked_from_ordinal_exclusive" in p)
        # the chain the following lines continue: a copied ancestor's meta overrides this
        chain = sid if paged else (parent or sid)
        if chain != cur.chain:
            cur.chain, cur.prev = chain, None  # the previous level was another chain's
        if cur.own is not None:
            return  # a copied parent meta (or a repeat): the file's own thread stays the first one
        if paged and sid not in self._forks:
            n = p.get("forked_from_ordinal_exclusive")
            hb = p.get("history_base") if isinstance(p.get("history_base"), dict) else {}
            n = n if type(n) is int else hb.get("end_ordinal_exclusive")
            self._forks[sid] = PagedFork(parent, n if type(n) is int else None, None)
        cur.own = sid
        cur.start = _utc(p.get("timestamp")) or ts
        git = p.get("git") if isinstance(p.get("git"), dict) else {}
        s = self._sessions.get(sid)
        if s is None:
            s = self._sessions[sid] = {
                "forked_from_id": parent, "cwd": _str(p.get("cwd")), "originator": _str(p.get("originator")),
                "source": _str(p.get("source")), "cli_version": _str(p.get("cli_version")),
                "git_branch": _str(git.get("branch")), "git_repository_url": _str(git.get("repository_url")),
                "started": None, "ended": None, "files": []}
        if file not in s["files"]:
            s["files"].append(file)
        # started: when the thread was created (a fork's copied lines keep older times)
        t = _utc(p.get("timestamp")) or ts
        if t is not None and (s["started"] is None or t < s["started"]):
            s["started"] = t

    def _token_count(self, p: dict[str, Any], ts: str | None, cur: _Cursor, file: str, lineno: int) -> None:
        info = p.get("info")
        if info is None:
            return  # the turn-start event: rate limits only
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        key = _level_key(total) if isinstance(total, dict) else None
        if key is None:
            self._problem(file, lineno, "token_count without a cumulative total_token_usage: not counted")
            return
        self._level(key, _str(info.get("model")) or cur.model, ts, cur, file, lineno, None)

    def _level(self, key: str, model: str | None, ts: str | None, cur: _Cursor, file: str, lineno: int,
               response_id: str | None) -> None:
        """A cumulative total seen (a token_count's, or a call record's thread total)."""
        session = cur.own or thread_of_path(file)
        levels = self._chains.setdefault(cur.chain, {})
        prev = cur.prev
        e = levels.get(key)
        start = cur.start
        if e is None:
            levels[key] = [ts, model, session, file, lineno, start, [prev or ""], response_id, cur.tier,
                           self._ordinal]
            cur.prev = key
            return
        if response_id is not None:
            e[_L_RESP] = response_id
        if key == prev:
            pass  # an exact repeat: nothing to charge
        elif prev is not None and prev not in e[_L_PREDS] and _le(_level(key), _level(prev)):
            return  # a stale copy of an older level: it is not the level below the next one
        # (a level below `prev` that another copy already had after `prev` is that copy's
        # restart, read again: it is the level below the next one here too)
        else:
            if (prev or "") not in e[_L_PREDS]:
                e[_L_PREDS].append(prev or "")
            cur.prev = key
        # the earliest copy; a tie (a fork that kept the original times): the thread that started
        # first (a path order would give the parent's usage to a fork under archived_sessions/)
        new_rank = (ts is None, ts or "", start is None, start or "", file, lineno)
        old_rank = (e[_L_TS] is None, e[_L_TS] or "", e[_L_START] is None, e[_L_START] or "", e[_L_FILE], e[_L_LINE])
        if new_rank < old_rank:
            e[_L_TS], e[_L_SESSION], e[_L_FILE], e[_L_LINE], e[_L_START] = ts, session, file, lineno, start
            e[_L_ORD] = self._ordinal
            if model is not None:
                e[_L_MODEL] = model
        elif e[_L_MODEL] is None:
            e[_L_MODEL] = model

    def _record(self, p: dict[str, Any], ts: str | None, cur: _Cursor, file: str, lineno: int) -> None:
        """A `token_usage_record` (0.169: one per API call): the call's own `usage`, keyed by its
        `response_id` (counted once wherever it is copied), and `thread_token_usage`, the
        cumulative total after it (a level, so the token_count repeating it adds nothing)."""
        rid = _str(p.get("response_id"))
        usage = p.get("usage")
        ukey = _level_key(usage) if isinstance(usage, dict) else None
        if rid is None or ukey is None:
            self._problem(file, lineno, "token_usage_record without a response_id or a usage: "
                                        "counted by the token_count totals")
            return
        thread = p.get("thread_token_usage")
        tkey = _level_key(thread) if isinstance(thread, dict) else None
        start = cur.start
        e = self._responses.get(rid)
        if e is None or (ts is None, ts or "", start is None, start or "", file, lineno) < (
                e[_R_TS] is None, e[_R_TS] or "", e[_R_START] is None, e[_R_START] or "", e[_R_FILE], e[_R_LINE]):
            self._responses[rid] = [ts, cur.model, cur.own or thread_of_path(file), file, lineno, start,
                                    ukey, cur.tier, cur.chain]
        fork = self._forks.get(cur.chain)
        if fork is not None and fork.base is None and tkey is not None:
            below = [None if t is None else t - (u or 0) for t, u in zip(_level(tkey), _level(ukey))]
            if all(v is None or v >= 0 for v in below):
                fork.base = ",".join("" if v is None else str(v) for v in below)
        if tkey is not None:
            self._level(tkey, cur.model, ts, cur, file, lineno, rid)

    def _call(self, p: dict[str, Any], ts: str | None, cur: _Cursor, file: str, lineno: int) -> None:
        kind = p.get("type")
        if type(kind) is not str:
            return  # (not a call: a list or object here is not even hashable)
        if kind in NAMED_CALLS:
            name = _str(p.get("name"))
            if name is None:
                self._problem(file, lineno, f"{kind} without a name: not counted")
                return
        else:
            name = CALL_NAMES.get(kind)
            if name is None:
                if kind in ("function_call_output", "custom_tool_call_output"):
                    self._result(p.get("call_id"), _output_status(p.get("output")), cur)
                return  # a message, reasoning, a call's output, ...
        cid = _str(p.get("call_id")) or _str(p.get("id"))
        # without an id: the payload (a fork's copy has the same payload, not the same timestamp)
        key = f"id:{cid}" if cid else "p:" + hashlib.sha256(orjson.dumps(p)).hexdigest()[:32]
        calls = self._calls.setdefault(cur.chain, {})
        e = calls.get(key)
        start = cur.start
        # the earliest copy; a fork that kept the original times ties: the thread that existed
        # first made the call (a path order would give it to a fork under archived_sessions/)
        if e is None or (ts is None, ts or "", start is None, start or "", file, lineno) < (
                e[_C_TS] is None, e[_C_TS] or "", e[_C_START] is None, e[_C_START] or "", e[_C_FILE], e[_C_LINE]):
            calls[key] = [ts, cur.own or thread_of_path(file), file, lineno, name, start]

    def _result(self, cid: Any, status: str | None, cur: _Cursor) -> None:
        if status is None or type(cid) is not str or not cid:
            return  # no result the log states, or no call to give it to
        res = self._results.setdefault(cur.chain, {})
        key = f"id:{cid}"
        old = res.get(key)
        if old is None or _WORSE[status] > _WORSE[old]:
            res[key] = status

    def deltas(self) -> Iterator[Delta]:
        return level_deltas(self._chains, self._responses, self._forks)

    def tools(self) -> dict[str, dict[str, int]]:
        """Tool calls per thread (the thread whose file holds a call's earliest copy) and name,
        each call counted once. Threads without a `session_meta` are keyed by their file's name."""
        out: dict[str, dict[str, int]] = {}
        for calls in self._calls.values():
            for e in calls.values():
                t = out.setdefault(e[_C_SESSION], {})
                t[e[_C_NAME]] = t.get(e[_C_NAME], 0) + 1
        return out

    def tool_results(self) -> dict[str, dict[str, list[int]]]:
        """Results per thread and tool name, `[ok, error, semantic-error]` (TOOL_STATUSES order),
        of the calls `tools()` counts; a call without a stated result is in neither (unknown)."""
        out: dict[str, dict[str, list[int]]] = {}
        for chain, res in self._results.items():
            calls = self._calls.get(chain, {})
            for key, status in res.items():
                e = calls.get(key)
                if e is None:
                    continue  # a result without its call (not in the history read)
                t = out.setdefault(e[_C_SESSION], {}).setdefault(e[_C_NAME], [0, 0, 0])
                t[TOOL_STATUSES.index(status)] += 1
        return out

    def sessions(self) -> list[Session]:
        tools = self.tools()
        results = self.tool_results()
        return [Session(sid, v["forked_from_id"], v["cwd"], v["originator"], v["source"], v["cli_version"],
                        v["git_branch"], v["git_repository_url"], v["started"], v["ended"], tuple(v["files"]),
                        tools.get(sid, {}), results.get(sid, {}))
                for sid, v in sorted(self._sessions.items())]

    def totals(self, by: Iterable[str] = ("day", "model")) -> dict[tuple, dict[str, Any]]:
        """Sums grouped by any of `day`, `model`, `session`: each counter (None when no delta
        reported it), `deltas` (charged levels, about one per model call) and `cost_usd`
        (always None: rollouts report no cost; it is estimated elsewhere)."""
        by = tuple(by)
        out: dict[tuple, dict[str, Any]] = {}
        for d in self.deltas():
            f = {"day": d.day, "model": d.model, "session": d.session_id}
            k = tuple(f[b] for b in by)
            r = out.get(k)
            if r is None:
                r = out[k] = {**{c: None for c in PUBLIC_COUNTERS}, "deltas": 0, "cost_usd": None}
            r["deltas"] += 1
            for c, v in d.counters.items():
                if v is not None:
                    r[c] = (r[c] or 0) + v
        return out
