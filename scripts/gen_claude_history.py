"""Write a synthetic Claude Code history (every duplication hazard) and print its truth.

    python3 scripts/gen_claude_history.py --sessions 2000 --seed 1 --out /tmp/claude-home

The output dir is a Claude config dir (`projects/<project>/<session>.jsonl`, subagents under
`<session>/subagents/`): point `ledger import claude --from DIR` or ccusage
(`CLAUDE_CONFIG_DIR=DIR`) at it. The truth (per UTC day and model: token counters, responses,
reported cost) is printed as JSON on stdout, or written to --truth FILE.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from claudehistory import generate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pad", type=int, default=0, help="characters of text per content block (size; same truth)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--truth", type=Path, help="write the truth here instead of stdout")
    a = ap.parse_args(argv)
    if a.out.exists() and any(a.out.iterdir()):
        print(f"Error: {a.out} is not empty", file=sys.stderr)
        return 2
    h = generate(a.out, sessions=a.sessions, seed=a.seed, pad=a.pad)
    truth = {"files": len(h.files), "bytes": sum(len(d) for d in h.files.values()),
             "responses": len(h.responses), "junk_lines": h.junk_lines,
             "daily_by_model": [{"day": d, "model": m, **row} for (d, m), row in sorted(h.truth().items())]}
    data = orjson.dumps(truth, option=orjson.OPT_INDENT_2) + b"\n"
    if a.truth:
        a.truth.write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
