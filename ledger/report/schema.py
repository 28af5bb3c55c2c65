"""The report tables' shape as the sync writes them, without SQLAlchemy (issue 10).

The tables are declared with the index's schema (ledger.index.report_tables, SQLAlchemy
models). The writers, in plain SQL (ledger.report.sync, .rollups, .fullsync, .quicksync), need
their column lists without importing those models: the measures, kinds and codes come from
ledger.index.reportshape (which the models use too); the column lists below are checked
against the models by ledger.report.models.schema_disagreements (tests/test_quicksync.py).
"""

from __future__ import annotations

from ledger.records.counters import ALL_INT_COUNTERS

from ledger.index.reportshape import (  # noqa: F401 - re-exported: the shape the models declare too
    CELL_KINDS, CHANGE_TRIGGERS, ESTIMATED, FACT_RULES, GROUP_KINDS, GROUP_RULES, GROUP_VALUES, GROUP_VERDICTS,
    GROUPS_DEFERRED, MIXED, MODEL_MEASURES, REPORTED, RUN_MEASURES, SLOT_SECONDS, SLOTS_PER_DAY,
)

COUNTER_COLUMNS = ALL_INT_COUNTERS  # (ledger.index.models: usage_streams' counters)
TOKEN_COLUMNS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
# the model_key of an imported session's start row (ledger.report.facts._start_row): no model
# has this name; every per-model figure leaves it out (ledger.report.accumulate, migration
# 0010's model_costs_v)
START_KEY = "(start)"
VALUE_KINDS = ("skill",)  # the evaluation kinds among GROUP_KINDS: their runs' figures are kept sorted
GROUP_COLUMNS = (["kind", "gnull", "gkey"] + [m[0] for m in RUN_MEASURES] + list(GROUP_VERDICTS) + ["rank_auto"])
CELL_COLUMNS = (["kind", "gnull", "gkey", "day"] + [m[0] for m in RUN_MEASURES] + list(GROUP_VERDICTS))

# report_facts' columns in table order (the tuples of ledger.report.fullsync.record_rows)
FACT_COLUMNS = (
    "slot", "home_id", "run_id", "model_key", "created_s", "first", "indexed_at", "settled", "state",
    "usage_fingerprint", "harness", "source", "piece", "run_model", "model", "models", "skill", "repo", "host",
    "session", "subject", "subjects_n", "outcome", "failed", "interrupted", "abandoned", "unverified",
    "evidence_gaps", "no_usage", "duration_ms", "run_cost_reported", "run_cost_estimated", "run_cost_auto",
    "run_basis_auto", "run_total_tokens", "input_tokens", "output_tokens", "cache_read_tokens",
    "cache_write_tokens", "reasoning_tokens", "cost_reported", "cost_estimated", "cost_auto", "basis_auto",
    "unpriced", "run_cost_reported_partial", "run_cost_estimated_partial", "run_cost_auto_partial",
    "cost_reported_partial", "cost_estimated_partial", "cost_auto_partial", "judged", "ok", "skill_expected",
    "skill_invoked", "tool_calls", "tool_errors",
)
# what a fact row is built from: these columns of `runs` and `usage_streams`, in this order
RUN_COLUMNS = ("home_id", "run_id", "created_at", "harness", "model", "skill", "repo", "host",
               "provider_session_id", "outcome", "settled", "state", "evidence_gaps", "duration_ms",
               "indexed_at", "source", "ok", "skill_invoked", "tool_calls", "tool_errors", "tool_semantic_errors")
STREAM_COLUMNS = ("home_id", "run_id", "stream_id", "provider", "model", "final_receipt", "cost_usd", "slot",
                  "est_cost_usd") + COUNTER_COLUMNS
