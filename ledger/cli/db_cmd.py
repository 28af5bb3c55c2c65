"""`ledger db`: the index schema's migrations (current, upgrade, check)."""

from __future__ import annotations

import typer

from ledger.cli.common import DbOpt, HomeOpt, JsonOpt, err, handle_errors, print_json
from ledger.cli.params import for_typer

app = typer.Typer(help="Index schema migrations: show the revision, upgrade, check.", no_args_is_help=True)


def _url(home, db):
    from ledger.cli.common import index_url

    return index_url(home, db)


@app.command("current")
@for_typer  # (the shared options are ledger.cli.params declarations)
@handle_errors
def current(home: HomeOpt = None, db: DbOpt = None, json_: JsonOpt = False) -> None:
    """Print the index's schema revision and the newest one this ledger knows."""
    from ledger.index.dbadmin import db_status

    st = db_status(_url(home, db))
    if json_:
        print_json(st)
    else:
        print(current_line(st))


def current_line(st: dict) -> str:
    """`ledger db current` for people: the revision and what it means (--json has the fields)."""
    rev, head, kind, where, detail = st["revision"], st["head"], st["status"], st["db"], st["detail"]
    if kind == "missing":
        return f"no index at {where} yet (this ledger's schema is {head}; `ledger index` creates it)"
    if kind == "fresh":
        return f"no ledger tables in {where} yet (this ledger's schema is {head}; `ledger index` creates them)"
    if kind == "ok":
        return f"{rev} (the newest revision this ledger knows)"
    if kind == "upgrade":
        return f"{rev} (older than this ledger's {head}: `ledger db upgrade` migrates it)"
    if kind == "corrupt":
        return f"the index {where} is {detail} (this ledger's schema is {head})"
    return f"{rev or 'no revision'}: {where}: {detail or kind} (this ledger's schema is {head})"


@app.command("upgrade")
@for_typer  # (the shared options are ledger.cli.params declarations)
@handle_errors
def upgrade(home: HomeOpt = None, db: DbOpt = None) -> None:
    """Create the index schema or upgrade it to the newest revision (no indexing)."""
    from ledger.index.dbadmin import db_upgrade

    err(db_upgrade(_url(home, db)))


@app.command("check")
@for_typer  # (the shared options are ledger.cli.params declarations)
@handle_errors
def check(home: HomeOpt = None, db: DbOpt = None, json_: JsonOpt = False) -> None:
    """Check the index thoroughly: header, revision, PRAGMA quick_check, schema vs models.

    Also lists the damaged copies kept next to an SQLite index (`index.sqlite.corrupt-*`,
    the newest 3 are kept).
    """
    from ledger.index.dbadmin import db_check, set_aside_list

    import os
    from pathlib import Path

    from ledger.home import resolve_home
    from ledger.index import db as dbmod

    url = _url(home, db)
    problems = db_check(url, owned=url == dbmod.default_url(Path(os.path.abspath(resolve_home(home)))))
    kept = set_aside_list(url)
    if json_:
        print_json({"ok": not problems, "problems": problems, "set_aside": kept})
    else:
        for p in problems:
            err(f"problem: {p}")
        for k in kept:
            err(f"kept damaged copy: {k}")
        err("index ok" if not problems else "index has problems; fix with `ledger index --rebuild`")
    if problems:
        raise typer.Exit(1)
