#!/usr/bin/env python3
"""Benchmarks (DESIGN §7). `python scripts/bench.py {index,report,launch,sources,first,team,warm,statusline} [options]`.

Each part lives in its own module (scripts/bench_<part>.py) with a `main(argv)` that prints
a Markdown table of measured numbers and ratios.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

PARTS = ("index", "report", "launch", "sources", "first", "team", "warm", "statusline")


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in PARTS:
        print(f"usage: bench.py {{{','.join(PARTS)}}} [options]", file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    return importlib.import_module(f"bench_{argv[0]}").main(argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
