"""The cumulative levels of a Codex chain and what each charges (the rules are the reducer's,
ledger.sources.codex_usage): a level's key, its counters in ledger's shape, its increment over
the nearest recorded level at or below it, a restart charged whole, a paginated fork's zero,
and the calls charged by their own record instead."""

from __future__ import annotations

from typing import Any, Iterator

from ledger.sources.codex_results import Delta
from ledger.sources.jsonlines import _count

# Raw cumulative fields, in the order a level stores them.
RAW_FIELDS = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens",
              "reasoning_output_tokens")
_IN, _CACHED, _WRITE, _OUT, _REASON = range(5)

# Level entry layout: [time, model, session, file, line, the file's thread start,
# [predecessor level keys ("" = zero)], the response id of the call that reached it (charged by
# that call's record, not as a delta) or None, service tier, its line's ordinal (0.169 writes
# one on each line; else the line's index in its file)]
_L_TS, _L_MODEL, _L_SESSION, _L_FILE, _L_LINE, _L_START, _L_PREDS, _L_RESP, _L_TIER, _L_ORD = range(10)
# Call (token_usage_record) entry layout: [time, model, session, file, line, the file's thread
# start, its usage's level key, service tier, its chain]
_R_TS, _R_MODEL, _R_SESSION, _R_FILE, _R_LINE, _R_START, _R_USAGE, _R_TIER, _R_CHAIN = range(9)
Chains = dict[str, dict[str, list[Any]]]  # chain -> level key -> entry (the _L_ layout above)


def _str(v: Any) -> str | None:
    return v if type(v) is str and v else None


class PagedFork:
    """A paginated fork chain's link to its parent; kept in the state as the list [parent thread,
    forked_from_ordinal_exclusive, the level below its first call as its first record states it
    (thread total - usage) or None]."""

    __slots__ = ("parent", "ordinal", "base")

    def __init__(self, parent: str | None, ordinal: int | None, base: str | None) -> None:
        self.parent, self.ordinal, self.base = parent, ordinal, base

    def to_state(self) -> list[Any]:
        return [self.parent, self.ordinal, self.base]


def _level_key(u: dict[str, Any]) -> str | None:
    """A cumulative usage object -> its level key ("i,c,w,o,r", "" for an absent counter);
    None when it holds no counter at all."""
    vals = [_count(u.get(f)) for f in RAW_FIELDS]
    if all(v is None for v in vals):
        return None
    return ",".join("" if v is None else str(v) for v in vals)


def _level(key: str) -> list[int | None]:
    return [int(x) if x else None for x in key.split(",")] if key else [None] * 5


def _counters(d: list[int | None]) -> dict[str, int | None]:
    """Raw usage (OpenAI's: input includes cached input and cache writes) in ledger's shape."""
    inp = d[_IN]
    if inp is not None:
        inp -= (d[_CACHED] or 0) + (d[_WRITE] or 0)
        if inp < 0:
            inp = None  # the client's own counters disagree: unknown, not negative
    return {"input_tokens": inp, "cache_read_tokens": d[_CACHED], "cache_write_tokens": d[_WRITE],
            "output_tokens": d[_OUT], "reasoning_tokens": d[_REASON]}


def _le(a: list[int | None], b: list[int | None]) -> bool:
    """a <= b on every counter (an absent counter counts as 0)."""
    return all((x or 0) <= (y or 0) for x, y in zip(a, b))


def fork_bases(chains: Chains, forks: dict[str, PagedFork]) -> dict[str, tuple[str, str | None]]:
    """Each paginated fork chain's zero: (the level key its totals go on from, the model of
    that level). The parent's level at the fork point (its last level on a line whose
    `ordinal` is below `forked_from_ordinal_exclusive`; a line without one: its index in
    the file, from 0) when the
    parent's rollout was read; else what the fork's first record states (its thread total
    less its usage); else zero."""
    if not forks:
        return {}
    own: dict[str, list[tuple[int, str, str | None]]] = {}
    parents = {f.parent for f in forks.values()}
    for levels in chains.values():
        for key, e in levels.items():
            if e[_L_SESSION] in parents:
                own.setdefault(e[_L_SESSION], []).append((e[_L_ORD], key, e[_L_MODEL]))
    out: dict[str, tuple[str, str | None]] = {}
    for chain, f in forks.items():
        below = [x for x in own.get(f.parent, ()) if f.ordinal is None or x[0] < f.ordinal]
        if below:
            _line, key, model = max(below)
            out[chain] = (key, model)
        elif f.base is not None:
            out[chain] = (f.base, None)
    return out


def level_deltas(chains: Chains, responses: dict[str, list[Any]],
                 forks: dict[str, PagedFork]) -> Iterator[Delta]:
    """What each call record and each level no record reached charges (the reducer's `deltas()`)."""
    bases = fork_bases(chains, forks)
    for rid, r in responses.items():
        model = r[_R_MODEL]
        if model is None and r[_R_CHAIN] in bases:
            # a fork's call before its first turn_context (the compaction a fork on another
            # model runs first): the parent's model at the fork point
            model = bases[r[_R_CHAIN]][1]
        yield Delta(r[_R_SESSION] or "", model, r[_R_TS], r[_R_SESSION], _counters(_level(r[_R_USAGE])), False,
                    r[_R_FILE], r[_R_LINE], r[_R_TIER], rid)
    for chain, levels in chains.items():
        for key, e in levels.items():
            if e[_L_RESP] is not None and e[_L_RESP] in responses:
                continue  # charged by its call's record
            zero = bases[chain][0] if chain in bases else ""  # a paginated fork's zero: its base
            if zero and key == zero:
                continue  # the parent's total, re-emitted by the fork: the parent's
            lv = _level(key)
            below: list[int | None] = [None] * 5
            best = -1
            for pk in e[_L_PREDS]:  # the nearest recorded level at or below (zero always is)
                pk = pk or zero
                pv = _level(pk)
                if pk != key and _le(pv, lv) and sum(x or 0 for x in pv) > best:
                    below, best = pv, sum(x or 0 for x in pv)
            restart = any(pk and not _le(_level(pk), lv) for pk in e[_L_PREDS]) and not any(
                pk and pk != key and _le(_level(pk), lv) for pk in e[_L_PREDS])
            d = [None if v is None else v - (b or 0) for v, b in zip(lv, below)]
            yield Delta(chain, e[_L_MODEL], e[_L_TS], e[_L_SESSION], _counters(d), restart, e[_L_FILE],
                        e[_L_LINE], e[_L_TIER])
