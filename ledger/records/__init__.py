"""The run record (Loopflow Run record v1): the authoritative, on-disk evidence.

This package never imports SQLAlchemy. Public API::

    from ledger.records import RunCapture, read_run, scan, resolve_selector

    with RunCapture(home, harness="command", subjects=["task:LOO-1"]) as run:
        attempt = run.start_attempt("anthropic", "claude-sonnet-4-5")
        stream = run.usage_stream(provider="anthropic", model="claude-sonnet-4-5",
                                  attempt_key=attempt, turn_key="turn-1")
        stream.observe({"input_tokens": 10, "output_tokens": 4})
    snap = read_run(run.path)          # RunSnapshot: usage reduced, gaps counted
    for item in scan(home): ...         # RunSnapshot or ScanProblem (damaged record)
"""

from ledger.records.ids import mint_run_id, parse_run_id, resolve_selector, run_dir
from ledger.records.model import Manifest, RunSnapshot, ScanProblem, Subject, UsageTotals
from ledger.records.reader import read_manifest, read_run, scan
from ledger.records.writer import (
    EventWriter, Interrupted, RunCapture, UsageStream, publish_run, settle, write_blob,
    write_provider_session,
)

__all__ = [
    "EventWriter", "Interrupted", "Manifest", "RunCapture", "RunSnapshot", "ScanProblem", "Subject",
    "UsageStream", "UsageTotals", "mint_run_id", "parse_run_id", "publish_run", "read_manifest",
    "read_run", "resolve_selector", "run_dir", "scan", "settle", "write_blob", "write_provider_session",
]
