"""Sources: the agents' own session logs (Claude Code transcripts, Codex rollouts), DESIGN §4b.

`ledger.sources.archive` copies new bytes of each log into the home, append-only (the archive
is a record). This package imports records/home/errors only, never the index.
"""
