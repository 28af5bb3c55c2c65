"""`ledger push`: copy the home's records into a central record store (append-only)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ledger.cli.common import HomeOpt, JsonOpt, err, handle_errors, print_json

ToOpt = Annotated[Path | None, typer.Option(
    "--to", help="The record store: a directory (e.g. a mounted share), created when missing or empty, "
                 "or a bucket, s3://BUCKET/PREFIX (default: $LEDGER_STORE).", show_default=False)]


@handle_errors
def push(
    to: ToOpt = None,
    home: HomeOpt = None,
    full: Annotated[bool, typer.Option("--full", help="Compare every file with the store's copy again (normally a "
                                                      "settled run or a log untouched since the last push is not read).",
                                       metavar="")] = False,
    json_: JsonOpt = False,
) -> None:
    """Copy the home's run records and imported session logs into a record store.

    The store keeps each home under homes/<home id>/, itself a ledger home: `ledger index
    --home STORE` indexes every home in it. Append-only and idempotent: new files are copied,
    grown logs extended with their new bytes, and a file that changed in the home is reported
    as a conflict (exit 1), never overwritten. The index and symlinks are not pushed.
    """
    import os
    import sys

    from ledger.errors import LedgerError
    from ledger.bucket.stores import store_at
    from ledger.home import resolve_home
    from ledger.store.summary import conflict_error

    dest = to if to is not None else os.environ.get("LEDGER_STORE") or None
    if not dest:
        raise LedgerError("no record store to push to",
                          hint="pass --to DIR (a directory, e.g. on a mounted share) or --to s3://BUCKET/PREFIX, "
                               "or set LEDGER_STORE")
    with _progress(sys.stderr.isatty()) as progress:
        summary = store_at(dest).push(resolve_home(home), progress=progress, full=full)
    for s in summary.skipped:
        err(f"skipped {s['path']}: {s['reason']}")
    for c in summary.conflicts:
        err(f"conflict: {c['path']}: {c['reason']}")
    if json_:
        print_json(summary.to_dict())
    else:
        err(summary.line())
    if summary.conflicts:
        raise conflict_error(summary)


class _progress:
    """A Rich progress bar on stderr, only when stderr is a terminal and there is real work."""

    MIN_WORK = 500

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar = None
        self.task = None

    def __enter__(self):
        return self.update if self.enabled else None

    def update(self, done: int, total: int) -> None:
        if self.bar is None:
            if total < self.MIN_WORK:
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("pushing records"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("push", total=total)
        self.bar.update(self.task, completed=done, total=total)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()
