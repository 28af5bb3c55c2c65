"""Capture what the real Claude Code (node_modules/.bin/claude, 2.1.328) writes, with the truth.

    python3 scripts/capture_claude.py [--out tests/data/captures/claude] [SCENARIO ...]

Each scenario drives the real client against tests/mockprovider.py on 127.0.0.1, headless
(`claude -p`) or as the interactive TUI in tmux (`send-keys` / `capture-pane`), in an isolated
HOME / CLAUDE_CONFIG_DIR (tests/agentenv.py). The mock logs every response it serves: that
log is the truth. Written per scenario, under OUT/<scenario>/:

- `projects/**/*.jsonl`: the transcripts the client wrote (sanitized, tests/capturekit.py:
  temp paths replaced by /tmp/ledger-test, and the payload of the big line types that
  carry no usage, `attachment`, `api-request*`, replaced by a
  marker; every other byte as written);
- `truth.json`: every response served (message id, model, session, usage with the cache 5m/1h
  split, max_tokens, time in UTC), whether a transcript holds it (`logged`), and its cost at
  the client's list prices (checked against the client's own `cost-state` totals).

The scenarios and what each showed: tests/data/captures/claude/README.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from capturekit import HELD_OUT, SCENARIOS, capture  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "captures" / "claude")
    ap.add_argument("scenario", nargs="*", help=f"default: all but the held-out ({', '.join(HELD_OUT)})")
    a = ap.parse_args()
    for name in a.scenario or [s for s in SCENARIOS if s not in HELD_OUT]:
        truth = capture(name, a.out / name)
        print(f"{name}: {len(truth['responses'])} responses served, "
              f"{sum(1 for r in truth['responses'] if r['logged'])} in a transcript, "
              f"check {truth['check']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
