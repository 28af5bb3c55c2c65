"""Write a synthetic Codex history (real client shapes only) and print its truth.

    python3 scripts/gen_codex_history.py --threads 10000 --seed 1 --pad 22000 --out /tmp/codex-home

The output dir is a Codex home (`sessions/YYYY/MM/DD/rollout-*.jsonl`, `archived_sessions/`):
point `ledger import codex --from DIR` or ccusage (`CODEX_HOME=DIR ccusage codex daily`) at
it. The truth (per UTC day and model: token counters and calls) is printed as JSON on stdout,
or written to --truth FILE.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from codexhistory import generate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pad", type=int, default=0, help="characters of answer text per model call (size; same truth)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--truth", type=Path, help="write the truth here instead of stdout")
    a = ap.parse_args(argv)
    if a.out.exists() and any(a.out.iterdir()):
        print(f"Error: {a.out} is not empty", file=sys.stderr)
        return 2
    h = generate(a.out, threads=a.threads, seed=a.seed, real_shapes=True, pad=a.pad)
    truth = {"files": len(h.files), "bytes": sum(len(d) for d in h.files.values()), "calls": len(h.calls),
             "junk_lines": h.junk_lines,
             "daily_by_model": [{"day": d, "model": m, **row} for (d, m), row in sorted(h.truth().items())]}
    data = orjson.dumps(truth, option=orjson.OPT_INDENT_2) + b"\n"
    if a.truth:
        a.truth.write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
