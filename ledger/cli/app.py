"""The `ledger` command's entry point. The Typer app (ledger.cli.typer_app) is built only for
what the fast paths do not answer: importing Typer is ~30 ms and building its command ~100 ms,
more than a warm `ledger report` needs in all (issue 15). `from ledger.cli.app import app`
still gives the Typer app."""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    if sys.argv[1:] == ["--version"]:  # (issue 28: Typer's whole app for one line)
        from ledger import __version__

        sys.stdout.write(f"ledger {__version__}\n")
        sys.stdout.flush()
        sys.exit(0)
    if sys.argv[1:2] != ["run"]:  # (`ledger run` checks its own options: the command may hold any bytes)
        from ledger.cli.common import not_utf8

        if not_utf8(sys.argv[1:]) is not None:
            _not_utf8()
    if sys.argv[1:2] == ["run"]:  # launch budget (DESIGN §7): skip Typer's ~70 ms Pydantic setup
        from ledger.cli import run_cmd

        run_cmd.main_fast(sys.argv[2:])  # exits, except for `--help` (Typer prints it)
    if sys.argv[1:2] in (["report"], ["import"], ["runs"], ["show"], ["index"], ["statusline"], ["sql"]) and sys.argv[2:3] != ["compare"]:  # issues 15, 10: the same
        from ledger.cli import fastpath  # command without importing Typer at all

        fastpath.main(sys.argv[1], sys.argv[2:])  # exits, except for what only Typer parses
    from ledger.cli.typer_app import app

    app()


def _not_utf8() -> None:
    """An argument that is not UTF-8: `Error:` + `Hint:`, exit 2, before any command runs."""
    from ledger.cli.common import check_utf8, print_usage_error

    try:
        check_utf8(sys.argv[1:])
    except Exception as exc:  # (typer.BadParameter)
        print_usage_error(exc, "ledger" if len(sys.argv) < 2 or sys.argv[1].startswith("-") else f"ledger {sys.argv[1]}")
        sys.exit(2)


def __getattr__(name: str) -> Any:
    """`app` (and the rest of the Typer layer): built on first use (PEP 562)."""
    if name.startswith("__"):
        raise AttributeError(name)
    from ledger.cli import typer_app

    try:
        return getattr(typer_app, name)
    except AttributeError:
        raise AttributeError(f"module 'ledger.cli.app' has no attribute {name!r}") from None
