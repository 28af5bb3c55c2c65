"""Report facts keep the known part of a cost that is not fully known.

Why: a run whose provider reported a cost on one stream but not on another (an attempt
retried before its final receipt, a run killed before its result), or that used one priced
and one unpriced model, had its whole cost reported as unknown: the part that *is* known
went missing from `cost_usd_known` (issue 17). Each cost column of `report_facts` (per run
and per model, for `auto`, `reported` and `estimated`) gets a `*_partial` companion: the
sum of the known figures when the cost is not fully known, NULL otherwise (so the common
case costs one header byte on SQLite). The rollups sum them like the costs. The facts are
derived data: clearing `report_state` makes the next report rebuild them all.

Revision ID: 0003_partial_costs
Revises: 0002_report
Create Date: 2026-12-14
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_partial_costs"
down_revision = "0002_report"
branch_labels = None
depends_on = None

MODES = ("auto", "reported", "estimated")
FACT_COLUMNS = tuple(f"run_cost_{m}_partial" for m in MODES) + tuple(f"cost_{m}_partial" for m in MODES)
TABLES = ("report_facts", "report_slots", "report_days")


def upgrade() -> None:
    for table in TABLES:
        for name in FACT_COLUMNS:
            op.add_column(table, sa.Column(name, sa.Double(), nullable=True))
    op.execute("DELETE FROM report_state")  # every fact is rebuilt (and re-priced) by the next report


def downgrade() -> None:
    # a plain DROP COLUMN (SQLite >= 3.35): a batch copy would lose WITHOUT ROWID
    for table in TABLES:
        for name in FACT_COLUMNS:
            op.drop_column(table, name)
    op.execute("DELETE FROM report_state")
