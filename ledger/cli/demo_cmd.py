"""`ledger demo [--home PATH]`: a few runs from recorded real client streams, to try the rest."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from ledger.cli.common import handle_errors


@handle_errors
def demo(home: Annotated[Optional[str], typer.Option("--home", metavar="PATH", help="Where to record (default: a separate demo home, never your real one).")] = None) -> None:
    """Record a few runs by replaying real Claude Code and Codex streams shipped with ledger
    through `ledger run` (no agent, no API key), then print what to try next."""
    from pathlib import Path

    from ledger.launch.demo import demo_home, record_demo

    where = Path(home) if home else demo_home()
    results = record_demo(where)
    for r in results:
        cost = f"${r.cost_usd:.4f}" if r.cost_usd is not None else "cost unknown"
        print(f"recorded {r.run_id[:12]} {r.harness} {r.outcome} {cost}", file=sys.stderr)
    h = f" --home {where}"
    print(f"demo runs recorded in {where}; try:\n  ledger runs{h}\n  ledger show {results[0].run_id[:12]}{h}\n"
          f"  ledger report model{h}", file=sys.stderr)
