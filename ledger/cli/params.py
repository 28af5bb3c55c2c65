"""Command options declared without importing Typer (issue 15: a warm `ledger report` 10x
faster than ccusage; Typer's import alone is ~30 ms of it).

A command declares its parameters as always, `Annotated[str | None, Option("--tz", help=...)]`,
but `Option` / `Argument` here only record their arguments. Two readers use them:

- ledger.cli.fastpath parses plain command lines from them, without Typer;
- `for_typer(fn)` (called where the Typer app is built) gives Typer the same function with
  each record turned into the `typer.Option(...)` / `typer.Argument(...)` it stands for, so
  help, completion and errors are Typer's, from the one declaration.

Declarations already made with typer.Option pass through `for_typer` unchanged. A `help` may
be a function returning the text, called only for Typer.
"""

from __future__ import annotations

from typing import Any, Callable


class Param:
    """`typer.Option(*decls, **kw)` or `typer.Argument(**kw)`, not yet made."""

    __slots__ = ("kind", "decls", "kw")

    def __init__(self, kind: str, decls: tuple[str, ...], kw: dict[str, Any]) -> None:
        self.kind = kind
        self.decls = decls
        self.kw = kw

    def __repr__(self) -> str:
        return f"{self.kind.capitalize()}({', '.join([*map(repr, self.decls), *(f'{k}={v!r}' for k, v in self.kw.items())])})"

    def typer(self) -> Any:
        import typer

        kw = self.kw
        if callable(kw.get("help")):  # (help text that needs an import: made for Typer only)
            kw = {**kw, "help": kw["help"]()}
        if self.kind == "argument":
            return typer.Argument(*self.decls, **kw)
        return typer.Option(*self.decls, **kw)


def Option(*decls: str, **kw: Any) -> Any:  # noqa: N802 (typer.Option's name and signature)
    return Param("option", decls, kw)


def Argument(*decls: str, **kw: Any) -> Any:  # noqa: N802
    return Param("argument", decls, kw)


# `ctx: Annotated[Any, CONTEXT] = None`: Typer passes its typer.Context (a command that reads
# ctx.args); the fast path, which parses no extra argument, passes none
CONTEXT = Param("context", (), {})


def for_typer(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` as Typer reads it: a wrapper whose signature carries Typer's own parameter infos
    (Typer reads `inspect.signature(fn, eval_str=True)`, which honours `__signature__`)."""
    import functools
    import inspect
    import typing

    target = inspect.unwrap(fn)
    hints = typing.get_type_hints(target, include_extras=True)
    sig = inspect.signature(target)
    params = []
    for p in sig.parameters.values():
        hint = hints.get(p.name, p.annotation)
        meta = getattr(hint, "__metadata__", ())
        if meta and isinstance(meta[0], Param) and meta[0].kind == "context":
            import typer

            params.append(p.replace(annotation=typer.Context))
            continue
        if meta and isinstance(meta[0], Param):
            hint = typing.Annotated[hint.__origin__, meta[0].typer(), *meta[1:]]
        params.append(p.replace(annotation=hint))

    @functools.wraps(fn)
    def command(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    command.__signature__ = sig.replace(parameters=params, return_annotation=hints.get("return", sig.empty))  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command
