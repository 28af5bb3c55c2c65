"""Every source the indexer walks, in pass order: run records first (the archived sessions
link to the runs recorded in the same pass), then each client's archived session logs.

Its own module so that the Source interface (sources.py), which the log source implements,
does not import the log source back.
"""

from __future__ import annotations

from ledger.index.logsource import LogSource
from ledger.index.sources import RunRecordsSource, Source
from ledger.sources.clients import IMPORTABLE

SOURCES: tuple[Source, ...] = (RunRecordsSource(), *(LogSource(client) for client in IMPORTABLE))
