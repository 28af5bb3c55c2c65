"""The report tables' shape as the sync writes them, without SQLAlchemy (issue 10).

The tables are declared with the index's schema (ledger.index.report_tables, SQLAlchemy
models). The writers that go through the sqlite3 driver (ledger.report.fullsync, .quicksync)
need their column lists, measures and codes without importing those models, so they are
repeated here; ledger.report.sync checks at import that both agree (and so does
tests/test_quicksync.py).
"""

from __future__ import annotations

from ledger.records.counters import ALL_INT_COUNTERS

SLOT_SECONDS = 900
SLOTS_PER_DAY = 86400 // SLOT_SECONDS
REPORTED, ESTIMATED, MIXED = 1, 2, 3  # cost basis codes (basis_auto, run_basis_auto)
COUNTER_COLUMNS = ALL_INT_COUNTERS  # (ledger.index.models: usage_streams' counters)
TOKEN_COLUMNS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
# the model_key of an imported session's start row (ledger.report.facts._start_row): no model
# has this name; every per-model figure leaves it out (ledger.report.accumulate, migration
# 0010's model_costs_v)
START_KEY = "(start)"
CHANGE_TRIGGERS = ("report_changes_insert", "report_changes_update", "report_changes_delete")

# (name, aggregate, report_facts column) of the rollups (report_slots, report_days, report_groups)
RUN_MEASURES = (
    ("runs", "sum", "first"),
    ("input_tokens", "sum", "input_tokens"),
    ("output_tokens", "sum", "output_tokens"),
    ("cache_read_tokens", "sum", "cache_read_tokens"),
    ("cache_write_tokens", "sum", "cache_write_tokens"),
    ("reasoning_tokens", "sum", "reasoning_tokens"),
    ("run_cost_auto", "sum", "run_cost_auto"),
    ("run_cost_auto_n", "count", "run_cost_auto"),
    ("run_cost_reported", "sum", "run_cost_reported"),
    ("run_cost_reported_n", "count", "run_cost_reported"),
    ("run_cost_estimated", "sum", "run_cost_estimated"),
    ("run_cost_estimated_n", "count", "run_cost_estimated"),
    ("run_basis_min", "min", "run_basis_auto"),
    ("run_basis_max", "max", "run_basis_auto"),
    ("failed", "sum", "failed"),
    ("interrupted", "sum", "interrupted"),
    ("abandoned", "sum", "abandoned"),
    ("unverified", "sum", "unverified"),
    ("evidence_gaps", "sum", "evidence_gaps"),
    ("no_usage", "sum", "no_usage"),
    ("run_cost_auto_partial", "sum", "run_cost_auto_partial"),
    ("run_cost_reported_partial", "sum", "run_cost_reported_partial"),
    ("run_cost_estimated_partial", "sum", "run_cost_estimated_partial"),
    ("pieces", "sum", "piece"),
)
MODEL_MEASURES = (
    ("model_rows", "count", None),
    ("cost_auto", "sum", "cost_auto"),
    ("cost_auto_n", "count", "cost_auto"),
    ("cost_reported", "sum", "cost_reported"),
    ("cost_reported_n", "count", "cost_reported"),
    ("cost_estimated", "sum", "cost_estimated"),
    ("cost_estimated_n", "count", "cost_estimated"),
    ("basis_min", "min", "basis_auto"),
    ("basis_max", "max", "basis_auto"),
    ("cost_auto_partial", "sum", "cost_auto_partial"),
    ("cost_reported_partial", "sum", "cost_reported_partial"),
    ("cost_estimated_partial", "sum", "cost_estimated_partial"),
)

# report_groups / report_group_days
GROUP_KINDS = ("session", "skill")
CELL_KINDS = ("skill",)
VALUE_KINDS = ("skill",)  # the evaluation kinds among GROUP_KINDS: their runs' figures are kept sorted
GROUP_VERDICTS = ("judged", "ok", "skill_expected", "skill_invoked", "tool_calls", "tool_errors")
GROUP_VALUES = (("values_cost_auto", "run_cost_auto"), ("values_cost_reported", "run_cost_reported"),
                ("values_cost_estimated", "run_cost_estimated"), ("values_duration_ms", "duration_ms"))
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
