"""A run's children found by an index, not a scan of the home's runs.

Why: `ledger show RUN` lists the runs started inside it (replays, runs an agent launched:
`runs.parent_run_id`); without an index that was a scan of every run of the home (~25 M
instructions, 5 % of a warm `show` on a 10,000-run home; issue 28's warm budget).

Revision ID: 0012_run_children
Revises: 0011_arms
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0012_run_children"
down_revision = "0011_arms"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_runs_home_id_parent_run_id", "runs", ["home_id", "parent_run_id"])


def downgrade() -> None:
    op.drop_index("ix_runs_home_id_parent_run_id", table_name="runs")
