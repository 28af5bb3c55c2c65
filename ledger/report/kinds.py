"""The report vocabulary: kinds, filters and their labels, outcomes (one home).

`ledger.report.query` validates queries against these and `ledger report` builds its
choices and help text from them. Kept free of SQLAlchemy and of the rest of the report
package so that the CLI can import it while `ledger --help` stays fast.
"""

from __future__ import annotations

# time reports first (bucketed), then the group-by reports
TIME_KINDS = ("daily", "weekly", "monthly")
KINDS = TIME_KINDS + ("run", "session", "model", "harness", "skill", "subject", "repo", "host", "task", "home")
# the evaluation view: the subject / skill reports (`--by subject|skill`)
EVALUATION_KINDS = ("subject", "skill")
# reports of their own shape, not ReportQuery's (`report blocks`: ledger.report.blocks; `report project`: ledger.report.projects)
EXTRA_KINDS = ("blocks", "project")
OUTCOMES = ("completed", "failed", "interrupted", "abandoned", "running", "unknown")
# filter name -> what the filter matches (the CLI's `--NAME` help)
FILTER_LABELS = {
    "harness": "harness",
    "model": "model (the launched model or any model it used)",
    "skill": "skill",
    "subject": "subject selector (e.g. task:LOO-1)",
    "repo": "repository",
    "host": "host",
    "source": "source (record: launched by `ledger run`; claude-log, codex-log, gemini-log: imported sessions)",
    "home_id": "home id (`ledger homes list`: the id written in the home; a team index holds several)",
}
# `outcome` and `project` are options of their own (`project`: ledger.records.project's match)
FILTERS = (*FILTER_LABELS, "outcome", "project")
# auto: the provider's receipt, else the estimate (ledger.report.costs applies the rule)
COST_MODES = ("auto", "reported", "estimated")
WEEK_STARTS = ("monday", "sunday")
# The report tables' codes and column lists, for the report's readers (ledger.index.report_tables
# and ledger.report.sync declare the same; tests/test_report_raw.py checks they agree)
SLOT_SECONDS = 900  # the clustering slot of report_facts / report_slots
REPORTED, ESTIMATED, MIXED = 1, 2, 3  # cost basis codes (basis_auto, run_basis_auto)
TOKEN_COLUMNS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
VERDICT_FACTS = ("judged", "ok", "skill_expected", "skill_invoked", "tool_calls", "tool_errors")
ORDERS = ("asc", "desc")


def known_outcome(value: str) -> bool:
    """An --outcome value names an outcome, or is a `*` pattern that matches one."""
    if "*" not in value:
        return value in OUTCOMES
    import re

    pat = re.compile(".*".join(re.escape(part) for part in value.split("*")))
    return any(pat.fullmatch(o) for o in OUTCOMES)
