"""`bench.py sources`: imported Claude Code history, ledger side by side with ccusage.

    python3 scripts/bench.py sources [--sessions 2000] [--pad 4800] [--seed 1] [--work DIR]

Writes a synthetic 2.1.x-shaped history with every duplication hazard (tests/claudehistory.py;
`--pad` characters of text per content block make it as large as real transcripts: 2,000
sessions at 4,800 are ~500 MB), installs `ccusage@20.0.24` from the npm registry into the work
dir, and measures in one run, on the same files:

- ccusage `daily --offline --json` (it re-parses everything on every call): best of 7, two
  before the import and five in alternation with the warm report;
- cold `ledger import claude --from DIR` into a new home, the first `ledger report daily`
  (which indexes the archive), a warm `ledger report daily` (best of 5, alternating with
  ccusage), `ledger --help`, and the interpreter's own start (`python -c pass`: the floor of
  any Python command here);
- peak RSS and CPU time (user + system) of each (GNU time), the archive's size against the history's;
- totals against the generator's truth: ledger's and ccusage's input/output/cache tokens.

Prints a Markdown table (docs/benchmarks.md keeps the last one). Leave a minute between two
runs: each deletes its home (~11,000 files) after measuring, and ext4 creates files several
times slower for ~30 s next to that many just-deleted inodes (the next cold import pays it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CCUSAGE = "ccusage@20.0.24"


def _timed(argv: list[str], env: dict[str, str], out: Path | None = None) -> tuple[float, int, float]:
    """(wall seconds, peak RSS in MB, CPU seconds: user + system, its children included) of one
    process. On a machine shared with other work the wall time moves with the load; the CPU
    time much less."""
    rss_file = out.with_suffix(".rss") if out else Path(os.devnull)
    cmd = ["/usr/bin/time", "-f", "%M %U %S", "-o", str(rss_file), *argv] if out else argv
    t0 = time.perf_counter()
    with open(out or os.devnull, "wb") as f:
        p = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed ({p.returncode}): {p.stderr.decode(errors='replace')[-2000:]}")
    if not out:
        return wall, 0, 0.0
    rss, user, sys_ = rss_file.read_text().split()[-3:]
    return wall, int(rss) // 1024, float(user) + float(sys_)


def _du(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def _tokens_truth(truth: list[dict[str, Any]]) -> dict[str, int]:
    out = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}
    for row in truth:
        out["input"] += row.get("input_tokens") or 0
        out["output"] += row.get("output_tokens") or 0
        out["cache_read"] += row.get("cache_read_tokens") or 0
        out["cache_write"] += row.get("cache_write_tokens") or 0
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench.py sources", description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=2000)
    ap.add_argument("--pad", type=int, default=4800)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", type=Path, default=Path("/tmp/ledger-bench-sources"))
    a = ap.parse_args(argv)
    if not shutil.which("/usr/bin/time"):
        raise SystemExit("needs GNU time (/usr/bin/time) for peak RSS: apt-get install time")
    work = a.work
    work.mkdir(parents=True, exist_ok=True)
    hist = work / f"claude-{a.sessions}-{a.pad}-{a.seed}"
    truth_file = hist.with_suffix(".truth.json")
    if not truth_file.exists():
        shutil.rmtree(hist, ignore_errors=True)
        print(f"generating {a.sessions} sessions (pad {a.pad}) in {hist} ...", file=sys.stderr)
        subprocess.run([sys.executable, str(REPO / "scripts" / "gen_claude_history.py"), "--sessions",
                        str(a.sessions), "--seed", str(a.seed), "--pad", str(a.pad), "--out", str(hist),
                        "--truth", str(truth_file)], check=True)
    cc_dir = work / "ccusage"
    cc_bin = cc_dir / "node_modules" / ".bin" / "ccusage"
    if not cc_bin.exists():
        print(f"installing {CCUSAGE} into {cc_dir} ...", file=sys.stderr)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(cc_dir), CCUSAGE], check=True,
                       stdout=subprocess.DEVNULL)
    # ledger's modules compiled once, as an installed package's are (a work tree run with
    # PYTHONDONTWRITEBYTECODE=1 would compile them on every call: ~50 ms of each command)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for k in ("LEDGER_DB", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"):
        env.pop(k, None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "ledger")], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    ledger = [sys.executable, "-m", "ledger"]
    source_bytes = _du(hist)
    truth = json.loads(truth_file.read_bytes())
    truth_rows = truth["daily_by_model"]  # (gen_claude_history.py's truth file)

    load0 = os.getloadavg()[0]
    rows: list[tuple[str, float, int, float]] = []
    cc_env = {**env, "CLAUDE_CONFIG_DIR": str(hist)}
    cc_out = work / "ccusage.json"
    cc_runs = [_timed([str(cc_bin), "daily", "--offline", "--json"], cc_env, cc_out) for _ in range(2)]
    rows.append(("ccusage daily --offline --json (every call)", 0.0, 0, 0.0))  # (filled in below)

    home = work / "home"
    if home.exists():  # (deleted after the measures: ext4 creates files slowly for ~30 s next to
        home.rename(work / f"old-home-{time.time_ns()}")  # thousands of just-deleted inodes)
    lenv = {**env, "LEDGER_HOME": str(home)}
    rows.append(("ledger import claude (cold)", *_timed([*ledger, "import", "claude", "--from", str(hist), "--json"],
                                                        lenv, work / "import.json")))
    rows.append(("ledger report daily (first: indexes the archive)",
                 *_timed([*ledger, "report", "daily", "--tz", "UTC", "--json"], lenv, work / "report1.json")))
    # the warm report and ccusage in alternation, best of 5 each (plus ccusage's first two): on
    # this shared machine the speed of both moves by tens of percent from minute to minute
    warm_runs = []
    for _ in range(5):
        warm_runs.append(_timed([*ledger, "report", "daily", "--tz", "UTC", "--json"], lenv, work / "report2.json"))
        cc_runs.append(_timed([str(cc_bin), "daily", "--offline", "--json"], cc_env, cc_out))
    warm = min(warm_runs, key=lambda x: x[0])
    cc = min(cc_runs, key=lambda x: x[0])
    rows[0] = ("ccusage daily --offline --json (every call)", *cc)
    rows.append(("ledger report daily (warm, nothing new)", *warm))
    helpt = min((_timed([*ledger, "--help"], lenv, work / "help.txt") for _ in range(3)), key=lambda x: x[0])
    rows.append(("ledger --help", *helpt))
    start = min((_timed([sys.executable, "-c", "pass"], lenv, work / "pass.txt") for _ in range(5)), key=lambda x: x[0])
    rows.append(("python -c pass (the interpreter's start)", *start))
    archive_bytes = _du(home / "sources")
    for old in work.glob("old-home-*"):
        shutil.rmtree(old, ignore_errors=True)

    want = _tokens_truth(truth_rows)
    rep = json.loads((work / "report2.json").read_bytes())["totals"]
    got = {"input": rep["input_tokens"], "output": rep["output_tokens"], "cache_read": rep["cache_read_tokens"],
           "cache_write": rep["cache_write_tokens"]}
    ccj = json.loads(cc_out.read_bytes())
    cct = ccj.get("totals", {})
    ccg = {"input": cct.get("inputTokens"), "output": cct.get("outputTokens"),
           "cache_read": cct.get("cacheReadTokens"), "cache_write": cct.get("cacheCreationTokens")}

    print(f"History: {a.sessions:,} sessions, {source_bytes / 1e6:,.0f} MB "
          f"(tests/claudehistory.py seed {a.seed}, pad {a.pad}); {os.cpu_count()} cores; load average "
          f"{load0:.1f} before, {os.getloadavg()[0]:.1f} after (other work on the machine slows both sides).\n")
    print("| step | wall s | vs ccusage | CPU s (user+sys) | CPU vs ccusage | peak RSS MB |")
    print("|---|---|---|---|---|---|")
    for name, wall, rss, cpu in rows:
        print(f"| {name} | {wall:.2f} | {wall / cc[0]:.2f}x | {cpu:.2f} | {cpu / cc[2]:.2f}x | {rss} |")
    print(f"\nwarm `ledger report` is {cc[0] / warm[0]:.1f}x faster than ccusage (CPU: {cc[2] / warm[2]:.1f}x); "
          f"cold import is {rows[1][1] / cc[0]:.2f}x ccusage's time (CPU: {rows[1][3] / cc[2]:.2f}x).")
    print(f"archive: {archive_bytes / 1e6:,.0f} MB = {100 * archive_bytes / source_bytes:.0f} % of the history's bytes.\n")
    print("| tokens | truth | ledger | ccusage | ccusage / truth |")
    print("|---|---|---|---|---|")
    for k in ("input", "output", "cache_read", "cache_write"):
        ratio = f"{ccg[k] / want[k]:.2f}" if ccg[k] and want[k] else "-"
        print(f"| {k} | {want[k]:,} | {got[k]:,} | {ccg[k] if ccg[k] is None else f'{ccg[k]:,}'} | {ratio} |")
    return 0
