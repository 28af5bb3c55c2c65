"""Cost basis rules: which figure a run's cost is, and how bases combine.

Per usage stream (DESIGN §3):

- `reported`: the provider's own cost, taken only from a stream that carries one.
- `estimated`: tokens priced with the pinned price table (ledger.pricing, genai-prices).
- `auto` (default): the provider's cost where the stream has a **final receipt** with a
  cost (a completed Claude Code run), else the estimate (Codex, Gemini, a run killed before
  its receipt). The rule itself is `ledger.records.costbasis` (receipt_cost, auto_cost),
  shared with `ledger run --json`, which may not import the report (DESIGN §6).

A stream whose figure is unknown (an unpriced model, no usage, no reported cost) makes the
cost of its (run, model) row and of its run unknown: never $0. What its other streams did
cost is still known and kept apart, as the row's *partial* figure (`split_known`): e.g. a
run whose first attempt was retried before its receipt has a reported cost for the final
attempt only. Groups combine runs:

- every run known, all `reported` -> `reported`; all `estimated` -> `estimated`;
  a mix (across runs or within one run) -> `mixed`;
- some runs unknown or only partly known -> `partial`: `cost_usd` is null,
  `cost_usd_known` is the sum of every known figure (a lower bound: the known runs and the
  known part of the others), `unmeasured_cost_runs` counts the runs not fully known;
- nothing known at all -> `unknown`.
"""

from __future__ import annotations

from typing import Iterable

from ledger.report.kinds import COST_MODES  # noqa: F401 - re-exported; kinds is its home
from ledger.report.kinds import ESTIMATED, MIXED, REPORTED  # (no SQLAlchemy: readers stay light)

BASES = ("reported", "estimated", "mixed", "partial", "unknown")
BASIS_NAMES = {REPORTED: "reported", ESTIMATED: "estimated", MIXED: "mixed"}


def combine_codes(codes: Iterable[int | None]) -> int | None:
    """The basis code of a sum of known figures (None in the input means unknown -> None)."""
    out: int | None = None
    for c in codes:
        if c is None:
            return None
        if out is None:
            out = c
        elif out != c:
            out = MIXED
    return out


def sum_known(values: Iterable[float | None]) -> float | None:
    """Sum, or None as soon as one value is unknown (an empty sum is unknown too)."""
    total: float | None = None
    for v in values:
        if v is None:
            return None
        total = v if total is None else total + v
    return total


def whole_cost(pieces: Iterable[float | None]) -> float | None:
    """A run's cost in one mode over its pieces (an imported session: one per 15-minute slot it
    spent in; a run record: one): known when every piece's is, unknown with no piece (a plain
    command). Summed exactly (math.fsum), so the same pieces in any order give the same
    figure: report_groups' sorted figures drop a run's old one by equality (facts._apply).
    `whole_cost_sql` is the rule over a run's fact rows in SQL."""
    import math

    vals = list(pieces)
    if not vals or any(v is None for v in vals):
        return None
    return math.fsum(vals)  # type: ignore[arg-type]


def whole_cost_sql(cost: str, piece: str) -> str:
    """`whole_cost` as an aggregate over one run's report_facts rows (GROUP BY the run):
    `cost` its run-level cost column (run_cost_<mode>, on each piece's row), `piece` its
    piece column. (Migration 0010's `run_costs_v` keeps its own copy of the rule.)"""
    return f"CASE WHEN count({cost}) = sum({piece}) AND count({cost}) > 0 THEN sum({cost}) END"


def split_known(values: Iterable[float | None]) -> tuple[float | None, float | None]:
    """(total, partial) of a sum whose parts may be unknown (None): the total when every part
    is known (partial None); else total None and partial the sum of the known parts (None
    when none is, or when there are no parts)."""
    vals = list(values)
    known = [v for v in vals if v is not None]
    if vals and len(known) == len(vals):
        return sum(known), None
    return None, (sum(known) if known else None)


def group_basis(runs: int, known_runs: int, min_code: int | None, max_code: int | None,
                partly_known: bool = False) -> str:
    """A group's basis from how many of its runs have a known cost, their codes' range, and
    whether the runs not fully known have a known part (`partly_known`)."""
    if runs == 0 or (known_runs == 0 and not partly_known):
        return "unknown"
    if known_runs < runs:
        return "partial"
    if min_code is None or max_code is None:
        return "unknown"
    if min_code != max_code:
        return "mixed"
    return BASIS_NAMES.get(min_code, "mixed")


def pieces_cost(pieces: Iterable[tuple[float | None, float | None, int | None]]) -> dict[str, float | str | None]:
    """cost_usd / cost_usd_known / cost_basis of a sum of cost pieces, each (cost, its known
    part when the cost is unknown, basis code): the cost only when every piece is known, the
    known sum always (`partial`: some known, `unknown`: none); no pieces at all: nothing
    known, basis None (`report blocks`, `ledger statusline`)."""
    rows = list(pieces)
    if not rows:
        return {"cost_usd": None, "cost_usd_known": None, "cost_basis": None}
    if all(r[0] is not None for r in rows):
        total = sum(r[0] for r in rows)
        return {"cost_usd": total, "cost_usd_known": total,
                "cost_basis": BASIS_NAMES.get(combine_codes(r[2] for r in rows), "unknown")}  # type: ignore[arg-type]
    known = [r[0] if r[0] is not None else r[1] for r in rows]
    some = [v for v in known if v is not None]
    return {"cost_usd": None, "cost_usd_known": sum(some) if some else None,
            "cost_basis": "partial" if some else "unknown"}


def pieces_cost_sql(cost: str, partial: str, basis: str) -> str:
    """`pieces_cost` as aggregates over fact rows (a select list; `pieces_cost_of` reads its
    row): the rows, their known costs, the costs' sum, the known sum (a cost, else its known
    part) and the basis codes' count and range. The sums run in the rows' scan order, as
    pieces_cost's do in its rows' order (a 5-hour block of 10,000 rows costs no Python)."""
    return (f"count(*), count({cost}), sum({cost}), sum(COALESCE({cost}, {partial})), count({basis}), "
            f"min({basis}), max({basis})")


def pieces_cost_of(row: tuple) -> dict[str, float | str | None]:
    """pieces_cost's figures from a `pieces_cost_sql` row (the same rule: see pieces_cost)."""
    n, n_cost, total, known, n_basis, lo, hi = row
    if not n:
        return {"cost_usd": None, "cost_usd_known": None, "cost_basis": None}
    if n_cost == n:
        code = None if n_basis < n else lo if lo == hi else MIXED  # (combine_codes)
        return {"cost_usd": total, "cost_usd_known": total, "cost_basis": BASIS_NAMES.get(code, "unknown")}
    return {"cost_usd": None, "cost_usd_known": known, "cost_basis": "partial" if known is not None else "unknown"}
