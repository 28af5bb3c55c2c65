"""The Typer app of the `ledger` command (ledger.cli.app.main runs it; `from ledger.cli.app import app`
still finds it). Commands live one group per module; heavy imports happen inside them."""

from __future__ import annotations

from typing import Annotated

import sys
from typing import Any

import typer
from typer.core import TyperGroup

from ledger.cli import run_cmd, runs_cmd
from ledger.cli import db_cmd, homes_cmd, import_cmd, index_cmd, sql_cmd
from ledger.cli import compare_cmd, report_cmd
from ledger.cli import verify_cmd
from ledger.cli import statusline_cmd
from ledger.cli import demo_cmd, push_cmd
from ledger.cli import replay_cmd, stop_cmd
from ledger.cli.common import err, print_usage_error
from ledger.cli.params import for_typer


class LedgerGroup(TyperGroup):
    """Typer's group, with usage errors in ledger's one format instead of Rich's boxed panel:
    `Error: <message>` + `Hint: run `ledger CMD --help`` on stderr, exit 2. Typer prints its
    own format only in standalone mode, so the app runs non-standalone and we print."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:  # the caller handles the exceptions
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            # `python -m ledger` would otherwise be named "python -m ledger" in usage and hints
            rv = super().main(args, prog_name or self.name or "ledger", complete_var, False, **extra)
        except typer.TyperException as exc:  # Typer's (vendored Click's) errors derive from it
            code = getattr(exc, "exit_code", 1)
            if type(exc).__name__ == "NoArgsIsHelpError":  # the help is the answer (Typer does the same)
                if exc.format_message().strip():
                    err(exc.format_message())
            elif code == 2:
                print_usage_error(exc)
            else:
                err(f"Error: {exc.format_message()}")
            sys.exit(code)
        except typer.Abort:
            err("Aborted.")
            sys.exit(1)
        # non-standalone returns a raised typer.Exit's code, or the command's return value
        sys.exit(rv if isinstance(rv, int) else 0)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """`ledger report compare ...` is its own command (ledger.cli.compare_cmd), registered
        hidden as `report-compare`; every other `ledger report KIND` is the report command."""
        if args[:2] == ["report", "compare"]:
            cmd = self.get_command(ctx, COMPARE_NAME)
            return "report compare", cmd, args[2:]
        return super().resolve_command(ctx, args)


COMPARE_NAME = "report-compare"


def _flags_without_type() -> None:
    """Typer 0.29 prints every option's type, so a flag (which takes no value) would read
    `--help <bool>`, `--install-completion <bool>`: a flag shows none."""
    from typer.core import TyperOption

    original = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        if self.is_flag and not self.count and self.metavar is None:
            return None
        return original(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_without_type()

app = typer.Typer(
    name="ledger",
    cls=LedgerGroup,
    help="An evidence ledger for AI coding-agent runs: immutable records, an SQL index, exact cost reports.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("ledger")
        except PackageNotFoundError:  # run from a source tree that was never installed
            v = "unknown (not installed)"
        print(f"ledger {v}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print ledger's version and exit.",
                                          callback=_version, is_eager=True, metavar="")] = False,
) -> None:
    """An evidence ledger for AI coding-agent runs: immutable records, an SQL index, exact cost reports."""


app.command("run", context_settings=run_cmd.RUN_CONTEXT)(for_typer(run_cmd.run))
app.command("runs")(for_typer(runs_cmd.runs))
app.command("show")(for_typer(runs_cmd.show))
app.command("replay")(for_typer(replay_cmd.replay))
app.command("stop")(for_typer(stop_cmd.stop))
app.command("index")(for_typer(index_cmd.index))
app.command("import")(for_typer(import_cmd.import_))
app.command("sql", context_settings=sql_cmd.SQL_CONTEXT)(for_typer(sql_cmd.sql))
app.command("report")(for_typer(report_cmd.report))
app.command(COMPARE_NAME, hidden=True)(for_typer(compare_cmd.compare))
app.command("verify")(for_typer(verify_cmd.verify))
app.command("statusline")(for_typer(statusline_cmd.statusline))
app.command("demo")(for_typer(demo_cmd.demo))
app.command("push")(for_typer(push_cmd.push))
app.add_typer(db_cmd.app, name="db")
app.add_typer(homes_cmd.app, name="homes")

