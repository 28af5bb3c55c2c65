"""Homes known by a stable id, not by their path; runs findable by run id alone.

Why (issue 11): a shared index keyed homes by their absolute path, so two machines with the
same default home path deleted each other's runs, and one home reached by a second path (a
synced copy, a symlink) was counted twice. A home now carries an id written once into it
(`home-id.json`, ledger.home) and each row of `homes` is one *location* of a home: its id
(`uid`), the machine (`machine`, ledger.home.machine_id) and the resolved path. Two machines
with the same path are two rows; a run is counted once across the whole index (the indexer
keeps the first writer's copy, `ix_runs_run_id` finds the others). `runs_v` gains the
home's id and machine (the home dimension of reports).

Rows written before this revision have no uid/machine: the first pass of a machine whose
home has that path adopts the row (ledger.index.homes).

Revision ID: 0006_team_homes
Revises: 0005_sessions
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_team_homes"
down_revision = "0005_sessions"
branch_labels = None
depends_on = None

COUNTERS = (
    "input_tokens", "output_tokens", "total_input_tokens", "peak_input_tokens",
    "context_window_tokens", "reasoning_tokens", "cache_read_tokens", "cache_write_tokens",
    "cache_write_5m_tokens", "cache_write_1h_tokens",
)
# runs_v as 0005 left it, the home's id and machine appended
RUNS_V = """
    SELECT h.path AS home, r.run_id, r.parent_run_id, r.created_at, r.ended_at, r.duration_ms,
           r.harness, r.model, r.surface, r.repo, r.worktree, r.skill, r.cwd, r.host,
           r.outcome, r.state, r.evidence_gaps, r.record_rewrites, r.streams, r.final_streams,
           {counters}, r.cost_usd, r.provider_session_id, r.api_retries, r.skill_invoked,
           r.final_answer, r.path,
           r.ok, r.error_kind, r.error_detail, r.tool_calls, r.tool_ok, r.tool_errors,
           r.tool_semantic_errors,
           r.tool_calls - r.tool_ok - r.tool_errors - r.tool_semantic_errors AS tool_unknown,
           r.source{extra}
    FROM runs r JOIN homes h ON h.home_id = r.home_id
"""


def _runs_v(with_home: bool) -> None:
    op.execute("DROP VIEW IF EXISTS runs_v")
    counters = ", ".join(f"r.{c}" for c in COUNTERS)
    extra = ",\n           h.uid AS home_uid, h.machine AS home_machine" if with_home else ""
    op.execute("CREATE VIEW runs_v AS " + RUNS_V.format(counters=counters, extra=extra))


def _alter_homes_sqlite(upgrade: bool) -> None:
    """SQLite cannot drop a table's UNIQUE constraint: the table is copied. Views that name
    `homes` would make the rename fail, so every view is dropped and recreated as it was."""
    conn = op.get_bind()
    views = conn.exec_driver_sql("SELECT name, sql FROM sqlite_master WHERE type = 'view' ORDER BY name").fetchall()
    for name, _sql in views:
        op.execute(f'DROP VIEW "{name}"')
    cols = ("home_id INTEGER NOT NULL, path TEXT NOT NULL, added_at DATETIME NOT NULL, "
            "last_indexed_at DATETIME")
    if upgrade:
        op.execute(f"CREATE TABLE homes_new ({cols}, uid TEXT, machine TEXT, "
                   "CONSTRAINT pk_homes PRIMARY KEY (home_id), "
                   "CONSTRAINT uq_homes_location UNIQUE (uid, machine, path))")
        op.execute("INSERT INTO homes_new (home_id, path, added_at, last_indexed_at) "
                   "SELECT home_id, path, added_at, last_indexed_at FROM homes")
    else:
        op.execute(f"CREATE TABLE homes_new ({cols}, CONSTRAINT pk_homes PRIMARY KEY (home_id), "
                   "CONSTRAINT uq_homes_path UNIQUE (path))")
        # (two locations of one path cannot both stay: the first registered keeps it)
        op.execute("INSERT INTO homes_new SELECT home_id, path, added_at, last_indexed_at FROM homes "
                   "WHERE home_id IN (SELECT min(home_id) FROM homes GROUP BY path)")
    op.execute("DROP TABLE homes")
    op.execute("ALTER TABLE homes_new RENAME TO homes")
    for _name, sql in views:
        op.execute(sql)


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _alter_homes_sqlite(True)
    else:
        op.drop_constraint("uq_homes_path", "homes", type_="unique")
        op.add_column("homes", sa.Column("uid", sa.Text(), nullable=True))
        op.add_column("homes", sa.Column("machine", sa.Text(), nullable=True))
        op.create_unique_constraint("uq_homes_location", "homes", ["uid", "machine", "path"])
    op.create_index("ix_runs_run_id", "runs", ["run_id"])
    _runs_v(True)


def downgrade() -> None:
    _runs_v(False)
    op.drop_index("ix_runs_run_id", table_name="runs")
    if op.get_bind().dialect.name == "sqlite":
        _alter_homes_sqlite(False)
    else:
        op.drop_constraint("uq_homes_location", "homes", type_="unique")
        op.drop_column("homes", "machine")
        op.drop_column("homes", "uid")
        op.execute("DELETE FROM homes WHERE home_id NOT IN (SELECT min(home_id) FROM homes GROUP BY path)")
        op.create_unique_constraint("uq_homes_path", "homes", ["path"])
