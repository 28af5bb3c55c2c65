"""The cumulative cost levels of Claude Code's `cost-state` lines (2.1.x), per chain (a line's
`sessionId`), and what they add: each level's increment split over the chain's responses, a
fork's counted from its parent's level, and the tokens a level holds beyond the chain's
responses (the `/compact` calls). The rules are the reducer's (ledger.sources.claude_usage).

A chain is a dict of plain JSON values, as kept in the reducer's state:
{"m": {model: {level key: [time, tokens or None, file, line]}}, "t": {repr(level): time},
"u": [models with unknown cost], "p": [sessions its copied lines name], "c": [compaction times]}.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Iterator

from ledger.sources.jsonlines import _count
from ledger.sources.claude_results import CostDelta, Response

Chains = dict[str, dict[str, Any]]  # sessionId -> its chain (the layout in this docstring)


def new_chain() -> dict[str, Any]:
    return {"m": {}, "t": {}, "u": [], "p": [], "c": []}


def levels(chains: Chains, sid: str, model: str) -> list[tuple[float, str | None, list[int | None] | None, str, int]]:
    """A chain's levels of one model, ascending: (cost, time reached, tokens, file, line); the
    time is the earliest observation of that level or any higher one."""
    lv = chains[sid]["m"].get(model, {})
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


def fork_base(chains: Chains, sid: str) -> dict[str, tuple[float, list[int | None] | None]]:
    """Where a fork's cumulative levels start, per model: its parent's level (cost, tokens)
    at the fork's first `cost-state` (the highest parent level observed by then). A session
    that is no fork, or whose parent's lines were not fed, starts at 0."""
    chain = chains[sid]
    parent = parent_of(chains, sid)
    if parent is None:
        return {}
    times = [v[0] for lv in chain["m"].values() for v in lv.values() if v[0] is not None]
    if not times:
        return {}
    at = min(times)
    out: dict[str, tuple[float, list[int | None] | None]] = {}
    for model in chains[parent]["m"]:
        below = [(c, tok) for c, t, tok, _, _ in levels(chains, parent, model) if t is not None and t <= at]
        if below:
            out[model] = below[-1]
    return out


def parent_of(chains: Chains, sid: str) -> str | None:
    """The session a fork was forked from. Its file's copies name the session each line was
    first written in (a fork of a fork copies its grandparent's lines with the grandparent's
    id, capture `fork_chain`): the parent is the deepest of them (the one forked from the
    others)."""
    cands = [p for p in chains[sid]["p"] if p != sid and p in chains]
    if not cands:
        return None

    def depth(x: str, seen: frozenset[str]) -> int:
        ps = [p for p in chains[x]["p"] if p in chains and p not in seen]
        return 1 + max((depth(p, seen | {p}) for p in ps), default=0)

    return max(cands, key=lambda x: (depth(x, frozenset({sid, x})), cands.index(x)))


def unlogged(chains: Chains, logged: list[Response]) -> Iterator[Response]:
    """Usage that only a `cost-state` shows: what a level's per-model cumulative tokens
    (`modelUsage`, a fork's counted from its parent's level) hold beyond the chain's own
    responses up to that level (the `/compact` calls, which no assistant line shows). Each
    such excess is one response, at the chain's latest compaction before the level (else
    the level's time)."""
    own: dict[tuple[str | None, str | None], list[Response]] = {}
    for r in logged:
        own.setdefault((r.session_id, r.model), []).append(r)
    for sid in sorted(chains):
        chain = chains[sid]
        base = fork_base(chains, sid)
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
            for k, (_, t, tok, file, line) in enumerate(levels(chains, sid, model)):
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


def chain_deltas(chains: Chains, responses: list[Response]) -> list[CostDelta]:
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
    for sid, chain in sorted(chains.items()):
        base = fork_base(chains, sid)
        if chain["m"]:
            for model in sorted(chain["m"]):
                unknown = model in chain["u"]
                prev: float | None = base[model][0] if model in base else None
                prev_t: str | None = None
                rs = [r for r in own.get((sid, model), []) if r.time is not None]
                times = [r.time for r in rs]
                for v, t, _, _, _ in levels(chains, sid, model):
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
            parent = parent_of(chains, sid)
            pb = chains[parent]["t"] if parent is not None else {}
            start = None
            if pb and chain["t"]:
                at = min((t for t in chain["t"].values() if t is not None), default=None)
                below = [(t, d) for t, d in _increments(pb) if at is not None and t is not None and t <= at]
                start = sum(d for _, d in below) if below else None
            for t, d in _increments(chain["t"], start):
                out.append(CostDelta(sid, None, t, d))
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
