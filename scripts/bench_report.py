#!/usr/bin/env python3
"""`python scripts/bench.py report [--runs N] [--keep DIR]`: `ledger report` over a big index.

Generates N runs (default 1,000,000: one year of history, a realistic mix of harnesses,
models, subagent side streams, outcomes, unpriced models and evidence gaps) straight into
the index tables of a fresh SQLite index (batched executemany, one transaction), then
measures, on this machine:

- the cold sync of the report facts (every (run, model) priced once with genai-prices);
- a no-change sync (what every later `ledger report` pays before querying);
- the query time of several reports (best of 3 after one warm-up), the acceptance ones
  being `daily` and `model --breakdown` (< 1 s each);
- one end-to-end `ledger report daily --json` process (start-up, index check, sync, query).

`--html`: instead, `ledger report daily --html` end to end (best of 3) and the page opened in
headless Chromium (playwright, /usr/bin/chromium). `--keep DIR --reuse` measures the index an
earlier `--keep DIR` run generated (generating and pricing a million runs takes minutes).

Prints a Markdown table (docs/benchmarks.md keeps the last one).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BATCH = 20_000
START = datetime(2025, 3, 1, tzinfo=timezone.utc)
SPAN_S = 365 * 86400
FMT = "%Y-%m-%d %H:%M:%S.%f"  # SQLAlchemy's DateTime storage on SQLite
COUNTERS = ("input_tokens", "output_tokens", "total_input_tokens", "peak_input_tokens", "context_window_tokens",
            "reasoning_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_5m_tokens",
            "cache_write_1h_tokens")
HARNESSES = (("claude", "anthropic", ("claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5")),
             ("codex", "openai", ("gpt-5.5", "gpt-5", "gpt-5-mini")),
             ("gemini", "google", ("gemini-2.5-pro", "gemini-2.5-flash")))
UNPRICED = "internal-model-x"


def _runs_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def generate(path: Path, n: int, seed: int = 7) -> dict[str, int]:
    """N runs with their usage streams and subjects, in one transaction."""
    from ledger.index import db as dbmod

    # created like `ledger index` creates an index (a fresh build: its page size included)
    eng = dbmod.engine(f"sqlite:///{path}", mode=os.environ.get("LEDGER_BENCH_CREATE_MODE", "build"))
    with eng.connect() as conn, conn.begin():
        dbmod.upgrade(conn)
    eng.dispose()
    rnd = random.Random(seed)
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA synchronous = OFF")
    run_cols = _runs_columns(con, "runs")
    stream_cols = _runs_columns(con, "usage_streams")
    subj_cols = _runs_columns(con, "subjects")
    now_dt = datetime.now(timezone.utc)
    now = now_dt.strftime(FMT)
    con.execute("BEGIN")
    con.execute("INSERT INTO homes (home_id, path, added_at) VALUES (1, '/bench/home', ?)", (now,))
    q_runs = f"INSERT INTO runs ({', '.join(run_cols)}) VALUES ({', '.join('?' * len(run_cols))})"
    q_streams = f"INSERT INTO usage_streams ({', '.join(stream_cols)}) VALUES ({', '.join('?' * len(stream_cols))})"
    q_subj = f"INSERT INTO subjects ({', '.join(subj_cols)}) VALUES ({', '.join('?' * len(subj_cols))})"
    skills = [f"skill-{i}" for i in range(20)] + [None] * 10
    repos = [f"github.com/acme/repo-{i}" for i in range(30)]
    hosts = [f"host-{i}" for i in range(5)]
    counts = {"runs": 0, "streams": 0, "subjects": 0}
    # created_at in increasing order (as an indexer appending new runs would write them)
    offsets = sorted(rnd.randrange(SPAN_S * 1_000_000) for _ in range(n))
    runs_b: list[tuple] = []
    streams_b: list[tuple] = []
    subj_b: list[tuple] = []

    def flush() -> None:
        con.executemany(q_runs, runs_b)
        con.executemany(q_streams, streams_b)
        con.executemany(q_subj, subj_b)
        runs_b.clear()
        streams_b.clear()
        subj_b.clear()

    for i, off in enumerate(offsets):
        run_id = f"run_{rnd.getrandbits(128):032x}"
        created = START + timedelta(microseconds=off)
        u = rnd.random()
        harness, provider, models = HARNESSES[0 if u < 0.6 else 1 if u < 0.9 else 2]
        command = rnd.random() < 0.05
        model = None if command else (UNPRICED if rnd.random() < 0.003 else rnd.choice(models))
        o = rnd.random()
        outcome, settled, state = (("completed", 1, "settled") if o < 0.85 else ("failed", 1, "settled") if o < 0.93
                                   else ("interrupted", 1, "settled") if o < 0.98 else (None, 0, "abandoned"))
        dur = rnd.randrange(5_000, 900_000)
        ended = (created + timedelta(milliseconds=dur)).strftime(FMT) if settled else None
        gaps = 1 if rnd.random() < 0.01 else 0
        streams = []
        if not command:
            n_streams = 2 if harness == "claude" and rnd.random() < 0.2 else 1
            for s in range(n_streams):
                m = model if s == 0 else "claude-haiku-4-5"
                inp, out = rnd.randrange(10, 5_000), rnd.randrange(10, 20_000)
                cr, cw = rnd.randrange(0, 400_000), rnd.randrange(0, 40_000)
                final = 1 if settled else 0
                cost = None
                if harness == "claude" and final and m != UNPRICED:
                    cost = round((inp * 3 + out * 15 + cr * 0.3 + cw * 3.75) / 1e6, 9)
                c = {"input_tokens": inp, "output_tokens": out, "cache_read_tokens": cr, "cache_write_tokens": cw,
                     "total_input_tokens": inp + cr + cw,
                     "reasoning_tokens": rnd.randrange(0, out) if harness == "codex" else None}
                streams.append((m, c, final, cost))
        tok = {k: (sum(s[1][k] for s in streams if s[1].get(k) is not None) if any(
            s[1].get(k) is not None for s in streams) else None) for k in COUNTERS}
        costs = [s[3] for s in streams if s[3] is not None]
        skill = rnd.choice(skills)
        tools = 0 if command else rnd.randrange(0, 40)
        tool_errors = sum(rnd.random() < 0.05 for _ in range(tools))
        row = {
            "home_id": 1, "run_id": run_id, "parent_run_id": None, "created_at": created.strftime(FMT),
            "ended_at": ended, "duration_ms": dur if settled else None,
            "harness": "command" if command else harness, "model": model, "surface": "headless",
            "repo": rnd.choice(repos), "worktree": None, "skill": skill, "cwd": "/work",
            "host": rnd.choice(hosts), "boot_id": None, "launcher_pid": None, "launcher_start_ticks": None,
            "outcome": outcome, "settled": settled, "state": state, "evidence_gaps": gaps, "usage_gaps": 0,
            "record_rewrites": 0, "streams": len(streams), "final_streams": sum(s[2] for s in streams),
            **tok, "cost_usd": sum(costs) if costs else None, "provider_session_id": f"sess-{i // 3}",
            "final_answer": None, "final_answer_exact": None, "api_retries": 0, "source": "record",
            # the verdict columns (NOT NULL since migration 0004): a verdict on 70 % of the
            # settled runs, the skill's invocation known when a skill was expected
            "ok": (rnd.random() < 0.8) if settled and rnd.random() < 0.7 else None,
            "skill_invoked": (rnd.random() < 0.9) if skill else None,
            "tool_calls": tools, "tool_ok": tools - tool_errors, "tool_errors": tool_errors,
            "tool_semantic_errors": 0,
            "path": f"/bench/home/runs/{run_id[4:6]}/{run_id}",
            # as the indexer writes them: one timestamp per batch of 500 runs, ~10k runs/s
            "indexed_at": (now_dt - timedelta(seconds=(n - i) // 500 * 0.05)).strftime(FMT),
        }
        runs_b.append(tuple(row.get(c) for c in run_cols))
        for s, (m, c, final, cost) in enumerate(streams):
            srow = {"home_id": 1, "run_id": run_id, "stream_id": f"attempt-1/turn-{s + 1}/{m}",
                    "provider": provider if s == 0 else "anthropic", "model": m, "attempt_key": "attempt-1",
                    "turn_key": f"turn-{s + 1}", "observations": 3, "final_receipt": final, **c, "cost_usd": cost}
            streams_b.append(tuple(srow.get(k) for k in stream_cols))
        counts["streams"] += len(streams)
        subj_b.append(tuple({"home_id": 1, "run_id": run_id, "position": 0, "selector": f"task:T-{rnd.randrange(5000)}",
                             "source": "declared"}.get(k) for k in subj_cols))
        counts["subjects"] += 1
        counts["runs"] += 1
        if len(runs_b) >= BATCH:
            flush()
    flush()
    con.execute("COMMIT")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return counts


def best_of(fn, repeat: int = 3) -> tuple[float, object]:
    fn()  # warm-up (page cache)
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _tree_cpu() -> float:
    """CPU seconds (user + system) of this process's live descendants: the browser's processes
    (renderer, GPU, browser) under playwright's driver. On a shared machine the wall time of a
    page load moves with the load average; its CPU time much less."""
    procs: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                st = f.read()
        except OSError:
            continue
        rest = st[st.rindex(")") + 2:].split()
        procs[int(name)] = (int(rest[1]), int(rest[11]) + int(rest[12]))
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    total, stack = 0, [os.getpid()]
    while stack:
        for child in kids.get(stack.pop(), []):
            total += procs[child][1]
            stack.append(child)
    return total / os.sysconf("SC_CLK_TCK")


def open_page(page_path: Path, chromium: str = "/usr/bin/chromium") -> dict[str, float]:
    """The page opened in headless Chromium (as tests/test_report_html.py opens it): seconds
    until the charts are drawn (performance.now() when the page says ready, and the wall time
    of goto + wait), the first contentful paint, when the first (cost) chart was drawn (the
    page's `ledger-drawn-cost-chart` mark, None on a page without it) and the browser's CPU
    seconds for the whole load."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            c0 = _tree_cpu()
            t0 = time.perf_counter()
            page.goto(page_path.as_uri())
            page.wait_for_function("document.body.dataset.ready === '1'", timeout=120_000)
            wall = time.perf_counter() - t0
            cpu = _tree_cpu() - c0
            ready = page.evaluate("performance.now()") / 1000
            paint = page.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime") / 1000
            first = page.evaluate("(performance.getEntriesByName('ledger-drawn-cost-chart')[0] || {}).startTime")
            if errors:
                raise RuntimeError(f"page errors: {errors}")
        finally:
            browser.close()
    return {"ready": ready, "wall": wall, "paint": paint, "cpu": cpu, "first": None if first is None else first / 1000}


def page_reports(url: str) -> list[tuple[str, str, str]]:
    """The page's reports answered in this process (one read transaction, best of 3 after a
    warm-up): wall and CPU seconds of each."""
    from ledger.index.rawread import reading
    from ledger.report.aggregate import run_report
    from ledger.report.query import ReportQuery
    from ledger.report.html import page_queries

    out = []
    for name, q in page_queries(ReportQuery(kind="daily")).items():
        best = (float("inf"), 0.0)
        rows = 0
        for _ in range(4):
            with reading(url) as c:
                t0, p0 = time.perf_counter(), time.process_time()
                rows = len(run_report(c, q).rows)
                took = (time.perf_counter() - t0, time.process_time() - p0)
            best = min(best, took)
        what = f"`report {q.kind}`" + (f" --limit {q.limit}" if q.limit is not None else "") + (
            " --breakdown" if q.breakdown else "")
        out.append((f"page's {name}: {what}", f"{best[0]:.2f} s", f"{best[1]:.2f} s CPU; {rows:,} rows"))
    return out


def html_bench(url: str, work: Path, repeat: int = 3) -> list[tuple[str, str, str]]:
    """`ledger report daily --html` as a process (index and facts already in step: the usual
    case), best of `repeat` after one warm-up, and the page opened in Chromium."""
    import resource

    env = dict(os.environ, LEDGER_HOME=str(work / "home"))
    (work / "home").mkdir(exist_ok=True)
    out = work / "report.html"
    cmd = [sys.executable, "-m", "ledger", "report", "daily", "--db", url, "--html", str(out)]
    subprocess.run(cmd, env=env, capture_output=True, check=True)  # warm-up (and a first sync)
    times = []
    for _ in range(repeat):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, capture_output=True, check=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append((time.perf_counter() - t0, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime))
    print(f"report daily --html: {times}", file=sys.stderr)
    loads = [open_page(out) for _ in range(repeat)]
    print(f"page: {loads}", file=sys.stderr)
    best = min(times)
    load = min(loads, key=lambda x: x["ready"])
    first = "" if load["first"] is None else f"; cost chart drawn {load['first']:.2f} s"
    all_loads = ", ".join(f"{x['ready']:.1f}" for x in loads)
    return [("`ledger report daily --html` process, end to end", f"{best[0]:.2f} s",
             f"{best[1]:.2f} s CPU; best of {repeat} (all: {', '.join(f'{t:.1f}' for t, _ in times)} s); "
             f"page {out.stat().st_size / 1e6:.1f} MB; load average {os.getloadavg()[0]:.1f}"),
            *page_reports(url),
            ("the page opened in headless Chromium, charts drawn", f"{load['ready']:.2f} s",
             f"performance.now() when drawn, best of {repeat}; first paint {load['paint']:.2f} s{first}; "
             f"browser CPU {min(x['cpu'] for x in loads):.2f} s (all loads: "
             f"{all_loads} s)")]


def _table(title: str, results: list[tuple[str, str, str]]) -> None:
    print(f"\n{title}\n")
    print("| what | time | notes |")
    print("|---|---:|---|")
    for name, t, note in results:
        print(f"| {name} | {t} | {note} |")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench.py report")
    ap.add_argument("--runs", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, help="keep the generated index in this directory")
    ap.add_argument("--reuse", action="store_true",
                    help="use the index an earlier run left in --keep (generated and synced)")
    ap.add_argument("--html", action="store_true",
                    help="measure `ledger report daily --html` and the page in Chromium (needs playwright)")
    args = ap.parse_args(argv)

    from ledger.report import service
    from ledger.report.query import ReportQuery

    if args.reuse and args.keep is None:
        ap.error("--reuse needs --keep DIR")
    tmp = Path(tempfile.mkdtemp(prefix="ledger-bench-report-"))
    work = args.keep or tmp
    work.mkdir(parents=True, exist_ok=True)
    db = work / "index.sqlite"
    url = f"sqlite:///{db}"
    results: list[tuple[str, str, str]] = []
    gen_note = "an index generated earlier"
    try:
        if not args.reuse:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
            t0 = time.perf_counter()
            counts = generate(db, args.runs)
            gen_s = time.perf_counter() - t0
            gen_note = f"generated in {gen_s:.0f} s"
            print(f"generated {counts['runs']:,} runs, {counts['streams']:,} usage streams in {gen_s:.1f}s "
                  f"({db.stat().st_size / 1e6:.0f} MB)", file=sys.stderr)
            t0 = time.perf_counter()
            stats = service.sync(url)
            cold = time.perf_counter() - t0
            print(f"cold sync: {cold:.1f}s ({stats.priced_streams:,} streams priced)", file=sys.stderr)
            results.append(("cold facts sync (price every run once)", f"{cold:.1f} s",
                            f"{stats.rebuilt:,} runs, {stats.priced_streams:,} distinct streams priced"))
        if args.html:
            results += html_bench(url, work)
            _table(f"`ledger report --html` over {args.runs:,} indexed runs (SQLite, {os.cpu_count()} cores, "
                   f"{gen_note})", results)
            return 0
        warm, stats = best_of(lambda: service.sync(url))
        results.append(("no-change facts sync (every report pays it)", f"{warm * 1000:.0f} ms",
                        f"{stats.checked:,} candidates checked"))
        ny = ZoneInfo("America/New_York")
        cases = [
            ("`report daily` (UTC)", ReportQuery(kind="daily"), True),
            ("`report daily --tz America/New_York`", ReportQuery(kind="daily", zone=ny, zone_name="America/New_York"), True),
            ("`report model --breakdown`", ReportQuery(kind="model", breakdown=True), True),
            ("`report model`", ReportQuery(kind="model"), False),
            ("`report monthly --tz Asia/Kathmandu` (+05:45)",
             ReportQuery(kind="monthly", zone=ZoneInfo("Asia/Kathmandu"), zone_name="Asia/Kathmandu"), False),
            ("`report daily --breakdown`", ReportQuery(kind="daily", breakdown=True), False),
            ("`report harness`", ReportQuery(kind="harness"), False),
            ("`report daily --since` (last 30 days)", ReportQuery(
                kind="daily", since=(START + timedelta(days=335)).date()), False),
            ("`report daily --harness codex` (a filter: no rollup)", ReportQuery(
                kind="daily", filters={"harness": ["codex"]}), False),
            ("`report run --limit 10` (top 10 runs)", ReportQuery(kind="run", limit=10), False),
            ("`report session --limit 20` (top 20 of 333,334 sessions)", ReportQuery(kind="session", limit=20), False),
            ("`report skill` (evaluation view, medians)", ReportQuery(kind="skill"), False),
            ("`report subject --limit 10` (evaluation view, 5,000 subjects)", ReportQuery(kind="subject", limit=10), False),
        ]
        for name, q, required in cases:
            secs, rep = best_of(lambda q=q: service.query(url, q))
            mark = (" ✅" if secs < 1 else " ❌") if required else ""
            results.append((name, f"{secs * 1000:.0f} ms{mark}", f"{len(rep.rows):,} rows"))  # type: ignore[union-attr]
        env = dict(os.environ, LEDGER_HOME=str(work / "home"))
        (work / "home").mkdir(exist_ok=True)
        cmd = [sys.executable, "-m", "ledger", "report", "daily", "--db", url, "--json"]
        subprocess.run(cmd, env=env, capture_output=True, check=True)
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, capture_output=True, check=True)
        e2e = time.perf_counter() - t0
        results.append(("`ledger report daily --json` process, end to end", f"{e2e * 1000:.0f} ms",
                        "start-up + index check + sync + query + JSON"))
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    _table(f"`ledger report` over {args.runs:,} indexed runs (SQLite, {os.cpu_count()} cores, {gen_note}; "
           "query times best of 3)", results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
