"""The names of the index's own tables in plain Python: the models (ledger.index.models)
declare them, the runtime that drops, clears or grants them (ledger.index.serverdb,
ledger.index.sqlro) names them from here. One list, no SQLAlchemy (issue 27). The report's
derived tables: ledger.index.reportshape.REPORT_TABLES; the views: ledger.sqlviews."""

DATA_TABLES = ("subjects", "attempts", "usage_streams", "tool_uses", "runs")
CURSOR_TABLES = ("index_cursors", "index_shards")
LOG_TABLES = ("log_sessions", "log_state")
ALL_TABLES = DATA_TABLES + CURSOR_TABLES + LOG_TABLES + ("homes", "ledger_meta")
