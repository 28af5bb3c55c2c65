"""`ledger homes`: the homes an index holds (several machines' in a team database), and
forgetting one. A home leaves an index only this way, never because its path is missing on
the machine that indexes (issue 11)."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger.cli.common import DbOpt, HomeOpt, JsonOpt, err, handle_errors, print_json, print_table
from ledger.cli.params import for_typer

app = typer.Typer(help="The homes an index holds: list them, forget one.", no_args_is_help=True)


def _url(home, db):
    from ledger.cli.common import index_url

    return index_url(home, db)


@app.command("list")
@for_typer  # (the shared options are ledger.cli.params declarations)
@handle_errors
def list_(home: HomeOpt = None, db: DbOpt = None, json_: JsonOpt = False) -> None:
    """List the index's homes: row id, home id, machine, path, runs counted, copies kept out."""
    from ledger.index.homesadmin import homes_list

    rows = homes_list(_url(home, db))
    if json_:
        print_json(rows)
        return
    # the path last (cut with … last); on a narrow terminal the machine, then the home id go
    print_table([[h["id"], h["runs"], h["copies"], "yes" if h["here"] else "no", (h["home_id"] or "(none)")[:8],
                  h["machine"] or "(none)", h["path"]] for h in rows],
                ["id", "runs", "copies", "here", "home", "machine", "path"], drop_first=(5, 4))


@app.command("forget")
@for_typer  # (the shared options are ledger.cli.params declarations)
@handle_errors
def forget(
    selector: Annotated[str, typer.Argument(help="The home: its id from `ledger homes list`, its home id, or its path.")],
    home: HomeOpt = None, db: DbOpt = None, json_: JsonOpt = False,
) -> None:
    """Remove a home and the runs indexed from it from the index (its records are not touched;
    indexing the home again brings them back)."""
    from ledger.index.homesadmin import homes_forget

    done = homes_forget(_url(home, db), selector, notify=err)
    if json_:
        print_json(done)
    else:
        err(f"forgot home {done['id']} ({done['path']} on {done['machine'] or 'an unknown machine'}): "
            f"{done['runs']} run(s) removed from the index; its records are untouched")
