"""`run_costs_v` sums every piece of a run; `model_costs_v` says when each row was spent (issue 26).

Why: an imported session is kept in `report_facts` as one piece per 15-minute slot it spent
in (migration 0005), the run-level costs of each slot on that slot's first row. 0002's
`run_costs_v` read the run's first row only (`first = 1`), so a session's cost there was
the cost of its first 15 minutes ($3.05 where the report said $13.83 on a home of imported
Claude Code sessions). It now sums the run's pieces: a run's cost is known when every
piece's is (else NULL, basis `unknown`), its basis the pieces' bases combined.
`model_costs_v` keeps its columns and appends `spent_at`: the UTC start of the 15-minute
slot the row's usage was spent in (a run record: its start's slot), so that costs per day
can be summed as `ledger report daily` charges them (a session on every day it spent), and
leaves out the row that marks an imported session's start when its first response came later
(model_key `(start)`: no usage, no model; ledger.report.schema.START_KEY).

Revision ID: 0010_run_figures
Revises: 0009_report_rollups
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0010_run_figures"
down_revision = "0009_report_rollups"
branch_labels = None
depends_on = None

_BASIS = """CASE WHEN {cost} IS NULL THEN 'unknown' WHEN {lo} = 1 AND {hi} = 1 THEN 'reported'
                 WHEN {lo} = 2 AND {hi} = 2 THEN 'estimated' ELSE 'mixed' END"""


def _whole(mode: str) -> str:
    """A run's cost in one mode over its pieces: known when every piece's is."""
    return (f"CASE WHEN count(run_cost_{mode}) = sum(piece) AND count(run_cost_{mode}) > 0 "
            f"THEN sum(run_cost_{mode}) END")


RUN_COSTS_V = f"""
    SELECT h.path AS home, r.run_id, r.created_at, r.harness, r.model, r.skill, r.repo, r.host,
           f.outcome, f.duration_ms, f.cost_usd,
           CASE WHEN f.run_id IS NULL THEN 'pending' ELSE {_BASIS.format(cost='f.cost_usd', lo='f.basis_lo', hi='f.basis_hi')} END
               AS cost_basis,
           f.reported_cost_usd, f.estimated_cost_usd, s.value AS price_version
    FROM runs r
    JOIN homes h ON h.home_id = r.home_id
    LEFT JOIN (SELECT home_id, run_id, max(outcome) AS outcome, max(duration_ms) AS duration_ms,
                      {_whole('auto')} AS cost_usd, {_whole('reported')} AS reported_cost_usd,
                      {_whole('estimated')} AS estimated_cost_usd,
                      min(run_basis_auto) AS basis_lo, max(run_basis_auto) AS basis_hi
               FROM report_facts GROUP BY home_id, run_id) f ON f.home_id = r.home_id AND f.run_id = r.run_id
    LEFT JOIN report_state s ON s.key = 'price_version' AND f.run_id IS NOT NULL
"""

MODEL_COSTS_V = """
    SELECT h.path AS home, f.run_id, r.created_at, f.harness, f.run_model, f.model,
           f.input_tokens, f.output_tokens, f.cache_read_tokens, f.cache_write_tokens,
           f.reasoning_tokens, f.cost_auto AS cost_usd, {basis} AS cost_basis,
           f.cost_reported AS reported_cost_usd, f.cost_estimated AS estimated_cost_usd,
           f.unpriced, s.value AS price_version, {spent} AS spent_at
    FROM report_facts f
    JOIN runs r ON r.home_id = f.home_id AND r.run_id = f.run_id
    JOIN homes h ON h.home_id = f.home_id
    LEFT JOIN report_state s ON s.key = 'price_version'
    WHERE f.model_key <> '(start)'
"""
_ROW_BASIS = """CASE WHEN f.cost_auto IS NULL THEN 'unknown' WHEN f.basis_auto = 1 THEN 'reported'
                 WHEN f.basis_auto = 2 THEN 'estimated' ELSE 'mixed' END"""


def _spent() -> str:
    """The slot's start, as the dialect keeps `created_at` (SQLite: UTC text with microseconds)."""
    if op.get_bind().dialect.name == "sqlite":
        return "strftime('%Y-%m-%d %H:%M:%S.000000', f.slot * 900, 'unixepoch')"
    return "to_timestamp(f.slot * 900)"


def upgrade() -> None:
    op.execute("DROP VIEW IF EXISTS run_costs_v")
    op.execute("DROP VIEW IF EXISTS model_costs_v")
    op.execute("CREATE VIEW run_costs_v AS " + RUN_COSTS_V)
    op.execute("CREATE VIEW model_costs_v AS " + MODEL_COSTS_V.format(basis=_ROW_BASIS, spent=_spent()))


# 0002's views, as that revision wrote them (a revision keeps its own copy)
_OLD_RUN_COSTS_V = """
    SELECT h.path AS home, r.run_id, r.created_at, r.harness, r.model, r.skill, r.repo, r.host,
           f.outcome, f.duration_ms,
           f.run_cost_auto AS cost_usd,
           CASE WHEN f.run_id IS NULL THEN 'pending' ELSE {basis} END AS cost_basis,
           f.run_cost_reported AS reported_cost_usd, f.run_cost_estimated AS estimated_cost_usd,
           s.value AS price_version
    FROM runs r
    JOIN homes h ON h.home_id = r.home_id
    LEFT JOIN report_facts f ON f.home_id = r.home_id AND f.run_id = r.run_id AND f.first = 1
    LEFT JOIN report_state s ON s.key = 'price_version' AND f.run_id IS NOT NULL
"""
_OLD_ROW_BASIS = """CASE WHEN f.run_cost_auto IS NULL THEN 'unknown' WHEN f.run_basis_auto = 1 THEN 'reported'
                 WHEN f.run_basis_auto = 2 THEN 'estimated' ELSE 'mixed' END"""


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS run_costs_v")
    op.execute("DROP VIEW IF EXISTS model_costs_v")
    op.execute("CREATE VIEW run_costs_v AS " + _OLD_RUN_COSTS_V.format(basis=_OLD_ROW_BASIS))
    op.execute("CREATE VIEW model_costs_v AS " + MODEL_COSTS_V.replace(", {spent} AS spent_at", "").replace(
        "    WHERE f.model_key <> '(start)'\n", "").format(basis=_ROW_BASIS))
