"""Report rollups per session and per skill; indexes for the top runs (issue 13).

Why: the HTML page of a million runs carries the 20 most expensive sessions and the
evaluation view by skill (medians of the runs' cost and duration). Both grouped every fact
row on every report (a sort of a million rows, seconds on SQLite). `report_groups` keeps
every run-level measure per session and per skill, plus each skill's runs' costs and
durations sorted (packed in a blob: an exact median is the middle value), and the sync
recomputes only the groups a changed run left or joined: a session from its facts (the new
index on `report_facts.session`), a skill (up to a million runs) from `report_group_days`, its
measures per UTC day, of which only the days a change touched are recomputed (a range of the
facts' key), its sorted figures updated by the changed runs' old and new values. The indexes on the run costs of the `auto` mode let `report
run --limit N` walk the most expensive runs in order instead of sorting them all.

`rank_auto` (each group's known cost, auto mode) is indexed so that `report session --limit
N` walks the N most expensive groups instead of ranking all of them.

The table starts empty: the next sync fills it from the facts (report_state's
`group_rules` is missing), without re-pricing anything.

Revision ID: 0009_report_rollups
Revises: 0008_run_command
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_report_rollups"
down_revision = "0008_run_command"
branch_labels = None
depends_on = None

# report_groups' measures, spelled out here so that this revision never changes with the models
RUN_MEASURES = (
    ("runs", "sum"), ("input_tokens", "sum"), ("output_tokens", "sum"), ("cache_read_tokens", "sum"),
    ("cache_write_tokens", "sum"), ("reasoning_tokens", "sum"),
    ("run_cost_auto", "sum"), ("run_cost_auto_n", "count"), ("run_cost_reported", "sum"),
    ("run_cost_reported_n", "count"), ("run_cost_estimated", "sum"), ("run_cost_estimated_n", "count"),
    ("run_basis_min", "min"), ("run_basis_max", "max"), ("failed", "sum"), ("interrupted", "sum"),
    ("abandoned", "sum"), ("unverified", "sum"), ("evidence_gaps", "sum"), ("no_usage", "sum"),
    ("run_cost_auto_partial", "sum"), ("run_cost_reported_partial", "sum"), ("run_cost_estimated_partial", "sum"),
    ("pieces", "sum"),
)
VERDICTS = ("judged", "ok", "skill_expected", "skill_invoked", "tool_calls", "tool_errors")
VALUES = ("values_cost_auto", "values_cost_reported", "values_cost_estimated", "values_duration_ms")
FACT_INDEXES = (("ix_report_facts_session", "session"),
                ("ix_report_facts_run_cost_auto", "run_cost_auto"),
                ("ix_report_facts_run_cost_auto_partial", "run_cost_auto_partial"))


def _kind(name: str, func: str) -> sa.types.TypeEngine:
    if func in ("min", "max"):
        return sa.SmallInteger()
    if func == "sum" and "cost" in name:
        return sa.Double()
    return sa.BigInteger()


def upgrade() -> None:
    op.create_table(
        "report_groups",
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("gnull", sa.SmallInteger(), nullable=False),
        sa.Column("gkey", sa.Text(), nullable=False),
        *(sa.Column(name, _kind(name, func), nullable=True) for name, func in RUN_MEASURES),
        *(sa.Column(name, sa.BigInteger(), nullable=True) for name in VERDICTS),
        *(sa.Column(name, sa.LargeBinary(), nullable=True) for name in VALUES),
        sa.Column("rank_auto", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("kind", "gnull", "gkey", name="pk_report_groups"),
        sqlite_with_rowid=False,
    )
    # `--limit N` walks the groups' known costs (cost auto) in order
    op.create_index("ix_report_groups_kind_rank_auto", "report_groups", ["kind", "rank_auto"])
    op.create_table(
        "report_group_days",
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("gnull", sa.SmallInteger(), nullable=False),
        sa.Column("gkey", sa.Text(), nullable=False),
        sa.Column("day", sa.BigInteger(), nullable=False),
        *(sa.Column(name, _kind(name, func), nullable=True) for name, func in RUN_MEASURES),
        *(sa.Column(name, sa.BigInteger(), nullable=True) for name in VERDICTS),
        sa.PrimaryKeyConstraint("kind", "gnull", "gkey", "day", name="pk_report_group_days"),
        sqlite_with_rowid=False,
    )
    for name, column in FACT_INDEXES:
        op.create_index(name, "report_facts", [column])
    op.execute("DELETE FROM report_state WHERE key = 'group_rules'")  # filled by the next sync


def downgrade() -> None:
    for name, _ in FACT_INDEXES:
        op.drop_index(name, table_name="report_facts")
    op.drop_table("report_group_days")
    op.drop_table("report_groups")
    op.execute("DELETE FROM report_state WHERE key = 'group_rules'")
