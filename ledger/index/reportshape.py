"""The report tables' shape in plain Python: the measures, kinds and codes that both the
SQLAlchemy models (ledger.index.report_tables) and the driver-level writers and readers
(ledger.report.schema, .fullsync, .quicksync) build on. One place, so the two can never
disagree; no SQLAlchemy here (the warm path imports it)."""

from __future__ import annotations

SLOT_SECONDS = 900  # the clustering slot: every zone offset in use today is a multiple of 15 min
SLOTS_PER_DAY = 86400 // SLOT_SECONDS

# cost basis codes stored in basis_auto / run_basis_auto
REPORTED, ESTIMATED, MIXED = 1, 2, 3

# Rollups of report_facts (report_slots, report_days, report_groups), recomputed by the sync
# for every slot / day / group a change touches.
# (name, aggregate, report_facts column): sums and counts add up, min / max combine.
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
    ("run_cost_auto_partial", "sum", "run_cost_auto_partial"),  # migration 0003
    ("run_cost_reported_partial", "sum", "run_cost_reported_partial"),
    ("run_cost_estimated_partial", "sum", "run_cost_estimated_partial"),
    ("pieces", "sum", "piece"),  # migration 0005
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
    ("cost_auto_partial", "sum", "cost_auto_partial"),  # migration 0003
    ("cost_reported_partial", "sum", "cost_reported_partial"),
    ("cost_estimated_partial", "sum", "cost_estimated_partial"),
)

# Group-by reports kept whole (migration 0009, report_groups / report_group_days): every
# measure of RUN_MEASURES, the verdict sums and (evaluation kinds) each group's runs' figures
# sorted, for the medians
GROUP_KINDS = ("session", "skill")  # (report kind, report_facts column); the page's per-group reports
CELL_KINDS = ("skill",)  # the kinds with few big groups, also kept per day (report_group_days)
GROUP_VERDICTS = ("judged", "ok", "skill_expected", "skill_invoked", "tool_calls", "tool_errors")
# the sorted figures of a group's runs (first rows), packed little-endian: costs as float64,
# durations as int64 (ledger.report.sync.pack_values)
GROUP_VALUES = (("values_cost_auto", "run_cost_auto"), ("values_cost_reported", "run_cost_reported"),
                ("values_cost_estimated", "run_cost_estimated"), ("values_duration_ms", "duration_ms"))

# report_state's rule versions (read by the sync, ledger.report.sync, and by the check that it
# has nothing to do, ledger.report.synced). FACT_RULES is bumped when the facts' rules change (2:
# plain commands have no cost piece; 3: an imported session's first row is in the slot of its
# start, facts._start_row): a full rebuild
FACT_RULES = "3"
# bumped when report_groups' rules change: the groups (not the facts) are rebuilt whole (2: a
# run's cost among the sorted figures is its whole cost, facts.RunValues; issue 26)
GROUP_RULES = "2"
# report_state.group_rules while report_groups / report_group_days are not built: they serve
# only `report session|skill` (aggregate.reads_groups), so a full sync (the first report after
# a cold index) leaves them to the first sync of a report that reads them (issue 10)
GROUPS_DEFERRED = "deferred"

# the triggers that fill report_changes (created by migration 0007; the sync checks they exist)
CHANGE_TRIGGERS = ("report_changes_insert", "report_changes_update", "report_changes_delete")

REPORT_TABLES = ("report_facts", "report_slots", "report_days", "report_groups", "report_group_days", "report_state",
                 "report_changes")
