"""`ledger run [OPTIONS] -- CMD [ARGS...]`: launch an agent or any command and record it.

The options are read from the command's extra arguments by a small parser here instead of
being declared as Typer options: Typer coerces every declared non-flag option through a
Pydantic adapter, and importing Pydantic alone costs ~50 ms, which the launch budget
(`ledger run -- true` within 150 ms of `true`, DESIGN §7) cannot afford. `--help` still
documents them (the docstring below); errors are usage errors (exit 2).
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from ledger.cli.common import handle_errors
from ledger.errors import LedgerError
from ledger.launch.adapters import AGENT_LABELS, COMMAND, HARNESSES

RUN_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True}
# Once the agent is started, `ledger run` lowers the CPU priority of its parsing thread
# (nice +10; Linux nice values are per thread: the pipe readers and the agent keep theirs):
# recording a fast stream then does not compete with the agent for the CPU.
RUN_NICE = 10

# name -> (key, kind): kind is "value", "multi" (repeatable value) or "flag"
_OPTIONS: dict[str, tuple[str, str]] = {
    "--harness": ("harness", "value"), "--subject": ("subject", "multi"), "--skill": ("skill", "value"),
    "--model": ("model", "value"), "--timeout": ("timeout", "value"), "--home": ("home", "value"),
    "--json": ("json", "flag"), "--redact": ("redact", "multi"), "--expect-skill": ("expect_skill", "value"),
    "--max-cost": ("max_cost", "value"), "--progress": ("progress", "flag"),
    "--no-progress": ("no_progress", "flag"), "--no-fail": ("no_fail", "flag"),
    # issue 30: arms and repeated trials (ledger.launch.repeats); --trial and --run-id are
    # what --repeat gives each trial's own `ledger run`
    "--arm": ("arm", "value"), "--repeat": ("repeat", "value"), "--jobs": ("jobs", "value"),
    "--trial": ("trial", "value"), "--run-id": ("run_id", "value"),
}
# the options a repeat's trials do not get from it (it gives each its own --json, --home, ...)
_NOT_FOR_TRIALS = frozenset({"repeat", "jobs", "json", "progress", "no_progress", "home", "trial", "run_id"})
HARNESS_CHOICES = ("auto", *HARNESSES)


def parse_run_args(args: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Split `[OPTIONS] CMD ARGS...` into ledger's options and the command.

    The command starts at the first argument that is not one of ledger's options (Typer has
    already consumed a `--` separator); everything from there on belongs to the command.
    """
    opts: dict[str, Any] = {"subject": [], "redact": []}
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        name, eq, inline = a.partition("=")
        if not a.startswith("--") or name not in _OPTIONS:
            if a.startswith("-") and a != "-":
                raise typer.BadParameter(
                    f"no such option: {a} (put the command after `--`: `ledger run [OPTIONS] -- CMD ...`)")
            break
        key, kind = _OPTIONS[name]
        if kind == "flag":
            if eq:
                raise typer.BadParameter(f"{name} does not take a value")
            opts[key] = True
            i += 1
            continue
        if eq:
            value = inline
            i += 1
        else:
            if i + 1 >= len(args):
                raise typer.BadParameter(f"{name} needs a value")
            value = args[i + 1]
            i += 2
        from ledger.cli.common import check_utf8

        check_utf8([value])  # (ledger's options are text; the command may hold any bytes)
        if kind == "multi":
            opts[key].append(value)
        else:
            opts[key] = value
    return opts, args[i:]


def _float(opts: dict[str, Any], key: str, flag: str) -> float | None:
    v = opts.get(key)
    if v is None:
        return None
    try:
        f = float(v)
    except ValueError:
        raise typer.BadParameter(f"{flag} expects a number, got {v!r}") from None
    if f != f or f in (float("inf"), float("-inf")):
        raise typer.BadParameter(f"{flag} expects a finite number, got {v!r}")
    return f


# `ledger run --help`'s options: (option, metavar (None: a flag), help). ledger.cli.typer_app
# shows them in Typer's own style (they are parsed by parse_run_args, not by Typer).
RUN_HELP: tuple[tuple[str, str | None, str], ...] = (
    ("--harness", "NAME", f"How to read the stream: {'|'.join(HARNESS_CHOICES)} (auto: from the executable's name)."),
    ("--subject", "SEL", "What the run is for, e.g. task:LOO-265 (repeatable)."),
    ("--skill", "NAME", "The skill this run exercises (recorded)."),
    ("--model", "NAME", "The model (default: the harness's own model flag)."),
    ("--timeout", "SECONDS", "Stop the agent after SECONDS (outcome interrupted, exit 124)."),
    ("--home", "PATH", "Ledger home (default: $LEDGER_HOME or the user data dir)."),
    ("--json", None, "Print one JSON object: run id, outcome, tokens, cost, evidence."),
    ("--redact", "NAME", "Another environment variable whose value must never be persisted (repeatable)."),
    ("--expect-skill", "NAME", "skill-not-invoked unless the stream proves a successful Skill tool call of NAME; "
                               "the run then exits 123 (when the agent itself exited 0)."),
    ("--no-fail", None, "With --expect-skill: exit with the agent's own code (the verdict is recorded all the same)."),
    ("--max-cost", "USD", "Stop the agent once its running cost passes USD (exit 125; estimated from the tokens "
                          "seen so far: Claude reports them as it goes, Codex and Gemini only at the end)."),
    ("--progress", None, "Live progress on stderr (default: when stderr is a terminal)."),
    ("--no-progress", None, "No live progress."),
    ("--arm", "NAME", "The arm this run belongs to, for `ledger report compare`."),
    ("--repeat", "N", "Run the command N times, each trial its own run (its trial number recorded), "
                      "all children of one parent run."),
    ("--jobs", "K", "With --repeat: at most K trials at once (default 1)."),
    ("--trial", "N/M", "What --repeat gives each trial's own run: its number of M (recorded)."),
    ("--run-id", "ID", "What --repeat gives each trial's own run: the id it was reserved."),
)
RUN_USAGE = "[OPTIONS] -- CMD [ARGS...]"


@handle_errors
def run(ctx: typer.Context) -> None:
    """Run an agent ({agents}) or any command headless and record it.

    An agent started without its headless flags (`claude` without -p, `codex` without
    exec, `gemini` without -p) in a terminal gets the terminal: an interactive run, its
    usage read from the agent's own session log (docs/run.md).

    ledger reads the agent's stdout itself, keeps the redacted raw stream as evidence, maps
    it to usage and conversation events, and exits with the agent's exit code (124 on
    --timeout, 125 on --max-cost, 128+N when stopped by signal N, 123 when the
    --expect-skill skill was not invoked). For agents the final answer is printed on
    stdout; a plain command's stdout passes through unchanged (to stderr with --json, so
    that stdout holds one JSON object).
    """
    _exit(execute(list(ctx.args)))


# the harnesses in the help come from the adapter registry (Typer reads the docstring)
run.__doc__ = (run.__doc__ or "").replace("{agents}", ", ".join(AGENT_LABELS))


def execute(args: list[str]) -> int:
    """Parse `[OPTIONS] CMD ARGS...`, run, print what `ledger run` prints; the exit code.

    Usage errors raise typer.BadParameter (exit 2), ledger errors LedgerError (exit 1)."""
    opts, command = parse_run_args(args)
    if not command:
        raise typer.BadParameter("no command given: put it after `--`, e.g. `ledger run -- true`")
    harness = opts.get("harness") or "auto"
    if harness not in HARNESS_CHOICES:
        raise typer.BadParameter(f"--harness must be one of {', '.join(HARNESS_CHOICES)}, got {harness!r}")
    timeout = _float(opts, "timeout", "--timeout")
    if timeout is not None and timeout <= 0:
        raise typer.BadParameter("--timeout must be positive")
    max_cost = _float(opts, "max_cost", "--max-cost")
    if max_cost is not None and max_cost < 0:
        raise typer.BadParameter("--max-cost must not be negative")
    progress = True if opts.get("progress") else (False if opts.get("no_progress") else None)
    json_ = bool(opts.get("json"))
    if opts.get("repeat") is not None or opts.get("jobs") is not None:
        return _execute_repeat(opts, command, json_)
    from ledger.home import resolve_home
    from ledger.launch.runner import RunOptions, launch

    result = launch(RunOptions(
        argv=command, home=resolve_home(opts.get("home")), harness=harness, subjects=opts["subject"],
        skill=opts.get("skill"), model=opts.get("model"), timeout=timeout, redact=opts["redact"],
        expect_skill=opts.get("expect_skill"), fail_on_skill=not opts.get("no_fail"), max_cost=max_cost, progress=progress, json_output=json_,
        nice=RUN_NICE, arm=opts.get("arm") or None, trial=_trial(opts.get("trial")), run_id=_run_id(opts.get("run_id")),
    ))
    return print_result(result, json_, progress)


def print_result(result: Any, json_: bool, progress: bool | None) -> int:
    """What `ledger run` (and `ledger replay`) print after a run; returns its exit code."""
    if json_:
        from ledger.cli.common import print_json

        print_json(result.to_json())
    elif result.harness != COMMAND and result.final_answer:
        sys.stdout.write(result.final_answer if result.final_answer.endswith("\n") else result.final_answer + "\n")
        sys.stdout.flush()
    # one summary line on stderr: after every run shown live (stderr is a terminal, or
    # --progress), and after a run that did not go well (also with stderr redirected)
    import os

    shown = progress if progress is not None else os.isatty(2)
    unwell = (result.returncode is None and result.error is not None) or result.outcome == "interrupted" or (
        result.harness != COMMAND and result.verdict.ok is False)
    if shown or (unwell and not json_):
        from ledger.text import plain  # the agent's stop reason or error: its control characters escaped

        sys.stderr.write(plain(summary_line(result)) + "\n")
    if result.hint and result.error:
        from ledger.text import plain

        sys.stderr.write(plain(f"Error: {result.error}") + "\n" + plain(f"Hint: {result.hint}") + "\n")
    sys.stderr.flush()
    return result.exit_code


def _count(opts: dict[str, Any], key: str, flag: str) -> int | None:
    v = opts.get(key)
    if v is None:
        return None
    try:
        n = int(v)
    except ValueError:
        raise typer.BadParameter(f"{flag} expects a whole number, got {v!r}") from None
    if n < 1:
        raise typer.BadParameter(f"{flag} must be at least 1")
    return n


def _trial(v: str | None) -> dict[str, int] | None:
    """`--trial I/N` (given by --repeat to each trial): the manifest's `trial`."""
    if v is None:
        return None
    a, sep, b = v.partition("/")
    if not (sep and a.isdigit() and b.isdigit() and 1 <= int(a) <= int(b)):
        raise typer.BadParameter(f"--trial expects I/N with 1 <= I <= N, got {v!r}")
    return {"number": int(a), "of": int(b)}


def _run_id(v: str | None) -> str | None:
    if v is None:
        return None
    from ledger.records.ids import is_run_id

    if not is_run_id(v):
        raise typer.BadParameter(f"--run-id expects run_ + a UUID, got {v!r}")
    return v


def _execute_repeat(opts: dict[str, Any], command: list[str], json_: bool) -> int:
    """`--repeat N [--jobs K]`: ledger.launch.repeats runs the trials; one JSON document with
    --json (the parent and every trial's `ledger run --json` object), else one line per trial
    and a summary line on stderr."""
    if opts.get("trial") or opts.get("run_id"):
        raise typer.BadParameter("--trial and --run-id are given by --repeat to its trials, not with it")
    if opts.get("repeat") is None:
        raise typer.BadParameter("--jobs goes with --repeat N: `ledger run --repeat N --jobs K -- CMD`")
    n = _count(opts, "repeat", "--repeat") or 1
    jobs = _count(opts, "jobs", "--jobs") or 1
    args: list[str] = []
    for name, (key, kind) in _OPTIONS.items():
        if key in _NOT_FOR_TRIALS or opts.get(key) in (None, [], False):
            continue
        if kind == "flag":
            args.append(name)
        else:
            for v in (opts[key] if kind == "multi" else [opts[key]]):
                args += [name, v]
    from ledger.home import resolve_home
    from ledger.launch.repeats import RepeatOptions, run_repeats

    result = run_repeats(RepeatOptions(argv=command, home=resolve_home(opts.get("home")), trials=n, jobs=jobs,
                                       run_args=args, arm=opts.get("arm") or None, skill=opts.get("skill"),
                                       subjects=opts["subject"], model=opts.get("model")))
    if json_:
        from ledger.cli.common import print_json

        print_json(result.to_json())
    ok = sum(1 for r in result.trials if r.get("ok") is True)
    costs = [r.get("cost_usd") for r in result.trials]
    known = [c for c in costs if isinstance(c, (int, float))]
    cost = (f"${sum(known):.4f}" if len(known) == len(costs) else
            f"cost unknown for {len(costs) - len(known)} trial{'s' if len(costs) - len(known) != 1 else ''}")
    arm = f" (arm {result.arm})" if result.arm else ""
    sys.stderr.write(f"ledger: {result.run_id[:SHORT_ID]} {result.outcome} · {len(result.trials)} trials{arm}, "
                     f"{ok} ok · {_duration(result.duration_secs)} · {cost}\n")
    sys.stderr.flush()
    return result.exit_code


SHORT_ID = 12  # `run_` + 8 hex digits: a prefix `ledger show` accepts, as `ledger runs` shows it


def _duration(secs: float) -> str:
    if secs < 60:
        return f"{secs:.1f}s"
    m, s = divmod(int(round(secs)), 60)
    return f"{m}m {s:02d}s" if m < 60 else f"{m // 60}h {m % 60:02d}m"


def summary_line(result: Any) -> str:
    """`ledger: run_1a2b3c4d completed · 12.3s · in 12k out 345 · $0.0123 est`: the run (an
    id prefix for `ledger show`), its outcome and why not ok, duration, the exit code when it
    says something (failed, 123), and for agents tokens and cost (a command has neither)."""
    from ledger.launch.progress import _fmt_tokens

    v = result.verdict
    why = None
    if result.returncode is None and result.error:
        why = result.error
    elif result.hint:  # (the error and hint follow on their own lines)
        why = "needs a terminal" if result.stop_reason == "needs_terminal" else "error"
    elif result.stop_reason in ("timeout", "max_cost"):
        why = "--" + result.stop_reason.replace("_", "-")
    elif v.error_kind == "cancelled":
        why = (v.error_detail or "").replace("stopped by signal:", "") or None
    elif v.ok is False:
        why = v.error_detail or v.error_kind
    parts = [_duration(result.duration_secs)]
    if result.outcome == "failed" or (result.exit_code and not result.stop_reason):
        parts.append(f"exit {result.exit_code}")  # (a stop's code is implied: 124, 125, 128+N)
    if result.evidence != "not_applicable":  # (recorded as a plain command: no usage to show)
        t = result.tokens  # (uncached input, as `ledger runs` and the reports count it)
        parts.append(f"in {_fmt_tokens(t.get('input_tokens'))} out {_fmt_tokens(t.get('output_tokens'))}")
        if result.cost_usd is not None:
            mark = {"estimated": " est", "mixed": " mix"}.get(result.cost_basis or "", "")
            parts.append(f"${result.cost_usd:.4f}{mark}")
        else:
            parts.append("cost unknown")
    head = f"ledger: {result.run_id[:SHORT_ID]} {result.outcome}"
    tail = " · " + " · ".join(parts)
    if why:  # cut to keep the line within 80 columns (`ledger show` has the whole reason)
        room = SUMMARY_WIDTH - len(head) - len(tail) - 3
        why = " ".join(why.split())
        head += f" ({why if len(why) <= max(room, 12) else why[:max(room - 1, 11)] + '…'})"
    return head + tail


SUMMARY_WIDTH = 80


def main_fast(argv: list[str]) -> None:
    """`ledger run ARGV` without Typer's argument processing, for `ledger.cli.app.main` to
    call before `app()` when `sys.argv[1] == "run"`: Typer 0.29 imports Pydantic (~70 ms) to
    coerce even its own `--help` option, most of `ledger run`'s launch overhead. Returns
    without doing anything when ledger's own options ask for `--help` (Typer prints it, in
    every command's style: ledger.cli.typer_app.RunCommand);
    otherwise it exits (the child's code, 2 on a usage error, 1 on a ledger error)."""
    import os

    head = argv[: argv.index("--")] if "--" in argv else argv
    if "--help" in head and not any(not a.startswith("-") for a in head[: head.index("--help")]):
        return
    try:
        code = execute(list(argv))
    except typer.BadParameter as exc:
        from ledger.cli.common import print_usage_error

        print_usage_error(exc, "ledger run")
        _exit(2)
        return
    except LedgerError as exc:
        if os.environ.get("LEDGER_DEBUG") == "1":
            raise
        sys.stderr.write(f"Error: {exc.message}\n" + (f"Hint: {exc.hint}\n" if exc.hint else ""))
        _exit(1)
        return
    _exit(code)


def _exit(code: int) -> None:
    """Exit with the child's code. In a real process (not under a test runner that swapped
    sys.stdout), everything is settled and flushed by now, so skip the interpreter teardown
    (~30 ms, mostly Typer's Pydantic import) with os._exit; LEDGER_NO_FAST_EXIT=1 disables it."""
    import os

    if (sys.stdout is sys.__stdout__ and sys.stderr is sys.__stderr__
            and os.environ.get("LEDGER_NO_FAST_EXIT") != "1"):
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os._exit(code)
    raise typer.Exit(code)
