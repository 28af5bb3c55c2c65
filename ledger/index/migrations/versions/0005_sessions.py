"""Archived client sessions (Claude Code / Codex logs) in the index.

Why: `ledger import` keeps the agents' own session logs in the home (issue 15); reports must
see that spend next to the runs ledger launched, without new commands. A session becomes a
row of `runs` (so `runs`, `report` and `sql` see it) marked by the new `runs.source`
(`record` for every existing row, `claude-log`, `codex-log`); its usage is kept per model
and 15-minute slot (`usage_streams.slot`) so a session spanning days is reported on each
day, with an estimate priced per API response (`usage_streams.est_cost_usd`: long-context
tiers are per request). `log_sessions` lists every session found, including those a run
record already holds (`linked_run_id`: counted once, as the run); `log_state` keeps each
client archive's reducer state and read positions. `report_facts.source` carries the
source into reports (`--source`), and `report_facts.piece` (rolled up as `pieces`) marks the
first row of each slot of a run: costs are known or unknown per piece, so a day is charged
what a session spent that day. Facts are derived: clearing `report_state` rebuilds them.

Revision ID: 0005_sessions
Revises: 0004_verdicts
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_sessions"
down_revision = "0004_verdicts"
branch_labels = None
depends_on = None

COUNTERS = (
    "input_tokens", "output_tokens", "total_input_tokens", "peak_input_tokens",
    "context_window_tokens", "reasoning_tokens", "cache_read_tokens", "cache_write_tokens",
    "cache_write_5m_tokens", "cache_write_1h_tokens",
)
# runs_v as 0004 left it, `source` appended (a view's earlier columns keep their places)
RUNS_V = """
    SELECT h.path AS home, r.run_id, r.parent_run_id, r.created_at, r.ended_at, r.duration_ms,
           r.harness, r.model, r.surface, r.repo, r.worktree, r.skill, r.cwd, r.host,
           r.outcome, r.state, r.evidence_gaps, r.record_rewrites, r.streams, r.final_streams,
           {counters}, r.cost_usd, r.provider_session_id, r.api_retries, r.skill_invoked,
           r.final_answer, r.path,
           r.ok, r.error_kind, r.error_detail, r.tool_calls, r.tool_ok, r.tool_errors,
           r.tool_semantic_errors,
           r.tool_calls - r.tool_ok - r.tool_errors - r.tool_semantic_errors AS tool_unknown{extra}
    FROM runs r JOIN homes h ON h.home_id = r.home_id
"""
# every imported session, with the row that counts it: its own, or the run record it is linked to
SESSIONS_V = """
    SELECT h.path AS home, s.row_id, s.source, s.provider_session_id, s.linked_run_id,
           COALESCE(s.linked_run_id, s.row_id) AS counted_as, s.files, s.path,
           r.created_at, r.ended_at, r.harness, r.model, r.surface, r.cwd, r.repo,
           r.input_tokens, r.output_tokens, r.cache_read_tokens, r.cache_write_tokens,
           r.reasoning_tokens, r.cost_usd
    FROM log_sessions s
    JOIN homes h ON h.home_id = s.home_id
    LEFT JOIN runs r ON r.home_id = s.home_id AND r.run_id = COALESCE(s.linked_run_id, s.row_id)
"""


def _runs_v(with_source: bool) -> None:
    op.execute("DROP VIEW IF EXISTS runs_v")
    counters = ", ".join(f"r.{c}" for c in COUNTERS)
    op.execute("CREATE VIEW runs_v AS " + RUNS_V.format(counters=counters, extra=",\n           r.source"
                                                        if with_source else ""))


def upgrade() -> None:
    op.add_column("runs", sa.Column("source", sa.Text(), server_default="record", nullable=False))
    op.add_column("usage_streams", sa.Column("slot", sa.BigInteger(), nullable=True))
    op.add_column("usage_streams", sa.Column("est_cost_usd", sa.Double(), nullable=True))
    op.add_column("report_facts", sa.Column("source", sa.Text(), server_default="record", nullable=False))
    op.add_column("report_facts", sa.Column("piece", sa.SmallInteger(), server_default="0", nullable=False))
    for table in ("report_slots", "report_days"):
        op.add_column(table, sa.Column("pieces", sa.BigInteger(), nullable=True))
    op.create_table(
        "log_sessions",
        sa.Column("home_id", sa.Integer(), nullable=False),
        sa.Column("row_id", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("provider_session_id", sa.Text(), nullable=False),
        sa.Column("linked_run_id", sa.Text(), nullable=True),
        sa.Column("files", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=True),
        sa.Column("fingerprint", sa.BigInteger(), nullable=False),
        sa.Column("indexed_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["home_id"], ["homes.home_id"], name="fk_log_sessions_home_id_homes",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("home_id", "row_id", name="pk_log_sessions"),
    )
    op.create_index("ix_log_sessions_provider_session_id", "log_sessions", ["provider_session_id"])
    op.create_table(
        "log_state",
        sa.Column("home_id", sa.Integer(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("indexed_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["home_id"], ["homes.home_id"], name="fk_log_state_home_id_homes",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("home_id", "source", name="pk_log_state"),
    )
    _runs_v(True)
    op.execute("CREATE VIEW sessions_v AS " + SESSIONS_V)
    op.execute("DELETE FROM report_state")  # every fact is rebuilt by the next report


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS sessions_v")
    _runs_v(False)
    op.drop_table("log_state")
    op.drop_index("ix_log_sessions_provider_session_id", table_name="log_sessions")
    op.drop_table("log_sessions")
    for table in ("subjects", "attempts", "usage_streams", "tool_uses"):  # (no cascade on SQLite)
        op.execute(f"DELETE FROM {table} WHERE EXISTS (SELECT 1 FROM runs r WHERE r.home_id = {table}.home_id "
                   f"AND r.run_id = {table}.run_id AND r.source <> 'record')")
    op.execute("DELETE FROM runs WHERE source <> 'record'")
    # a plain DROP COLUMN (SQLite >= 3.35): a batch copy would lose WITHOUT ROWID
    for table in ("report_slots", "report_days"):
        op.drop_column(table, "pieces")
    op.drop_column("report_facts", "piece")
    op.drop_column("report_facts", "source")
    op.drop_column("usage_streams", "est_cost_usd")
    op.drop_column("usage_streams", "slot")
    op.drop_column("runs", "source")
    op.execute("DELETE FROM report_state")
