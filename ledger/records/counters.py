"""The usage counters of the run record (v1), in their own module so that readers on the warm
path (ledger.report.schema, the report's fast paths) get the list without importing the
record's dataclasses (ledger.records.model re-exports them)."""

INT_COUNTERS = (
    "input_tokens", "output_tokens", "total_input_tokens", "peak_input_tokens",
    "context_window_tokens", "reasoning_tokens", "cache_read_tokens", "cache_write_tokens",
)
# ledger addition (optional, v1-compatible): the 5-minute / 1-hour split of cache writes,
# kept for pricing. Reduced like the other counters.
EXTRA_COUNTERS = ("cache_write_5m_tokens", "cache_write_1h_tokens")
ALL_INT_COUNTERS = INT_COUNTERS + EXTRA_COUNTERS
