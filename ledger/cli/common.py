"""Shared CLI plumbing: options, output formats, and the one place errors map to exit codes."""

from __future__ import annotations

import functools
import io
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Callable, Iterable, Sequence, TypeVar

from ledger.cli.params import Option
from ledger.errors import LedgerError

F = TypeVar("F", bound=Callable[..., Any])

HomeOpt = Annotated[Path | None, Option("--home", help="Ledger home (default: $LEDGER_HOME or the user data dir).", show_default=False)]
DbOpt = Annotated[str | None, Option("--db", metavar="URL", help="SQLAlchemy URL of the index (default: $LEDGER_DB or SQLite in the home).", show_default=False)]
JsonOpt = Annotated[bool, Option("--json", help="Print one JSON document.", metavar="")]
CsvOpt = Annotated[bool, Option("--csv", help="Print CSV.", metavar="")]
# every command's --since / --until: one syntax (ledger.report.buckets.parse_bound; docs/report.md, "Dates")
Since = Option("--since", metavar="WHEN", show_default=False,
               help="From this day or time, in --tz: 2026-03-01, 2026-03-01T09:00, today, yesterday, or a time ago: 30m, 24h, 7d, 2w.")
Until = Option("--until", metavar="WHEN", show_default=False,
               help="To this day (included whole) or time, in --tz; same forms as --since.")


def handle_errors(fn: F) -> F:
    """Map library errors to `Error: ...` + hint on stderr and exit code 1. A full or
    read-only disk (an OSError, or SQLite's "database or disk is full" through the driver or
    SQLAlchemy) is mapped here once for every command (ledger.errors.storage_error)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except LedgerError as exc:
            if os.environ.get("LEDGER_DEBUG") == "1":
                raise
            _print_error(exc)
        except BrokenPipeError:
            # a closed pipe (`ledger runs | head`) is not an error
            try:
                sys.stdout = open(os.devnull, "w")
            except OSError:
                pass
            import typer

            raise typer.Exit(0) from None
        except Exception as exc:
            from ledger.errors import storage_error

            mapped = storage_error(exc) if isinstance(exc, OSError) or type(exc).__module__.startswith(
                ("sqlalchemy", "sqlite3")) else None
            if mapped is None or os.environ.get("LEDGER_DEBUG") == "1":
                raise
            _print_error(mapped)

    return wrapper  # type: ignore[return-value]


def _print_error(exc: LedgerError) -> None:
    err(f"Error: {exc.message}")
    if exc.hint:
        err(f"Hint: {exc.hint}")
    import typer

    raise typer.Exit(1) from None


def err(message: str) -> None:
    """A line on stderr. Messages embed data (a record path, a model name, a reason read from
    a file): its control characters are shown escaped, never sent to the terminal."""
    from ledger.text import plain

    print(plain(message, multiline=True), file=sys.stderr, flush=True)


def index_url(home: Any, db: str | None) -> str:
    """The index of `--home` / `--db` as every command finds it: the home's own, or a record
    store's index/ (ledger.store.layout.index_base), unless --db / $LEDGER_DB names another."""
    import os

    from ledger.home import resolve_home
    from ledger.index import db as dbmod
    from ledger.store.layout import index_base

    return dbmod.resolve_url(index_base(Path(os.path.abspath(resolve_home(home)))), db)


def print_json(obj: Any) -> None:
    import orjson

    sys.stdout.buffer.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


def print_json_stream(items: Iterable[Any]) -> None:
    """Print a JSON array item by item: memory stays flat however many rows there are."""
    import orjson

    out = sys.stdout.buffer
    first = True
    for item in items:
        out.write(b"[\n" if first else b",\n")
        first = False
        out.write(orjson.dumps(item, option=orjson.OPT_INDENT_2))
    out.write(b"[]\n" if first else b"\n]\n")
    out.flush()


def print_csv(rows: Iterable[Sequence[Any]], header: Sequence[str]) -> None:
    import csv

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for row in rows:
        w.writerow(["" if v is None else v for v in row])
    sys.stdout.write(buf.getvalue())
    sys.stdout.flush()


def print_table(rows: Iterable[Sequence[Any]], header: Sequence[str], title: str | None = None,
                drop_first: Sequence[int] = (), whole: Sequence[bool] | None = None) -> None:
    """A table in ledger's one style (ledger.tables: SIMPLE_HEAD, one line per row), fitted to
    the terminal by ledger.tables.fit: empty columns hidden first, then `drop_first` in order,
    then text cut with `…`; a number is never cut or split (a cut number reads as another
    number); stderr names the columns hidden. `whole`: the columns never cut (default: those
    whose values are numbers; `ledger runs` formats its numbers, and keeps its ids whole).

    Headers (SQL column names), cells are data: printed as stored, never read as markup or
    emoji, control characters escaped (ledger.text.plain). The title is ours."""
    from ledger.tables import draw, fit, layout, plain_stdout
    from ledger.text import plain

    rows = [list(r) for r in rows]
    numeric = [bool(rows) and all(_is_number(r[i]) for r in rows if r[i] is not None) and any(r[i] is not None for r in rows)
               for i in range(len(header))]
    cells = [[plain("—" if v is None else v) for v in r] for r in rows]
    width = plain_stdout()
    console = data_console() if width is None else None
    keep, fitted, hidden = fit(console.width if console is not None else width, [plain(h) for h in header], cells,
                               numeric if whole is None else whole, drop_first)
    if hidden:
        err(f"(narrow terminal: {', '.join(hidden)} not shown; widen it or use --json)")
    head, body = fitted[0], fitted[1:]
    numeric = [numeric[k] for k in keep]
    justify = ["right" if num else "left" for num in numeric]
    lines = [(r, None, False) for r in body]
    if console is None:  # (no styles to write: the table's text without Rich's console, issue 28)
        pieces = layout(width, head, justify, lines, title=title)
        if pieces is not None:
            sys.stdout.write("".join(p for p, _ in pieces) + "\n")
            sys.stdout.flush()
            return
        console = data_console()
    if draw(console, head, justify, lines, title=title):
        return
    from rich import box
    from rich.table import Table

    from ledger.text import shown

    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)  # (an ASCII-only console: Rich's characters)
    for h, how in zip(head, justify):
        table.add_column(shown(h), justify=how, no_wrap=True, overflow="ellipsis")
    for r in body:
        table.add_row(*[shown(c) for c in r])
    console.print(table)


def _is_number(v: Any) -> bool:
    """An SQL number (PostgreSQL's numeric is a Decimal: named, not imported, on a warm path)."""
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) or type(v).__name__ == "Decimal"


def table_width() -> int:
    """The width print_table fits a table to: Rich's console's, read without importing it
    when standard output takes no styles (ledger.tables.plain_stdout)."""
    from ledger.tables import plain_stdout

    width = plain_stdout()
    return width if width is not None else data_console().width


def data_console(stderr: bool = False) -> Any:
    """A Rich console that prints data as it is: no emoji codes, no highlighting (markup stays
    on for our own labels; data goes in as ledger.text.shown() Text, which markup never touches)."""
    from rich.console import Console

    return Console(stderr=stderr, emoji=False, highlight=False)


def not_utf8(args: Sequence[str]) -> str | None:
    """The first argument holding bytes that are not UTF-8 (Python decodes them as lone
    surrogates), shown with those bytes escaped, or None. ledger's options and arguments are
    text (a subject, a query, a home kept in the index): such an argument is a usage error,
    never a TypeError later (issue 32)."""
    for a in args:
        try:
            a.encode("utf-8")
        except UnicodeEncodeError:
            from ledger.text import plain

            try:
                return plain(a.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"))
            except UnicodeEncodeError:  # (a surrogate that is not an escaped byte)
                return plain(a)
    return None


def check_utf8(args: Sequence[str]) -> None:
    """Raise the usage error for the first argument that is not UTF-8 (see not_utf8)."""
    bad = not_utf8(args)
    if bad is not None:
        raise usage_error(f"the argument '{bad}' is not valid UTF-8",
                          hint="pass ledger's options and arguments as UTF-8 text (check the terminal's or the "
                               "script's encoding); the command after `ledger run --` may hold any bytes")


def exclusive_formats(json_: bool, csv_: bool) -> None:
    if json_ and csv_:
        raise usage_error("--json and --csv cannot be used together")


def usage_error(message: str, hint: str | None = None, param_hint: str | None = None) -> Exception:
    """A usage mistake (exit 2: Typer's BadParameter), with a hint of its own when given (e.g.
    an example value). Typer is imported only when there is a mistake to say (issue 15: the
    fast path answers without it)."""
    import typer

    exc = typer.BadParameter(message, param_hint=param_hint)
    exc.hint = hint  # type: ignore[attr-defined]
    return exc


def print_usage_error(exc: Exception, command: str | None = None) -> None:
    """A Typer usage error (unknown option, missing argument, bad value, no such command)
    in ledger's one error format: `Error: ...` and a `Hint:` (the command's --help)."""
    import typer

    if isinstance(exc, typer.BadParameter) and exc.param is None and exc.param_hint is None:
        message = exc.message  # not "Invalid value: ..." around a message that says it all
    else:
        fmt = getattr(exc, "format_message", None)
        message = fmt() if fmt is not None else str(exc)
    message = message.strip().rstrip(".")
    if command is None:
        ctx = getattr(exc, "ctx", None)
        command = ctx.command_path if ctx is not None else "ledger"
    err(f"Error: {message}")
    err(f"Hint: {getattr(exc, 'hint', None) or f'run `{command} --help`'}")
