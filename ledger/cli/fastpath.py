"""`ledger report` and `ledger import` without Typer's argument processing (issue 15: a warm
report 10x faster than ccusage, a cold import at most 2x its time; Typer 0.29 spends ~150 ms
building its command before running any).

`ledger.cli.app.main` calls `main(command, argv)` for `ledger report ARGV` / `ledger import
ARGV` (and runs, show, index). The options are read from the command function's own
declarations (names, types, defaults: ledger.cli.params, which Typer reads too), so there is
one definition; Typer is not even imported unless the command raises one of its exceptions
(a usage mistake). Only plain forms are parsed here: one positional argument, `--opt value`,
`--opt=value`, flags, repeated list options. Anything else (`--help`,
an unknown option, a value that looks like an option, a value of the wrong type) returns
without having done any work, and Typer parses the same argv and answers as always. A usage
mistake the command itself finds is said as Typer's path says it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


# the keyword arguments of a declaration that parse() honours (min, max, envvar: a command
# line that leaves such an option out while its variable is set goes to Typer) or that only
# shape Typer's help; any other (callback, count, ...) sends the whole command to Typer
KNOWN = frozenset({"help", "show_default", "metavar", "min", "max", "envvar"})
# a number as parse() reads it; any other spelling Click accepts (` 1`, `1e3`, `inf`) is Click's
NUMBER = __import__("re").compile(r"[0-9]+(\.[0-9]+)?")


def _spec(fn: Any) -> tuple[dict[str, tuple[str, Any, Any]], str | None]:
    """{option name: (parameter, type, Param)} and the positional argument's parameter, read
    from the ledger.cli.params declarations of `fn` (Typer itself is not imported)."""
    import types
    import typing

    from ledger.cli.params import Param

    hints = typing.get_type_hints(fn, include_extras=True)
    opts: dict[str, tuple[str, Any, Any]] = {}
    positional = None
    for name, hint in hints.items():
        meta = getattr(hint, "__metadata__", None)
        if not meta:
            continue
        info = meta[0]
        if isinstance(info, Param) and info.kind == "context":
            continue  # (Typer's context: this parser lets no extra argument through)
        if not isinstance(info, Param) or not KNOWN.issuperset(info.kw):
            return {}, None  # (a form not read here: the whole command goes to Typer)
        kind = typing.get_args(hint)[0]
        if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
            kind = next(a for a in typing.get_args(kind) if a is not type(None))
        if info.kind == "argument":
            if info.decls or positional is not None:
                return {}, None
            positional = name
            continue
        if not info.decls or any(not d.startswith("--") or "/" in d for d in info.decls):
            return {}, None
        for d in info.decls:
            opts[d] = (name, kind, info)
    return opts, positional


def parse(argv: list[str], fn: Any) -> dict[str, Any] | None:
    """Keyword arguments for `fn` (only those given), or None when Typer must parse argv."""
    opts, positional = _spec(fn)
    if not opts:
        return None
    out: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        i += 1
        if not a.startswith("-") or a == "-":
            if positional is None or positional in out or a == "-":
                return None
            out[positional] = a
            continue
        name, eq, value = a.partition("=")
        spec = opts.get(name)
        if spec is None:
            return None  # --help, an unknown option, `--`, a short option
        param, kind, info = spec
        if kind is bool:
            if eq:
                return None
            out[param] = True
            continue
        if not eq:
            if i >= len(argv):
                return None
            value = argv[i]
            i += 1
        if value.startswith("-"):
            return None  # (Click's reading of `--tz -05:00` is left to Click)
        if typing_list(kind):
            out.setdefault(param, []).append(value)
        elif kind is str:
            out[param] = value
        elif kind is Path:
            out[param] = Path(value)
        elif kind is int or kind is float:
            if kind is float:
                if NUMBER.fullmatch(value) is None:
                    return None
                n: Any = float(value)
            else:
                try:
                    n = int(value, 10)
                except ValueError:
                    return None
            lo, hi = info.kw.get("min"), info.kw.get("max")
            if (lo is not None and n < lo) or (hi is not None and n > hi):
                return None
            out[param] = n
        else:
            return None
    if positional is not None and positional not in out and not _has_default(fn, positional):
        return None  # (a required argument missing: Typer says so)
    import os

    for param, _kind, info in opts.values():
        var = info.kw.get("envvar")
        if var is not None and param not in out and var in os.environ:
            return None  # (the option's value from the environment: Click reads it)
    return out


def _has_default(fn: Any, name: str) -> bool:
    """Whether parameter `name` of the plain function `fn` has a default (what
    inspect.signature says, without importing inspect: ~5 ms of a warm report)."""
    code = fn.__code__
    if name in (fn.__kwdefaults__ or {}):
        return True
    positional = code.co_varnames[:code.co_argcount]
    defaults = fn.__defaults__ or ()
    return name in positional[len(positional) - len(defaults):]


def typing_list(kind: Any) -> bool:
    import typing

    return typing.get_origin(kind) is list and typing.get_args(kind) == (str,)


COMMANDS = {"report": ("ledger.cli.report_cmd", "report"), "import": ("ledger.cli.import_cmd", "import_"),
            # issue 10: the readers of an up-to-date index answer in about `ledger --help`'s time
            "runs": ("ledger.cli.runs_cmd", "runs"), "show": ("ledger.cli.runs_cmd", "show"),
            "index": ("ledger.cli.index_cmd", "index"),
            # issue 29: Claude Code runs it after every response
            "statusline": ("ledger.cli.statusline_cmd", "statusline"),
            # issue 28: every warm read within 3x of the interpreter's start
            "sql": ("ledger.cli.sql_cmd", "sql")}


def main(command: str, argv: list[str]) -> None:
    """Run `ledger COMMAND ARGV` and exit, or return (nothing done) for Typer to do it."""
    import importlib

    module, name = COMMANDS[command]
    fn = getattr(importlib.import_module(module), name)
    kwargs = parse(argv, fn.__wrapped__)
    if kwargs is None:
        return
    try:
        fn(**kwargs)
    except Exception as exc:
        # Typer's exceptions, raised by the command (it imports Typer to make one): none can be
        # raised before Typer is imported, so it is not imported here to catch them
        typer = sys.modules.get("typer")
        if typer is None:
            raise
        if isinstance(exc, typer.BadParameter):  # (raised before any work, like Typer's own)
            from ledger.cli.common import print_usage_error

            print_usage_error(exc, f"ledger {command}")
            _exit(2)
        elif isinstance(exc, typer.Exit):
            _exit(exc.exit_code)
        raise
    _exit(0)


def _exit(code: int) -> None:
    """Exit now: output flushed, the interpreter's teardown skipped in a real process (as
    `ledger run` does); under a test runner that swapped the streams, a plain exit."""
    import os

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    if (sys.stdout is sys.__stdout__ and sys.stderr is sys.__stderr__
            and os.environ.get("LEDGER_NO_FAST_EXIT") != "1"):
        os._exit(code)
    sys.exit(code)
