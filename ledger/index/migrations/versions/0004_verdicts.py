"""Verdicts: every run says whether it counts and why not; tool results carry their status.

Why (issue 14): an evaluation needs to know which runs count. `runs` gets the verdict of
ledger.records.verdict (`ok`, NULL while a run has none yet; `error_kind`, `error_detail`)
and its tool results per status (`tool_calls`, `tool_ok`, `tool_errors`,
`tool_semantic_errors`; a use without a result is unknown); `tool_uses` gets the same per
tool (`ok`, `errors`, `semantic_errors`); `report_facts` the run-level counts the
evaluation view rates (`judged`, `ok`, `skill_expected`, `skill_invoked`, `tool_calls`,
`tool_errors`). `runs_v` and `tool_uses_v` show them (docs/sql.md).

The verdict reads facts of the result event the reducer did not keep before, so every
record is read again by the next index pass: the cursors drop their fold state (the
rewrite detection, which does not need it, is kept) and are marked racy, the shards
unsealed. Until then a run's verdict is NULL. The report facts are rebuilt by the next
report (report_state cleared), like 0003 did.

Revision ID: 0004_verdicts
Revises: 0003_partial_costs
Create Date: 2026-12-20
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_verdicts"
down_revision = "0003_partial_costs"
branch_labels = None
depends_on = None

COUNTERS = (
    "input_tokens", "output_tokens", "total_input_tokens", "peak_input_tokens",
    "context_window_tokens", "reasoning_tokens", "cache_read_tokens", "cache_write_tokens",
    "cache_write_5m_tokens", "cache_write_1h_tokens",
)
RUN_COLUMNS = (("ok", sa.Boolean, None), ("error_kind", sa.Text, None), ("error_detail", sa.Text, None),
               ("tool_calls", sa.Integer, "0"), ("tool_ok", sa.Integer, "0"), ("tool_errors", sa.Integer, "0"),
               ("tool_semantic_errors", sa.Integer, "0"))
TOOL_COLUMNS = ("ok", "errors", "semantic_errors")
FACT_COLUMNS = (("judged", sa.SmallInteger), ("ok", sa.SmallInteger), ("skill_expected", sa.SmallInteger),
                ("skill_invoked", sa.SmallInteger), ("tool_calls", sa.Integer), ("tool_errors", sa.Integer))

# 0001's bodies with the new columns (appended: a view's earlier columns keep their places)
OLD_VIEWS = {
    "runs_v": """
        SELECT h.path AS home, r.run_id, r.parent_run_id, r.created_at, r.ended_at, r.duration_ms,
               r.harness, r.model, r.surface, r.repo, r.worktree, r.skill, r.cwd, r.host,
               r.outcome, r.state, r.evidence_gaps, r.record_rewrites, r.streams, r.final_streams,
               {counters}, r.cost_usd, r.provider_session_id, r.api_retries, r.skill_invoked,
               r.final_answer, r.path{extra}
        FROM runs r JOIN homes h ON h.home_id = r.home_id
    """,
    "tool_uses_v": """
        SELECT h.path AS home, t.run_id, r.created_at, r.harness, r.skill, t.tool_name, t.uses{extra}
        FROM tool_uses t
        JOIN runs r ON r.home_id = t.home_id AND r.run_id = t.run_id
        JOIN homes h ON h.home_id = t.home_id
    """,
}
EXTRA = {
    "runs_v": """,
               r.ok, r.error_kind, r.error_detail, r.tool_calls, r.tool_ok, r.tool_errors,
               r.tool_semantic_errors,
               r.tool_calls - r.tool_ok - r.tool_errors - r.tool_semantic_errors AS tool_unknown""",
    "tool_uses_v": """, t.ok, t.errors, t.semantic_errors,
               t.uses - t.ok - t.errors - t.semantic_errors AS unknown""",
}


def _views(new: bool) -> None:
    counters = ", ".join(f"r.{c}" for c in COUNTERS)
    for name, body in OLD_VIEWS.items():
        op.execute(f"DROP VIEW IF EXISTS {name}")
        op.execute(f"CREATE VIEW {name} AS {body.format(counters=counters, extra=EXTRA[name] if new else '')}")


def _reread_every_record() -> None:
    cursors = sa.table("index_cursors", sa.column("fold_state"), sa.column("racy", sa.Boolean),
                       sa.column("status"))
    op.execute(sa.update(cursors).where(cursors.c.status == "indexed").values(fold_state=None, racy=sa.true()))
    shards = sa.table("index_shards", sa.column("sealed", sa.Boolean))
    op.execute(sa.update(shards).values(sealed=sa.false()))
    op.execute("DELETE FROM report_state")  # every fact is rebuilt by the next report


def upgrade() -> None:
    for name, type_, default in RUN_COLUMNS:
        op.add_column("runs", sa.Column(name, type_(), nullable=default is None, server_default=default))
    for name in TOOL_COLUMNS:
        op.add_column("tool_uses", sa.Column(name, sa.Integer(), nullable=False, server_default="0"))
    for name, type_ in FACT_COLUMNS:
        op.add_column("report_facts", sa.Column(name, type_(), nullable=False, server_default="0"))
    _views(new=True)
    _reread_every_record()


def downgrade() -> None:
    _views(new=False)
    # a plain DROP COLUMN (SQLite >= 3.35): a batch copy would lose WITHOUT ROWID
    for name, _ in FACT_COLUMNS:
        op.drop_column("report_facts", name)
    for name in TOOL_COLUMNS:
        op.drop_column("tool_uses", name)
    for name, _, _ in RUN_COLUMNS:
        op.drop_column("runs", name)
