"""`ledger sql`: read-only SQL over the index (documented views: docs/sql.md)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Optional

from ledger.cli.common import CsvOpt, DbOpt, HomeOpt, JsonOpt, err, exclusive_formats, handle_errors, print_csv, print_table
from ledger.cli.params import CONTEXT, Argument, Option

# A query may start with `-` (an SQL comment): Click would take it for an option. Unknown
# "options" reach the command as arguments instead, and sql() decides (see _check_args).
SQL_CONTEXT = {"ignore_unknown_options": True, "allow_extra_args": True}
_OPTIONS = ("--json", "--csv", "--home", "--db", "--timeout", "--role", "--help")
_OPTION_LIKE = re.compile(r"--?[A-Za-z][\w-]*(=.*)?", re.S)
HINT_DASH = ("options go before the query; a query that starts with `-` (an SQL comment) goes after `--` "
             "(ledger sql -- \"-- note ...\") or on stdin (ledger sql - < query.sql)")
BLOB_SHOWN = 16  # bytes of a blob shown in the table (--json / --csv print all of it): with its size, in 80 columns

DEFAULT_TIMEOUT = 300.0  # = ledger.index.sqlro.DEFAULT_TIMEOUT (not imported: CLI start-up stays light)


@handle_errors
def sql(
    query: Annotated[str, Argument(help="One SQL statement (read-only), or `-` to read it from stdin. "
                                              "A query starting with `--` goes after `--`.", show_default=False)],
    home: HomeOpt = None,
    db: DbOpt = None,
    json_: JsonOpt = False,
    csv_: CsvOpt = False,
    timeout: Annotated[float, Option("--timeout", metavar="SECONDS", min=0,
                                           help="Stop the query after this many seconds (0: no limit).")] = DEFAULT_TIMEOUT,
    role: Annotated[Optional[str], Option(
        "--role", envvar="LEDGER_SQL_ROLE", metavar="NAME", show_default=False,
        help="PostgreSQL: run the query as this login role (default: ledger's reader role, see docs/sql.md).")] = None,
    ctx: Annotated[Any, CONTEXT] = None,
) -> None:
    """Run a read-only SQL query against the index (updated from the records first).

    Views: {views} (see docs/sql.md).
    Any write is refused and changes nothing. Ctrl-C stops a running query (exit 130).
    """
    import os
    import sys
    from pathlib import Path

    from ledger.home import home_named, resolve_home
    from ledger.index import db as dbmod
    from ledger.index import sqlro
    from ledger.index.ops import index_homes, reader_homes

    _check_args(query, list(ctx.args) if ctx is not None else [])  # (the fast path parses no extra argument)
    exclusive_formats(json_, csv_)
    querying = False
    try:
        if query == "-":
            query = sys.stdin.read()
        from ledger.store.layout import index_base

        home_path = Path(os.path.abspath(resolve_home(home)))
        url = dbmod.resolve_url(index_base(home_path), db)
        homes = reader_homes(home_path, url, home_named(home), err)  # a record store (`ledger push`): every home in it
        summary = index_homes(homes, url, notify=err, stale_ok=True)
        from ledger.records.model import skipped_warnings

        for line in skipped_warnings(summary.skipped):
            err(line)
        querying = True
        import contextlib

        from ledger.index.ops import read_repairing

        stack = contextlib.ExitStack()

        def start() -> Any:
            # a damaged page met when the query starts (before any output) sets the index
            # aside, rebuilds it and starts the query once more
            return stack.enter_context(sqlro.query(url, query, timeout=timeout or None, role=role or None))

        with stack:
            columns, rows = read_repairing(homes, url, start, err)
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
                print_table(([_cell(v) for v in row] for row in rows), columns)
    except KeyboardInterrupt:
        # Ctrl-C: the query was stopped (SQLite) or cancelled on the server (PostgreSQL);
        # an index pass rolls back its transaction
        err("Interrupted: the query was stopped; nothing was changed" if querying else "Interrupted.")
        import typer

        raise typer.Exit(130) from None


def _check_args(query: str, extra: list[str]) -> None:
    """Arguments Click let through (SQL_CONTEXT): a query that starts with an SQL comment is
    fine (it has blanks: no option looks like that); an unknown option is a usage error."""
    from ledger.cli.common import usage_error

    if _OPTION_LIKE.fullmatch(query):
        raise usage_error(f"no such option: {query}", hint=HINT_DASH)
    for arg in extra:
        if arg.split("=", 1)[0] in _OPTIONS:
            raise usage_error(f"{arg} came after `--`, where it is not an option", hint=HINT_DASH)
        if _OPTION_LIKE.fullmatch(arg):
            raise usage_error(f"no such option: {arg}", hint=HINT_DASH)
        raise usage_error(f"unexpected extra argument {arg!r}: the query is one argument",
                          hint="quote the whole query, e.g. ledger sql \"SELECT model, count(*) FROM runs_v GROUP BY model\"")


def _cell(v: Any) -> Any:
    """The table shows a blob as an SQL blob literal, x'00ff', cut after BLOB_SHOWN bytes
    with its size (a Python b'...' repr reads like text that is not there)."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        b = bytes(v)
        if len(b) <= BLOB_SHOWN:
            return f"x'{b.hex()}'"
        return f"x'{b[:BLOB_SHOWN].hex()}…' ({len(b)} bytes)"
    return v


def _csv(v):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


from ledger.sqlviews import DOCUMENTED_VIEWS as _VIEWS  # noqa: E402 - the one list, no SQLAlchemy

sql.__doc__ = (sql.__doc__ or "").replace("{views}", ", ".join(_VIEWS))
