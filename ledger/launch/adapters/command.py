"""Any command: no stream to parse; exit status, duration and output tails only."""

from __future__ import annotations

from typing import Any

from ledger.launch.adapters.base import Adapter


class CommandAdapter(Adapter):
    harness = "command"
    provider = None
    parses_stream = False
    terminal_types = ()

    @classmethod
    def prompt_from_argv(cls, argv: list[str]) -> tuple[str | None, str | None]:
        return None, None  # a plain command has no prompt to find

    def feed(self, obj: dict[str, Any]) -> None:  # never called: stdout is not parsed
        pass

    def finish(self, returncode: int | None, stopped_by: str | None) -> None:
        if self.expect_skill is not None:
            self.skill_invoked = False
