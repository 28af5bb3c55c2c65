#!/usr/bin/env python3
"""Warm reads (issue 10): `python scripts/bench.py warm [--runs N] [--keep DIR] [--repeat R]`.

Each read command against `ledger --help` (the floor of any `ledger` command: interpreter,
Typer, Click) in the same run, wall time of the real console script, output to a pipe:

- nothing changed: a home of N runs (scripts/bench_index.generate: settled runs, ~30 events
  each; `--unsettled PCT` / `--damaged PCT` mix in never-settled runs, whose launcher is gone,
  and unreadable records), indexed, sealed and reported once, then every command in
  interleaved rounds (the machine's load drifts), best and median of R;
- after one new run: before each measured command one more settled run is recorded with the
  real writer (and left 0.2 s, past the racy window), so that command's pass has it to index
  (and a report, its facts to sync).

Prints a Markdown table; `--write-docs` replaces the "Warm reads" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

DOC = ROOT / "docs" / "benchmarks.md"
SECTION = "## Warm reads"
BUDGET_SAME, BUDGET_NEW = 1.5, 2.0  # x `ledger --help` (issue 10)


CHECKOUT: Path | None = None  # --checkout: measure another tree's code (python -m ledger)


def _ledger() -> list[str]:
    script = Path(sys.executable).parent / "ledger"
    if CHECKOUT is None and script.exists():
        return [str(script)]
    return [sys.executable, "-m", "ledger"]


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ, LEDGER_HOME=str(home), COLUMNS="120")
    for k in ("LEDGER_DB", "PYTHONDONTWRITEBYTECODE", "PYTHONPROFILEIMPORTTIME"):
        env.pop(k, None)
    if CHECKOUT is not None:
        env["PYTHONPATH"] = str(CHECKOUT)
    return env


def _time(argv: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    p = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       cwd=CHECKOUT)
    took = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({p.returncode}): {p.stderr.decode(errors='replace')[-500:]}")
    return took


def age(root: Path, seconds: int = 60) -> None:
    """Every file and directory under `root` last changed `seconds` ago: a history that has
    been quiet (its shards sealable) rather than one written a moment ago."""
    t = time.time() - seconds
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + dirnames:
            os.utime(os.path.join(dirpath, name), (t, t), follow_symlinks=False)


def mix(home: Path, n: int, unsettled: float, damaged: float, seed: int = 11) -> None:
    """Never-settled runs (recorded here and left: their launcher, this process, is gone once
    the bench's generator exits) and unreadable records (a manifest that is not JSON)."""
    from bench_index import generate
    from ledger.records import RunCapture

    rnd = random.Random(seed)
    for _ in range(int(n * unsettled / 100)):
        cap = RunCapture(home, harness="claude", model="claude-sonnet-4-5", subjects=[f"task:U-{rnd.randint(0, 9)}"])
        cap.emit("tool_use", name="Bash", summary="x")
        cap.detach()
    before = {p for p in (home / "runs").glob("*/run_*")}
    generate(home, int(n * damaged / 100), seed=seed)
    for p in {p for p in (home / "runs").glob("*/run_*")} - before:
        (p / "manifest.json").write_bytes(b"{not json")


def prepare(home: Path, n: int, unsettled: float, damaged: float) -> None:
    from bench_index import generate

    if not (home / "runs").exists():
        t = time.perf_counter()
        generate(home, n - int(n * unsettled / 100) - int(n * damaged / 100))
        if unsettled or damaged:
            # (in a child: its exit leaves the unsettled runs' launcher gone, as in a real home)
            subprocess.run([sys.executable, "-c", f"import sys; sys.path[:0] = {[str(ROOT), str(Path(__file__).parent)]!r}; "
                            f"from bench_warm import mix; from pathlib import Path; "
                            f"mix(Path({str(home)!r}), {n}, {unsettled}, {damaged})"], check=True)
        print(f"generated {n} runs in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    for p in home.glob("index.sqlite*"):
        p.unlink()
    age(home / "runs")
    env = _env(home)
    for argv in (["index"], ["index"], ["report"]):  # build, seal, sync the report's facts
        _time(_ledger() + argv, env)


def commands(home: Path) -> list[tuple[str, list[str]]]:
    run = sorted(p.name for p in (home / "runs").glob("*/run_*"))[0]
    return [("`ledger --help`", ["--help"]), ("`ledger index`", ["index"]), ("`ledger runs`", ["runs"]),
            ("`ledger runs --json`", ["runs", "--json"]), ("`ledger show RUN`", ["show", run]),
            ("`ledger report`", ["report"]), ("`ledger report --json`", ["report", "--json"]),
            ('`ledger sql "select 1"`', ["sql", "select 1"])]


def new_run(home: Path, i: int) -> None:
    from ledger.records import RunCapture

    with RunCapture(home, harness="claude", model="claude-sonnet-4-5", subjects=[f"task:N-{i}"]) as run:
        stream = run.usage_stream(provider="anthropic", model="claude-sonnet-4-5", attempt_key="a1", turn_key="t1")
        stream.observe({"input_tokens": 100 + i, "output_tokens": 20, "cost_usd": 0.001}, final_receipt=True)
        run.emit("result", outcome="completed", duration_secs=1.0)


def measure(home: Path, repeat: int) -> dict[str, dict[str, list[float]]]:
    env, ledger = _env(home), _ledger()
    cmds = commands(home)
    same: dict[str, list[float]] = {name: [] for name, _ in cmds}
    for _ in range(repeat):  # interleaved rounds
        for name, argv in cmds:
            same[name].append(_time(ledger + argv, env))
    new: dict[str, list[float]] = {name: [] for name, _ in cmds}
    k = 0
    for _ in range(repeat):
        for name, argv in cmds:
            if argv != ["--help"]:
                k += 1
                new_run(home, k)
                time.sleep(0.2)  # (past the racy window: the run is read once, like one just recorded)
            new[name].append(_time(ledger + argv, env))
            if argv != ["--help"]:
                _time(ledger + ["report"], env)  # (settled again before the next one)
    return {"same": same, "new": new}


def render(res: dict[str, dict[str, list[float]]], n: int, note: str) -> str:
    same, new = res["same"], res["new"]
    floor_same, floor_new = min(same["`ledger --help`"]), min(new["`ledger --help`"])
    lines = [SECTION, "", f"`python scripts/bench.py warm --runs {n}`{note}. Wall time of the console script, "
             "output to a pipe, best of the rounds (median in brackets); ratios of the bests to `ledger --help` "
             "measured in the same rounds.", "",
             "| command | nothing changed | vs --help | after one new run | vs --help |", "|---|---|---|---|---|"]
    worst_same = worst_new = 0.0
    for name in same:
        bs, ms, bn, mn = min(same[name]), statistics.median(same[name]), min(new[name]), statistics.median(new[name])
        rs, rn = bs / floor_same, bn / floor_new
        if name != "`ledger --help`":
            worst_same, worst_new = max(worst_same, rs), max(worst_new, rn)
        lines.append(f"| {name} | {bs * 1000:.0f} ms ({ms * 1000:.0f}) | {rs:.2f}x | {bn * 1000:.0f} ms ({mn * 1000:.0f}) "
                     f"| {rn:.2f}x |")
    rj = min(same["`ledger report`"]) / min(same["`ledger report --json`"])
    lines += ["", f"Worst: {worst_same:.2f}x nothing changed (budget {BUDGET_SAME}x: "
              f"{'ok' if worst_same <= BUDGET_SAME else 'NOT MET'}), {worst_new:.2f}x after one new run (budget "
              f"{BUDGET_NEW}x: {'ok' if worst_new <= BUDGET_NEW else 'NOT MET'}); `ledger report` / `--json`: "
              f"{rj:.2f} (budget within 20%: {'ok' if 0.8 <= rj <= 1.2 else 'NOT MET'}).", ""]
    return "\n".join(lines)


def write_docs(section: str) -> None:
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n\n"
    if SECTION in text:
        start = text.index(SECTION)
        nxt = text.find("\n## ", start + len(SECTION))
        text = text[:start] + section + ("\n" + text[nxt + 1:] if nxt >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    DOC.write_text(text)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench.py warm")
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--keep", type=Path, help="generate into / reuse this directory")
    ap.add_argument("--repeat", type=int, default=5, help="rounds per measure")
    ap.add_argument("--unsettled", type=float, default=0.0, help="percent of runs never settled")
    ap.add_argument("--damaged", type=float, default=0.0, help="percent of records unreadable")
    ap.add_argument("--checkout", type=Path, help="run this tree's code (python -m ledger), e.g. the code before a change")
    ap.add_argument("--write-docs", action="store_true", help="replace the Warm reads section of docs/benchmarks.md")
    args = ap.parse_args(argv)
    global CHECKOUT
    CHECKOUT = args.checkout.resolve() if args.checkout else None
    base = args.keep or Path(tempfile.mkdtemp(prefix="ledger-bench-warm-"))
    home = base / "home"
    prepare(home, args.runs, args.unsettled, args.damaged)
    res = measure(home, args.repeat)
    note = (f" --unsettled {args.unsettled:g} --damaged {args.damaged:g}" if args.unsettled or args.damaged else "")
    note += f" --checkout {CHECKOUT}" if CHECKOUT else ""
    load = os.getloadavg()[0]
    section = render(res, args.runs, f"{note} (load average {load:.1f} at the end)")
    print(section)
    if args.write_docs:
        write_docs(section)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
