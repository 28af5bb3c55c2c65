"""`ledger replay RUN`: run a recorded headless run again as its child (ledger.launch.replay)."""

from __future__ import annotations

from typing import Annotated

from ledger.cli.common import HomeOpt, JsonOpt, handle_errors, print_json
from ledger.cli.params import Argument, Option


@handle_errors
def replay(
    run: Annotated[str, Argument(help="Run id or unique prefix (with or without run_).")],
    home: HomeOpt = None,
    json_: JsonOpt = False,
    dry_run: Annotated[bool, Option("--dry-run", help="Print the command instead of running it.", metavar="")] = False,
) -> None:
    """Run a recorded headless run's command again, as a new run whose parent it is.

    Same harness, command line, prompts, model, skill and directory; the subjects are
    inherited. Refused when no launch request was recorded, a prompt was redacted (a
    secret was in it), the harness is not installed here, or the run was interactive.
    Exits with the new run's exit code (as `ledger run`).
    """
    import os
    import sys

    from ledger.home import resolve_home
    from ledger.launch.replay import plan_replay
    from ledger.text import plain

    h = resolve_home(home)
    plan = plan_replay(h, run)
    if dry_run:
        if json_:
            print_json(plan.to_json())
        else:
            print(plain(plan.command()))
            sys.stderr.write(plain(f"(in {plan.cwd}, as a child of {plan.source_run_id})") + "\n")
        return
    import typer

    from ledger.cli.run_cmd import RUN_NICE, print_result
    from ledger.launch.runner import RunOptions, launch

    result = launch(RunOptions(
        argv=plan.argv, home=h, harness=plan.harness, skill=plan.skill, model=plan.model,
        expect_skill=plan.expect_skill, json_output=json_, cwd=plan.cwd, env=plan.env(dict(os.environ)),
        nice=RUN_NICE,
    ))
    code = print_result(result, json_, None)
    raise typer.Exit(code)
