#!/usr/bin/env python3
"""Warm reads against the interpreter's floor (issues 28, 29): `python scripts/bench.py warm
--floor [--runs N] [--sessions S] [--keep DIR] [--repeat R] [--ccusage PATH] [--instructions]
[--write-docs]`.

A warm home of N generated runs with S imported Claude sessions (bench_warm.prepare: indexed,
sealed, its report facts synced). In interleaved rounds (the machine's load drifts), each
process with output to a pipe: the floor `python -c "import sqlite3, json"`, then `ledger
--version`, `--help`, `report`, `runs`, `show RUN`, `sql "select 1"` and `statusline` (fed
Claude Code 2.1.328's own status-line document naming the largest imported transcript), and
with --ccusage, ccusage's `statusline --offline` on the same document and files. `ledger` is
the console script a user runs, with this tree's code (PYTHONPATH). Median and best wall time
of R rounds, each median as a ratio to the floor's median of the same rounds, the load average
before and after; with --instructions each command once under callgrind (the same count
whatever else the machine does). Budgets: each warm read <= 3x the floor (goal 2x), --help
<= 5x, statusline median <= 50 ms and <= 4x.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOOR = '`python -c "import sqlite3, json"`'
WARM_SUB = "### Against the interpreter's floor (issue 28)"
STATUS_SECTION = "## Status line"
STATUS_SUB = "### Against the floor and ccusage (issue 29)"


def _ledger() -> list[str]:
    script = Path(sys.executable).parent / "ledger"
    return [str(script)] if script.exists() else [sys.executable, "-m", "ledger"]


def _stdin_doc(src: Path) -> bytes:
    transcript = max(src.glob("projects/*/*.jsonl"), key=lambda p: p.stat().st_size)
    doc = json.loads((ROOT / "tests" / "data" / "statusline" / "claude-2.1.328-after-response.json").read_text())
    doc.update(session_id=transcript.stem, transcript_path=str(transcript), cwd=str(src),
               workspace={"current_dir": str(src), "project_dir": str(src), "added_dirs": []})
    return json.dumps(doc).encode()


def cases(home: Path, src: Path, ccusage: str | None) -> list[tuple[str, list[str], dict[str, str], bytes, float | None]]:
    """(name, argv, extra env, stdin, budget as a ratio to the floor)."""
    ledger = _ledger()
    run = sorted(p.name for p in (home / "runs").glob("*/run_*"))[0]
    doc = _stdin_doc(src)
    out = [(FLOOR, [sys.executable, "-c", "import sqlite3, json"], {}, b"", None),
           ("`ledger --version`", ledger + ["--version"], {}, b"", 3.0),
           ("`ledger --help`", ledger + ["--help"], {}, b"", 5.0),
           ("`ledger report`", ledger + ["report"], {}, b"", 3.0),
           ("`ledger runs`", ledger + ["runs"], {}, b"", 3.0),
           ("`ledger show RUN`", ledger + ["show", run], {}, b"", 3.0),
           ('`ledger sql "select 1"`', ledger + ["sql", "select 1"], {}, b"", 3.0),
           ("`ledger statusline`", ledger + ["statusline"], {}, doc, 4.0)]
    if ccusage:
        out.append(("ccusage 20.0.24 `statusline --offline`", [ccusage, "statusline", "--offline"],
                    {"CLAUDE_CONFIG_DIR": str(src)}, doc, None))
    return out


def _wall(argv: list[str], env: dict[str, str], stdin: bytes) -> float:
    t = time.perf_counter()
    p = subprocess.run(argv, env=env, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    took = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({p.returncode}): {p.stderr.decode(errors='replace')[-500:]}")
    return took


def _instructions(argv: list[str], env: dict[str, str], stdin: bytes) -> int:
    import re

    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv], env=env,
                       input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    m = re.search(rb"Collected : (\d+)", p.stderr)
    if p.returncode != 0 or m is None:
        raise SystemExit(f"valgrind {' '.join(argv)} failed ({p.returncode}): {p.stderr.decode(errors='replace')[-500:]}")
    return int(m.group(1))


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def measure(home: Path, src: Path, repeat: int, ccusage: str | None, instructions: bool,
            installed: bool = False) -> dict:
    import bench_warm

    env = bench_warm._env(home)
    if installed:  # (the interpreter's own ledger: what a user's `pip install .` runs)
        env.pop("PYTHONPATH", None)
    else:
        env["PYTHONPATH"] = str(ROOT)
    cs = cases(home, src, ccusage)
    for name, argv, extra, stdin, _ in cs:  # warm-up (page cache; ccusage's first parse)
        _wall(argv, {**env, **extra}, stdin)
    line = subprocess.run(cs[-1 if not ccusage else -2][1], env=env, input=cs[-1 if not ccusage else -2][3],
                          capture_output=True).stdout.decode().strip()
    ir = {name: _instructions(argv, {**env, **extra}, stdin) for name, argv, extra, stdin, _ in cs
          if instructions and not name.startswith("ccusage")}
    times: dict[str, list[float]] = {name: [] for name, *_ in cs}
    load0 = _load()
    for _ in range(repeat):
        for name, argv, extra, stdin, _ in cs:
            times[name].append(_wall(argv, {**env, **extra}, stdin))
    return {"cases": [(name, budget) for name, *_, budget in cs], "times": times, "ir": ir,
            "load": (load0, _load()), "line": line}


def render(res: dict, runs: int, sessions: int, repeat: int, ccusage: str | None,
           installed: bool = False) -> tuple[str, str]:
    times, ir = res["times"], res["ir"]
    floor = statistics.median(times[FLOOR])
    floor_ir = ir.get(FLOOR)
    cmd = (("VENV/bin/python" if installed else "python")
           + f" scripts/bench.py warm --floor --runs {runs} --sessions {sessions} --repeat {repeat}"
           + (f" --ccusage {ccusage}" if ccusage else "") + (" --instructions" if ir else "")
           + (" --installed" if installed else ""))
    head = (f"`{cmd}`: {runs:,} runs, {sessions:,} imported Claude sessions, {repeat} interleaved rounds; load "
            f"average (1/5/15 min) {res['load'][0]} before the rounds, {res['load'][1]} after. Median wall time "
            "(best in brackets) as a ratio to the floor's median in the same rounds"
            + ("; instructions (callgrind, one run each) as a ratio to the floor's" if ir else "") + ".")

    def row(name: str, budget: float | None) -> str:
        med, best = statistics.median(times[name]), min(times[name])
        r = med / floor
        cells = [name, f"{med * 1000:.0f} ms ({best * 1000:.0f})", f"{r:.2f}x"]
        if ir:
            n = ir.get(name)
            cells.append("" if n is None else f"{n / 1e6:,.0f} M = {n / floor_ir:.2f}x")
        if budget is None:
            cells.append("")
        else:
            rs = [r] + ([ir[name] / floor_ir] if name in ir else [])
            extra = " and <= 50 ms" if name == "`ledger statusline`" else ""
            ok = all(x <= budget for x in rs) and (med <= 0.050 or not extra)
            cells.append(f"<= {budget:g}x{extra}: {'ok' if ok else 'NOT MET'}")
        return "| " + " | ".join(cells) + " |"

    header = "| command | median wall (best) | / floor | " + ("instructions | " if ir else "") + "budget |"
    sep = "|---|---|---|" + ("---|" if ir else "") + "---|"
    warm = [WARM_SUB, "", head, "", header, sep]
    status = [STATUS_SUB, "", head, "", header, sep]
    for name, budget in res["cases"]:
        if name == FLOOR:
            warm.append(row(name, None))
            status.append(row(name, None))
        elif "statusline" in name:
            status.append(row(name, budget))
        else:
            warm.append(row(name, budget))
    status += ["", f"`ledger statusline` printed: `{res['line']}`"]
    return "\n".join(warm) + "\n", "\n".join(status) + "\n"


def write_docs(text: str, section: str, sub: str) -> None:
    doc = ROOT / "docs" / "benchmarks.md"
    s = doc.read_text()
    start = s.index(section)
    end = s.find("\n## ", start + len(section))
    end = len(s) if end < 0 else end + 1
    body = s[start:end]
    if sub in body:
        a = body.index(sub)
        b = body.find("\n### ", a + len(sub))
        body = body[:a] + text + ("\n" + body[b + 1:] if b >= 0 else "")
    else:
        body = body.rstrip("\n") + "\n\n" + text
    doc.write_text(s[:start] + body.rstrip("\n") + "\n" + ("\n" + s[end:] if end < len(s) else ""))


def main(args) -> int:
    import bench_warm

    base = args.keep or Path(__import__("tempfile").mkdtemp(prefix="ledger-bench-floor-"))
    home = base / "home"
    sessions = args.sessions or 2000
    bench_warm.CHECKOUT = ROOT  # (prepare runs this tree's code too)
    bench_warm.prepare(home, args.runs, 0.0, 0.0, sessions)
    bench_warm.CHECKOUT = None
    res = measure(home, base / f"claude-{sessions}", args.repeat, args.ccusage, args.instructions, args.installed)
    warm, status = render(res, args.runs, sessions, args.repeat, args.ccusage, args.installed)
    print(warm)
    print(status)
    if args.write_docs:
        write_docs(warm, bench_warm.SECTION, WARM_SUB)
        write_docs(status, STATUS_SECTION, STATUS_SUB)
    return 0
