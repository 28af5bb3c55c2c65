"""Initial index schema: homes, runs and their details, the indexer's cursors, SQL views.

Why: the run records on disk are the truth; this database is a projection of them that
can always be rebuilt. Everything here is therefore derived data, keyed by
(home_id, run_id) so several ledger homes can share one database (a team's PostgreSQL).

- `runs` keeps one row per readable record with the reduced usage on the row itself
  (per-run counters, reported cost, streams / final_streams) so reports aggregate one
  table; `usage_streams` keeps the per-stream maxima (model, final receipt, cache-write
  5m/1h split) for pricing; `subjects`, `attempts`, `tool_uses` hold the other facts.
- `index_cursors` is the indexer's position in each record (file signatures, byte offset,
  prefix hash, the reducer's fold state); it is written in the same transaction as the
  rows it produced, so a crash never leaves rows without their cursor or the reverse.
- `index_shards` lets a pass skip a whole shard directory whose records are all settled
  and quiet (and whose directory did not change), so a no-change pass over a settled
  history stats the ~256 shard directories, not every run (DESIGN §7).
- `ledger_meta` marks the database as a ledger index (`application` = `ledger-index`);
  on SQLite `PRAGMA application_id` says the same in the file header, so a foreign
  SQLite file is told apart without reading any table.
- The `*_v` views are the documented, stable surface for `ledger sql` (docs/sql.md);
  tables may change between revisions, views keep their columns.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

APPLICATION_ID = 0x4C444752  # "LDGR"; must equal ledger.index.db.APPLICATION_ID

COUNTERS = (
    "input_tokens", "output_tokens", "total_input_tokens", "peak_input_tokens",
    "context_window_tokens", "reasoning_tokens", "cache_read_tokens", "cache_write_tokens",
    "cache_write_5m_tokens", "cache_write_1h_tokens",
)

TS = sa.DateTime(timezone=True)


def _counter_columns() -> list[sa.Column]:
    return [sa.Column(name, sa.BigInteger(), nullable=True) for name in COUNTERS]


def _run_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(["home_id", "run_id"], ["runs.home_id", "runs.run_id"],
                                   ondelete="CASCADE", name=f"fk_{table}_run_runs")


VIEWS = {
    "runs_v": """
        SELECT h.path AS home, r.run_id, r.parent_run_id, r.created_at, r.ended_at, r.duration_ms,
               r.harness, r.model, r.surface, r.repo, r.worktree, r.skill, r.cwd, r.host,
               r.outcome, r.state, r.evidence_gaps, r.record_rewrites, r.streams, r.final_streams,
               {counters}, r.cost_usd, r.provider_session_id, r.api_retries, r.skill_invoked,
               r.final_answer, r.path
        FROM runs r JOIN homes h ON h.home_id = r.home_id
    """,
    "subjects_v": """
        SELECT h.path AS home, s.run_id, s.position, s.selector, s.source,
               r.created_at, r.harness, r.model, r.skill, r.outcome, r.state
        FROM subjects s
        JOIN runs r ON r.home_id = s.home_id AND r.run_id = s.run_id
        JOIN homes h ON h.home_id = s.home_id
    """,
    "attempts_v": """
        SELECT h.path AS home, a.run_id, a.attempt_key, a.provider, a.model,
               a.started_at, a.finished_at, a.outcome
        FROM attempts a JOIN homes h ON h.home_id = a.home_id
    """,
    "usage_streams_v": """
        SELECT h.path AS home, u.run_id, r.created_at, r.harness, r.skill, u.stream_id,
               u.provider, u.model, u.attempt_key, u.turn_key, u.observations, u.final_receipt,
               {ucounters}, u.cost_usd
        FROM usage_streams u
        JOIN runs r ON r.home_id = u.home_id AND r.run_id = u.run_id
        JOIN homes h ON h.home_id = u.home_id
    """,
    "tool_uses_v": """
        SELECT h.path AS home, t.run_id, r.created_at, r.harness, r.skill, t.tool_name, t.uses
        FROM tool_uses t
        JOIN runs r ON r.home_id = t.home_id AND r.run_id = t.run_id
        JOIN homes h ON h.home_id = t.home_id
    """,
}


def upgrade() -> None:
    bind = op.get_bind()
    meta = op.create_table(
        "ledger_meta",
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("key", name="pk_ledger_meta"),
    )
    op.create_table(
        "homes",
        sa.Column("home_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("added_at", TS, nullable=False),
        sa.Column("last_indexed_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("home_id", name="pk_homes"),
        sa.UniqueConstraint("path", name="uq_homes_path"),
    )
    op.create_table(
        "runs",
        sa.Column("home_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("parent_run_id", sa.Text(), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("ended_at", TS, nullable=True),
        sa.Column("duration_ms", sa.BigInteger(), nullable=True),
        sa.Column("harness", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("surface", sa.Text(), nullable=True),
        sa.Column("repo", sa.Text(), nullable=True),
        sa.Column("worktree", sa.Text(), nullable=True),
        sa.Column("skill", sa.Text(), nullable=True),
        sa.Column("cwd", sa.Text(), nullable=True),
        sa.Column("host", sa.Text(), nullable=True),
        sa.Column("boot_id", sa.Text(), nullable=True),
        sa.Column("launcher_pid", sa.BigInteger(), nullable=True),
        sa.Column("launcher_start_ticks", sa.BigInteger(), nullable=True),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("settled", sa.Boolean(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("evidence_gaps", sa.Integer(), nullable=False),
        sa.Column("usage_gaps", sa.Integer(), nullable=False),
        sa.Column("record_rewrites", sa.Integer(), nullable=False),
        sa.Column("streams", sa.Integer(), nullable=False),
        sa.Column("final_streams", sa.Integer(), nullable=False),
        *_counter_columns(),
        sa.Column("cost_usd", sa.Double(), nullable=True),
        sa.Column("provider_session_id", sa.Text(), nullable=True),
        sa.Column("final_answer", sa.Text(), nullable=True),
        sa.Column("final_answer_exact", sa.Boolean(), nullable=True),
        sa.Column("api_retries", sa.Integer(), nullable=False),
        sa.Column("skill_invoked", sa.Boolean(), nullable=True),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("indexed_at", TS, nullable=False),
        sa.ForeignKeyConstraint(["home_id"], ["homes.home_id"], ondelete="CASCADE",
                                name="fk_runs_home_id_homes"),
        sa.PrimaryKeyConstraint("home_id", "run_id", name="pk_runs"),
    )
    op.create_index("ix_runs_home_id_created_at", "runs", ["home_id", "created_at"])
    op.create_index("ix_runs_home_id_settled", "runs", ["home_id", "settled"])
    op.create_index("ix_runs_created_at", "runs", ["created_at"])
    op.create_index("ix_runs_model", "runs", ["model"])
    op.create_index("ix_runs_harness", "runs", ["harness"])
    op.create_index("ix_runs_skill", "runs", ["skill"])
    op.create_table(
        "subjects",
        sa.Column("home_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("selector", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        _run_fk("subjects"),
        sa.PrimaryKeyConstraint("home_id", "run_id", "position", name="pk_subjects"),
    )
    op.create_index("ix_subjects_selector", "subjects", ["selector"])
    op.create_table(
        "attempts",
        sa.Column("home_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("attempt_key", sa.Text(), nullable=False),
        sa.Column("provider", sa.Text(), nullable=True),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("started_at", sa.Text(), nullable=True),
        sa.Column("finished_at", sa.Text(), nullable=True),
        sa.Column("outcome", sa.Text(), nullable=True),
        _run_fk("attempts"),
        sa.PrimaryKeyConstraint("home_id", "run_id", "attempt_key", name="pk_attempts"),
    )
    op.create_table(
        "usage_streams",
        sa.Column("home_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("stream_id", sa.Text(), nullable=False),
        sa.Column("provider", sa.Text(), nullable=True),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("attempt_key", sa.Text(), nullable=True),
        sa.Column("turn_key", sa.Text(), nullable=True),
        sa.Column("observations", sa.Integer(), nullable=False),
        sa.Column("final_receipt", sa.Boolean(), nullable=False),
        *_counter_columns(),
        sa.Column("cost_usd", sa.Double(), nullable=True),
        _run_fk("usage_streams"),
        sa.PrimaryKeyConstraint("home_id", "run_id", "stream_id", name="pk_usage_streams"),
    )
    op.create_index("ix_usage_streams_model", "usage_streams", ["model"])
    op.create_table(
        "tool_uses",
        sa.Column("home_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("tool_name", sa.Text(), nullable=False),
        sa.Column("uses", sa.Integer(), nullable=False),
        _run_fk("tool_uses"),
        sa.PrimaryKeyConstraint("home_id", "run_id", "tool_name", name="pk_tool_uses"),
    )
    op.create_index("ix_tool_uses_tool_name", "tool_uses", ["tool_name"])
    op.create_table(
        "index_cursors",
        sa.Column("home_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("shard", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("problem", sa.Text(), nullable=True),
        sa.Column("problem_path", sa.Text(), nullable=True),
        sa.Column("settled", sa.Boolean(), nullable=False),
        sa.Column("racy", sa.Boolean(), nullable=False),
        sa.Column("dir_sig", sa.Text(), nullable=True),
        sa.Column("events_sig", sa.Text(), nullable=True),
        sa.Column("files_sig", sa.Text(), nullable=True),
        sa.Column("context_sig", sa.Text(), nullable=True),
        sa.Column("context_ok", sa.Boolean(), nullable=True),
        sa.Column("events_ino", sa.BigInteger(), nullable=True),
        sa.Column("events_offset", sa.BigInteger(), nullable=False),
        sa.Column("torn", sa.Boolean(), nullable=False),
        sa.Column("prefix_len", sa.Integer(), nullable=False),
        sa.Column("prefix_sha256", sa.Text(), nullable=True),
        sa.Column("record_rewrites", sa.Integer(), nullable=False),
        sa.Column("fold_state", sa.Text(), nullable=True),
        sa.Column("indexed_at", TS, nullable=False),
        sa.ForeignKeyConstraint(["home_id"], ["homes.home_id"], ondelete="CASCADE",
                                name="fk_index_cursors_home_id_homes"),
        sa.PrimaryKeyConstraint("home_id", "run_id", name="pk_index_cursors"),
    )
    op.create_index("ix_index_cursors_home_id_status", "index_cursors", ["home_id", "status"])
    op.create_table(
        "index_shards",
        sa.Column("home_id", sa.Integer(), nullable=False),
        sa.Column("shard", sa.Text(), nullable=False),
        sa.Column("dir_sig", sa.Text(), nullable=True),
        sa.Column("sealed", sa.Boolean(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["home_id"], ["homes.home_id"], ondelete="CASCADE",
                                name="fk_index_shards_home_id_homes"),
        sa.PrimaryKeyConstraint("home_id", "shard", name="pk_index_shards"),
    )
    counters = ", ".join(f"r.{c}" for c in COUNTERS)
    ucounters = ", ".join(f"u.{c}" for c in COUNTERS)
    for name, body in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {body.format(counters=counters, ucounters=ucounters)}")
    op.bulk_insert(meta, [{"key": "application", "value": "ledger-index"}])
    if bind.dialect.name == "sqlite":
        op.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def downgrade() -> None:
    for name in reversed(list(VIEWS)):
        op.execute(f"DROP VIEW IF EXISTS {name}")
    for table in ("index_shards", "index_cursors", "tool_uses", "usage_streams", "attempts", "subjects", "runs",
                  "homes", "ledger_meta"):
        op.drop_table(table)
    if op.get_bind().dialect.name == "sqlite":
        op.execute("PRAGMA application_id = 0")
