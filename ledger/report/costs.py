"""Cost basis rules: which figure a run's cost is, and how bases combine.

Per usage stream (DESIGN §3):

- `reported`: the provider's own cost, taken only from a stream that carries one.
- `estimated`: tokens priced with the pinned price table (ledger.pricing, genai-prices).
- `auto` (default): the provider's cost where the stream has a **final receipt** with a
  cost (a completed Claude Code run), else the estimate (Codex, Gemini, a run killed before
  its receipt).

A stream whose figure is unknown (an unpriced model, no usage, no reported cost) makes the
cost of its (run, model) row and of its run unknown: never $0. Groups combine runs:

- every run known, all `reported` -> `reported`; all `estimated` -> `estimated`;
  a mix (across runs or within one run) -> `mixed`;
- some runs unknown -> `partial`: `cost_usd` is null, `cost_usd_known` is the sum of the
  known part (a lower bound), `unmeasured_cost_runs` counts the others;
- every run unknown -> `unknown`.
"""

from __future__ import annotations

from typing import Iterable

from ledger.report.models import ESTIMATED, MIXED, REPORTED

COST_MODES = ("auto", "reported", "estimated")
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


def group_basis(runs: int, known_runs: int, min_code: int | None, max_code: int | None) -> str:
    """A group's basis from how many of its runs have a known cost and their codes' range."""
    if runs == 0 or known_runs == 0:
        return "unknown"
    if known_runs < runs:
        return "partial"
    if min_code is None or max_code is None:
        return "unknown"
    if min_code != max_code:
        return "mixed"
    return BASIS_NAMES.get(min_code, "mixed")
