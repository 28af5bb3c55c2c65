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

# Loaded on first use (PEP 562): a reader that needs one module of the package (the index's
# freshness check needs `model`) does not pay for the writer, the reader and the fold.
_WHERE = {
    "mint_run_id": "ids", "parse_run_id": "ids", "resolve_selector": "ids", "run_dir": "ids",
    "Manifest": "model", "RunSnapshot": "model", "ScanProblem": "model", "Subject": "model", "UsageTotals": "model",
    "read_manifest": "reader", "read_run": "reader", "scan": "reader",
    "EventWriter": "writer", "Interrupted": "writer", "RunCapture": "writer", "UsageStream": "writer",
    "publish_run": "writer", "settle": "writer", "write_blob": "writer", "write_provider_session": "writer",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'ledger.records' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"ledger.records.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "EventWriter", "Interrupted", "Manifest", "RunCapture", "RunSnapshot", "ScanProblem", "Subject",
    "UsageStream", "UsageTotals", "mint_run_id", "parse_run_id", "publish_run", "read_manifest",
    "read_run", "resolve_selector", "run_dir", "scan", "settle", "write_blob", "write_provider_session",
]
