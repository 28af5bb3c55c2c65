"""One list of importable clients (ledger/sources/clients.py): the CLI's choices, the index's
log sources and every per-client table name exactly those clients, in that order."""

from __future__ import annotations

from ledger.cli import import_cmd
from ledger.index import fresh, logsource, sourcelist
from ledger.sources import logdirs
from ledger.sources.clients import IMPORTABLE, source_name


def test_every_client_table_names_the_importable_clients():
    assert IMPORTABLE == ("claude", "codex", "gemini")
    assert import_cmd.CHOICES == (*IMPORTABLE, "all")
    logs = [s for s in sourcelist.SOURCES if isinstance(s, logsource.LogSource)]
    assert [s.client for s in logs] == list(IMPORTABLE)
    assert [s.name for s in logs] == [source_name(c) for c in IMPORTABLE]
    assert tuple(logdirs.CLIENTS) == IMPORTABLE
    assert tuple(logsource.CLIENTS) == IMPORTABLE
    assert fresh.LOG_CLIENTS == IMPORTABLE and tuple(fresh.LOG_STATE_V) == IMPORTABLE
