"""A group's mergeable aggregate (`Agg`: the run-level and per-model vectors, every field
merged by +, min or max, and the evaluation view's verdict sums) and the report row it
becomes (`row_dict`: tokens, the cost fields and basis, the verdict rates)."""

from __future__ import annotations

from typing import Any, Sequence

from ledger.report.costs import group_basis
from ledger.report.kinds import TOKEN_COLUMNS, VERDICT_FACTS
from ledger.report.query import ReportQuery
from ledger.report.schema import START_KEY


TOKENS = TOKEN_COLUMNS
# total_tokens = input + output + cache read + cache write (output already includes reasoning)
TOTAL_PARTS = TOKENS[:4]
COST_DIGITS = 10
RATE_DIGITS = 6


# The vectors a group accumulates: (field, how two groups merge), in the order the SQL
# selects them (see _run_vector / _model_vector). Positions are derived from these lists.
# cost: sum of fully known costs, cost_n: how many; cost_partial: sum of the known parts of
# the costs that are not fully known; basis_min/max: the cost basis codes seen.
RUN_VECTOR = (("runs", "sum"), ("input_tokens", "sum"), ("output_tokens", "sum"), ("cache_read_tokens", "sum"),
              ("cache_write_tokens", "sum"), ("reasoning_tokens", "sum"), ("cost", "sum"), ("cost_n", "sum"),
              ("basis_min", "min"), ("basis_max", "max"), ("failed", "sum"), ("interrupted", "sum"),
              ("abandoned", "sum"), ("unverified", "sum"), ("evidence_gaps", "sum"), ("no_usage", "sum"),
              ("cost_partial", "sum"), ("pieces", "sum"))
MODEL_VECTOR = (("rows", "sum"), ("input_tokens", "sum"), ("output_tokens", "sum"), ("cache_read_tokens", "sum"),
                ("cache_write_tokens", "sum"), ("reasoning_tokens", "sum"), ("cost", "sum"), ("cost_n", "sum"),
                ("basis_min", "min"), ("basis_max", "max"), ("cost_partial", "sum"))
_RUN_POS = {name: i for i, (name, _) in enumerate(RUN_VECTOR)}
_MODEL_POS = {name: i for i, (name, _) in enumerate(MODEL_VECTOR)}
_RUN_OPS = tuple(op for _, op in RUN_VECTOR)
_MODEL_OPS = tuple(op for _, op in MODEL_VECTOR)
N_RUN, N_MODEL = len(RUN_VECTOR), len(MODEL_VECTOR)
# run-level positions in Agg.v
(RUNS, IN, OUT, CR, CW, RS, COST, COST_N, BMIN, BMAX, FAILED, INTR, ABAND, UNVER, GAPS, NO_USAGE, PART, PIECES) = (
    _RUN_POS[n] for n in ("runs", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                          "reasoning_tokens", "cost", "cost_n", "basis_min", "basis_max", "failed", "interrupted",
                          "abandoned", "unverified", "evidence_gaps", "no_usage", "cost_partial", "pieces"))
# per-model positions in Agg.models[model]
(M_ROWS, M_IN, M_OUT, M_CR, M_CW, M_RS, M_COST, M_COST_N, M_BMIN, M_BMAX, M_PART) = (
    _MODEL_POS[n] for n in ("rows", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                            "reasoning_tokens", "cost", "cost_n", "basis_min", "basis_max", "cost_partial"))


def _merge(dst: list, src: Sequence, start: int, ops: tuple[str, ...]) -> None:
    """dst[i] (op)= src[start + i] with each field's merge (sum, min or max); None is unknown."""
    for i, op in enumerate(ops):
        x = src[start + i]
        if x is None:
            continue
        cur = dst[i]
        if cur is None:
            dst[i] = x
        elif op == "sum":
            dst[i] = cur + x
        elif op == "min":
            if x < cur:
                dst[i] = x
        elif x > cur:  # max
            dst[i] = x


def _num(v: Any) -> Any:
    """PostgreSQL sums BIGINT into NUMERIC: bring Decimals back to int / float."""
    if v is None or isinstance(v, (int, float)):
        return v
    from decimal import Decimal

    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    return v


class Agg:
    """The mergeable aggregate of a group (and of its models with --breakdown)."""

    __slots__ = ("v", "models", "medians", "verdicts")

    def __init__(self) -> None:
        self.v: list[Any] = [None] * N_RUN
        self.models: dict[str | None, list[Any]] = {}
        self.medians: list[Any] = [None, None]  # of the runs' known costs, of their durations (_medians)
        self.verdicts: list[int] = [0] * len(VERDICT_FACTS)  # the evaluation view's (sums in SQL)

    def add(self, row: Sequence[Any], start: int = 0) -> None:
        _merge(self.v, row, start, _RUN_OPS)

    def add_model(self, model: str | None, row: Sequence[Any], start: int = 0) -> None:
        cur = self.models.get(model)
        if cur is None:
            cur = self.models[model] = [None] * N_MODEL
        _merge(cur, row, start, _MODEL_OPS)

    def add_verdicts(self, row: Sequence[Any], start: int) -> None:
        self.verdicts = [a + int(_num(row[start + i]) or 0) for i, a in enumerate(self.verdicts)]

    def merge(self, other: "Agg") -> None:
        _merge(self.v, other.v, 0, _RUN_OPS)
        for m, vals in other.models.items():
            self.add_model(m, vals)
        self.verdicts = [a + b for a, b in zip(self.verdicts, other.verdicts)]


NOT_APPLICABLE = "not_applicable"  # the basis of a group of plain commands only


def _cost_fields(runs: int, cost: float | None, known: int, bmin: int | None, bmax: int | None,
                 part: float | None = None) -> dict[str, Any]:
    """cost_usd / cost_basis / cost_usd_known / unmeasured_cost_runs of a group: the known
    sum counts the fully known runs and the known part of the others (money never goes
    missing), but only a group whose every run is fully known has a cost_usd."""
    basis = group_basis(runs, known, bmin, bmax, partly_known=part is not None)
    pieces = [v for v in ((cost if known else None), part) if v is not None]
    known_sum = round(sum(pieces), COST_DIGITS) if pieces else None
    return {
        "cost_usd": known_sum if basis in ("reported", "estimated", "mixed") else None,
        "cost_basis": basis,
        "cost_usd_known": known_sum,
        "unmeasured_cost_runs": runs - known,
    }


def _tokens(values: Sequence[Any], first: int) -> dict[str, Any]:
    out = {name: values[first + i] for i, name in enumerate(TOKENS)}
    parts = [out[n] for n in TOTAL_PARTS if out[n] is not None]
    out["total_tokens"] = sum(parts) if parts else None
    return out


def row_dict(key: Any, agg: Agg, q: ReportQuery) -> dict[str, Any]:
    v = [_num(x) for x in agg.v]
    runs = v[RUNS] or 0
    d: dict[str, Any] = {"key": key, "runs": runs}
    d.update(_tokens(v, IN))
    d["unmeasured_usage_runs"] = v[NO_USAGE] or 0
    # costs are known or not per piece: a run record is one, an imported session one per slot
    # it spent in (a day holding only its later part has pieces but no run)
    d.update(_cost_fields(v[PIECES] or 0, v[COST], v[COST_N] or 0, v[BMIN], v[BMAX], v[PART]))
    if runs and not v[PIECES]:  # only plain commands: no cost can exist (docs/report.md)
        d["cost_basis"] = NOT_APPLICABLE
    d.update({"failed": v[FAILED] or 0, "interrupted": v[INTR] or 0, "abandoned": v[ABAND] or 0,
              "unverified": v[UNVER] or 0, "evidence_gaps": v[GAPS] or 0})
    if q.evaluation:
        cost, duration = agg.medians
        d["median_cost_usd"] = None if cost is None else round(cost, COST_DIGITS)
        d["median_duration_ms"] = None if duration is None else int(duration)
        d.update(_verdict_fields(agg.verdicts))
    if q.breakdown:
        models = []
        for m, mv in agg.models.items():
            if m == START_KEY:  # (a session's start row: no model spent there)
                continue
            mv = [_num(x) for x in mv]
            rows = mv[M_ROWS] or 0
            md: dict[str, Any] = {"model": m, "runs": rows}
            md.update(_tokens(mv, M_IN))
            md.update(_cost_fields(rows, mv[M_COST], mv[M_COST_N] or 0, mv[M_BMIN], mv[M_BMAX], mv[M_PART]))
            models.append(md)
        models.sort(key=lambda x: (-(x["cost_usd_known"] or 0), -(x["total_tokens"] or 0), x["model"] or ""))
        d["models"] = models
    return d


def _rate(n: int, of: int) -> float | None:
    return round(n / of, RATE_DIGITS) if of else None


def _verdict_fields(c: Sequence[int]) -> dict[str, Any]:
    """ok rate (of the runs with a verdict), skill-invoked rate (of the runs expecting a skill),
    tool error rate (error + semantic-error results of all tool uses); None when nothing to rate."""
    judged, ok, expected, invoked, calls, errors = c
    return {"judged_runs": judged, "ok_runs": ok, "ok_rate": _rate(ok, judged),
            "skill_expected_runs": expected, "skill_invoked_runs": invoked,
            "skill_invoked_rate": _rate(invoked, expected),
            "tool_calls": calls, "tool_errors": errors, "tool_error_rate": _rate(errors, calls)}
