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

- `--first-report` (issue 10's acceptance at 100,000 runs): the index deleted, a cold `ledger
  index`, then the first `ledger report` (its facts synced from nothing), in `--cold-rounds`
  rounds; then the no-change `ledger index` and later `ledger report`s against `ledger --help`
  in interleaved rounds. Prints the acceptance lines (wall and CPU, load average before and
  after each part).

- `--floor` (issues 28, 29): every warm read and the status line against the interpreter's own
  start, and ccusage's statusline beside (scripts/bench_floor.py).

Prints a Markdown table; `--write-docs` replaces the "Warm reads" section of docs/benchmarks.md
(with `--first-report`: only its "### Acceptance at N runs" subsection; with `--floor`: its
subsections in "Warm reads" and "Status line").
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
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


def _time(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one command. CPU time (user + system, from the child's rusage)
    moves far less than wall time on a shared machine; on a quiet one they are close."""
    t = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         cwd=CHECKOUT)
    err = p.stderr.read()
    _pid, status, usage = os.wait4(p.pid, 0)
    took = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    p.stderr.close()
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({p.returncode}): {err.decode(errors='replace')[-500:]}")
    return took, usage.ru_utime + usage.ru_stime


def _instructions(argv: list[str], env: dict[str, str]) -> int:
    """Instructions one command executes (valgrind's callgrind): the same count whatever else
    the machine does (system calls are the kernel's: not counted)."""
    import re

    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv], env=env,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=CHECKOUT)
    m = re.search(rb"Collected : (\d+)", p.stderr)
    if p.returncode != 0 or m is None:
        raise SystemExit(f"valgrind {' '.join(argv)} failed ({p.returncode}): {p.stderr.decode(errors='replace')[-500:]}")
    return int(m.group(1))


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


def import_sessions(home: Path, sessions: int) -> None:
    """`--sessions N`: a generated Claude Code history of N sessions (tests/claudehistory.py,
    every duplication hazard), imported into the home with `ledger import claude`, its files
    aged past the archive's racy window: every measured command then also brings the imported
    sessions up to date (issue 10, with issue 15's sessions)."""
    src = home.parent / f"claude-{sessions}"
    if not src.exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_claude_history.py"), "--sessions", str(sessions),
                        "--out", str(src)], check=True, capture_output=True)
        age(src, 3600)
    if not (home / "sources" / "claude").exists():
        subprocess.run(_ledger() + ["import", "claude", "--from", str(src)], env=_env(home), check=True,
                       capture_output=True)


def prepare(home: Path, n: int, unsettled: float, damaged: float, sessions: int = 0) -> None:
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
    if sessions:
        import_sessions(home, sessions)
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


def measure(home: Path, repeat: int) -> dict[str, dict[str, list[tuple[float, float]]]]:
    env, ledger = _env(home), _ledger()
    cmds = commands(home)
    same: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in cmds}
    for _ in range(repeat):  # interleaved rounds
        for name, argv in cmds:
            same[name].append(_time(ledger + argv, env))
    new: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in cmds}
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


def clone(home: Path, n: int, seed: int = 13) -> None:
    """Add N settled runs as byte copies of the settled runs already in `home` (recorded with
    the real writer), each under a fresh id (manifest's run_id and the provider session id
    rewritten; nothing fsync'ed): a 100,000-run home in minutes instead of hours."""
    import re
    import uuid

    rnd = random.Random(seed)
    templates = [p for p in sorted((home / "runs").glob("*/run_*")) if (p / "terminal.json").exists()]
    if not templates:
        raise SystemExit("clone: no settled run to copy")
    sess = re.compile(rb'"sess-[^"]*"')
    loaded = []
    for t in templates:
        files = {f.name: f.read_bytes() for f in t.iterdir() if f.is_file()}
        loaded.append((t.name.encode(), files))
    for i in range(n):
        old, files = loaded[i % len(loaded)]
        rid = "run_" + uuid.UUID(int=rnd.getrandbits(128), version=4).hex
        d = home / "runs" / rid[4:6] / rid
        d.parent.mkdir(mode=0o700, exist_ok=True)
        d.mkdir(mode=0o700)
        new_sess = f'"sess-c{i}"'.encode()
        for name, data in files.items():
            if name == "manifest.json":
                data = data.replace(old, rid.encode())
            elif name in ("events.jsonl", "provider-session.json"):
                data = sess.sub(new_sess, data)
            fd = os.open(d / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def first_report(home: Path, n: int, unsettled: float, damaged: float, cold_rounds: int, repeat: int,
                 templates: int = 0) -> dict:
    """Issue 10's acceptance at N runs: cold index + first report (index deleted each round),
    then no-change index and later reports against --help in interleaved rounds. `templates`:
    only that many settled runs recorded with the writer, the others cloned from them."""
    from bench_index import generate

    if not (home / "runs").exists():
        t = time.perf_counter()
        settled = n - int(n * unsettled / 100) - int(n * damaged / 100)
        generate(home, min(settled, templates) if templates else settled)
        if templates and settled > templates:
            clone(home, settled - templates)
        if unsettled or damaged:
            subprocess.run([sys.executable, "-c", f"import sys; sys.path[:0] = {[str(ROOT), str(Path(__file__).parent)]!r}; "
                            f"from bench_warm import mix; from pathlib import Path; "
                            f"mix(Path({str(home)!r}), {n}, {unsettled}, {damaged})"], check=True)
        print(f"generated {n} runs in {time.perf_counter() - t:.1f}s", file=sys.stderr)
        age(home / "runs")
    env, ledger = _env(home), _ledger()
    out: dict = {"cold": [], "first": [], "load": {}}
    out["load"]["cold_before"] = _load()
    for _ in range(cold_rounds):
        for p in home.glob("index.sqlite*"):
            p.unlink()
        out["cold"].append(_time(ledger + ["index"], env))
        out["first"].append(_time(ledger + ["report"], env))
        print(f"cold index {out['cold'][-1][0]:.2f}s, first report {out['first'][-1][0]:.2f}s "
              f"(load {_load()})", file=sys.stderr)
    out["load"]["cold_after"] = _load()
    cmds = [("help", ["--help"]), ("index", ["index"]), ("report", ["report"]), ("report --json", ["report", "--json"])]
    out["warm"] = {name: [] for name, _ in cmds}
    out["load"]["warm_before"] = _load()
    for _ in range(repeat):
        for name, argv in cmds:
            out["warm"][name].append(_time(ledger + argv, env))
    out["load"]["warm_after"] = _load()
    con = sqlite3.connect(home / "index.sqlite")
    try:
        out["shards"] = dict(con.execute("SELECT sealed, count(*) FROM index_shards GROUP BY sealed").fetchall())
        out["states"] = dict(con.execute("SELECT state, count(*) FROM runs GROUP BY state").fetchall())
        out["damaged"] = con.execute("SELECT count(*) FROM index_cursors WHERE status = 'damaged'").fetchone()[0]
    finally:
        con.close()
    return out


def render_acceptance(res: dict, n: int, unsettled: float, damaged: float) -> str:
    def best(xs: list[tuple[float, float]]) -> tuple[float, float, float]:
        return min(w for w, _ in xs), statistics.median(w for w, _ in xs), min(c for _, c in xs)

    hw, _hm, hc = best(res["warm"]["help"])
    mix_note = f" --unsettled {unsettled:g} --damaged {damaged:g}" if unsettled or damaged else ""
    lines = [f"### Acceptance at {n:,} runs", "",
             f"`python scripts/bench.py warm --runs {n}{mix_note} --first-report`: {res['states'].get('abandoned', 0):,} "
             f"runs never settled (launcher gone: abandoned), {res['damaged']:,} unreadable records; after the passes "
             f"{res['shards'].get(1, 0)} shards sealed, {res['shards'].get(0, 0)} open. Load average (1/5/15 min) "
             f"{res['load']['cold_before']} before the cold rounds, {res['load']['cold_after']} after; "
             f"{res['load']['warm_before']} before the warm rounds, {res['load']['warm_after']} after. Best wall time "
             "(median in brackets) and best CPU time (user + system) of the rounds.", "",
             "| line | wall | CPU | budget | |", "|---|---|---|---|---|",
             f"| `ledger --help` | {hw * 1000:.0f} ms ({_hm * 1000:.0f}) | {hc * 1000:.0f} ms | | |"]
    cw, cm, cc = best(res["cold"])
    lines.append(f"| cold `ledger index` (no index) | {cw:.1f} s ({cm:.1f}) | {cc:.1f} s | | |")
    fw, fm, fc = best(res["first"])
    ok = min(fw, fc) < 5.0
    lines.append(f"| first `ledger report` after it | {fw:.2f} s ({fm:.2f}) | {fc:.2f} s | < 5 s | "
                 f"{'ok' if ok else 'NOT MET'} |")
    for name, label in (("index", "no-change `ledger index`"), ("report", "later `ledger report`"),
                        ("report --json", "later `ledger report --json`")):
        w, m, c = best(res["warm"][name])
        r = min(w / hw, c / hc)
        lines.append(f"| {label} | {w * 1000:.0f} ms ({m * 1000:.0f}) = {w / hw:.2f}x | {c * 1000:.0f} ms = "
                     f"{c / hc:.2f}x | <= 2x | {'ok' if r <= 2.0 else 'NOT MET'} |")
    return "\n".join(lines) + "\n"


def measure_instructions(home: Path) -> dict[str, dict[str, int]]:
    """Each command once under callgrind: nothing changed, then after one new run."""
    env, ledger = _env(home), _ledger()
    cmds = commands(home)
    same = {name: _instructions(ledger + argv, env) for name, argv in cmds}
    new: dict[str, int] = {}
    for k, (name, argv) in enumerate(cmds):
        if argv != ["--help"]:
            new_run(home, 10_000 + k)
            time.sleep(0.2)
        new[name] = _instructions(ledger + argv, env)
        if argv != ["--help"]:
            _time(ledger + ["report"], env)
    return {"same": same, "new": new}


def render_instructions(ir: dict[str, dict[str, int]]) -> str:
    help_ = "`ledger --help`"
    lines = ["Instructions executed (valgrind's callgrind, `--instructions`), as a ratio to `ledger --help`:", "",
             "| command | nothing changed | after one new run |", "|---|---|---|"]
    for name in ir["same"]:
        lines.append(f"| {name} | {ir['same'][name] / 1e6:,.0f} M = {ir['same'][name] / ir['same'][help_]:.2f}x | "
                     f"{ir['new'][name] / 1e6:,.0f} M = {ir['new'][name] / ir['new'][help_]:.2f}x |")
    return "\n".join(lines) + "\n"


def render(res: dict[str, dict[str, list[tuple[float, float]]]], n: int, note: str) -> str:
    help_ = "`ledger --help`"
    floors = {part: (min(w for w, _ in res[part][help_]), min(c for _, c in res[part][help_])) for part in res}
    lines = [SECTION, "", f"`python scripts/bench.py warm --runs {n}`{note}. Each command as a user runs it (the "
             "console script, output to a pipe), in interleaved rounds; best wall time of the rounds (median in "
             "brackets) and best CPU time (user + system of the process), each as a ratio to `ledger --help` "
             "measured in the same rounds. CPU time barely moves with the load of this shared machine; wall time "
             "does.", "",
             "| command | nothing changed: wall | CPU | after one new run: wall | CPU |", "|---|---|---|---|---|"]
    worst = {"same": 0.0, "new": 0.0}
    for name in res["same"]:
        cells = []
        for part in ("same", "new"):
            walls = [w for w, _ in res[part][name]]
            cpus = [c for _, c in res[part][name]]
            fw, fc = floors[part]
            rw, rc = min(walls) / fw, min(cpus) / fc
            if name != help_:
                worst[part] = max(worst[part], min(rw, rc))
            cells.append(f"{min(walls) * 1000:.0f} ms ({statistics.median(walls) * 1000:.0f}) = {rw:.2f}x")
            cells.append(f"{min(cpus) * 1000:.0f} ms = {rc:.2f}x")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    rj = min(c for _, c in res["same"]["`ledger report`"]) / min(c for _, c in res["same"]["`ledger report --json`"])
    lines += ["", f"Worst (the better of the wall and CPU ratios): {worst['same']:.2f}x nothing changed (budget "
              f"{BUDGET_SAME}x: {'ok' if worst['same'] <= BUDGET_SAME else 'NOT MET'}), {worst['new']:.2f}x after one "
              f"new run (budget {BUDGET_NEW}x: {'ok' if worst['new'] <= BUDGET_NEW else 'NOT MET'}); `ledger report` / "
              f"`--json` (CPU): {rj:.2f} (budget within 20%: {'ok' if 0.8 <= rj <= 1.2 else 'NOT MET'}).", ""]
    return "\n".join(lines)


def write_docs(section: str, sub: bool = False) -> None:
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n\n"
    if sub:  # a "### ..." subsection of the Warm reads section (replaced, or added at its end)
        head = section.split("\n", 1)[0]
        if SECTION not in text:
            text = text.rstrip("\n") + "\n\n" + SECTION + "\n"
        start = text.index(SECTION)
        end = text.find("\n## ", start + len(SECTION))
        end = len(text) if end < 0 else end + 1
        body = text[start:end]
        if head in body:
            a = body.index(head)
            b = body.find("\n### ", a + len(head))
            body = body[:a] + section + ("\n" + body[b + 1:] if b >= 0 else "")
        else:
            body = body.rstrip("\n") + "\n\n" + section
        DOC.write_text(text[:start] + body.rstrip("\n") + "\n" + ("\n" + text[end:] if end < len(text) else ""))
        return
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
    ap.add_argument("--sessions", type=int, default=0, help="also import a generated Claude history of this many sessions")
    ap.add_argument("--instructions", action="store_true", help="also count each command's instructions (valgrind)")
    ap.add_argument("--checkout", type=Path, help="run this tree's code (python -m ledger), e.g. the code before a change")
    ap.add_argument("--first-report", action="store_true",
                    help="issue 10's acceptance lines: cold index, first report, then no-change index and later reports")
    ap.add_argument("--cold-rounds", type=int, default=2, help="--first-report: cold index + first report rounds")
    ap.add_argument("--templates", type=int, default=0,
                    help="--first-report: record only this many settled runs with the writer, clone the rest")
    ap.add_argument("--floor", action="store_true",
                    help="issues 28/29: each warm read and the status line against `python -c \"import sqlite3, json\"` "
                         "(scripts/bench_floor.py; --sessions defaults to 2000)")
    ap.add_argument("--ccusage", help="--floor: a ccusage binary whose statusline is measured beside")
    ap.add_argument("--installed", action="store_true",
                    help="--floor: measure the ledger installed for this interpreter (its console script, no "
                         "PYTHONPATH), e.g. a user's `pip install .` in a venv: `VENV/bin/python scripts/bench.py ...`")
    ap.add_argument("--write-docs", action="store_true", help="replace the Warm reads section of docs/benchmarks.md")
    args = ap.parse_args(argv)
    if args.floor:
        import bench_floor

        return bench_floor.main(args)
    global CHECKOUT
    CHECKOUT = args.checkout.resolve() if args.checkout else None
    base = args.keep or Path(tempfile.mkdtemp(prefix="ledger-bench-warm-"))
    home = base / "home"
    if args.first_report:
        section = render_acceptance(first_report(home, args.runs, args.unsettled, args.damaged, args.cold_rounds,
                                                 args.repeat, args.templates), args.runs, args.unsettled, args.damaged)
        print(section)
        if args.write_docs:
            write_docs(section, sub=True)
        return 0
    prepare(home, args.runs, args.unsettled, args.damaged, args.sessions)
    ir = measure_instructions(home) if args.instructions else None  # (first: while every shard is sealed)
    res = measure(home, args.repeat)
    note = (f" --unsettled {args.unsettled:g} --damaged {args.damaged:g}" if args.unsettled or args.damaged else "")
    note += f" --checkout {CHECKOUT}" if CHECKOUT else ""
    note += f" --sessions {args.sessions}" if args.sessions else ""
    load = os.getloadavg()[0]
    section = render(res, args.runs, f"{note} (load average {load:.1f} at the end)")
    if ir is not None:
        section += "\n" + render_instructions(ir)
    print(section)
    if args.write_docs:
        write_docs(section)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
