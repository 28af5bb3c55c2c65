"""`ledger verify`."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger.cli.common import HomeOpt, JsonOpt, err, handle_errors, print_json


@handle_errors
def verify(
    run: Annotated[str | None, typer.Argument(help="Run id or prefix (default: every run).")] = None,
    home: HomeOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Re-check records: readable, context and evidence files match their sha256 bindings.

    Without a run id, the archive of imported logs (sources/) too: every zstd frame decoded
    and checked, each file against its state (size, hashes); a problem names the file and
    the byte offset. Exit 0 when everything verifies, 1 when any run or archive file has a
    problem (each is listed; a symlink where a shard or run directory should be is one,
    never followed). A missing home is an error.
    """
    from ledger.home import resolve_home
    from ledger.records.ids import resolve_selector
    from ledger.text import plain
    from ledger.verify import check_home, verify_archive, verify_home, verify_run

    h = resolve_home(home)
    from ledger.sources.logdirs import missing_home_hint

    check_home(h, missing_home_hint)
    verdicts = [verify_run(resolve_selector(h, run))] if run else list(verify_home(h))
    bad = [v for v in verdicts if not v.ok]
    shards = sum(v.shard for v in verdicts)  # a symlinked shard is a problem, not a run
    runs = len(verdicts) - shards
    archives = None if run else verify_archive(h)
    if json_:
        doc = {"runs": runs, "ok": runs - (len(bad) - shards), "shard_links": shards,
               "problems": [v.to_dict() for v in bad]}
        if archives is not None:
            doc["archives"] = {"files": archives.files, "frames": archives.frames, "bytes": archives.bytes,
                               "ok": archives.files - archives.bad_files,
                               "problems": [p.to_dict() for p in archives.problems]}
        print_json(doc)
    else:
        for v in bad:
            for p in v.problems:
                print(plain(f"{v.run_id}: {p}"))  # a problem can quote a path or a record's bytes
        for p in archives.problems if archives is not None else ():
            print(plain(str(p)))
        err(f"verified {runs} run(s): {runs - (len(bad) - shards)} ok, {len(bad) - shards} with problems"
            + (f"; {shards} symlinked shard(s) not followed" if shards else ""))
        if archives is not None and (archives.files or archives.problems):
            err(f"verified {archives.files} archive file(s) ({archives.frames:,} frames, {archives.bytes:,} bytes): "
                f"{archives.files - archives.bad_files} ok, {len({p.path for p in archives.problems})} with problems"
                + ("; `ledger import` copies a damaged file again while the log still holds it"
                   if archives.problems else ""))
    if bad or (archives is not None and archives.problems):
        raise typer.Exit(1)
