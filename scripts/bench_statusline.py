#!/usr/bin/env python3
"""`ledger statusline` warm (issue 29): `python scripts/bench.py statusline [--runs N]
[--sessions S] [--keep DIR] [--repeat R] [--ccusage PATH]`.

A home of N generated runs with S imported Claude sessions (scripts/bench_warm.prepare:
indexed, sealed, its report facts synced), then in interleaved rounds (the machine's load
drifts): `python -c "import sqlite3, json"` (the floor), `ledger statusline` fed Claude Code
2.1.328's own status-line document (tests/data/statusline/) naming one imported session's
transcript, and with --ccusage, ccusage's `statusline --offline` on the same document and
files. Wall time of each process (output to a pipe), median and best; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _wall(argv: list[str], env: dict[str, str], stdin: bytes) -> float:
    t = time.perf_counter()
    p = subprocess.run(argv, env=env, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    took = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({p.returncode}): {p.stderr.decode(errors='replace')[-500:]}")
    return took


def main(argv: list[str]) -> int:
    import bench_warm

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--sessions", type=int, default=2_000)
    ap.add_argument("--keep", type=Path, help="generate into / reuse this directory")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--ccusage", help="a ccusage binary to measure beside (e.g. /tmp/ccu/node_modules/.bin/ccusage)")
    a = ap.parse_args(argv)
    bench_warm.CHECKOUT = ROOT  # (this tree's code: python -m ledger, not an installed console script)
    base = a.keep or Path(tempfile.mkdtemp(prefix="bench-statusline-"))
    home = base / "home"
    home.mkdir(parents=True, exist_ok=True)
    bench_warm.prepare(home, a.runs, 0.0, 0.0, a.sessions)
    src = home.parent / f"claude-{a.sessions}"
    transcript = max(src.glob("projects/*/*.jsonl"), key=lambda p: p.stat().st_size)
    doc = json.loads((ROOT / "tests" / "data" / "statusline" / "claude-2.1.328-after-response.json").read_text())
    doc.update(session_id=transcript.stem, transcript_path=str(transcript), cwd=str(src),
               workspace={"current_dir": str(src), "project_dir": str(src), "added_dirs": []})
    stdin = json.dumps(doc).encode()
    env = bench_warm._env(home)
    ledger = bench_warm._ledger() + ["statusline"]
    cases = [("`python -c \"import sqlite3, json\"`", [sys.executable, "-c", "import sqlite3, json"], {}),
             ("`ledger statusline`", ledger, {})]
    if a.ccusage:
        cases.append(("ccusage 20.0.24 `statusline --offline`", [a.ccusage, "statusline", "--offline"],
                      {"CLAUDE_CONFIG_DIR": str(src)}))
    for _, cmd, extra in cases:  # warm-up (and the line it prints)
        _wall(cmd, {**env, **extra}, stdin)
    line = subprocess.run(ledger, env=env, input=stdin, capture_output=True).stdout.decode().strip()
    times: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    load0 = os.getloadavg()[0]
    for _ in range(a.repeat):
        for name, cmd, extra in cases:
            times[name].append(_wall(cmd, {**env, **extra}, stdin))
    load1 = os.getloadavg()[0]
    floor = statistics.median(times[cases[0][0]])
    print(f"{a.runs} runs, {a.sessions} imported sessions; {a.repeat} interleaved rounds; "
          f"load average {load0:.1f} before, {load1:.1f} after.\n")
    print("| command | median wall | best | median / floor |")
    print("|---|---:|---:|---:|")
    for name, _, _ in cases:
        med = statistics.median(times[name])
        print(f"| {name} | {med * 1000:.0f} ms | {min(times[name]) * 1000:.0f} ms | {med / floor:.2f}x |")
    print(f"\n`ledger statusline` printed: `{line}`")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
