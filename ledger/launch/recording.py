"""What both launchers (headless, runner.py; interactive, interactive.py) record the same way:
the run's record opened (a typed error when the home is not writable), the manifest's launch
request, the child's environment (the run's id and directory exported), and the running cost
of its usage streams by the one `auto` rule."""

from __future__ import annotations

import os
from typing import Any

from ledger.errors import LedgerError
from ledger.launch.adapters import COMMAND
from ledger.launch.adapters.base import Adapter
from ledger.launch.redact import Redactor

_SKIP_PERMISSION_FLAGS = ("--dangerously-skip-permissions", "--dangerously-bypass-approvals-and-sandbox",
                          "--yolo", "-y")


def open_capture(home: Any, **publish: Any) -> Any:
    """RunCapture(home, **publish): the run published, or a LedgerError naming the fix."""
    from ledger.records.writer import RunCapture

    try:
        return RunCapture(home, **publish)
    except OSError as exc:
        raise LedgerError(f"cannot create a run record in {home}: {exc.strerror or exc}",
                          hint="pass a writable home with `ledger run --home DIR` (or set LEDGER_HOME)") from None


def child_env(env: dict[str, str], capture: Any) -> dict[str, str]:
    """The child's environment: ours plus the run's id and directory (LF_* and LEDGER_*), and
    the parent run's id when the run has one (never a stale one inherited)."""
    out = dict(env)
    path = os.fspath(capture.path)
    out.pop("LF_PARENT_RUN_ID", None)
    out.update({"LF_RUN_ID": capture.run_id, "LF_RUN_DIR": path, "LEDGER_RUN_ID": capture.run_id,
                "LEDGER_RUN_DIR": path})
    if capture.manifest.parent_run_id:
        out["LF_PARENT_RUN_ID"] = capture.manifest.parent_run_id
    return out


def launch_request(cls: type[Adapter], argv: list[str], redactor: Redactor) -> dict[str, Any] | None:
    """Manifest `launch` (Loopflow's RunLaunchRequest shape), prompts redacted; agents only."""
    if cls.harness == COMMAND:
        return None
    system, task = cls.prompt_from_argv(argv)
    max_turns = None
    for i, a in enumerate(argv):
        if a == "--max-turns" and i + 1 < len(argv) and argv[i + 1].isdigit():
            max_turns = int(argv[i + 1])
    return {
        "system_prompt": redactor.text(system or ""), "task_prompt": redactor.text(task or ""),
        "agent": cls.harness, "account_id": None, "max_turns": max_turns, "write_scope": "configured",
        "execution_boundary": None, "skip_permissions": any(a in _SKIP_PERMISSION_FLAGS for a in argv),
        "chrome": False,
    }


def running_cost(adapter: Adapter) -> tuple[float | None, str | None, str | None]:
    """(cost, basis, note) by the one `auto` rule (ledger.records.costbasis): each stream's
    provider cost from its final receipt, else its estimate from the price table
    (genai-prices, imported only when a stream needs it); basis reported | estimated | mixed.
    The note names the price data of an estimate, or why the cost is unknown."""
    return books_cost(adapter.provider, adapter.books.values())


def books_cost(provider: str | None, books: Any) -> tuple[float | None, str | None, str | None]:
    """running_cost of these usage-stream books (ledger.launch.adapters.base.StreamBook)."""
    from ledger.records.costbasis import REPORTED, auto_cost

    def estimate(b: Any) -> tuple[float | None, str | None]:
        from ledger.pricing import estimate_cost

        return estimate_cost(provider, b.model, b.counters)

    cost, basis, why = auto_cost(books, lambda b: b.final, lambda b: b.cost, estimate)
    if cost is None:
        return None, None, why
    if basis == REPORTED:
        return cost, basis, None
    from ledger.pricing import price_data_version

    return cost, basis, price_data_version()
