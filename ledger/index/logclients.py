"""What each client's log reducer gives the index: its sessions, each with its usage streams
(one per model and 15-minute slot), tools and surface (ledger.index.logsource projects them
into rows). The counting is the reducers' own (ledger.sources.claude_usage, codex_usage,
gemini_usage); a reducer is imported only when a pass has something to read.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from ledger.index.fresh import LOG_STATE_V
from ledger.index.reportshape import SLOT_SECONDS
from ledger.records.timefmt import parse_rfc3339

COUNTERS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_5m_tokens",
            "cache_write_1h_tokens", "output_tokens", "reasoning_tokens")


# ---------------------------------------------------------------- what a session becomes

@dataclass
class Stream:
    model: str | None
    slot: int
    n: int = 0
    counters: dict[str, int | None] = field(default_factory=lambda: dict.fromkeys(COUNTERS))
    priced: list[dict[str, int | None]] = field(default_factory=list)  # per response, to estimate
    tiers: list[str | None] = field(default_factory=list)  # each priced response's service tier
    cost: float | None = None
    costed: int = 0  # responses that carried their own cost (2.0.x)
    receipt: bool = False

    def add(self, counters: dict[str, int | None], tier: str | None = None) -> None:
        self.n += 1
        for k, v in counters.items():
            if v is not None and k in self.counters:
                self.counters[k] = (self.counters[k] or 0) + v
        self.priced.append(counters)
        self.tiers.append(tier)


@dataclass
class Session:
    sid: str
    started: str | None = None
    ended: str | None = None
    cwd: str | None = None
    repo: str | None = None
    branch: str | None = None
    surface: str | None = None
    parent: str | None = None
    tools: dict[str, int] = field(default_factory=dict)
    tool_results: dict[str, list[int]] = field(default_factory=dict)  # name -> [ok, error, semantic-error]
    streams: dict[tuple[str, int], Stream] = field(default_factory=dict)
    files: set[str] = field(default_factory=set)
    damaged: int = 0  # its archive files that could not be read whole (each an evidence gap)

    def stream(self, model: str | None, slot: int) -> Stream:
        key = (model or "", slot)
        st = self.streams.get(key)
        if st is None:
            st = self.streams[key] = Stream(model, slot)
        return st

    def at(self, model: str | None, time: str | None) -> Stream:
        """The stream of `model` in the slot of `time` (the session's start's when it has none)."""
        return self.stream(model, _slot(time, _slot(self.started, 0)))

_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def row_id(harness: str, session_id: str) -> str:
    """The row id of a session: `<harness>-<session id>` (ids are UUIDs), or, for an id that
    could not be pasted into `ledger show` (control characters, markup, spaces, huge), a
    stable hash of it (the id itself stays verbatim in provider_session_id)."""
    if _SAFE_ID.fullmatch(session_id):
        return f"{harness}-{session_id}"
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{harness}-x{digest}"


def _epoch(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(parse_rfc3339(text).timestamp())
    except (ValueError, OverflowError):
        return None


def _slot(text: str | None, fallback: int) -> int:
    e = _epoch(text)
    return fallback if e is None else e // SLOT_SECONDS


# ---------------------------------------------------------------- the clients

class _Client:
    """A client's reducer as the index uses it: `label` names it in a progress line, `harness`
    in its rows; `sessions(usage)` gives what the reducer `usage` counted, by session id."""

    label = harness = provider = ""

    @classmethod
    def reducer(cls, state: dict[str, Any] | None) -> Any:
        from ledger.sources.prefold import reducer

        return reducer(cls.harness, state, adopt=True)  # (the log source parsed it for the reducer alone)


def _session_of(out: dict[str, Session], sid: str) -> Session:
    s = out.get(sid)
    if s is None:
        s = out[sid] = Session(sid)
    return s


class _Claude(_Client):
    label = "Claude Code"  # (how a progress line names it)
    harness = "claude"
    provider = "anthropic"

    @staticmethod
    def sessions(usage: Any) -> dict[str, Session]:
        out: dict[str, Session] = {}
        for sid, info in usage.sessions().items():
            ep = info.entrypoint
            surface = None if ep is None else ("headless" if ep.startswith("sdk") else "interactive")
            out[sid] = s = Session(sid, info.started, info.ended, info.cwd, None, info.git_branch, surface,
                                    tools=dict(info.tools))
            s.files.update(info.files)  # (every file holding its lines: a damaged one is its gap)

        def session(sid: str | None) -> Session:
            return _session_of(out, sid or "unknown")

        # a chain with cost-state lines: its models' costs are the client's (per model, or
        # only the session total: then on a model-less stream), the tokens' own cost 0
        chains: dict[str, tuple[set[str | None], set[str]]] = {}
        deltas = usage.cost_deltas()
        for d in deltas:
            models, unknown = chains.setdefault(d.session_id, (set(), set()))
            models.add(d.model)
            if d.cost_usd is None and d.model is not None:
                unknown.add(d.model)
        for r in usage.responses():
            s = session(r.session_id)
            s.files.add(r.file)
            st = s.at(r.model, r.time)
            st.add(r.counters)
            if r.cost_usd is not None:  # 2.0.x: the response's own cost
                st.cost = (st.cost or 0.0) + r.cost_usd
                st.costed += 1
        for d in deltas:
            if d.cost_usd is None:
                continue
            s = session(d.session_id)
            st = s.at(d.model, d.time)
            st.cost = (st.cost or 0.0) + d.cost_usd
        for s in out.values():
            models, unknown = chains.get(s.sid, (set(), set()))
            for st in s.streams.values():
                if (st.model in models or None in models) and st.model not in unknown:
                    st.receipt = True  # the chain's deltas are this model's cost (0 in this slot if none)
                    st.cost = st.cost or 0.0
                else:
                    st.receipt = st.costed == st.n  # 2.0.x: every response said what it cost
        return out


class _Codex(_Client):
    label = "Codex"  # (how a progress line names it)
    harness = "codex"
    provider = "openai"

    @staticmethod
    def sessions(usage: Any) -> dict[str, Session]:
        out: dict[str, Session] = {}
        for info in usage.sessions():
            headless = info.originator == "codex_exec" or info.source == "exec"
            interactive = info.originator == "codex_cli_rs" or info.source == "cli"
            surface = "headless" if headless else ("interactive" if interactive else None)
            s = out[info.session_id] = Session(info.session_id, info.started, info.ended, info.cwd,
                                                info.git_repository_url, info.git_branch, surface,
                                                parent=info.forked_from_id, tools=dict(info.tools),
                                                tool_results={k: list(v) for k, v in info.tool_results.items()})
            s.files.update(info.files)
        results = usage.tool_results()
        for sid, tools in usage.tools().items():  # (a thread without a session_meta: by its file name)
            if sid not in out:
                out[sid] = Session(sid, tools=dict(tools), tool_results=results.get(sid, {}))
        for d in usage.deltas():
            s = _session_of(out, d.session_id or d.chain)
            s.files.add(d.file)
            s.at(d.model, d.time).add(d.counters, d.service_tier)
        return out


class _Gemini(_Client):
    label = "Gemini CLI"  # (how a progress line names it)
    harness = "gemini"
    provider = "google"

    @staticmethod
    def sessions(usage: Any) -> dict[str, Session]:
        # the chats log does not say how the client was started, nor the cwd (only its hash)
        out: dict[str, Session] = {}
        for sid, info in usage.sessions().items():
            s = out[sid] = Session(sid, info.started, info.ended, tools=dict(info.tools))
            s.files.update(info.files)
        for r in usage.responses():
            s = _session_of(out, r.session_id)
            s.files.add(r.file)
            s.at(r.model, r.time).add(r.counters)
        return out


CLIENTS = {"claude": _Claude, "codex": _Codex, "gemini": _Gemini}


def state_v(client: str) -> int:
    """The version of a client's reducer state: an index holding an older one reads the
    archive again. Read from the warm check's table (ledger.index.fresh.LOG_STATE_V, the index's
    one copy of the reducers' STATE_VERSION), so that a pass that finds nothing new imports no
    reducer."""
    return LOG_STATE_V[client]
