"""A synthetic Claude Code history with every known duplication hazard, and its ground truth.

`generate(root, sessions=N, seed=S)` writes a Claude config dir layout under `root`
(`projects/<project>/<session>.jsonl`, `projects/<project>/<session>/subagents/agent-<id>.jsonl`)
and returns a `History` whose `truth` is computed from the generator's own list of distinct
API responses and of the costs it charged, never by reading the files back.

Hazards (reference/stream-formats.md §B):
* one line per content block, each with the same `message.id`, request key and usage;
* streaming snapshots: earlier lines of a response have a lower `output_tokens` (and, 2.0.x,
  a lower `costUSD`);
* styles: 2.1.x (`requestRef`, `api-request` lines, cumulative `cost-state` lines, 5m/1h
  cache-write split), 2.0.x (`requestId`, `costUSD` per line), and no request key, no cost;
* a 2.1.x session resumed later into the same file (its cost-state totals continue);
* a session resumed into a new file that replays the earlier responses verbatim (new
  sessionId, new uuids, original timestamps);
* a fork (2.1.x, as Claude Code 2.1.328 writes `--resume ID --fork-session`, see
  tests/data/captures/claude/): a new file copying the parent's user/assistant/system lines
  verbatim (same uuids, ids, timestamps, usage) with `sessionId` rewritten and
  `requestSessionId: <parent>` on the copied assistant lines, no cost-state copied; then its
  own responses, its cumulative cost-state going on from the parent's total; a fork of a
  compacted session copies from the compaction on, plus the preserved pre-compaction
  response with its usage zeroed (but `cache_creation.ephemeral_5m_input_tokens`);
* a 2.1.x compaction (as captured): boundary + summary lines and a compaction call that no
  assistant line shows, only the next cost-state's per-model cumulative usage; older styles:
  boundary + summary, then the last responses re-logged with later timestamps (first
  appearance must win);
* subagent transcripts (`isSidechain`, `agentId`) whose cost is in the parent's cost-state;
* a model the client cannot price (`hasUnknownModelCost`, costUSD 0): its cost is unknown;
* sessions starting near midnight UTC and resumed days later;
* junk: malformed JSON, non-UTF-8 bytes, a JSON array, an unknown line type, a torn last line.

Costs are multiples of 2**-20 USD so that every sum and difference is exact in binary floats
and the truth can be compared with `==`. A 2.1.x response costs its tokens at list-price
proportions (input 1, output 5, cache read 0.1, write 5m 1.25, 1h 2: RATE units of 2**-20 per
weight unit; cache reads a multiple of 10 and 5m writes of 4 keep the weight whole), as the
client's cost-state does; the reducer splits a level's increment in those proportions, so each
response's cost is booked on its own day.
"""

from __future__ import annotations

import copy
import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson

COUNTERS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_5m_tokens",
            "cache_write_1h_tokens", "output_tokens", "reasoning_tokens")
MODELS = ("claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805", "claude-haiku-4-5-20251001")
UNPRICED_MODEL = "acme-proxy-model-1"  # the client has no price: hasUnknownModelCost
UNIT = 2.0 ** -20
RATE = {"claude-sonnet-4-5-20250929": 3, "claude-opus-4-1-20250805": 15, "claude-haiku-4-5-20251001": 1}
# cost-state modelUsage's cumulative counters (input, cache read, cache write, output, 5m, 1h)
_MU = ("inputTokens", "cacheReadInputTokens", "cacheCreationInputTokens", "outputTokens",
       "cacheCreationEphemeral5mInputTokens", "cacheCreationEphemeral1hInputTokens")
T0 = datetime(2026, 1, 9, 22, 30, tzinfo=timezone.utc)


@dataclass
class TrueResponse:
    message_id: str
    request_key: str | None
    model: str
    time: datetime
    session_id: str
    counters: dict[str, int | None]
    cost_usd: float | None      # the 2.0.x per-line cost (reported), else None

    @property
    def day(self) -> str:
        return self.time.strftime("%Y-%m-%d")


@dataclass
class History:
    root: Path | None
    files: dict[str, bytes]                 # relative path -> bytes written
    responses: list[TrueResponse]
    charges: list[tuple[str, str, float | None]]  # (day, model, cost) from cost-state levels
    junk_lines: int
    torn_files: list[str]

    def truth(self, by: tuple[str, ...] = ("day", "model")) -> dict[tuple, dict[str, Any]]:
        out: dict[tuple, dict[str, Any]] = {}

        def row(day: str, model: str, session: str | None = None) -> dict[str, Any]:
            f = {"day": day, "model": model, "session": session}
            k = tuple(f[b] for b in by)
            if k not in out:
                out[k] = {**{c: None for c in COUNTERS}, "responses": 0, "cost_usd": None}
            return out[k]

        for r in self.responses:
            x = row(r.day, r.model, r.session_id)
            x["responses"] += 1
            for c, v in r.counters.items():
                if v is not None:
                    x[c] = (x[c] or 0) + v
            if r.cost_usd is not None:
                x["cost_usd"] = (x["cost_usd"] or 0.0) + r.cost_usd
        if "session" not in by:
            for day, model, cost in self.charges:
                if cost is not None:
                    x = row(day, model)
                    x["cost_usd"] = (x["cost_usd"] or 0.0) + cost
        return out


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


class _File:
    """One transcript file being written: its lines (dicts, or raw bytes for junk)."""

    def __init__(self, rel: str) -> None:
        self.rel = rel
        self.lines: list[Any] = []
        self.max_ts: datetime | None = None

    def add(self, obj: Any) -> None:
        self.lines.append(obj)
        if isinstance(obj, dict) and "timestamp" in obj:
            t = datetime.fromisoformat(obj["timestamp"].replace("Z", "+00:00"))
            if self.max_ts is None or t > self.max_ts:
                self.max_ts = t

    def data(self) -> bytes:
        return b"".join(x if isinstance(x, bytes) else orjson.dumps(x) + b"\n" for x in self.lines)


_WORDS = ("the", "function", "returns", "a", "list", "of", "tokens", "when", "file", "is", "read", "test",
          "passes", "after", "change", "import", "error", "value", "config", "path", "session", "model",
          "cache", "write", "index", "query", "result", "line", "count", "report", "cost", "user")


def _filler(mid: str, block: int, size: int) -> str:
    """About `size` characters of text for a content block (benchmarks: real transcripts hold
    code and prose). Derived from the ids, not the generator's random stream, so a padded
    history has the same responses and truth as an unpadded one of the same seed."""
    if size <= 0:
        return ""
    import hashlib

    words = []
    n = 0
    k = 0
    while n < size:
        d = hashlib.blake2b(f"{mid}/{block}/{k}".encode(), digest_size=32).digest()
        for b in d:
            w = _WORDS[b % len(_WORDS)]
            words.append(w)
            n += len(w) + 1
        k += 1
    return " " + " ".join(words)[:size]


class _Gen:
    def __init__(self, root: Path | None, seed: int, pad: int = 0) -> None:
        self.pad = pad
        self.root = root
        self.rng = random.Random(seed)
        self.files: list[_File] = []
        self.responses: list[TrueResponse] = []
        self.charges: list[tuple[str, str, float | None]] = []
        self.junk = 0
        self.torn: list[str] = []

    def hex(self, n: int) -> str:
        return "".join(self.rng.choice("0123456789abcdef") for _ in range(n))

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def new_file(self, rel: str) -> _File:
        f = _File(rel)
        self.files.append(f)
        return f

    # -- one API response, written as several lines -------------------------------------
    def response(self, f: _File, sess: "_Session", t: datetime, model: str, *, agent: str | None = None) -> datetime:
        rng = self.rng
        style = sess.style
        mid = "msg_01" + self.hex(22)
        req = None
        if style == "2.1":
            req = "req-" + self.uid()
            f.add({"type": "api-request", "id": req, "params": {"model": model}, "sessionId": sess.sid})
        elif style == "2.0":
            req = "req_011" + self.hex(21)
        inp, read = rng.randint(1, 50), rng.choice([0, rng.randint(10, 9000) * 10])
        write = rng.choice([0, rng.randint(10, 30000)])
        out = rng.randint(1, 3000)
        m5 = h1 = None
        if style == "2.1":
            h1 = rng.choice([0, rng.randint(1, 10000)])
            m5 = rng.choice([0, rng.randint(1, 5000) * 4])
            write = m5 + h1
        usage: dict[str, Any] = {"input_tokens": inp, "cache_creation_input_tokens": write,
                                 "cache_read_input_tokens": read, "output_tokens": out,
                                 "service_tier": "standard"}
        if style == "2.1":
            usage["cache_creation"] = {"ephemeral_5m_input_tokens": m5, "ephemeral_1h_input_tokens": h1}
        cost = rng.randint(1, 4000) * UNIT
        if style == "2.1":
            cost = list_cost(model, inp, out, read, m5, h1)
        blocks = rng.randint(1, 3)
        snapshots = rng.randint(0, 2)  # lines with a lower output_tokens before the final ones
        first = t
        for i in range(snapshots + blocks):
            u = dict(usage)
            line_cost = cost
            if i < snapshots:
                u["output_tokens"] = rng.randint(0, out - 1) if out > 1 else 0
                line_cost = rng.randint(0, int(cost / UNIT) - 1) * UNIT if cost > UNIT else 0.0
            line: dict[str, Any] = {
                "parentUuid": self.uid(), "isSidechain": agent is not None, "userType": "external",
                "cwd": sess.cwd, "sessionId": sess.sid, "version": sess.version, "gitBranch": "main",
                "type": "assistant", "uuid": self.uid(), "timestamp": _iso(t),
                "message": {"id": mid, "type": "message", "role": "assistant", "model": model,
                            "content": [{"type": "text", "text": f"block {i}" + _filler(mid, i, self.pad)}],
                            "stop_reason": None,
                            "usage": u}}
            if agent is not None:
                line["agentId"] = agent
            if style == "2.1":
                line["requestRef"] = req
                line["apiBlockIndex"] = i
            elif style == "2.0":
                line["requestId"] = req
                line["costUSD"] = line_cost
            f.add(line)
            t += timedelta(milliseconds=rng.randint(1, 900))
        counters = {"input_tokens": inp, "cache_read_tokens": read, "cache_write_tokens": write,
                    "cache_write_5m_tokens": m5, "cache_write_1h_tokens": h1, "output_tokens": out,
                    "reasoning_tokens": None}
        self.responses.append(TrueResponse(mid, req, model, first, sess.sid, counters,
                                           cost if style == "2.0" else None))
        if style == "2.1":
            sess.track(model, first, cost, (inp, read, write, out, m5, h1))
        return t

    def compaction_call(self, sess: "_Session", t: datetime) -> None:
        """The 2.1.x `/compact` call: served, in the next cost-state only (no assistant line)."""
        rng = self.rng
        model = sess.models[0]
        inp, read, h1, m5, out = rng.randint(100, 3000), rng.randint(0, 900) * 10, 0, rng.randint(0, 500) * 4, \
            rng.randint(50, 900)
        cost = list_cost(model, inp, out, read, m5, h1)
        counters = {"input_tokens": inp, "cache_read_tokens": read, "cache_write_tokens": m5 + h1,
                    "cache_write_5m_tokens": m5, "cache_write_1h_tokens": h1, "output_tokens": out,
                    "reasoning_tokens": None}
        self.responses.append(TrueResponse(f"compaction-{self.hex(8)}", None, model, t, sess.sid, counters, None))
        sess.track(model, t, cost, (inp, read, m5 + h1, out, m5, h1))

    def user(self, f: _File, sess: "_Session", t: datetime, text: str = "go on") -> None:
        f.add({"parentUuid": None, "isSidechain": False, "type": "user", "uuid": self.uid(),
               "timestamp": _iso(t), "sessionId": sess.sid, "cwd": sess.cwd, "version": sess.version,
               "message": {"role": "user", "content": text}})

    def cost_state(self, f: _File, sess: "_Session") -> None:
        """A 2.1.x cost-state line (cumulative per session, per model tokens and cost, as the
        client writes it); the truth charges each response it newly covers on the response's
        day (an unknown-cost model: unknown, on the file's latest day)."""
        day = f.max_ts.strftime("%Y-%m-%d")
        unknown = False
        mu = {}
        for t, model, cost in sess.pending:
            if model != UNPRICED_MODEL:
                self.charges.append((t.strftime("%Y-%m-%d"), model, cost))
        sess.pending.clear()
        for model, c in sess.cum.items():
            if model == UNPRICED_MODEL:
                unknown = True
                if sess.cum_tokens[model] > sess.charged_tokens.get(model, 0):
                    self.charges.append((day, model, None))
            sess.charged_tokens[model] = sess.cum_tokens[model]
            tok = sess.cum_usage[model]
            mu[model] = {**dict(zip(_MU, tok)), "thinkingTokens": 0, "webSearchRequests": 0, "costUSD": c}
        line = {"type": "cost-state", "sessionId": sess.sid, "totalCostUSD": sum(sess.cum.values()),
                "totalAPIDuration": 1000, "totalDuration": 2000, "startTime": 1767996000000,
                "modelUsage": mu}
        if unknown:
            line["hasUnknownModelCost"] = True
        f.add(line)

    def junk_line(self, f: _File) -> None:
        self.junk += 1
        f.add(self.rng.choice([b'{"type":"assistant","message":{"id":\n', b"\xff\xfe not utf-8 \x80\n",
                               b"[1, 2, 3]\n", b'{"type":"x-future-line-type","n":1}\n', b"not json at all\n"]))

    # -- sessions --------------------------------------------------------------------------
    def run(self, f: _File, sess: "_Session", t: datetime, turns: int, *, subagent_dir: str | None = None) -> datetime:
        rng = self.rng
        for _ in range(turns):
            self.user(f, sess, t)
            t += timedelta(seconds=rng.randint(1, 30))
            f.add({"type": "queue-operation", "operation": "enqueue", "sessionId": sess.sid, "timestamp": _iso(t)})
            for _ in range(rng.randint(1, 3)):
                model = rng.choice(sess.models)
                t = self.response(f, sess, t, model)
                t += timedelta(seconds=rng.randint(1, 600))
            if subagent_dir and rng.random() < 0.5:
                agent = self.hex(8)
                af = self.new_file(f"{subagent_dir}/agent-{agent}.jsonl")
                at = t
                for _ in range(rng.randint(1, 3)):
                    at = self.response(af, sess, at, rng.choice(MODELS), agent=agent)
                t = at + timedelta(seconds=5)
                self.user(f, sess, t, "subagent result")  # (the tool result, in the parent's file)
            if rng.random() < 0.15:
                self.junk_line(f)
            if sess.style == "2.1" and rng.random() < 0.6:
                self.cost_state(f, sess)
            t += timedelta(minutes=rng.randint(1, 90))
        if sess.style == "2.1":
            self.cost_state(f, sess)  # the client writes one as the process ends
        return t

    def compaction(self, f: _File, sess: "_Session", t: datetime) -> datetime:
        f.add({"type": "system", "subtype": "compact_boundary", "sessionId": sess.sid, "timestamp": _iso(t),
               "uuid": self.uid()})
        f.add({"type": "user", "isCompactSummary": True, "sessionId": sess.sid, "timestamp": _iso(t),
               "uuid": self.uid(), "message": {"role": "user", "content": "summary"}})
        if sess.style == "2.1":
            self.compaction_call(sess, t)
            return t + timedelta(seconds=1)
        # re-log the last response's lines later: the first appearance keeps its day
        last = [x for x in f.lines if isinstance(x, dict) and x.get("type") == "assistant"][-2:]
        for x in last:
            y = copy.deepcopy(x)
            y["uuid"] = self.uid()
            y["timestamp"] = _iso(t)
            f.add(y)
            t += timedelta(seconds=1)
        return t

    def session(self, project: str, style: str, t: datetime) -> None:
        rng = self.rng
        sess = _Session(self.uid(), style, project, [*rng.sample(MODELS, rng.randint(1, 2))])
        if style == "2.1" and rng.random() < 0.3:
            sess.models.append(UNPRICED_MODEL)
        f = self.new_file(f"projects/{project}/{sess.sid}.jsonl")
        f.add({"type": "summary", "summary": "A task", "leafUuid": self.uid()})
        t = self.run(f, sess, t, rng.randint(1, 4), subagent_dir=f"projects/{project}/{sess.sid}/subagents")
        if rng.random() < 0.4:
            t = self.compaction(f, sess, t)
            t = self.run(f, sess, t, 1)
        hazard = rng.random()
        if style == "2.1" and hazard < 0.4:
            # resumed into the same file, days later: the cost-state totals continue
            t += timedelta(days=rng.randint(1, 3), hours=rng.randint(0, 5))
            self.run(f, sess, t, rng.randint(1, 2))
        elif style == "2.1" and hazard < 0.8:
            # forked (--fork-session): a new file copies the parent's conversation lines
            child = sess.fork(self.uid())
            cf = self.new_file(f"projects/{project}/{child.sid}.jsonl")
            lines = [x for x in f.lines if isinstance(x, dict)]
            cut = max((i for i, x in enumerate(lines) if x.get("subtype") == "compact_boundary"), default=None)
            kept = lines if cut is None else lines[cut:]
            if cut is not None:
                pre = [x for x in lines[:cut] if x.get("type") == "assistant"][-1:]
                for x in pre:  # the preserved pre-compaction response, its usage zeroed
                    y = copy.deepcopy(x)
                    u = y["message"]["usage"]
                    for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                              "output_tokens"):
                        u[k] = 0
                    if "cache_creation" in u:
                        u["cache_creation"]["ephemeral_1h_input_tokens"] = 0
                    kept = [*kept[:2], y, *kept[2:]]
            for x in kept:
                if x.get("type") in ("user", "assistant", "system"):
                    y = copy.deepcopy(x)
                    y["sessionId"] = child.sid
                    if y["type"] == "assistant":
                        y["requestSessionId"] = sess.sid
                    cf.add(y)
            t += timedelta(hours=rng.randint(1, 30))
            self.run(cf, child, t, rng.randint(1, 2))
        elif style != "2.1" and hazard < 0.6:
            # resumed into a new file (older clients): earlier responses replayed verbatim
            child = _Session(self.uid(), style, project, sess.models)
            cf = self.new_file(f"projects/{project}/{child.sid}.jsonl")
            for x in f.lines:
                if isinstance(x, dict) and x.get("type") in ("user", "assistant"):
                    y = copy.deepcopy(x)
                    y["sessionId"] = child.sid
                    y["uuid"] = self.uid()
                    cf.add(y)
            t += timedelta(days=rng.randint(0, 2), hours=rng.randint(1, 20))
            self.run(cf, child, t, rng.randint(1, 3))


@dataclass
class _Session:
    sid: str
    style: str
    project: str
    models: list[str]
    cum: dict[str, float] = field(default_factory=dict)
    cum_tokens: dict[str, int] = field(default_factory=dict)
    cum_usage: dict[str, list[int]] = field(default_factory=dict)
    charged_tokens: dict[str, int] = field(default_factory=dict)
    pending: list[tuple[datetime, str, float]] = field(default_factory=list)  # not yet in a cost-state

    def track(self, model: str, t: datetime, cost: float, tokens: tuple) -> None:
        """The client's cumulative cost tracker (the whole process: subagents included)."""
        cost = 0.0 if model == UNPRICED_MODEL else cost
        self.cum[model] = self.cum.get(model, 0.0) + cost
        self.cum_tokens[model] = self.cum_tokens.get(model, 0) + tokens[0] + tokens[3]
        acc = self.cum_usage.setdefault(model, [0] * 6)
        for i, v in enumerate(tokens):
            acc[i] += v or 0
        self.pending.append((t, model, cost))

    def fork(self, sid: str) -> "_Session":
        """A fork: its cumulative totals go on from this session's (the client's cost-state)."""
        return _Session(sid, self.style, self.project, self.models, dict(self.cum), dict(self.cum_tokens),
                        {m: list(v) for m, v in self.cum_usage.items()}, dict(self.charged_tokens))

    @property
    def cwd(self) -> str:
        return "/" + self.project.strip("-").replace("-", "/")

    @property
    def version(self) -> str:
        return {"2.1": "2.1.328", "2.0": "2.0.46", "none": "2.1.63"}[self.style]


def list_cost(model: str, inp: int, out: int, read: int, m5: int | None, h1: int | None) -> float:
    """A 2.1.x response's cost: its tokens at list-price proportions, whole units of 2**-20."""
    if model == UNPRICED_MODEL:
        return 0.0
    weight = inp + 5 * out + read // 10 + (m5 or 0) * 5 // 4 + 2 * (h1 or 0)
    return RATE[model] * weight * UNIT


def generate(root: Path | None, sessions: int = 8, seed: int = 0, pad: int = 0) -> History:
    """Write the history under `root` (a Claude config dir; None: keep it in memory only) and
    return it with its truth. `pad`: characters of text added to each content block (to make a
    benchmark history as large as real ones; the truth does not change)."""
    g = _Gen(Path(root) if root is not None else None, seed, pad)
    projects = ["-home-dev-" + w for w in ("alpha", "beta-app", "gamma")]
    styles = ("2.1", "2.0", "none")
    for i in range(sessions):
        style = styles[i % 3] if i < 3 else g.rng.choice(styles)
        t = T0 + timedelta(days=g.rng.randint(0, 3), minutes=g.rng.randint(0, 180))
        g.session(g.rng.choice(projects), style, t)
    # a live session's torn last line: a response still being written (not in the truth)
    last = g.files[0]
    last.add(b'{"type":"assistant","timestamp":"2026-01-12T10:00:00.000Z","message":{"id":"msg_torn","usa')
    g.torn.append(last.rel)
    files: dict[str, bytes] = {}
    for f in g.files:
        data = f.data()
        files[f.rel] = data
        if g.root is None:
            continue
        p = g.root / f.rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return History(g.root, files, g.responses, g.charges, g.junk, g.torn)
