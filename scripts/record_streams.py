#!/usr/bin/env python3
"""Re-record tests/data/streams/*.jsonl from the real claude / codex CLIs.

Runs the ``agents`` tests of tests/test_mockprovider.py with
LEDGER_RECORD_STREAMS=1: each scenario test saves the client's stdout (temp
paths replaced by /tmp/ledger-test) under tests/data/streams/, so the saved
files come from exactly the scenarios the tests assert on.  The mock server
listens on 127.0.0.1 only; nothing else is contacted.

After re-recording, check the totals against tests/data/streams/README.md
(the unmarked test_recorded_* tests do that) and update the README if a
client version changed.

Usage: python3 scripts/record_streams.py [extra pytest args]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT / "tests"))
    from agentenv import agents_available  # noqa: PLC0415

    if not agents_available():
        print("claude/codex not found in node_modules/.bin; run `npm ci` "
              "first", file=sys.stderr)
        return 2
    env = dict(os.environ, LEDGER_RECORD_STREAMS="1")
    cmd = [sys.executable, "-m", "pytest", "tests/test_mockprovider.py",
           "-q", "-m", "agents", "-p", "no:cacheprovider", *argv]
    rc = subprocess.call(cmd, cwd=ROOT, env=env)
    if rc == 0:
        # check the freshly written files against the documented totals
        rc = subprocess.call(
            [sys.executable, "-m", "pytest", "tests/test_mockprovider.py",
             "-q", "-k", "recorded", "-p", "no:cacheprovider"],
            cwd=ROOT)
    for f in sorted((ROOT / "tests" / "data" / "streams").glob("*.jsonl")):
        print(f"{f.relative_to(ROOT)}: {sum(1 for _ in f.open())} lines")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
