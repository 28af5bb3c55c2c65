"""`ledger index`: bring the SQL index up to date with the run records (incremental)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from ledger.cli.common import DbOpt, JsonOpt, err, handle_errors, print_json
from ledger.cli.params import Option

HomesOpt = Annotated[list[Path] | None, Option(
    "--home", help="Ledger home (or record store: a directory, or s3://BUCKET/PREFIX) to index; repeat for "
                   "several homes in one database "
                   "(default: $LEDGER_HOME or the user data dir).", show_default=False)]


@handle_errors
def index(
    home: HomesOpt = None,
    db: DbOpt = None,
    rebuild: Annotated[bool, Option("--rebuild", help="Rebuild the index from the records (atomically swapped in).", metavar="")] = False,
    full: Annotated[bool, Option("--full", help="Also look into sealed shards (settled, quiet runs; normally skipped while their directory is unchanged).", metavar="")] = False,
    lock_timeout: Annotated[float, Option("--lock-timeout", help="PostgreSQL: seconds to wait for a home or the schema locked by another indexer before giving up (the message names the holder).", min=0)] = 30.0,
    json_: JsonOpt = False,
) -> None:
    """Index run records into SQLite (default: <home>/index.sqlite) or any SQLAlchemy URL.

    Only what changed is read: new runs, appended events, rewritten files (flagged as an
    evidence gap). Damaged records are listed and skipped. A summary goes to stderr
    (or, with --json, to stdout as JSON).
    """
    import os
    import sys

    from ledger.home import resolve_home
    from ledger.index import db as dbmod
    from ledger.index.ops import index_homes

    from ledger.store.layout import expand_homes, index_base

    from ledger.bucket.client import is_bucket_url

    given, reads = [], []
    for h in home or [resolve_home(None)]:
        if is_bucket_url(h):  # a bucket store: its local mirror, brought up to date first
            from ledger.bucket.stores import store_at

            local, read = store_at(h).local()
            err(read.line())
            for c in read.conflicts:
                err(f"conflict: {c.get('key')}: {c['reason']}")
            for uid in read.restarted:
                err(f"the push log of home {uid} starts anew in {read.store}: its mirror is replayed from the start "
                    "(run `ledger index --rebuild` if its runs show evidence gaps)")
            given.append(local)
            reads.append(read)
        else:
            given.append(Path(os.path.abspath(h)))
    homes = expand_homes(given)  # a record store (`ledger push`): every home in it
    url = dbmod.resolve_url(index_base(given[0]), db)
    with _progress(sys.stderr.isatty()) as progress:
        summary = index_homes(homes, url, rebuild=rebuild, notify=err, progress=progress, full=full,
                              lock_timeout=lock_timeout)
    for p in summary.skipped:
        err(f"skipped damaged record {p.path}: {p.reason}")
    for h in summary.absent:
        err(f"not here: {h} (its runs stay in the index; `ledger homes forget` removes a home)")
    err(summary.line())
    if json_:
        doc = summary.to_dict()
        if reads:
            doc["stores"] = [r.to_dict() for r in reads]
        print_json(doc)
    conflicts = [c for r in reads for c in r.conflicts]
    if conflicts:
        from ledger.errors import LedgerError

        n = len(conflicts)
        raise LedgerError(f"{n} object{'' if n == 1 else 's'} of the record store {'is' if n == 1 else 'are'} not "
                          "what was pushed (listed above); the index holds what came before them",
                          hint="see docs/team.md (a conflict in a bucket): restore the object from a backup, or "
                               "have its home push again with `ledger push --full`")


class _progress:
    """A Rich progress bar on stderr, only when stderr is a terminal and there is real work."""

    MIN_WORK = 200

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar = None
        self.task = None

    def __enter__(self):
        return self.update if self.enabled else None

    def update(self, done: int, total: int) -> None:
        """`total` 0 means unknown (records are processed as they are found)."""
        if self.bar is None:
            if done < self.MIN_WORK:
                return
            from rich.console import Console
            from rich.progress import MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self.bar = Progress(SpinnerColumn(), TextColumn("indexing records"), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("index", total=None)
        self.bar.update(self.task, completed=done, total=total or None)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()
