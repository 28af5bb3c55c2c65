"""Runs keep the command they ran and its exit code.

Why (issue 12): `ledger runs` and `ledger show` should say what a run ran and how it
exited. `ledger run` has always written both on the `result` event (the argv redacted, the
child's exit code); the reducer now keeps the command too (ledger.records.fold). `runs`
gets `command` (the argv joined with shlex.join, so it can be pasted into a shell) and
`exit_code`; `runs_v` shows both, appended (docs/sql.md). NULL: not known, for runs
recorded without a result event (a launcher killed before the child ended), imported
client sessions, and runs whose record does not say.

Existing rows are filled by reading every record again, as 0004 did: the cursors drop
their fold state (the rewrite detection, which does not need it, is kept) and are marked
racy, the shards unsealed, so the next index pass re-reads each record whole and rewrites
its row. Until that pass both columns are NULL. The report facts do not use them:
`report_state` is kept (the rewritten rows reach the report through `report_changes`).

Revision ID: 0008_run_command
Revises: 0007_report_changes
Create Date: 2026-12-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_run_command"
down_revision = "0007_report_changes"
branch_labels = None
depends_on = None

COUNTERS = (
    "input_tokens", "output_tokens", "total_input_tokens", "peak_input_tokens",
    "context_window_tokens", "reasoning_tokens", "cache_read_tokens", "cache_write_tokens",
    "cache_write_5m_tokens", "cache_write_1h_tokens",
)
# runs_v as 0006 left it, the command and exit code appended (earlier columns keep their places)
RUNS_V = """
    SELECT h.path AS home, r.run_id, r.parent_run_id, r.created_at, r.ended_at, r.duration_ms,
           r.harness, r.model, r.surface, r.repo, r.worktree, r.skill, r.cwd, r.host,
           r.outcome, r.state, r.evidence_gaps, r.record_rewrites, r.streams, r.final_streams,
           {counters}, r.cost_usd, r.provider_session_id, r.api_retries, r.skill_invoked,
           r.final_answer, r.path,
           r.ok, r.error_kind, r.error_detail, r.tool_calls, r.tool_ok, r.tool_errors,
           r.tool_semantic_errors,
           r.tool_calls - r.tool_ok - r.tool_errors - r.tool_semantic_errors AS tool_unknown,
           r.source,
           h.uid AS home_uid, h.machine AS home_machine{extra}
    FROM runs r JOIN homes h ON h.home_id = r.home_id
"""


def _runs_v(with_command: bool) -> None:
    op.execute("DROP VIEW IF EXISTS runs_v")
    counters = ", ".join(f"r.{c}" for c in COUNTERS)
    extra = ",\n           r.command, r.exit_code" if with_command else ""
    op.execute("CREATE VIEW runs_v AS " + RUNS_V.format(counters=counters, extra=extra))


def _reread_every_record() -> None:
    cursors = sa.table("index_cursors", sa.column("fold_state"), sa.column("racy", sa.Boolean),
                       sa.column("status"))
    op.execute(sa.update(cursors).where(cursors.c.status == "indexed").values(fold_state=None, racy=sa.true()))
    shards = sa.table("index_shards", sa.column("sealed", sa.Boolean))
    op.execute(sa.update(shards).values(sealed=sa.false()))


def upgrade() -> None:
    op.add_column("runs", sa.Column("command", sa.Text(), nullable=True))
    op.add_column("runs", sa.Column("exit_code", sa.Integer(), nullable=True))
    _runs_v(True)
    _reread_every_record()


def downgrade() -> None:
    _runs_v(False)  # first: SQLite refuses to drop a column a view names
    # a plain DROP COLUMN (SQLite >= 3.35): a batch copy would lose WITHOUT ROWID
    op.drop_column("runs", "exit_code")
    op.drop_column("runs", "command")
