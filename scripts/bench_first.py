"""`bench.py first`: a new user's first answer, ledger against ccusage, on a large history.

    python3 scripts/bench.py first [--client claude,codex] [--rounds 3] [--work DIR] [--ccusage DIR]

What a new user waits for after the README's first two commands: `ledger import <client>`
into a new home, then the first `ledger report daily` (which builds the index of everything
imported), against ccusage 20.0.24 answering the same question from the same files
(`ccusage daily --offline --json` with CLAUDE_CONFIG_DIR; `ccusage codex daily --offline
--json` with CODEX_HOME; HOME an empty directory so ccusage finds no other agent's logs).

Histories (generated once under --work and reused; ~1.6 GB each, several minutes):
- Claude Code: tests/claudehistory.py, 2,000 sessions, seed 1, pad 19,000 (every duplication
  hazard; `scripts/gen_claude_history.py`);
- Codex: tests/codexhistory.py with real_shapes (only what the 0.169 / 0.130 clients were
  seen to write), 10,000 threads, seed 1, pad 22,000 (`scripts/gen_codex_history.py`).

Each round runs ccusage, then the import into a new home and the first report; the table has
the median of --rounds rounds (wall seconds, CPU seconds user + system with children, peak RSS
from GNU time) and the load average before and after. ccusage is installed with npm into
--ccusage (default: WORK/ccusage) unless it is there already.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sources import _du, _timed  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CCUSAGE = "ccusage@20.0.24"
HISTORIES = {
    "claude": ("claude-2000-19000-1", "gen_claude_history.py", ["--sessions", "2000", "--seed", "1", "--pad", "19000"]),
    "codex": ("codex-10000-22000-1", "gen_codex_history.py", ["--threads", "10000", "--seed", "1", "--pad", "22000"]),
}


def _history(work: Path, client: str) -> tuple[Path, dict]:
    name, script, args = HISTORIES[client]
    hist = work / name
    truth_file = hist.with_suffix(".truth.json")
    if not truth_file.exists():
        shutil.rmtree(hist, ignore_errors=True)
        print(f"generating {hist} (once; reused by later runs) ...", file=sys.stderr)
        subprocess.run([sys.executable, str(REPO / "scripts" / script), *args, "--out", str(hist),
                        "--truth", str(truth_file)], check=True)
    return hist, json.loads(truth_file.read_bytes())


def _ccusage(d: Path) -> Path:
    b = d / "node_modules" / ".bin" / "ccusage"
    if not b.exists():
        print(f"installing {CCUSAGE} into {d} ...", file=sys.stderr)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(d), CCUSAGE], check=True,
                       stdout=subprocess.DEVNULL)
    return b


def _totals(truth: dict) -> dict[str, int]:
    out = {"input": 0, "output": 0, "cache_read": 0}
    for row in truth["daily_by_model"]:
        out["input"] += row.get("input_tokens") or 0
        out["output"] += row.get("output_tokens") or 0
        out["cache_read"] += row.get("cache_read_tokens") or 0
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench.py first", description=__doc__.splitlines()[0])
    ap.add_argument("--client", default="claude,codex")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/ledger-bench-sources"))
    ap.add_argument("--ccusage", type=Path, help="a directory holding node_modules/.bin/ccusage (default WORK/ccusage)")
    a = ap.parse_args(argv)
    if not shutil.which("/usr/bin/time"):
        raise SystemExit("needs GNU time (/usr/bin/time) for peak RSS: apt-get install time")
    work = a.work
    work.mkdir(parents=True, exist_ok=True)
    cc_bin = _ccusage(a.ccusage or work / "ccusage")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for k in ("LEDGER_DB", "LEDGER_HOME", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "CLAUDE_CONFIG_DIR",
              "CODEX_HOME"):
        env.pop(k, None)
    # ledger's modules compiled once, as an installed package's are
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "ledger")], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    ledger = [sys.executable, "-m", "ledger"]
    empty = work / "empty-home"
    empty.mkdir(exist_ok=True)
    results = []
    for client in a.client.split(","):
        hist, truth = _history(work, client)
        source_bytes = _du(hist)
        if client == "claude":
            cc_args, cc_env = ["daily", "--offline", "--json"], {**env, "HOME": str(empty), "CLAUDE_CONFIG_DIR": str(hist)}
        else:
            cc_args, cc_env = ["codex", "daily", "--offline", "--json"], {**env, "HOME": str(empty), "CODEX_HOME": str(hist)}
        load0 = os.getloadavg()
        rounds = []
        for i in range(a.rounds):
            cc = _timed([str(cc_bin), *cc_args], cc_env, work / f"ccusage-{client}.json")
            home = work / f"home-{client}"
            if home.exists():  # (deleted at the end: ext4 creates files slowly next to many just-deleted inodes)
                home.rename(work / f"old-home-{time.time_ns()}")
            lenv = {**env, "LEDGER_HOME": str(home)}
            imp = _timed([*ledger, "import", client, "--from", str(hist), "--json"], lenv, work / f"import-{client}.json")
            rep = _timed([*ledger, "report", "daily", "--tz", "UTC", "--json"], lenv, work / f"report-{client}.json")
            rounds.append((cc, imp, rep))
            print(f"{client} round {i + 1}: ccusage {cc[0]:.2f} s, import {imp[0]:.2f} s + first report {rep[0]:.2f} s "
                  f"(load {os.getloadavg()[0]:.1f})", file=sys.stderr)
        load1 = os.getloadavg()
        archive_bytes = _du(work / f"home-{client}" / "sources")
        want = _totals(truth)
        got = json.loads((work / f"report-{client}.json").read_bytes())["totals"]
        exact = all(got[f"{k}_tokens"] == v for k, v in want.items())
        results.append((client, source_bytes, archive_bytes, rounds, load0, load1, exact))
    for old in work.glob("old-home-*"):
        shutil.rmtree(old, ignore_errors=True)

    med = statistics.median
    print(f"{os.cpu_count()} cores; median of {a.rounds} rounds; wall and CPU seconds (user + system), "
          f"peak RSS MB (GNU time).\n")
    print("| history | step | wall s | CPU s | peak RSS MB | vs ccusage (wall) |")
    print("|---|---|---|---|---|---|")
    for client, src, arch, rounds, load0, load1, exact in results:
        cc_wall = med(r[0][0] for r in rounds)
        rows = [("ccusage " + ("daily" if client == "claude" else "codex daily") + " --offline --json",
                 [r[0] for r in rounds]),
                (f"ledger import {client}", [r[1] for r in rounds]),
                ("ledger report daily (first: builds the index)", [r[2] for r in rounds]),
                ("**import + first report**", [(r[1][0] + r[2][0], max(r[1][1], r[2][1]), r[1][2] + r[2][2])
                                               for r in rounds])]
        for name, xs in rows:
            wall, rss, cpu = med(x[0] for x in xs), max(x[1] for x in xs), med(x[2] for x in xs)
            print(f"| {client} {src / 1e9:.2f} GB | {name} | {wall:.2f} | {cpu:.2f} | {rss} | {wall / cc_wall:.2f}x |")
    print()
    for client, src, arch, rounds, load0, load1, exact in results:
        print(f"- {client}: load average {load0[0]:.1f} / {load0[1]:.1f} before, {load1[0]:.1f} / {load1[1]:.1f} "
              f"after (1 / 5 min); archive {100 * arch / src:.0f} % of the history's bytes; ledger's token "
              f"totals {'equal' if exact else 'DIFFER FROM'} the generator's truth.")
    return 0
