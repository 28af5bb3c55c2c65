"""The `ledger` command. Commands live one group per module; heavy imports happen inside them."""

from __future__ import annotations

import typer

from ledger.cli import runs_cmd

app = typer.Typer(
    name="ledger",
    help="An evidence ledger for AI coding-agent runs: immutable records, an SQL index, exact cost reports.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("runs")(runs_cmd.runs)
app.command("show")(runs_cmd.show)


def main() -> None:
    app()
