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

    Exit 0 when everything verifies, 1 when any run has a problem (each is listed; a symlink
    where a shard or run directory should be is one, never followed). A missing home is an error.
    """
    from ledger.home import resolve_home
    from ledger.records.ids import resolve_selector
    from ledger.text import plain
    from ledger.verify import check_home, verify_home, verify_run

    h = resolve_home(home)
    from ledger.sources.archive import missing_home_hint

    check_home(h, missing_home_hint)
    verdicts = [verify_run(resolve_selector(h, run))] if run else list(verify_home(h))
    bad = [v for v in verdicts if not v.ok]
    if json_:
        print_json({"runs": len(verdicts), "ok": len(verdicts) - len(bad),
                    "problems": [v.to_dict() for v in bad]})
    else:
        for v in bad:
            for p in v.problems:
                print(plain(f"{v.run_id}: {p}"))  # a problem can quote a path or a record's bytes
        err(f"verified {len(verdicts)} run(s): {len(verdicts) - len(bad)} ok, {len(bad)} with problems")
    if bad:
        raise typer.Exit(1)
