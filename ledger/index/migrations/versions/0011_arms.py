"""Arms and trials (issue 30): `ledger run --arm NAME` and `--repeat N`.

Why: comparing two arms (a skill, a prompt, a model) over the same tasks needs to know which
arm a run belongs to and which trial of a repeated cell it is. `ledger run` writes both into
the manifest (ledger's optional additions `arm`, `trial: {number, of}`, and on the parent of
a repeat `repeat: {trials, jobs}`); `runs` gets `arm`, `trial` (the trial's number, from 1)
and `trials` (how many trials its repeat asked for; on the repeat's parent too, whose
`trial` is NULL: the parent is a grouping run, never a trial). `runs_v` shows the three,
appended.

Two report views answer `ledger report compare`'s question in SQL (docs/sql.md):
`compare_runs_v`, one row per run that can be in a comparison (every run but a repeat's
parent) with its task, arm, verdict, the report's `auto` cost and why it cannot count
(`excluded`: the one place this rule is written; `ledger report compare` reads it; a run's
cost and tokens summed over its pieces, as 0010's `run_costs_v`: an imported session is one
piece per 15-minute slot), and
`compare_v`, one row per (task, arm).

Existing rows are filled by reading every record again, as 0008 did (their manifests are
read again with the rows).

Revision ID: 0011_arms
Revises: 0010_run_figures
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_arms"
down_revision = "0010_run_figures"
branch_labels = None
depends_on = None

COUNTERS = (
    "input_tokens", "output_tokens", "total_input_tokens", "peak_input_tokens",
    "context_window_tokens", "reasoning_tokens", "cache_read_tokens", "cache_write_tokens",
    "cache_write_5m_tokens", "cache_write_1h_tokens",
)
# runs_v as 0008 left it, the arm and trial appended (earlier columns keep their places)
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
           h.uid AS home_uid, h.machine AS home_machine,
           r.command, r.exit_code{extra}
    FROM runs r JOIN homes h ON h.home_id = r.home_id
"""

# Why a run cannot count in a comparison, the first that applies (NULL: it counts). The
# verdict is the index's (ledger.records.verdict); the cost the report's `auto` one.
EXCLUDED = """CASE
             WHEN r.ok IS NULL THEN 'running'
             WHEN r.error_kind = 'abandoned' THEN 'abandoned'
             WHEN r.error_kind = 'cancelled' THEN 'cancelled'
             WHEN r.evidence_gaps > 0 THEN 'evidence-gaps'
             WHEN r.error_kind = 'evidence-unverified' THEN 'unverified'
             WHEN f.run_cost_auto IS NULL THEN 'unknown-cost'
           END"""

COMPARE_RUNS_V = f"""
    SELECT h.path AS home, r.run_id, r.parent_run_id, r.created_at,
           COALESCE(s.selector, CASE WHEN r.trial IS NOT NULL THEN r.parent_run_id END) AS task,
           r.arm, r.skill, r.trial, r.trials, r.harness, r.model, r.outcome, r.ok, r.error_kind,
           f.run_cost_auto AS cost_usd, r.duration_ms, f.run_total_tokens AS tokens,
           r.tool_calls, r.tool_errors + r.tool_semantic_errors AS tool_errors,
           r.evidence_gaps,
           {EXCLUDED} AS excluded
    FROM runs r
    JOIN homes h ON h.home_id = r.home_id
    LEFT JOIN subjects s ON s.home_id = r.home_id AND s.run_id = r.run_id AND s.position = 0
    LEFT JOIN (SELECT home_id, run_id,
                      CASE WHEN count(run_cost_auto) = sum(piece) AND count(run_cost_auto) > 0
                           THEN sum(run_cost_auto) END AS run_cost_auto,
                      max(CASE WHEN first = 1 THEN run_total_tokens END) AS run_total_tokens
               FROM report_facts GROUP BY home_id, run_id) f
           ON f.home_id = r.home_id AND f.run_id = r.run_id
    WHERE NOT (r.trials IS NOT NULL AND r.trial IS NULL)
"""

COMPARE_V = """
    SELECT task, arm, count(*) AS runs,
           sum(CASE WHEN excluded IS NULL THEN 1 ELSE 0 END) AS counted_runs,
           sum(CASE WHEN excluded IS NULL THEN 0 ELSE 1 END) AS excluded_runs,
           sum(CASE WHEN excluded IS NULL AND ok THEN 1 ELSE 0 END) AS ok_runs,
           1.0 * sum(CASE WHEN excluded IS NULL AND ok THEN 1 ELSE 0 END)
               / NULLIF(sum(CASE WHEN excluded IS NULL THEN 1 ELSE 0 END), 0) AS ok_rate,
           sum(CASE WHEN excluded IS NULL THEN cost_usd END) AS cost_usd,
           sum(CASE WHEN excluded IS NULL THEN cost_usd END)
               / NULLIF(sum(CASE WHEN excluded IS NULL AND ok THEN 1 ELSE 0 END), 0) AS cost_per_ok_usd,
           sum(CASE WHEN excluded IS NULL THEN tool_calls ELSE 0 END) AS tool_calls,
           sum(CASE WHEN excluded IS NULL THEN tool_errors ELSE 0 END) AS tool_errors
    FROM compare_runs_v
    GROUP BY task, arm
"""


def _runs_v(with_arms: bool) -> None:
    op.execute("DROP VIEW IF EXISTS runs_v")
    counters = ", ".join(f"r.{c}" for c in COUNTERS)
    extra = ",\n           r.arm, r.trial, r.trials" if with_arms else ""
    op.execute("CREATE VIEW runs_v AS " + RUNS_V.format(counters=counters, extra=extra))


def _reread_every_record() -> None:
    cursors = sa.table("index_cursors", sa.column("fold_state"), sa.column("racy", sa.Boolean),
                       sa.column("status"))
    op.execute(sa.update(cursors).where(cursors.c.status == "indexed").values(fold_state=None, racy=sa.true()))
    shards = sa.table("index_shards", sa.column("sealed", sa.Boolean))
    op.execute(sa.update(shards).values(sealed=sa.false()))


def upgrade() -> None:
    op.add_column("runs", sa.Column("arm", sa.Text(), nullable=True))
    op.add_column("runs", sa.Column("trial", sa.Integer(), nullable=True))
    op.add_column("runs", sa.Column("trials", sa.Integer(), nullable=True))
    _runs_v(True)
    op.execute("CREATE VIEW compare_runs_v AS " + COMPARE_RUNS_V)
    op.execute("CREATE VIEW compare_v AS " + COMPARE_V)
    _reread_every_record()


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS compare_v")
    op.execute("DROP VIEW IF EXISTS compare_runs_v")
    _runs_v(False)  # first: SQLite refuses to drop a column a view names
    op.drop_column("runs", "trials")
    op.drop_column("runs", "trial")
    op.drop_column("runs", "arm")
