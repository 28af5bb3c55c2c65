"""SQL text with its parameters: a condition or expression built from parts (`?` placeholders,
values in order), shared by the report's queries (ledger.report.aggregate) and the project
filter (ledger.report.projects), so neither imports the other for it."""

from __future__ import annotations

from typing import Any, Sequence

from ledger.plainclass import FrozenPlain


class Sql(FrozenPlain):
    """An SQL condition or expression: text with `?` placeholders, and their values in order
    (a frozen dataclass, written out: ledger.plainclass)."""

    __slots__ = ("text", "params")

    def __init__(self, text: str, params: tuple = ()) -> None:
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "params", params)


def _and(conds: Sequence[Sql]) -> Sql:
    return Sql(" AND ".join(f"({c.text})" if " OR " in c.text else c.text for c in conds),
               tuple(p for c in conds for p in c.params))


def _or(conds: Sequence[Sql]) -> Sql:
    return Sql(" OR ".join(f"({c.text})" if " AND " in c.text else c.text for c in conds),
               tuple(p for c in conds for p in c.params))


def _key_in(col: str, keys: Sequence[Any]) -> Sql:
    """col IN keys (None among them: or col IS NULL)."""
    values = [k for k in keys if k is not None]
    conds = [Sql(f"{col} IN ({', '.join('?' * len(values))})", tuple(values))] if values else []
    if len(values) < len(keys):
        conds.append(Sql(f"{col} IS NULL"))
    return _or(conds) if conds else Sql("1 = 0")


def known_cost(cost: str, part: str) -> str:
    """The known cost from the SQL expressions `cost` (the fully known costs' sum) and `part`
    (the others' known parts): their sum, NULL when neither is known. What `--limit` ranks
    groups by (ledger.report.top) and report_groups keeps as rank_auto (ledger.report.rollups)."""
    return f"CASE WHEN {cost} IS NULL AND {part} IS NULL THEN NULL ELSE coalesce({cost}, 0) + coalesce({part}, 0) END"
