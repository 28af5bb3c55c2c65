"""The Typer app of the `ledger` command (ledger.cli.app.main runs it; `from ledger.cli.app import app`
still finds it). Commands live one group per module; heavy imports happen inside them."""

from __future__ import annotations

from typing import Annotated

import sys
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

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


class _Later(type):
    """A stand-in for a class (`_module` names its module): called or asked for an attribute,
    it imports the real class and hands over."""

    def _real(cls) -> Any:
        import importlib

        return getattr(importlib.import_module(cls._module), cls.__name__)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls._real()(*args, **kwargs)

    def __getattr__(cls, name: str) -> Any:
        return getattr(cls._real(), name)


def _import_rich_utils() -> Any:
    """typer.rich_utils, without the two imports at its top that only serve what ledger never
    does: rich.markdown (markdown-it: help text in markup mode "markdown"; ledger's is "rich")
    and rich.traceback (pygments: Typer's pretty exceptions, disabled below). They were ~300 M
    instructions of `ledger --help`, twice the interpreter's start (issue 28). While
    rich_utils is imported each is a stand-in module whose class imports the real one on
    first use; then the stand-ins are gone (a later `import rich.markdown` is the real one)."""
    import types

    if "typer.rich_utils" in sys.modules:
        return sys.modules["typer.rich_utils"]
    import rich

    stand_ins = {}
    for name, cls in (("rich.markdown", "Markdown"), ("rich.traceback", "Traceback")):
        if name not in sys.modules:
            module = types.ModuleType(name)
            setattr(module, cls, _Later(cls, (), {"_module": name}))
            stand_ins[name] = module
    sys.modules.update(stand_ins)
    try:
        from typer import rich_utils
    finally:
        for name, module in stand_ins.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]
            if getattr(rich, name.split(".")[1], None) is module:
                delattr(rich, name.split(".")[1])
    return rich_utils


def _readable_help() -> None:
    """Typer 0.29 keeps a docstring's single line breaks after its first paragraph, so Rich's
    re-wrap leaves ragged lines (`A run belongs` / `to the` / `bucket of...`): a paragraph
    is one line of text for Rich to wrap (a `\\b` paragraph, or a line that starts a list
    item, keeps its breaks). Its types read `<str>`, `<list[str]>`, `<int range> [x>=0]`: an
    option without a metavar shows what a person types (TEXT, N, PATH, NUMBER; a repeatable
    option says so in its help), an argument its name, and a count that only cannot be
    negative no range; the usage line names an argument as Click does (`QUERY`, `[KIND]`)."""
    import re

    from typer.core import TyperArgument, TyperOption

    rich_utils = _import_rich_utils()

    def fix_linebreaks(paragraphs: list[str], markup_mode: Any) -> str:
        return "\n\n".join(p if p.startswith("\b") else re.sub(r"\n(?!\s*[-*] )\s*", " ", p) for p in paragraphs)

    rich_utils._fix_linebreaks = fix_linebreaks
    command_help = rich_utils._make_command_help

    def first_paragraph(*, help_text: str, markup_mode: Any) -> Any:  # (a group's list of commands)
        return command_help(help_text=fix_linebreaks(help_text.split("\n\n")[:1], markup_mode), markup_mode=markup_mode)

    rich_utils._make_command_help = first_paragraph

    def readable(param: Any, ctx: Any) -> str:
        label = (param.display_type(ctx) or "").strip("<>")
        if label.startswith("list[") and label.endswith("]"):
            label = label[5:-1]  # (repeatable: its help says so)
        if label.startswith("int"):
            return "N"
        if label.startswith("float"):
            return "NUMBER"
        if label in ("str", "text", ""):
            return "TEXT"
        if "|" in label:
            return label  # (choices)
        return "PATH" if label in ("file", "directory", "path", "Path") else "TEXT"

    shown = TyperOption.display_type_rich

    def option_type(self: TyperOption, ctx: Any) -> str | None:
        if self.metavar is not None or (self.is_flag and not self.count):
            return shown(self, ctx)
        return readable(self, ctx)

    TyperOption.display_type_rich = option_type  # type: ignore[method-assign]

    def argument_type(self: TyperArgument, ctx: Any) -> str | None:
        return self.metavar if self.metavar is not None else (self.name or "").upper()

    TyperArgument.display_type_rich = argument_type  # type: ignore[method-assign]

    def usage_name(self: TyperArgument) -> str:  # `ledger sql [OPTIONS] QUERY`, not `{query}`
        name = (self.metavar or self.name or "").upper()
        name = name if self.required else f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")

    TyperArgument._usage_display_name = usage_name  # type: ignore[method-assign]

    ranged = TyperOption._get_number_range_help_str

    def range_text(self: TyperOption) -> str | None:
        if self.min == 0 and self.max is None:
            return None  # (a count: N says it)
        return ranged(self)

    TyperOption._get_number_range_help_str = range_text  # type: ignore[method-assign]


_readable_help()

app = typer.Typer(
    name="ledger",
    cls=LedgerGroup,
    help="An evidence ledger for AI coding-agent runs: immutable records, an SQL index, exact cost reports.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:  # (ledger.cli.app.main answers a plain `ledger --version` without Typer)
        from ledger import __version__

        print(f"ledger {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print ledger's version and exit.",
                                          callback=_version, is_eager=True, metavar="")] = False,
) -> None:
    """An evidence ledger for AI coding-agent runs: immutable records, an SQL index, exact cost reports."""


class RunCommand(TyperCommand):
    """`ledger run`: its options are parsed by run_cmd.parse_run_args (not declared to Typer: the
    launch budget), so its help shows run_cmd.RUN_HELP as Typer shows any command's options."""

    def format_help(self, ctx: Any, formatter: Any) -> Any:
        return _run_help_command().format_help(ctx, formatter)


def _run_help_command() -> Any:
    import inspect

    params = []
    for i, (decl, metavar, text) in enumerate(run_cmd.RUN_HELP):
        extra = {"metavar": metavar} if metavar is not None else {}
        opt = typer.Option(decl, help=text, show_default=False, **extra)
        kind, default = (bool, False) if metavar is None else (str | None, None)
        params.append(inspect.Parameter(f"opt{i}", inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=Annotated[kind, opt]))

    def shown(**kwargs: Any) -> None:
        pass

    shown.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    shown.__doc__ = run_cmd.run.__doc__
    one = typer.Typer(add_completion=False)
    one.command("run", options_metavar=run_cmd.RUN_USAGE)(shown)
    return typer.main.get_command(one)


app.command("run", cls=RunCommand, context_settings=run_cmd.RUN_CONTEXT)(for_typer(run_cmd.run))
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

