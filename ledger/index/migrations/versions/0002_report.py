"""Report facts: the cost-estimate cache and the tables `ledger report` aggregates.

Why: estimating a run's cost from its tokens (genai-prices) costs ~0.1-0.3 ms per usage
stream, too slow to redo for every report over a long history, so each (run, model) row of
`report_facts` keeps its estimate with a fingerprint of the usage it priced (the price
data version is kept in `report_state`) and is re-priced only when either changes. The
same rows carry every column a report groups or filters by, clustered on SQLite by the
15-minute UTC slot of the run's start, so a report never joins `runs` (wide, text-keyed).
`report_slots` (per slot and model) and `report_days` (per UTC day, harness, models and
outcome) roll the facts up so that `daily`/`weekly`/`monthly` and `model`/`harness` read
thousands of rows instead of a million; the sync recomputes the rollup rows of every slot
and day a change touches. All of it is derived from `runs`, `usage_streams`, `subjects`
and the price table (ledger.report.sync), declared in ledger/index/report_tables.py (filled by the report).

`ix_runs_indexed_at` lets the sync find the runs written since it last looked. The views
`run_costs_v` and `model_costs_v` give `ledger sql` the same costs as `ledger report`.

Revision ID: 0002_report
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_report"
down_revision = "0001"
branch_labels = None
depends_on = None


# Rollups of report_facts (kept in step by the sync): (name, aggregate). Spelled out here so
# this revision never changes with the models.
RUN_MEASURES = (
    ("runs", "sum"), ("input_tokens", "sum"), ("output_tokens", "sum"), ("cache_read_tokens", "sum"),
    ("cache_write_tokens", "sum"), ("reasoning_tokens", "sum"),
    ("run_cost_auto", "sum"), ("run_cost_auto_n", "count"), ("run_cost_reported", "sum"),
    ("run_cost_reported_n", "count"), ("run_cost_estimated", "sum"), ("run_cost_estimated_n", "count"),
    ("run_basis_min", "min"), ("run_basis_max", "max"), ("failed", "sum"), ("interrupted", "sum"),
    ("abandoned", "sum"), ("unverified", "sum"), ("evidence_gaps", "sum"), ("no_usage", "sum"),
)
MODEL_MEASURES = (
    ("model_rows", "count"), ("cost_auto", "sum"), ("cost_auto_n", "count"), ("cost_reported", "sum"),
    ("cost_reported_n", "count"), ("cost_estimated", "sum"), ("cost_estimated_n", "count"),
    ("basis_min", "min"), ("basis_max", "max"),
)


def _measure_columns(measures: tuple) -> list[sa.Column]:
    def kind(name: str, func: str) -> sa.types.TypeEngine:
        if func in ("min", "max"):
            return sa.SmallInteger()
        if func == "sum" and "cost" in name:
            return sa.Double()
        return sa.BigInteger()

    return [sa.Column(name, kind(name, func), nullable=True) for name, func in measures]


_BASIS = """CASE WHEN {cost} IS NULL THEN 'unknown' WHEN {basis} = 1 THEN 'reported'
                 WHEN {basis} = 2 THEN 'estimated' ELSE 'mixed' END"""

# Documented in docs/report.md ("The same with `ledger sql`"); stable like the index's views.
VIEWS = {
    # one row per indexed run; cost_basis 'pending' until a report has priced the run
    "run_costs_v": """
        SELECT h.path AS home, r.run_id, r.created_at, r.harness, r.model, r.skill, r.repo, r.host,
               f.outcome, f.duration_ms,
               f.run_cost_auto AS cost_usd,
               CASE WHEN f.run_id IS NULL THEN 'pending' ELSE {run_basis} END AS cost_basis,
               f.run_cost_reported AS reported_cost_usd, f.run_cost_estimated AS estimated_cost_usd,
               s.value AS price_version
        FROM runs r
        JOIN homes h ON h.home_id = r.home_id
        LEFT JOIN report_facts f ON f.home_id = r.home_id AND f.run_id = r.run_id AND f.first = 1
        LEFT JOIN report_state s ON s.key = 'price_version' AND f.run_id IS NOT NULL
    """,
    # one row per (run, usage-stream model): tokens and cost of that model in that run
    "model_costs_v": """
        SELECT h.path AS home, f.run_id, r.created_at, f.harness, f.run_model, f.model,
               f.input_tokens, f.output_tokens, f.cache_read_tokens, f.cache_write_tokens,
               f.reasoning_tokens, f.cost_auto AS cost_usd, {basis} AS cost_basis,
               f.cost_reported AS reported_cost_usd, f.cost_estimated AS estimated_cost_usd,
               f.unpriced, s.value AS price_version
        FROM report_facts f
        JOIN runs r ON r.home_id = f.home_id AND r.run_id = f.run_id
        JOIN homes h ON h.home_id = f.home_id
        LEFT JOIN report_state s ON s.key = 'price_version'
    """,
}


def upgrade() -> None:
    op.create_table(
        "report_facts",
        sa.Column("slot", sa.BigInteger(), nullable=False),
        sa.Column("home_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("model_key", sa.Text(), nullable=False),
        sa.Column("created_s", sa.BigInteger(), nullable=False),
        sa.Column("first", sa.SmallInteger(), nullable=False),
        sa.Column("indexed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("settled", sa.SmallInteger(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("usage_fingerprint", sa.BigInteger(), nullable=False),
        sa.Column("harness", sa.Text(), nullable=False),
        sa.Column("run_model", sa.Text(), nullable=True),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("models", sa.Text(), nullable=False),
        sa.Column("skill", sa.Text(), nullable=True),
        sa.Column("repo", sa.Text(), nullable=True),
        sa.Column("host", sa.Text(), nullable=True),
        sa.Column("session", sa.Text(), nullable=True),
        sa.Column("subject", sa.Text(), nullable=True),
        sa.Column("subjects_n", sa.SmallInteger(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("failed", sa.SmallInteger(), nullable=False),
        sa.Column("interrupted", sa.SmallInteger(), nullable=False),
        sa.Column("abandoned", sa.SmallInteger(), nullable=False),
        sa.Column("unverified", sa.SmallInteger(), nullable=False),
        sa.Column("evidence_gaps", sa.Integer(), nullable=False),
        sa.Column("no_usage", sa.SmallInteger(), nullable=False),
        sa.Column("duration_ms", sa.BigInteger(), nullable=True),
        sa.Column("run_cost_reported", sa.Double(), nullable=True),
        sa.Column("run_cost_estimated", sa.Double(), nullable=True),
        sa.Column("run_cost_auto", sa.Double(), nullable=True),
        sa.Column("run_basis_auto", sa.SmallInteger(), nullable=True),
        sa.Column("run_total_tokens", sa.BigInteger(), nullable=True),
        sa.Column("input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("output_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=True),
        sa.Column("reasoning_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cost_reported", sa.Double(), nullable=True),
        sa.Column("cost_estimated", sa.Double(), nullable=True),
        sa.Column("cost_auto", sa.Double(), nullable=True),
        sa.Column("basis_auto", sa.SmallInteger(), nullable=True),
        sa.Column("unpriced", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("slot", "home_id", "run_id", "model_key", name="pk_report_facts"),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_report_facts_home_id_run_id", "report_facts", ["home_id", "run_id"])
    op.create_index("ix_report_facts_settled_state", "report_facts", ["settled", "state"])
    op.create_index("ix_report_facts_unpriced", "report_facts", ["unpriced"])
    op.create_table(
        "report_slots",
        sa.Column("slot", sa.BigInteger(), nullable=False),
        sa.Column("model_key", sa.Text(), nullable=False),
        *_measure_columns(RUN_MEASURES + MODEL_MEASURES),
        sa.PrimaryKeyConstraint("slot", "model_key", name="pk_report_slots"),
    )
    op.create_table(
        "report_days",
        sa.Column("day", sa.BigInteger(), nullable=False),
        sa.Column("harness", sa.Text(), nullable=False),
        sa.Column("run_model_key", sa.Text(), nullable=False),
        sa.Column("model_key", sa.Text(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        *_measure_columns(RUN_MEASURES + MODEL_MEASURES),
        sa.PrimaryKeyConstraint("day", "harness", "run_model_key", "model_key", "outcome", name="pk_report_days"),
    )
    op.create_table(
        "report_state",
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("key", name="pk_report_state"),
    )
    op.create_index("ix_runs_indexed_at", "runs", ["indexed_at"])
    run_basis = _BASIS.format(cost="f.run_cost_auto", basis="f.run_basis_auto")
    basis = _BASIS.format(cost="f.cost_auto", basis="f.basis_auto")
    for name, body in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {body.format(run_basis=run_basis, basis=basis)}")


def downgrade() -> None:
    for name in reversed(list(VIEWS)):
        op.execute(f"DROP VIEW IF EXISTS {name}")
    op.drop_index("ix_runs_indexed_at", table_name="runs")
    op.drop_table("report_state")
    op.drop_table("report_days")
    op.drop_table("report_slots")
    op.drop_table("report_facts")
