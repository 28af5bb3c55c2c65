"""The cost-basis rule, in one place: which figure is a usage stream's cost.

`auto` (what `ledger run --json` prints and `ledger report` uses by default): the provider's
own cost when the stream carries it in a **final receipt** (a completed Claude Code run),
else the stream's tokens priced with the price table (Codex and Gemini report no cost; a
run killed before its receipt only has provisional figures). A run's `auto` cost sums its
streams'; its basis is `reported`, `estimated` or `mixed` (both within one run), and the
cost is unknown (None) as soon as one stream's figure is unknown: never $0.

It lives here, at the bottom of the layers, because both the launcher (ledger.launch) and
the report (ledger.report.costs, ledger.report.sync) apply it, and launch must not import
report (DESIGN §6). Pure functions: the price table is passed in, never imported here.
"""

from __future__ import annotations

from typing import Callable, Iterable, TypeVar

REPORTED = "reported"
ESTIMATED = "estimated"
MIXED = "mixed"

S = TypeVar("S")


def receipt_cost(final_receipt: bool, cost_usd: float | None) -> float | None:
    """The provider's cost that `auto` takes for a stream: only from its final receipt."""
    return cost_usd if final_receipt and cost_usd is not None else None


def combine_bases(bases: Iterable[str]) -> str | None:
    """reported + reported -> reported, estimated + estimated -> estimated, else mixed
    (None for no figures)."""
    out: str | None = None
    for b in bases:
        out = b if out is None or out == b else MIXED
    return out


def auto_cost(streams: Iterable[S], final_receipt: Callable[[S], bool], cost_usd: Callable[[S], float | None],
              estimate: Callable[[S], tuple[float | None, str | None]]) -> tuple[float | None, str | None, str | None]:
    """(cost, basis, why unknown) of streams under `auto`. `estimate(stream)` -> (USD or
    None, reason) is called only for streams without a receipt cost."""
    total: float | None = None
    bases: list[str] = []
    for st in streams:
        figure = receipt_cost(final_receipt(st), cost_usd(st))
        if figure is not None:
            bases.append(REPORTED)
        else:
            figure, why = estimate(st)
            if figure is None:
                return None, None, why
            bases.append(ESTIMATED)
        total = figure if total is None else total + figure
    if total is None:
        return None, None, "no usage observed"
    return total, combine_bases(bases), None
