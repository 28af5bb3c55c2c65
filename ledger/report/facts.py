"""Report facts from runs, without SQLAlchemy: the rules of a report_facts row (issue 10).

A run and its usage streams become one row per (slot, model) (FactBuilder.rows), each model's
cost estimated with a memo and reused from the facts' cache when its usage fingerprint did not
change. ledger.report.sync writes them (plain SQL on ledger.index.dbapi.Conn; a full sync on
SQLite through ledger.report.fullsync, a few changed runs through ledger.report.quicksync).
Also the sorted figures of report_groups (pack_values / _unpack / _apply) and the sync's
bookkeeping (whose rule versions, FACT_RULES and GROUP_RULES, are ledger.index.reportshape's).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from ledger.records.costbasis import receipt_cost
from ledger.report.buckets import epoch
from ledger.report.costs import COST_MODES, combine_codes, split_known, sum_known, whole_cost
from ledger.report.schema import (
    CELL_KINDS, COUNTER_COLUMNS, ESTIMATED, GROUP_KINDS, GROUP_VALUES, REPORTED, SLOT_SECONDS, SLOTS_PER_DAY, START_KEY,
    TOKEN_COLUMNS, VALUE_KINDS,
)
from ledger.report.schema import FACT_RULES, GROUP_RULES, GROUPS_DEFERRED  # noqa: F401 - re-exported (tests)

Estimator = Callable[[str | None, str | None, Mapping[str, Any]], "tuple[float | None, str | None]"]


@dataclass
class SyncStats:
    """What a sync did (the benchmark prints it; tests check it)."""

    full: bool = False
    checked: int = 0
    rebuilt: int = 0
    priced_streams: int = 0
    reused_estimates: int = 0
    removed: int = 0
    reconciled: bool = False
    fact_runs_delta: int = 0  # runs gained (lost) by report_facts in an incremental sync
    groups: int = 0  # report_groups groups recomputed ((kind, key); -1: all of them)
    seconds: float = 0.0


def _default_estimator() -> Estimator:
    from ledger.pricing import estimate_cost

    return estimate_cost


COMMAND_HARNESS = "command"



def _price_version() -> str:
    from ledger.pricing import price_data_version

    return price_data_version()


def run_outcome(outcome: str | None, settled: bool, state: str | None) -> str:
    """completed | failed | interrupted | abandoned | running | unknown."""
    if settled:
        return outcome if outcome in ("completed", "failed", "interrupted") else "unknown"
    return state if state in ("running", "abandoned") else "unknown"


class FactBuilder:
    """Turns runs + their usage streams into report_facts rows, pricing with a memo."""

    def __init__(self, price_version: str, estimator: Estimator, stats: SyncStats) -> None:
        self.price_version = price_version
        self.estimate = estimator
        self.stats = stats
        self._memo: dict[tuple, tuple[float | None, str | None]] = {}
        # the report_groups groups a rebuilt run left or joined: (kind, key)
        self.groups: set[tuple[str, str | None]] = set()
        # the report_group_days cells they touched: (kind, key, day)
        self.cells: set[tuple[str, str | None, int]] = set()
        # per (kind, key) of VALUE_KINDS, per GROUP_VALUES figure: +1 per value added, -1 removed
        # (from the runs noted leaving and joining, when `deltas` is read)
        self._deltas: dict[tuple[str, str | None], list[Any]] = {}
        self._noted = {-1: RunValues(), +1: RunValues()}

    def note(self, row: Mapping[str, Any], sign: int) -> None:
        """A fact row leaving (-1) or joining (+1) report_facts: its groups, cells, figures
        (every row of a run leaves or joins: its figures are the whole run's, RunValues)."""
        day = row["slot"] // SLOTS_PER_DAY
        for k in GROUP_KINDS:
            self.groups.add((k, row[k]))
        for k in CELL_KINDS:
            self.cells.add((k, row[k], day))
        self._noted[sign].add(row)

    @property
    def deltas(self) -> dict[tuple[str, str | None], list[Any]]:
        """The figures' counts per (kind, key) of VALUE_KINDS, of the runs noted so far."""
        from collections import Counter

        for sign, noted in self._noted.items():
            for keys, figures in noted.take():
                for k in VALUE_KINDS:
                    counters = self._deltas.get((k, keys[k]))
                    if counters is None:
                        counters = self._deltas[(k, keys[k])] = [Counter() for _ in GROUP_VALUES]
                    for i, v in enumerate(figures):
                        if v is not None:
                            counters[i][v] += sign
        return self._deltas

    def _estimate(self, provider: str | None, model: str | None, counters: dict[str, Any]) -> tuple[float | None, str | None]:
        key = (provider, model) + tuple(counters.get(n) for n in COUNTER_COLUMNS)
        hit = self._memo.get(key)
        if hit is None:
            try:
                hit = self.estimate(provider, model, counters)
            except Exception as exc:  # noqa: BLE001 - a price-table failure is an unknown cost, not a crash
                hit = (None, f"cannot price model {model!r}: {exc}")
            if len(self._memo) < 100_000:
                self._memo[key] = hit
            self.stats.priced_streams += 1
        return hit

    def rows(self, run: Any, streams: Sequence[Any],
             cached: Mapping[tuple[int, str], tuple[int, float | None, str | None, float | None]],
             subjects: Sequence[str] = ()) -> list[dict[str, Any]]:
        """The fact rows of one run: one per (slot, model). A run record's usage is all in the
        slot it was created in; an archived session's streams each name their slot (its
        usage is reported when it was spent). `cached`: (slot, model_key) -> (fingerprint,
        estimate, unpriced, known part of an incomplete estimate) of rows priced with the
        current price version (reused when the fingerprint matches); `subjects`: the run's
        subject selectors in manifest order."""
        created_s = epoch(run.created_at)
        created_slot = created_s // SLOT_SECONDS
        by_model: dict[tuple[int, str], list[Any]] = {}
        for st in streams:
            by_model.setdefault((created_slot if st.slot is None else st.slot, st.model or ""), []).append(st)
        outcome = run_outcome(run.outcome, bool(run.settled), run.state)
        # a plain command can never report usage: its cost is not applicable, not unknown (no
        # cost piece, not an unmeasured run; docs/report.md)
        never_usage = not by_model and run.harness == COMMAND_HARNESS
        per_model: list[dict[str, Any]] = []
        if not by_model:
            per_model.append({"slot": created_slot, "model_key": "", "model": None, **{c: None for c in TOKEN_COLUMNS},
                              **{f"cost_{m}{p}": None for m in COST_MODES for p in ("", "_partial")},
                              "basis_auto": None, "unpriced": None, "usage_fingerprint": 0})
        for slot, key in sorted(by_model):
            group = by_model[(slot, key)]
            fp = _fingerprint(group)
            tokens = {}
            for c in TOKEN_COLUMNS:
                vals = [getattr(st, c) for st in group if getattr(st, c) is not None]
                tokens[c] = sum(vals) if vals else None
            hit = cached.get((slot, key))
            if hit is not None and hit[0] == fp:
                est, unpriced = hit[1], hit[2]
                est_part = hit[3] if len(hit) > 3 else None  # a fully known or unknown estimate has none
                self.stats.reused_estimates += 1
                est_by_stream = None
            else:
                est_by_stream = [self._stream_estimate(st) for st in group]
                est, est_part = split_known(e for e, _ in est_by_stream)
                unpriced = next((why for e, why in est_by_stream if e is None), None)
            # reported: every cost the provider gave, final receipt or not (a retried attempt's)
            reported, reported_part = split_known(st.cost_usd for st in group)
            # auto: each stream's receipt cost when it has one, else its estimate (the rule:
            # ledger.records.costbasis.receipt_cost)
            receipts = [receipt_cost(bool(st.final_receipt), st.cost_usd) for st in group]
            if all(r is not None for r in receipts):
                auto, auto_part, basis = sum_known(receipts), None, REPORTED
            elif all(r is None for r in receipts):
                auto, auto_part, basis = est, est_part, (ESTIMATED if est is not None else None)
            else:
                if est_by_stream is None:
                    est_by_stream = [self._stream_estimate(st) for st in group]
                parts = [(r, REPORTED) if r is not None else (e, ESTIMATED)
                         for r, (e, _) in zip(receipts, est_by_stream)]
                auto, auto_part = split_known(p for p, _ in parts)
                basis = combine_codes(b for _, b in parts) if auto is not None else None
            per_model.append({"slot": slot, "model_key": key, "model": key or None, **tokens, "cost_reported": reported,
                              "cost_estimated": est, "cost_auto": auto, "basis_auto": basis,
                              "cost_reported_partial": reported_part, "cost_estimated_partial": est_part,
                              "cost_auto_partial": auto_part,
                              "unpriced": unpriced if est is None else None, "usage_fingerprint": fp})
        run_model = run.model
        if run_model is None:
            best = max((m for m in per_model if m["model"] is not None),
                       key=lambda m: (sum(m[c] or 0 for c in TOKEN_COLUMNS[:4]), m["model_key"]), default=None)
            run_model = best["model"] if best is not None else None
        models = sorted({m["model"] for m in per_model if m["model"]} | ({run_model} if run_model else set()))
        common = {
            "home_id": run.home_id, "run_id": run.run_id, "source": run.source, "indexed_at": run.indexed_at, "settled": 1 if run.settled else 0,
            "state": run.state, "harness": run.harness,
            "run_model": run_model, "models": "|" + "|".join(models) + "|", "skill": run.skill,
            "repo": run.repo, "host": run.host, "session": run.provider_session_id, "outcome": outcome,
            "subject": subjects[0] if subjects else None, "subjects_n": len(subjects),
        }
        run_level = {
            "failed": int(outcome == "failed"), "interrupted": int(outcome == "interrupted"),
            "abandoned": int(outcome == "abandoned"), "unverified": int((run.evidence_gaps or 0) > 0),
            "evidence_gaps": run.evidence_gaps or 0, "no_usage": int(not streams and not never_usage),
            "duration_ms": run.duration_ms,
            **_run_costs(per_model),
            "run_basis_auto": combine_codes(m["basis_auto"] for m in per_model),
            "run_total_tokens": _total_tokens(per_model),
            **verdict_facts(run),
        }
        zero = {"failed": 0, "interrupted": 0, "abandoned": 0, "unverified": 0, "evidence_gaps": 0,
                "no_usage": 0, "duration_ms": None, "run_basis_auto": None, "run_total_tokens": None,
                **{f"run_cost_{m}{p}": None for m in COST_MODES for p in ("", "_partial")},
                **{name: 0 for name in VERDICT_FACTS}}
        # an imported session spends in several slots: each slot's first row is a *piece*
        # carrying that slot's run-level costs (a day is charged what was spent that day);
        # a run record has one slot, so its one piece is its first row with the whole cost
        slots: dict[int, list[dict[str, Any]]] = {}
        start = _start_row(per_model, created_slot)
        if start is not None:
            slots[created_slot] = [start]
        for m in per_model:
            slots.setdefault(m["slot"], []).append(m)
        out = []
        for slot, rows in slots.items():
            piece = {**zero, **_run_costs(rows), "run_basis_auto": combine_codes(m["basis_auto"] for m in rows)}
            for j, m in enumerate(rows):
                first = not out
                # a later slot's row is dated at its slot's start (the buckets of zones whose
                # offset is not a multiple of 15 minutes use it); the first row at the creation
                at = created_s if slot == created_slot else slot * SLOT_SECONDS
                out.append({**common, **m, "created_s": at, "first": 1 if first else 0, "piece": 1 if j == 0 and not never_usage else 0,
                            **({**run_level, **piece, **_run_flags(run_level)} if first else piece if j == 0 else zero)})
        return out

    def _stream_estimate(self, st: Any) -> tuple[float | None, str | None]:
        """An archived session's stream carries its estimate, priced per API response (a
        long-context tier is per request); a run record's stream is priced here."""
        if st.est_cost_usd is not None:
            return st.est_cost_usd, None
        return self._estimate(st.provider, st.model, _counters(st))


def _start_row(per_model: Sequence[Mapping[str, Any]], created_slot: int) -> dict[str, Any] | None:
    """An imported session whose first response came in a later slot than its start (a
    session begins with its first line): a row in the slot of its start that spent nothing
    (tokens 0, cost $0 where the first response's figures are known), so that the run is
    counted, and starts, where `ledger runs` and SQL say it does (issue 26), not at its first
    piece. Its model_key is START_KEY (no model): --breakdown, `report model` and
    model_costs_v leave it out."""
    first = min(per_model, key=lambda m: (m["slot"], m["model_key"]))
    if first["slot"] <= created_slot:
        return None
    zero = {c: None for c in TOKEN_COLUMNS}  # (no usage in that slot)
    costs = {f"cost_{mode}": (0.0 if first[f"cost_{mode}"] is not None else None) for mode in COST_MODES}
    return {"slot": created_slot, "model_key": START_KEY, "model": None, **zero, **costs,
            **{f"cost_{mode}_partial": None for mode in COST_MODES},
            "basis_auto": first["basis_auto"] if costs["cost_auto"] is not None else None,
            "unpriced": None, "usage_fingerprint": 0}


def _run_flags(run_level: Mapping[str, Any]) -> dict[str, Any]:
    """The run-level fields that are not costs (the first row keeps them whole)."""
    return {k: v for k, v in run_level.items() if not k.startswith("run_cost_") and k != "run_basis_auto"}


VERDICT_FACTS = ("judged", "ok", "skill_expected", "skill_invoked", "tool_calls", "tool_errors")


def verdict_facts(run: Any) -> dict[str, int]:
    """The run's verdict counts (report_facts, first row): a verdict exists / is ok, a skill
    was expected / invoked, tool uses and their error results (error + semantic-error)."""
    get = run._mapping.get if hasattr(run, "_mapping") else run.__dict__.get  # (a Row, or a plain object)
    ok, invoked = get("ok"), get("skill_invoked")
    return {"judged": int(ok is not None), "ok": int(ok is True),
            "skill_expected": int(invoked is not None), "skill_invoked": int(invoked is True),
            "tool_calls": get("tool_calls") or 0, "tool_errors": (get("tool_errors") or 0) + (get("tool_semantic_errors") or 0)}


def _run_costs(per_model: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A run's cost per mode: the sum over its models when every one is fully known, else
    null, with the known part (fully known models plus the others' known parts) apart."""
    out: dict[str, Any] = {}
    for mode in COST_MODES:
        total, part = split_known(m[f"cost_{mode}"] for m in per_model)
        if total is None:
            known = [m[f"cost_{mode}"] if m[f"cost_{mode}"] is not None else m[f"cost_{mode}_partial"]
                     for m in per_model]
            part = sum_known(v for v in known if v is not None)
        out[f"run_cost_{mode}"] = total
        out[f"run_cost_{mode}_partial"] = part
    return out


def _total_tokens(rows: Sequence[Mapping[str, Any]]) -> int | None:
    """input + output + cache read + cache write over the known counters (None if none)."""
    vals = [m[c] for m in rows for c in TOKEN_COLUMNS[:4] if m[c] is not None]
    return sum(vals) if vals else None


def _counters(st: Any) -> dict[str, Any]:
    return {name: getattr(st, name) for name in COUNTER_COLUMNS if getattr(st, name) is not None}


def _fingerprint(streams: Iterable[Any]) -> int:
    """A 63-bit hash of what pricing depends on: each stream's counters, cost and receipt."""
    h = hashlib.sha1()
    for st in sorted(streams, key=lambda s: s.stream_id):
        h.update(repr((st.stream_id, st.provider, st.model, bool(st.final_receipt), st.cost_usd,
                       tuple(getattr(st, n) for n in COUNTER_COLUMNS))).encode())
        if st.slot is not None or st.est_cost_usd is not None:  # (archived sessions only)
            h.update(repr((st.slot, st.est_cost_usd)).encode())
    return int.from_bytes(h.digest()[:8], "big", signed=True)


class RunValues:
    """The GROUP_VALUES figures of runs from their report_facts rows, fed in any order: a run's
    cost (values_cost_<mode>) is its whole cost over its pieces (costs.whole_cost: known when
    every piece's is), its duration and its group keys its first row's (issue 26: the first
    row's run_cost_<mode> is its first 15 minutes' only)."""

    def __init__(self) -> None:
        # (home_id, run_id) -> [first row's VALUE_KINDS keys or None, per figure its values]
        self._runs: dict[tuple[Any, Any], list[Any]] = {}

    def add(self, row: Mapping[str, Any]) -> None:
        first, piece = row["first"] == 1, row["piece"] == 1
        if not (first or piece):
            return
        acc = self._runs.get((row["home_id"], row["run_id"]))
        if acc is None:
            acc = self._runs[(row["home_id"], row["run_id"])] = [None, [[] for _ in GROUP_VALUES]]
        if first:
            acc[0] = {k: row[k] for k in VALUE_KINDS}
        for i, (name, src) in enumerate(GROUP_VALUES):
            if name in _RUN_WIDE:
                if first:
                    acc[1][i].append(row[src])
            elif piece:
                acc[1][i].append(row[src])

    def take(self) -> list[tuple[dict[str, Any], list[Any]]]:
        """(first row's keys, figures) of each run with a first row; forgets them all."""
        out = [(keys, [lists[i][0] if GROUP_VALUES[i][0] in _RUN_WIDE else whole_cost(lists[i])
                       for i in range(len(GROUP_VALUES))])
               for keys, lists in self._runs.values() if keys is not None]
        self._runs = {}
        return out


# the figures a run's first row carries whole (the others: per piece, summed by RunValues)
_RUN_WIDE = frozenset({"values_duration_ms"})


def pack_values(values: list[Any], integer: bool) -> bytes:
    """Sorted figures as little-endian int64 (durations) or float64 (costs)."""
    import array
    import sys

    a = array.array("q" if integer else "d", sorted(values))
    if sys.byteorder != "little":  # pragma: no cover - every machine here is little-endian
        a.byteswap()
    return a.tobytes()


def _unpack(blob: Any, integer: bool) -> list[Any]:
    import array
    import sys

    a = array.array("q" if integer else "d")
    a.frombytes(blob or b"")
    if sys.byteorder != "little":  # pragma: no cover
        a.byteswap()
    return a.tolist()


def _apply(values: list[Any], counter: Any) -> bool:
    """Apply +n / -n counts to sorted `values` in place; False when a value to remove is missing."""
    from bisect import bisect_left, insort

    for v, n in counter.items():
        for _ in range(-n):
            i = bisect_left(values, v)
            if i == len(values) or values[i] != v:
                return False
            del values[i]
        for _ in range(n):
            insort(values, v)
    return True

