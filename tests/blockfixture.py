"""The sessions of tests/test_report_blocks.py's hazard-free history (tests/cleanhistory.py):
blocks that fill, a response right after a block's end, idle spans shorter and longer than a
block, a session across midnight. tests/data/ccusage/blocks-clean.json is ccusage 20.0.24's
output for it, and tests/data/ccusage/daily-instances-clean.json its `claude daily --instances
--json --offline --timezone UTC`:

    python3 -c 'import sys; sys.path[:0] = ["tests"]; import blockfixture; blockfixture.write(sys.argv[1])' /tmp/bfix
    npm install --prefix /tmp/ccu ccusage@20.0.24
    CLAUDE_CONFIG_DIR=/tmp/bfix /tmp/ccu/node_modules/.bin/ccusage blocks --json --offline
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import cleanhistory


def _t(*a: int) -> datetime:
    return datetime(*a, tzinfo=timezone.utc)


SPANS = [
    (_t(2026, 1, 9, 8, 17, 5), [0, 3, 40, 95, 170]),       # block 08:00-13:00
    (_t(2026, 1, 9, 11, 50), [0, 20, 61.5, 75]),           # into it; 13:05 opens the next block
    (_t(2026, 1, 9, 21, 7), [0, 1, 2, 290, 299]),          # after an idle span > 5 h (a gap)
    (_t(2026, 1, 10, 2, 3), [0, 10]),                      # 02:03, past 02:00: a new block
    (_t(2026, 1, 12, 23, 59, 30), [0, 0.2, 240, 301]),     # across midnight; 05:00:30 opens a block
]
SEED = 7


def write(root: Path) -> int:
    return cleanhistory.write(Path(root), SPANS, seed=SEED)
