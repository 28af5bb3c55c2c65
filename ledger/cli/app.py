"""The `ledger` command. Commands live one group per module; heavy imports happen inside them."""

from __future__ import annotations

import typer

from ledger.cli import run_cmd, runs_cmd
from ledger.cli import db_cmd, index_cmd, sql_cmd
from ledger.cli import report_cmd
from ledger.cli import verify_cmd

app = typer.Typer(
    name="ledger",
    help="An evidence ledger for AI coding-agent runs: immutable records, an SQL index, exact cost reports.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("run", context_settings=run_cmd.RUN_CONTEXT)(run_cmd.run)
app.command("runs")(runs_cmd.runs)
app.command("show")(runs_cmd.show)
app.command("index")(index_cmd.index)
app.command("sql")(sql_cmd.sql)
app.command("report")(report_cmd.report)
app.command("verify")(verify_cmd.verify)
app.add_typer(db_cmd.app, name="db")


def main() -> None:
    import sys

    if sys.argv[1:2] == ["run"]:  # launch budget (DESIGN §7): skip Typer's ~70 ms Pydantic setup
        run_cmd.main_fast(sys.argv[2:])  # exits, except for `--help` (Typer prints it)
    app()
