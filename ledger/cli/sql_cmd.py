"""`ledger sql`: read-only SQL over the index (documented views: docs/sql.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger.cli.common import CsvOpt, DbOpt, HomeOpt, JsonOpt, err, exclusive_formats, handle_errors, print_csv, print_table


@handle_errors
def sql(
    query: Annotated[str, typer.Argument(help="One SQL statement (read-only), or `-` to read it from stdin.")],
    home: HomeOpt = None,
    db: DbOpt = None,
    json_: JsonOpt = False,
    csv_: CsvOpt = False,
) -> None:
    """Run a read-only SQL query against the index (updated from the records first).

    Views: runs_v, usage_streams_v, subjects_v, attempts_v, tool_uses_v (see docs/sql.md).
    Any write is refused and changes nothing.
    """
    import os
    import sys
    from pathlib import Path

    from ledger.home import resolve_home
    from ledger.index import db as dbmod
    from ledger.index import sqlro
    from ledger.index.ops import index_homes

    exclusive_formats(json_, csv_)
    if query == "-":
        query = sys.stdin.read()
    home_path = Path(os.path.abspath(resolve_home(home)))
    url = dbmod.resolve_url(home_path, db)
    summary = index_homes([home_path], url, notify=err)
    for p in summary.skipped:
        err(f"warning: skipped damaged record {p.path}: {p.reason}")
    with sqlro.query(url, query) as (columns, rows):
        if json_:
            import orjson

            out = sys.stdout.buffer
            first = True
            for row in rows:
                out.write(b"[\n" if first else b",\n")
                first = False
                out.write(orjson.dumps(dict(zip(columns, row)), default=sqlro.jsonable,
                                       option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
            out.write(b"[]\n" if first else b"\n]\n")
            out.flush()
        elif csv_:
            print_csv(([_csv(v) for v in row] for row in rows), columns)
        else:
            print_table(rows, columns)


def _csv(v):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v
