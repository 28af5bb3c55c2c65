"""The report finds changed runs through a change log filled by triggers, not by timestamps.

Why (issue 11): the report sync took the runs to rebuild as those with `runs.indexed_at` at
or after its last high-water mark (minus 2 s). `indexed_at` comes from the clock of the
machine that indexed the run, so a machine 1 h behind (or an index pass committing after
a later one) wrote rows older than the mark: such an update was in `runs_v` and missing
from every later report. Now every INSERT, UPDATE and DELETE on `runs` adds the run's key
to `report_changes` in the same transaction (triggers: whatever code writes `runs`); the
sync deletes the rows it sees and rebuilds exactly those runs. A row of a transaction still
open is not seen and not deleted, so it is taken by the next sync: no clock, no margin.

`ix_runs_indexed_at` served only the old lookup and goes (one index less per written run).
The facts were synced under the old rule and may miss updates: clearing `report_state`
makes the next report rebuild them all.

Revision ID: 0007_report_changes
Revises: 0006_team_homes
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_report_changes"
down_revision = "0006_team_homes"
branch_labels = None
depends_on = None

TRIGGERS = ("report_changes_insert", "report_changes_update", "report_changes_delete")

# SQLite: row triggers (writers are serialised by the database lock)
SQLITE_TRIGGERS = (
    "CREATE TRIGGER report_changes_insert AFTER INSERT ON runs BEGIN "
    "INSERT INTO report_changes (home_id, run_id) VALUES (NEW.home_id, NEW.run_id); END",
    # (a key that changed leaves its old key behind too)
    "CREATE TRIGGER report_changes_update AFTER UPDATE ON runs BEGIN "
    "INSERT INTO report_changes (home_id, run_id) VALUES (NEW.home_id, NEW.run_id); "
    "INSERT INTO report_changes (home_id, run_id) SELECT OLD.home_id, OLD.run_id "
    "WHERE OLD.home_id IS NOT NEW.home_id OR OLD.run_id IS NOT NEW.run_id; END",
    "CREATE TRIGGER report_changes_delete AFTER DELETE ON runs BEGIN "
    "INSERT INTO report_changes (home_id, run_id) VALUES (OLD.home_id, OLD.run_id); END",
)

# PostgreSQL: one set-based insert per statement (transition tables), so a batch or a COPY
# of thousands of runs costs one INSERT ... SELECT, not a trigger call per row
PG_FUNCTION = """
CREATE OR REPLACE FUNCTION ledger_report_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO report_changes (home_id, run_id) SELECT home_id, run_id FROM ledger_new_runs;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO report_changes (home_id, run_id)
        SELECT home_id, run_id FROM ledger_new_runs UNION SELECT home_id, run_id FROM ledger_old_runs;
    ELSE
        INSERT INTO report_changes (home_id, run_id) SELECT home_id, run_id FROM ledger_old_runs;
    END IF;
    RETURN NULL;
END
$$
"""
PG_TRIGGERS = (
    "CREATE TRIGGER report_changes_insert AFTER INSERT ON runs REFERENCING NEW TABLE AS ledger_new_runs "
    "FOR EACH STATEMENT EXECUTE FUNCTION ledger_report_changes()",
    "CREATE TRIGGER report_changes_update AFTER UPDATE ON runs "
    "REFERENCING OLD TABLE AS ledger_old_runs NEW TABLE AS ledger_new_runs "
    "FOR EACH STATEMENT EXECUTE FUNCTION ledger_report_changes()",
    "CREATE TRIGGER report_changes_delete AFTER DELETE ON runs REFERENCING OLD TABLE AS ledger_old_runs "
    "FOR EACH STATEMENT EXECUTE FUNCTION ledger_report_changes()",
)


def upgrade() -> None:
    op.create_table(
        "report_changes",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("home_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_report_changes"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(PG_FUNCTION)
        for sql in PG_TRIGGERS:
            op.execute(sql)
    else:
        for sql in SQLITE_TRIGGERS:
            op.execute(sql)
    op.drop_index("ix_runs_indexed_at", table_name="runs")
    op.execute("DELETE FROM report_state")  # every fact is rebuilt by the next report


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for name in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}" + (" ON runs" if postgres else ""))
    if postgres:
        op.execute("DROP FUNCTION IF EXISTS ledger_report_changes()")
    op.drop_table("report_changes")
    op.create_index("ix_runs_indexed_at", "runs", ["indexed_at"])
    op.execute("DELETE FROM report_state")  # the old sync starts from a full rebuild
