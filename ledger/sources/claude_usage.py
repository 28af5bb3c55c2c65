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

from typing import Any, Iterable, Iterator

from ledger.records.timefmt import utc_text
from ledger.sources.claude_costlevels import (_copy_chain, _level_tokens, _observe, _observe_level, chain_deltas,
                                              new_chain, unlogged)
from ledger.sources.claude_lines import (KNOWN_TYPES, SYNTHETIC_MODEL, _copied_from, _cost, _max,
                                         _untyped_response, _usage_counters, session_of_path)
from ledger.sources.claude_results import CostDelta, Response, SessionInfo
from ledger.sources.jsonlines import TORN, Problem, _count, complete_end, json_objects

STATE_VERSION = 3  # (2: cost levels with their tokens, a fork's parent, compaction times; 3: each
# session's files)

# Counters kept per response, in the order stored in the state.
COUNTERS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
            "reasoning_tokens", "_eph_5m", "_eph_1h")
PUBLIC_COUNTERS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_5m_tokens",
                   "cache_write_1h_tokens", "output_tokens", "reasoning_tokens")
_N = len(COUNTERS)

# Response entry layout in the state (a list, to keep the cursor small).
# [counters x7, first_ts, model, rank_sidechain, rank_ts, session, agent, file, line, cost]
_TS, _MODEL, _SIDE, _RTS, _SESSION, _AGENT, _FILE, _LINE, _COST = range(_N, _N + 9)

# Claude Code's own form (`2026-01-12T10:00:00.000Z`): its canonical UTC form is the same
# digits with microseconds, once the date is known valid (every line has one: the first
# report of a long history parses ~100,000)
_utc = utc_text  # (ledger.records.timefmt: the one rule for a log line's timestamp)


class _FileCursor:
    """How far a file was read; kept in the state as the list [offset, lines consumed, latest
    timestamp so far]."""

    __slots__ = ("offset", "lines", "latest")

    def __init__(self, offset: int = 0, lines: int = 0, latest: str | None = None) -> None:
        self.offset, self.lines, self.latest = offset, lines, latest

    def to_state(self) -> list[Any]:
        return [self.offset, self.lines, self.latest]


class _SessionLines:
    """What a session's own lines said so far; kept in the state as the list
    [started, ended, cwd, git branch, version, entrypoint, {tool: uses}]."""

    __slots__ = ("started", "ended", "cwd", "git_branch", "version", "entrypoint", "tools")

    def __init__(self, started: str | None = None, ended: str | None = None, cwd: str | None = None,
                 git_branch: str | None = None, version: str | None = None, entrypoint: str | None = None,
                 tools: dict[str, int] | None = None) -> None:
        self.started, self.ended, self.cwd, self.git_branch = started, ended, cwd, git_branch
        self.version, self.entrypoint = version, entrypoint
        self.tools: dict[str, int] = {} if tools is None else dict(tools)

    @classmethod
    def from_state(cls, v: list[Any]) -> _SessionLines:
        return cls(*v[:6], v[6])

    def to_state(self) -> list[Any]:
        return [self.started, self.ended, self.cwd, self.git_branch, self.version, self.entrypoint, dict(self.tools)]

    def info(self, sid: str, files: tuple[str, ...]) -> SessionInfo:
        return SessionInfo(sid, self.started, self.ended, self.cwd, self.git_branch, self.version, self.entrypoint,
                           dict(self.tools), files)


class ClaudeUsage:
    """The reducer. Feed lines of one or several sessions' files; read `responses()`,
    `cost_deltas()`, `totals()`; persist `state()`."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        if s and s.get("v") != STATE_VERSION:
            raise ValueError(f"unsupported claude usage state version {s.get('v')!r}")
        self._files: dict[str, _FileCursor] = {k: _FileCursor(*v) for k, v in s.get("files", {}).items()}
        # "<message id>\n<request key>" -> entry list (layout above)
        self._responses: dict[str, list[Any]] = {k: list(v) for k, v in s.get("responses", {}).items()}
        # chain (sessionId) -> {"m": {model: {level key: [time, tokens or None, file, line]}},
        #                       "t": {repr(level): time}, "u": [models with unknown cost],
        #                       "p": [sessions its copied lines name], "c": [compaction times]}
        self._chains: dict[str, dict[str, Any]] = {k: _copy_chain(v) for k, v in s.get("chains", {}).items()}
        # session id -> what its lines said (optional in the state: states written before
        # sessions were kept still load)
        self._sessions: dict[str, _SessionLines] = {
            k: _SessionLines.from_state(v) for k, v in s.get("sessions", {}).items()}
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
        return {"v": STATE_VERSION, "files": {k: v.to_state() for k, v in self._files.items()},
                "responses": {k: list(v) for k, v in self._responses.items()},
                "chains": {k: _copy_chain(v) for k, v in self._chains.items()},
                "sessions": {k: v.to_state() for k, v in self._sessions.items()},
                "tool_ids": sorted(self._tool_ids),
                "session_files": {k: sorted(v) for k, v in self._session_files.items()},
                "problem_count": self.problem_count}

    def state_view(self) -> dict[str, Any]:
        """`state()`, to be written (every reducer has one; Codex's holds its own lists, not a copy)."""
        return self.state()

    def state_json(self) -> bytes:
        """`state()` as the index stores it."""
        import orjson

        return orjson.dumps(self.state())

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
        and is reported as a problem (it will be read whole once its newline arrives)."""
        cur = self._files.get(file)
        if cur is None:
            cur = self._files[file] = _FileCursor()
        self._memo = None
        if offset != cur.offset:
            raise ValueError(f"{file}: feed at offset {offset}, but {cur.offset} bytes were consumed")
        path_session, path_agent = session_of_path(file)
        end = complete_end(data)
        latest = cur.latest
        lineno = cur.lines + data.count(b"\n", 0, end)  # after the chunk
        named: set[str] = set()  # the sessions this chunk's lines belong to
        for n, obj in json_objects(data, end, cur.lines, lambda n, why: self._problem(file, n, why)):
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
        cur.offset, cur.lines, cur.latest = offset + end, lineno, latest
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
            m = self._sessions[sid] = _SessionLines()
        if ts is not None:
            if m.started is None or ts < m.started:
                m.started = ts
            if m.ended is None or ts > m.ended:
                m.ended = ts
        if m.cwd is None and type(obj.get("cwd")) is str:
            m.cwd = obj["cwd"]
        if m.git_branch is None and type(obj.get("gitBranch")) is str and obj["gitBranch"]:
            m.git_branch = obj["gitBranch"]
        if m.version is None and type(obj.get("version")) is str:
            m.version = obj["version"]
        if m.entrypoint is None and type(obj.get("entrypoint")) is str:
            m.entrypoint = obj["entrypoint"]

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
                    m = self._sessions[sid] = _SessionLines()
                m.tools[name] = m.tools.get(name, 0) + 1

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
            c = self._chains[sid] = new_chain()
        return c

    def responses(self) -> Iterator[Response]:
        """Every response: those the transcripts hold, then those only a `cost-state` shows."""
        return iter(self._results()[0])

    def _results(self) -> tuple[list[Response], list[CostDelta]]:
        """(responses, cost deltas), computed once per fed state (feed() forgets them)."""
        if self._memo is None:
            logged = list(self._logged())
            every = logged + list(unlogged(self._chains, logged))
            self._memo = (every, chain_deltas(self._chains, every))
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
        out = {sid: m.info(sid, tuple(sorted(self._session_files.get(sid, ())))) for sid, m in self._sessions.items()}
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

    def cost_deltas(self) -> list[CostDelta]:
        return list(self._results()[1])

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
