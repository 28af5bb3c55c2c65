"""Exact per-response usage from Claude Code transcripts (`projects/<project>/<session>.jsonl`
and `<session>/subagents/**/*.jsonl`): a pure, incremental reducer.

Counting rules (DESIGN §4b, reference/stream-formats.md §B):

* **One API response is counted once across every file fed**, keyed by `message.id` plus the
  request key when the line has one (`requestRef` in 2.1.x, `requestId` in 2.0.x, neither on
  some versions). Claude Code writes one line per content block with a copy of the usage,
  streaming snapshots before the final line, and replays earlier responses into resumed,
  forked and compacted files: all of these are copies of one key.
* Its usage is the **max per counter** over its lines (a snapshot's `output_tokens` is low).
* Its time is the **first appearance** (the smallest timestamp of any copy; a compaction
  re-logs responses later), so the UTC day does not depend on the order files are fed in.
* A copied fork line (`requestSessionId` other than its `sessionId`: Claude Code 2.1.328's
  `--resume ID --fork-session` copies the parent's lines so) belongs to `requestSessionId`.
  Otherwise its attribution (session, agent) comes from the preferred copy: **non-sidechain
  first**, then the earliest, then the smallest session id / file / line (a total order, so
  the choice does not depend on feed order either).
* Counters use ledger's shape (ledger.records.model): `input_tokens` (uncached),
  `cache_read_tokens`, `cache_write_tokens` with `cache_write_5m_tokens` /
  `cache_write_1h_tokens` when the split accounts for every cache write, `output_tokens`,
  `reasoning_tokens` when reported. A counter no line reported stays None (unknown, not 0).
* Cost (basis `reported`), never estimated here:
  - 2.1.x `cost-state` lines hold the cumulative cost of a session (`totalCostUSD`, per model
    `modelUsage[m].costUSD` and its cumulative tokens; a resumed session's file holds both
    runs' cumulative states). A cost-state has no timestamp: its time is the latest
    timestamp before it in its file; each level counts once (copies add nothing). Each chain
    (the line's `sessionId`) is charged its increments, a fork's counted from its parent's
    level at the fork (its levels go on from the parent's total). An increment is split over
    the chain's responses of that model since the level below, in list-price proportions, so
    it is booked on their days; one no response explains is booked at the level's time. A
    model that has tokens but a 0 cost under `hasUnknownModelCost` has an unknown cost (None).
  - What a level's per-model tokens hold beyond the chain's responses (the `/compact` calls,
    which no assistant line shows) is one more response, at the latest compaction before it.
  - 2.0.x `costUSD` on assistant lines: the response's cost (max over its copies).
  - Anything else: no cost (None); estimating is done elsewhere.
* A line without `type` holding `message.id` + `message.usage` (role assistant or unsaid) is an
  assistant line (ccusage's test data has this shape); another untyped line with a `message`
  is a message with nothing to count; an untyped line without one is a problem.
* Bad input (not JSON, not an object, non-UTF-8, unknown line type, an assistant line with
  usage but no `message.id`, a torn last line) is skipped and reported in `problems` with
  file, line number and reason; never an exception.

Incremental use: `state()` is a dict of plain JSON values; `ClaudeUsage(state)` continues
from it, and `feed(file, data, offset)` takes the bytes of `file` from `offset` (the value the
previous `feed` returned for it). Only complete lines are consumed: a torn tail is left for
the next pass. Memory is bounded by the number of distinct responses (plus one small cursor
per file and the distinct cumulative cost levels per session).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from ledger.records.timefmt import utc_text
from ledger.sources.jsonlines import TORN, complete_end, json_objects

STATE_VERSION = 3  # (2: cost levels with their tokens, a fork's parent, compaction times; 3: each
# session's files)
SYNTHETIC_MODEL = "<synthetic>"  # locally made messages: no API call, no usage

# Counters kept per response, in the order stored in the state.
COUNTERS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
            "reasoning_tokens", "_eph_5m", "_eph_1h")
PUBLIC_COUNTERS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_5m_tokens",
                   "cache_write_1h_tokens", "output_tokens", "reasoning_tokens")
_N = len(COUNTERS)

# Line types Claude Code writes (2.0.x-2.1.328): skipped silently. Anything else is counted.
KNOWN_TYPES = frozenset({
    "user", "assistant", "system", "attachment", "progress", "summary", "custom-title", "ai-title",
    "tag", "agent_metadata", "queue-operation", "api-request", "api-request-resumed",
    "api-request-shape", "api-request-blob", "frame-link", "observer-ref", "continued-in",
    "resume-head-vouch", "file-history-snapshot", "file-history-delta", "attribution-snapshot",
    "relocated", "agent-name", "agent-color", "agent-setting", "mode", "permission-mode",
    "session-owner", "isolation-latch", "dev-mods", "atis-latch", "worktree-state", "bridge-session",
    "tools-used", "data-flow-records", "data-flow-incomplete", "derived-from", "pr-link",
    "history-suppression", "ended-by-model", "cost-state", "last-prompt", "content-replacement",
    "memory-mode", "artifact-comment-monitor", "artifact-autoreact-ledger", "fork-context-ref",
    "repl-mode",
})

# Response entry layout in the state (a list, to keep the cursor small).
# [counters x7, first_ts, model, rank_sidechain, rank_ts, session, agent, file, line, cost]
_TS, _MODEL, _SIDE, _RTS, _SESSION, _AGENT, _FILE, _LINE, _COST = range(_N, _N + 9)


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "reason": self.reason}


@dataclass(frozen=True)
class Response:
    """One API response, counted once."""

    message_id: str
    request_key: str | None
    model: str | None
    time: str | None            # first appearance, canonical UTC (None: no copy had a timestamp)
    session_id: str | None
    agent_id: str | None
    sidechain: bool             # True only when every copy was a sidechain copy
    counters: dict[str, int | None]
    cost_usd: float | None      # 2.0.x per-line costUSD (reported), else None
    file: str                   # where the preferred copy is
    line: int

    @property
    def day(self) -> str | None:
        return self.time[:10] if self.time else None


@dataclass(frozen=True)
class CostDelta:
    """Reported cost a session added (from its cumulative `cost-state` lines)."""

    session_id: str
    model: str | None           # None: only `totalCostUSD` was known
    time: str | None
    cost_usd: float | None      # None: the client said this model's cost is unknown

    @property
    def day(self) -> str | None:
        return self.time[:10] if self.time else None


@dataclass(frozen=True)
class SessionInfo:
    """A session as its lines describe it (subagent files' lines carry the parent's id)."""

    session_id: str
    started: str | None
    ended: str | None
    cwd: str | None
    git_branch: str | None
    version: str | None
    entrypoint: str | None      # "cli": interactive; "sdk-cli": `claude -p` / the SDK
    tools: dict[str, int]
    files: tuple[str, ...] = ()  # every file holding a line of it (its counted responses may be in others)


def _count(v: Any) -> int | None:
    if type(v) is int:
        return v if v >= 0 else None
    if type(v) is float and v.is_integer() and v >= 0:
        return int(v)
    return None


def _cost(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if math.isfinite(v) and v >= 0 else None


# Claude Code's own form (`2026-01-12T10:00:00.000Z`): its canonical UTC form is the same
# digits with microseconds, once the date is known valid (every line has one: the first
# report of a long history parses ~100,000)
_utc = utc_text  # (ledger.records.timefmt: the one rule for a log line's timestamp)


def _max(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a if a >= b else b


def _usage_counters(u: dict[str, Any]) -> list[int | None]:
    cc = u.get("cache_creation")
    cc = cc if isinstance(cc, dict) else {}
    details = u.get("output_tokens_details")
    thinking = details.get("thinking_tokens") if isinstance(details, dict) else None
    return [_count(u.get("input_tokens")), _count(u.get("cache_read_input_tokens")),
            _count(u.get("cache_creation_input_tokens")), _count(u.get("output_tokens")),
            _count(thinking), _count(cc.get("ephemeral_5m_input_tokens")),
            _count(cc.get("ephemeral_1h_input_tokens"))]


def session_of_path(file: str) -> tuple[str | None, str | None]:
    """(session id, agent id) implied by a transcript path: `<session>.jsonl` or
    `<session>/subagents/**/agent-<id>.jsonl`. Used when a line does not say."""
    parts = file.replace("\\", "/").split("/")
    name = parts[-1]
    stem = name[:-6] if name.endswith(".jsonl") else name
    if "subagents" in parts:
        i = len(parts) - 1 - parts[::-1].index("subagents")
        session = parts[i - 1] if i >= 1 else None
        agent = stem[6:] if stem.startswith("agent-") else stem
        return session, agent
    return stem or None, None


class ClaudeUsage:
    """The reducer. Feed lines of one or several sessions' files; read `responses()`,
    `cost_deltas()`, `totals()`; persist `state()`."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        if s and s.get("v") != STATE_VERSION:
            raise ValueError(f"unsupported claude usage state version {s.get('v')!r}")
        # file -> [offset, lines consumed, latest timestamp so far]
        self._files: dict[str, list[Any]] = {k: list(v) for k, v in s.get("files", {}).items()}
        # "<message id>\n<request key>" -> entry list (layout above)
        self._responses: dict[str, list[Any]] = {k: list(v) for k, v in s.get("responses", {}).items()}
        # chain (sessionId) -> {"m": {model: {level key: [time, tokens or None, file, line]}},
        #                       "t": {repr(level): time}, "u": [models with unknown cost],
        #                       "p": [sessions its copied lines name], "c": [compaction times]}
        self._chains: dict[str, dict[str, Any]] = {k: _copy_chain(v) for k, v in s.get("chains", {}).items()}
        # session id -> [started, ended, cwd, git branch, version, entrypoint, {tool: uses}]
        # (optional in the state: states written before sessions were kept still load)
        self._sessions: dict[str, list[Any]] = {
            k: [*v[:6], dict(v[6])] for k, v in s.get("sessions", {}).items()}
        # tool_use ids already counted (a content block is copied like its response)
        self._tool_ids: set[str] = set(s.get("tool_ids", ()))
        # session id -> the files holding a line of it (its `sessionId`, else the file's path
        # says): a file whose lines are all copies, or carry no usage, is still its evidence
        self._session_files: dict[str, set[str]] = {k: set(v) for k, v in s.get("session_files", {}).items()}
        self.problem_count: int = s.get("problem_count", 0)
        self.problems: list[Problem] = []   # found by this object (this pass), not persisted
        self._memo: tuple[list[Response], list[CostDelta]] | None = None

    # ---- persistence -----------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"v": STATE_VERSION, "files": {k: list(v) for k, v in self._files.items()},
                "responses": {k: list(v) for k, v in self._responses.items()},
                "chains": {k: _copy_chain(v) for k, v in self._chains.items()},
                "sessions": {k: [*v[:6], dict(v[6])] for k, v in self._sessions.items()},
                "tool_ids": sorted(self._tool_ids),
                "session_files": {k: sorted(v) for k, v in self._session_files.items()},
                "problem_count": self.problem_count}

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
        and is reported as a problem (it will be read whole once its newline arrives)."""
        cur = self._files.get(file)
        if cur is None:
            cur = self._files[file] = [0, 0, None]
        self._memo = None
        if offset != cur[0]:
            raise ValueError(f"{file}: feed at offset {offset}, but {cur[0]} bytes were consumed")
        path_session, path_agent = session_of_path(file)
        end = complete_end(data)
        latest = cur[2]
        lineno = cur[1] + data.count(b"\n", 0, end)  # after the chunk
        named: set[str] = set()  # the sessions this chunk's lines belong to
        for n, obj in json_objects(data, end, cur[1], lambda n, why: self._problem(file, n, why)):
            kind = obj.get("type")
            if kind is None and isinstance(obj.get("message"), dict):
                # an untyped message line: a response when it holds one, else nothing to count
                kind = "assistant" if _untyped_response(obj) else "user"
            ts = _utc(obj.get("timestamp"))
            if ts is not None and (latest is None or ts > latest):
                latest = ts
            sid = obj.get("sessionId")
            if type(sid) is str and sid:
                named.add(sid)
                if _copied_from(obj, sid) is None:
                    self._session_line(sid, obj, ts)
            elif path_session is not None:
                named.add(path_session)
            if kind == "assistant":
                self._assistant(obj, ts, file, n, path_session, path_agent)
            elif kind == "cost-state":
                self._cost_state(obj, latest, file, n, path_session)
            elif kind == "system" and obj.get("subtype") == "compact_boundary" and ts is not None:
                c = self._chain(sid if type(sid) is str and sid else path_session)
                if c is not None and ts not in c["c"]:
                    c["c"].append(ts)
            elif kind is None:
                self._problem(file, n, "a line without a type and without a message: not counted")
            elif kind not in KNOWN_TYPES:
                self._problem(file, n, f"unknown line type {str(kind)[:60]!r}")
        for sid in named:
            self._session_files.setdefault(sid, set()).add(file)
        if end < len(data):
            self._problem(file, lineno + 1, TORN)
        cur[0], cur[1], cur[2] = offset + end, lineno, latest
        return offset + end

    def _assistant(self, obj: dict[str, Any], ts: str | None, file: str, lineno: int,
                   path_session: str | None, path_agent: str | None) -> None:
        msg = obj.get("message")
        if not isinstance(msg, dict) or not isinstance(msg.get("usage"), dict):
            return  # an assistant line without usage carries nothing to count
        model = msg.get("model") if type(msg.get("model")) is str else None
        if model == SYNTHETIC_MODEL:
            return
        mid = msg.get("id")
        if type(mid) is not str or not mid:
            self._problem(file, lineno, "assistant usage without message.id: not counted")
            return
        req = obj.get("requestRef")
        if type(req) is not str or not req:
            req = obj.get("requestId")
            if type(req) is not str or not req:
                req = None
        key = mid + "\n" + (req if req is not None else "")
        counters = _usage_counters(msg["usage"])
        cost = _cost(obj.get("costUSD"))
        side = 1 if obj.get("isSidechain") is True else 0
        session = obj.get("sessionId") if type(obj.get("sessionId")) is str else path_session
        parent = _copied_from(obj, session)
        if parent is not None:
            # `--resume ID --fork-session` copies the parent's lines into the fork's file with
            # `requestSessionId: <parent>`: the response is the parent's (the fork gets only its
            # own); the fork's cost levels start from the parent's total
            c = self._chain(session)
            if c is not None and parent not in c["p"]:
                c["p"].append(parent)
            session = parent
        content = msg.get("content")
        if type(content) is list and session is not None:
            self._tools(session, content)
        agent = obj.get("agentId") if type(obj.get("agentId")) is str else path_agent
        e = self._responses.get(key)
        if e is None:
            self._responses[key] = [*counters, ts, model, side, ts, session, agent, file, lineno, cost]
            return
        for i in range(_N):
            e[i] = _max(e[i], counters[i])
        if ts is not None and (e[_TS] is None or ts < e[_TS]):
            e[_TS] = ts
        e[_COST] = _max(e[_COST], cost)
        # the preferred copy: non-sidechain, then earliest (None last), then session/file/line
        new_rank = (side, ts is None, ts or "", session or "", file, lineno)
        old_rank = (e[_SIDE], e[_RTS] is None, e[_RTS] or "", e[_SESSION] or "", e[_FILE], e[_LINE])
        if new_rank < old_rank:
            e[_SIDE], e[_RTS], e[_SESSION], e[_AGENT], e[_FILE], e[_LINE] = side, ts, session, agent, file, lineno
            if model is not None:
                e[_MODEL] = model
        elif e[_MODEL] is None:
            e[_MODEL] = model

    def _session_line(self, sid: str, obj: dict[str, Any], ts: str | None) -> None:
        """What the session's lines say about it: first/last time, cwd, branch, client."""
        m = self._sessions.get(sid)
        if m is None:
            m = self._sessions[sid] = [None, None, None, None, None, None, {}]
        if ts is not None:
            if m[0] is None or ts < m[0]:
                m[0] = ts
            if m[1] is None or ts > m[1]:
                m[1] = ts
        if m[2] is None and type(obj.get("cwd")) is str:
            m[2] = obj["cwd"]
        if m[3] is None and type(obj.get("gitBranch")) is str and obj["gitBranch"]:
            m[3] = obj["gitBranch"]
        if m[4] is None and type(obj.get("version")) is str:
            m[4] = obj["version"]
        if m[5] is None and type(obj.get("entrypoint")) is str:
            m[5] = obj["entrypoint"]

    def _tools(self, sid: str, content: list[Any]) -> None:
        """Tool uses by name, each `tool_use` block id counted once (blocks are copied into
        resumed and forked files like the responses that hold them)."""
        for block in content:
            if type(block) is dict and block.get("type") == "tool_use":
                tid, name = block.get("id"), block.get("name")
                if type(tid) is not str or type(name) is not str or tid in self._tool_ids:
                    continue
                self._tool_ids.add(tid)
                m = self._sessions.get(sid)
                if m is None:
                    m = self._sessions[sid] = [None, None, None, None, None, None, {}]
                m[6][name] = m[6].get(name, 0) + 1

    def _cost_state(self, obj: dict[str, Any], time: str | None, file: str, lineno: int,
                    path_session: str | None) -> None:
        sid = obj.get("sessionId") if type(obj.get("sessionId")) is str else path_session
        if sid is None:
            self._problem(file, lineno, "cost-state without sessionId")
            return
        chain = self._chain(sid)
        total = _cost(obj.get("totalCostUSD"))
        if total is not None:
            _observe(chain["t"], total, time)
        unknown = obj.get("hasUnknownModelCost") is True
        mu = obj.get("modelUsage")
        if isinstance(mu, dict):
            for model, u in mu.items():
                if not isinstance(u, dict):
                    continue
                c = _cost(u.get("costUSD"))
                if c is None:
                    continue
                if unknown and c == 0 and any(_count(u.get(k)) for k in (
                        "inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationInputTokens")):
                    if model not in chain["u"]:
                        chain["u"].append(model)
                _observe_level(chain["m"].setdefault(model, {}), c, _level_tokens(u), time, file, lineno)
        elif total is None:
            self._problem(file, lineno, "cost-state without totalCostUSD or modelUsage")

    # ---- results -----------------------------------------------------------------------
    def _chain(self, sid: str | None) -> dict[str, Any] | None:
        if sid is None:
            return None
        c = self._chains.get(sid)
        if c is None:
            c = self._chains[sid] = {"m": {}, "t": {}, "u": [], "p": [], "c": []}
        return c

    def responses(self) -> Iterator[Response]:
        """Every response: those the transcripts hold, then those only a `cost-state` shows."""
        return iter(self._results()[0])

    def _results(self) -> tuple[list[Response], list[CostDelta]]:
        """(responses, cost deltas), computed once per fed state (feed() forgets them)."""
        if self._memo is None:
            logged = list(self._logged())
            every = logged + list(self._unlogged(logged))
            self._memo = (every, self._deltas(every))
        return self._memo

    def _logged(self) -> Iterator[Response]:
        for key, e in self._responses.items():
            mid, _, req = key.partition("\n")
            write, m5, h1 = e[2], e[5], e[6]
            split_ok = write is not None and m5 is not None and h1 is not None and m5 + h1 == write
            counters = {
                "input_tokens": e[0], "cache_read_tokens": e[1], "cache_write_tokens": write,
                "cache_write_5m_tokens": m5 if split_ok else None,
                "cache_write_1h_tokens": h1 if split_ok else None,
                "output_tokens": e[3], "reasoning_tokens": e[4],
            }
            yield Response(mid, req or None, e[_MODEL], e[_TS], e[_SESSION], e[_AGENT], bool(e[_SIDE]),
                           counters, e[_COST], e[_FILE], e[_LINE])

    def sessions(self) -> dict[str, SessionInfo]:
        """What each session's own lines said about it (by session id). A fork's file starts
        with copies of its parent's lines (their old timestamps; only the assistant copies are
        marked): a fork starts at its first own response, when it has one."""
        out = {sid: SessionInfo(sid, *m[:6], dict(m[6]), tuple(sorted(self._session_files.get(sid, ()))))
               for sid, m in self._sessions.items()}
        forks = {sid for sid, c in self._chains.items() if c["p"] and sid in out}
        if forks:
            first: dict[str, str] = {}
            for r in self.responses():
                if r.session_id in forks and r.time is not None and (
                        r.session_id not in first or r.time < first[r.session_id]):
                    first[r.session_id] = r.time
            for sid, t in first.items():
                info = out[sid]
                if info.started is None or info.started < t:
                    out[sid] = SessionInfo(sid, t, info.ended, info.cwd, info.git_branch, info.version,
                                           info.entrypoint, info.tools, info.files)
        return out

    # ---- cumulative cost-state levels ----------------------------------------------------
    def _levels(self, sid: str, model: str) -> list[tuple[float, str | None, list[int | None] | None, str, int]]:
        """A chain's levels of one model, ascending: (cost, time reached, tokens, file, line); the
        time is the earliest observation of that level or any higher one."""
        lv = self._chains[sid]["m"].get(model, {})
        pts = sorted(((float(k.partition("|")[0]), *v) for k, v in lv.items()),
                     key=lambda p: (p[0], sum(x or 0 for x in p[2] or ())))
        out: list[Any] = []
        best: str | None = None
        for cost, t, tok, file, line in reversed(pts):
            if t is not None and (best is None or t < best):
                best = t
            out.append((cost, best, tok, file, line))
        out.reverse()
        return out

    def _base(self, sid: str) -> dict[str, tuple[float, list[int | None] | None]]:
        """Where a fork's cumulative levels start, per model: its parent's level (cost, tokens)
        at the fork's first `cost-state` (the highest parent level observed by then). A session
        that is no fork, or whose parent's lines were not fed, starts at 0."""
        chain = self._chains[sid]
        parent = self._parent(sid)
        if parent is None:
            return {}
        times = [v[0] for lv in chain["m"].values() for v in lv.values() if v[0] is not None]
        if not times:
            return {}
        at = min(times)
        out: dict[str, tuple[float, list[int | None] | None]] = {}
        for model in self._chains[parent]["m"]:
            below = [(c, tok) for c, t, tok, _, _ in self._levels(parent, model) if t is not None and t <= at]
            if below:
                out[model] = below[-1]
        return out

    def _parent(self, sid: str) -> str | None:
        """The session a fork was forked from. Its file's copies name the session each line was
        first written in (a fork of a fork copies its grandparent's lines with the grandparent's
        id, capture `fork_chain`): the parent is the deepest of them (the one forked from the
        others)."""
        cands = [p for p in self._chains[sid]["p"] if p != sid and p in self._chains]
        if not cands:
            return None

        def depth(x: str, seen: frozenset[str]) -> int:
            ps = [p for p in self._chains[x]["p"] if p in self._chains and p not in seen]
            return 1 + max((depth(p, seen | {p}) for p in ps), default=0)

        return max(cands, key=lambda x: (depth(x, frozenset({sid, x})), cands.index(x)))

    def _unlogged(self, logged: list[Response]) -> Iterator[Response]:
        """Usage that only a `cost-state` shows: what a level's per-model cumulative tokens
        (`modelUsage`, a fork's counted from its parent's level) hold beyond the chain's own
        responses up to that level (the `/compact` calls, which no assistant line shows). Each
        such excess is one response, at the chain's latest compaction before the level (else
        the level's time)."""
        own: dict[tuple[str | None, str | None], list[Response]] = {}
        for r in logged:
            own.setdefault((r.session_id, r.model), []).append(r)
        for sid in sorted(self._chains):
            chain = self._chains[sid]
            base = self._base(sid)
            for model in sorted(chain["m"]):
                if model in chain["u"]:
                    continue  # (a model whose cost the client does not know: its tokens are its own)
                bt = base.get(model, (0.0, None))[1] or [0] * len(LEVEL_TOKENS)
                rs = sorted((r for r in own.get((sid, model), []) if r.time is not None),
                            key=lambda r: r.time)  # type: ignore[arg-type, return-value]
                seen: list[int | None] = [0] * len(LEVEL_TOKENS)  # the responses' sums up to the level
                j = 0
                done = [0] * len(LEVEL_TOKENS)
                prev_t: str | None = None
                for k, (_, t, tok, file, line) in enumerate(self._levels(sid, model)):
                    if tok is None or t is None:
                        continue
                    while j < len(rs) and rs[j].time <= t:  # type: ignore[operator]
                        c = rs[j].counters
                        for i, name in enumerate(LEVEL_TOKENS):
                            v, x = c[name], seen[i]
                            seen[i] = None if v is None or x is None else x + v
                        j += 1
                    extra: list[int | None] = []
                    for i in range(len(LEVEL_TOKENS)):
                        x, b, sn = tok[i], bt[i] if i < len(bt) else 0, seen[i]
                        extra.append(None if x is None or b is None or sn is None else max(0, x - b - sn - done[i]))
                    if any(extra[:4]):
                        for i, v in enumerate(extra):
                            if v is not None:
                                done[i] += v
                        w, m5, h1 = extra[2], extra[4], extra[5]
                        split = w is not None and m5 is not None and h1 is not None and m5 + h1 == w
                        counters = {"input_tokens": extra[0], "cache_read_tokens": extra[1], "cache_write_tokens": w,
                                    "cache_write_5m_tokens": m5 if split else None,
                                    "cache_write_1h_tokens": h1 if split else None,
                                    "output_tokens": extra[3], "reasoning_tokens": None}
                        when = max((c for c in chain["c"] if c <= t and (prev_t is None or c > prev_t)), default=t)
                        yield Response(f"cost-state:{sid}:{model}:{k}", None, model, when, sid, None, False,
                                       counters, None, file, line)
                    prev_t = t

    def cost_deltas(self) -> list[CostDelta]:
        return list(self._results()[1])

    def _deltas(self, responses: list[Response]) -> list[CostDelta]:
        """What each chain (session) added: its levels' increments (a fork's from its parent's
        level), each split over the chain's responses of that model since the level below, in
        proportion to their list-price weight (`_weight`), so a level is charged on the days its
        responses happened; an increment no response explains is charged at the level's time."""
        out: list[CostDelta] = []
        own: dict[tuple[str | None, str | None], list[Response]] = {}
        for r in responses:
            own.setdefault((r.session_id, r.model), []).append(r)
        for rs in own.values():
            rs.sort(key=lambda r: (r.time is None, r.time or ""))
        for sid, chain in sorted(self._chains.items()):
            base = self._base(sid)
            if chain["m"]:
                for model in sorted(chain["m"]):
                    unknown = model in chain["u"]
                    prev: float | None = base[model][0] if model in base else None
                    prev_t: str | None = None
                    rs = [r for r in own.get((sid, model), []) if r.time is not None]
                    times = [r.time for r in rs]
                    for v, t, _, _, _ in self._levels(sid, model):
                        if prev is None or v > prev:
                            # the first level is charged even at 0.0: a measured zero is not unknown
                            d = v - (prev or 0.0)
                            covered = rs[0 if prev_t is None else bisect_right(times, prev_t):
                                         len(rs) if t is None else bisect_right(times, t)]
                            out.extend(_split(sid, model, t, d, covered, unknown))
                            prev = v
                        if t is not None:
                            prev_t = t
            else:
                parent = self._parent(sid)
                pb = self._chains[parent]["t"] if parent is not None else {}
                start = None
                if pb and chain["t"]:
                    at = min((t for t in chain["t"].values() if t is not None), default=None)
                    below = [(t, d) for t, d in _increments(pb) if at is not None and t is not None and t <= at]
                    start = sum(d for _, d in below) if below else None
                for t, d in _increments(chain["t"], start):
                    out.append(CostDelta(sid, None, t, d))
        return out

    def totals(self, by: Iterable[str] = ("day", "model")) -> dict[tuple, dict[str, Any]]:
        """Sums grouped by any of `day`, `model`, `session`: each counter (None when no
        response reported it), `responses`, and `cost_usd` (reported: cost-state deltas plus
        2.0.x per-response costs; None when nothing in the group reported a cost)."""
        by = tuple(by)
        out: dict[tuple, dict[str, Any]] = {}

        def row(k: tuple) -> dict[str, Any]:
            r = out.get(k)
            if r is None:
                r = out[k] = {c: None for c in PUBLIC_COUNTERS}
                r["responses"] = 0
                r["cost_usd"] = None
            return r

        def key(day: str | None, model: str | None, session: str | None) -> tuple:
            f = {"day": day, "model": model, "session": session}
            return tuple(f[b] for b in by)

        for resp in self.responses():
            r = row(key(resp.day, resp.model, resp.session_id))
            r["responses"] += 1
            for c, v in resp.counters.items():
                if v is not None:
                    r[c] = (r[c] or 0) + v
            if resp.cost_usd is not None:
                r["cost_usd"] = (r["cost_usd"] or 0.0) + resp.cost_usd
        for d in self.cost_deltas():
            if d.cost_usd is not None:
                r = row(key(d.day, d.model, d.session_id))
                r["cost_usd"] = (r["cost_usd"] or 0.0) + d.cost_usd
        return out


def _observe(levels: dict[str, Any], value: float, time: str | None) -> None:
    k = repr(value)  # repr round-trips a float exactly, and is a JSON key
    old = levels.get(k, False)
    if old is False or (time is not None and (old is None or time < old)):
        levels[k] = time


def _increments(levels: dict[str, Any], start: float | None = None) -> list[tuple[str | None, float]]:
    """Each cumulative level's increment over the level below, charged at the earliest time any
    observation reached it (so copies and feed order change nothing)."""
    pts = sorted(((float(k), t) for k, t in levels.items()), key=lambda p: -p[0])
    reached: list[tuple[float, str | None]] = []
    best: str | None = None
    for v, t in pts:
        if t is not None and (best is None or t < best):
            best = t
        reached.append((v, best))
    reached.reverse()
    out: list[tuple[str | None, float]] = []
    prev: float | None = start
    for v, t in reached:
        if prev is None or v > prev:
            # the first level is charged even at 0.0: a measured zero is not unknown
            out.append((t, v - (prev or 0.0)))
        prev = v
    return out


# modelUsage's cumulative counters, in the order kept per level (the last two: the 5m/1h split)
LEVEL_TOKENS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
                "cache_write_5m_tokens", "cache_write_1h_tokens")
_MODEL_USAGE = ("inputTokens", "cacheReadInputTokens", "cacheCreationInputTokens", "outputTokens",
                "cacheCreationEphemeral5mInputTokens", "cacheCreationEphemeral1hInputTokens")
# Anthropic's list prices per token type relative to input (every Claude model: input 1, output 5,
# cache read 0.1, cache write 5m 1.25, 1h 2), times 20 to stay whole: a level's increment is split
# over its responses in these proportions (exact when the client prices at list, as it says)
_WEIGHTS20 = {"input_tokens": 20, "output_tokens": 100, "cache_read_tokens": 2,
              "cache_write_5m_tokens": 25, "cache_write_1h_tokens": 40}


def _untyped_response(obj: dict[str, Any]) -> bool:
    """A line without `type` that holds a response (`message.id` and `message.usage`, the role
    assistant or unsaid): counted as an assistant line (the shape of ccusage's test data; a
    log of such lines would otherwise count nothing)."""
    m = obj.get("message")
    return (isinstance(m, dict) and type(m.get("id")) is str and isinstance(m.get("usage"), dict)
            and m.get("role", "assistant") == "assistant")


def _copied_from(obj: dict[str, Any], session: str | None) -> str | None:
    """The session a copied line belongs to (`requestSessionId` other than its `sessionId`)."""
    p = obj.get("requestSessionId")
    return p if type(p) is str and p and p != session else None


def _copy_chain(v: dict[str, Any]) -> dict[str, Any]:
    return {"m": {m: {k: list(x) for k, x in lv.items()} for m, lv in v["m"].items()}, "t": dict(v["t"]),
            "u": list(v["u"]), "p": list(v.get("p") or ()), "c": list(v.get("c", ()))}


def _level_tokens(u: dict[str, Any]) -> list[int | None] | None:
    tok = [_count(u.get(k)) for k in _MODEL_USAGE]
    return tok if any(x is not None for x in tok[:4]) else None


def _observe_level(levels: dict[str, Any], cost: float, tokens: list[int | None] | None, time: str | None,
                   file: str, line: int) -> None:
    k = repr(cost) if tokens is None else repr(cost) + "|" + ",".join("-" if x is None else str(x) for x in tokens)
    old = levels.get(k)
    if old is None:
        levels[k] = [time, tokens, file, line]
    elif time is not None and (old[0] is None or time < old[0]):
        old[0] = time


def _weight(r: Response) -> int:
    c = r.counters
    w = 0
    for k in ("input_tokens", "output_tokens", "cache_read_tokens"):
        w += (c[k] or 0) * _WEIGHTS20[k]
    if c["cache_write_5m_tokens"] is not None and c["cache_write_1h_tokens"] is not None:
        w += c["cache_write_5m_tokens"] * 25 + c["cache_write_1h_tokens"] * 40
    else:
        w += (c["cache_write_tokens"] or 0) * 25
    return w


def _split(sid: str, model: str, t: str | None, d: float, covered: list[Response], unknown: bool) -> list[CostDelta]:
    if unknown:
        return [CostDelta(sid, model, t, None)]
    weights = [_weight(r) for r in covered]
    total = sum(weights)
    if not covered or total <= 0:
        return [CostDelta(sid, model, t, d)]
    out = [CostDelta(sid, model, r.time, d * w / total) for r, w in zip(covered, weights)]
    # (the shares add up to the increment exactly: the last takes what rounding left)
    out[-1] = CostDelta(sid, model, covered[-1].time, d - sum(x.cost_usd or 0.0 for x in out[:-1]))
    return out
