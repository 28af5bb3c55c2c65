"""The clients whose own session logs ledger imports (`ledger import CLIENT`), in the order the
indexer reads their archives: the one list. The CLI's choices and the index's log sources are
made from it; each client's specifics stay with its code (logdirs.CLIENTS: where its logs
live; index/logclients.CLIENTS: its reducer), and tests/test_clients.py checks that those
name exactly these clients. A source's name in the index is the client's plus `-log`."""

from __future__ import annotations

IMPORTABLE: tuple[str, ...] = ("claude", "codex", "gemini")


def source_name(client: str) -> str:
    """`runs.source` / `log_state.source` of a client's imported sessions (never renamed)."""
    return f"{client}-log"
