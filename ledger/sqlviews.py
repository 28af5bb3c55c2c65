"""The names of the documented SQL views: one list that the schema, `ledger sql` (its help and
hints) and the docs test read. No SQLAlchemy here: the CLI's help stays cheap."""

VIEWS = ("runs_v", "subjects_v", "attempts_v", "usage_streams_v", "tool_uses_v", "sessions_v")
# the report's: costs (migration 0002_report) and comparisons of arms (0011_arms)
REPORT_VIEWS = ("run_costs_v", "model_costs_v", "compare_runs_v", "compare_v")
DOCUMENTED_VIEWS = VIEWS + REPORT_VIEWS
