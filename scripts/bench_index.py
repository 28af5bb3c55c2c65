#!/usr/bin/env python3
"""Index benchmark (DESIGN §7): `python scripts/bench.py index [--runs N] [--keep DIR]`.

Generates N settled runs (~30 events each) with the records writer, then measures, in this
one process and on the same data (page cache warm for every step):

- the floor: read every events.jsonl line and JSON-parse it (orjson), best of REPEAT, measured
  alternately with the cold builds (best of REPEAT) so both see the same machine;
- a cold `ledger index` (new database, built into a temp file and swapped in);
- a no-change re-index (settled, quiet runs are sealed: their shard directories are only
  stat'ed), the same with `--full` (every run stat'ed), and a `--full` re-index after
  appending 3 events to 1% of the (settled) runs;
- peak memory of a cold index at N/10 and at N runs (forked child, ru_maxrss growth).

Prints a Markdown table with the ratios and the budgets (cold <= 3x floor, no-change
>= 50x faster than cold, memory flat).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def generate(home: Path, n: int, seed: int = 7) -> None:
    """N settled runs, ~30 events each, written with the real writer (RunCapture)."""
    from ledger.records import RunCapture

    rnd = random.Random(seed)
    models = ["claude-sonnet-4-5", "claude-opus-4-1", "gpt-5", "gemini-2.5-pro"]
    tools = ["Bash", "Edit", "Read", "Grep", "Write"]
    for i in range(n):
        model = models[i % len(models)]
        with RunCapture(home, harness="claude", model=model, subjects=[f"task:T-{i % 97}"],
                        skill=rnd.choice([None, "review", "fix"])) as run:
            attempt = run.start_attempt("anthropic", model)
            run.provider_session(attempt, f"sess-{i}")
            stream = run.usage_stream(provider="anthropic", model=model, attempt_key=attempt, turn_key="turn-1")
            inp = out = 0
            for j in range(12):
                inp += rnd.randint(100, 2000)
                out += rnd.randint(10, 300)
                counters = {"input_tokens": inp, "output_tokens": out, "cache_read_tokens": inp // 3}
                if j == 11:
                    counters["cost_usd"] = round(inp * 3e-6 + out * 15e-6, 6)
                stream.observe(counters, final_receipt=j == 11)
            for j in range(12):
                run.emit("tool_use", name=rnd.choice(tools), summary=f"step {j}")
            run.emit("conversation", event={"type": "turn_completed", "turn_id": "t1", "status": "completed"})
            run.emit("result", outcome="completed", duration_secs=rnd.random() * 100)
            run.emit("provider_attempt_finished", attempt_key=attempt, outcome="completed")


def floor(home: Path) -> tuple[float, int]:
    """Read every events line and JSON-parse it: the cost any indexer must pay."""
    from ledger.records.reader import iter_run_dirs

    t = time.perf_counter()
    lines = 0
    loads = orjson.loads
    for path, _ in iter_run_dirs(home):
        with open(os.path.join(path, "events.jsonl"), "rb") as f:
            for line in f:
                loads(line)
                lines += 1
    return time.perf_counter() - t, lines


REPEAT = 5  # floor / cold-build measurements, best of each


def timed_index(home: Path, url: str, full: bool = False) -> tuple[float, object]:
    from ledger.index.ops import index_homes

    t = time.perf_counter()
    summary = index_homes([home], url, full=full)
    return time.perf_counter() - t, summary


def _mem_child(home: str, url: str, q: "mp.Queue") -> None:
    from ledger.index.ops import index_homes

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    index_homes([home], url)
    # the indexer's worker processes (forked from this one) count too: the larger peak
    after = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    q.put(after - before)


def peak_kib(home: Path, url: str) -> int:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_mem_child, args=(str(home), url, q))
    p.start()
    growth = q.get()
    p.join()
    return growth


def subset(src: Path, dst: Path, n: int) -> None:
    from ledger.records.reader import iter_run_dirs

    for i, (path, name) in enumerate(iter_run_dirs(src)):
        if i >= n:
            break
        target = dst / "runs" / os.path.basename(os.path.dirname(path)) / name
        shutil.copytree(path, target)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench.py index")
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--keep", type=Path, help="generate into / reuse this directory")
    args = ap.parse_args(argv)
    from ledger.index import sealing

    sealing.RACY_NS = 0  # generated runs are all a few seconds old at most; time them as settled history
    base = args.keep or Path(tempfile.mkdtemp(prefix="ledger-bench-"))
    home = base / "home"
    if not (home / "runs").exists():
        t = time.perf_counter()
        generate(home, args.runs)
        print(f"generated {args.runs} runs in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    for p in base.glob("*.sqlite*"):
        p.unlink()
    # the no-change budget is about settled history: let the newest run become quiet first
    # (a settled run is sealed once quiet for SEAL_GRACE; see ledger/index/sealing.py)
    from ledger.records.reader import iter_run_dirs

    # (a --keep'd home had events appended by the previous run's last step)
    newest = max([os.stat(p).st_mtime for p in (home / "runs").iterdir()]
                 + [os.stat(os.path.join(p, "events.jsonl")).st_mtime for p, _ in iter_run_dirs(home)])
    wait = sealing.SEAL_GRACE_NS / 1e9 - (time.time() - newest)
    if wait > 0:
        print(f"waiting {wait:.1f}s for the newest runs to be sealable", file=sys.stderr)
        time.sleep(wait)
    url = f"sqlite:///{base / 'bench.sqlite'}"
    floor(home)  # warm the page cache for everyone
    from ledger.records.reader import scan

    t = time.perf_counter()
    for _ in scan(home):
        pass
    t_reader = time.perf_counter() - t
    # The floor and the cold build are measured alternately, REPEAT times each, best of each:
    # the machine is shared (a burst of other work then hits both alike), and the first pass
    # of the process also pays one-time imports (SQLAlchemy, Alembic).
    floors, colds = [], []
    s_cold = None
    for k in range(REPEAT):
        floors.append(floor(home))
        last = k == REPEAT - 1
        t_k, s_k = timed_index(home, url if last else f"sqlite:///{base / f'cold-{k}.sqlite'}")
        colds.append(t_k)
        s_cold = s_cold or s_k
    t_floor, lines = min(floors)
    t_cold = min(colds)
    t_none = min(timed_index(home, url)[0] for _ in range(3))
    t_full = min(timed_index(home, url, full=True)[0] for _ in range(3))
    dirs = [p for p, _ in iter_run_dirs(home)]
    chosen = dirs[:: max(1, len(dirs) // max(1, len(dirs) // 100))][: max(1, len(dirs) // 100)]
    for path in chosen:
        with open(os.path.join(path, "events.jsonl"), "rb") as f:
            last = orjson.loads(f.read().splitlines()[-1])
        with open(os.path.join(path, "events.jsonl"), "ab") as f:
            for k in range(3):
                f.write(orjson.dumps({"schema_version": 1, "seq": last["seq"] + 1 + k,
                                      "observed_at": "2026-01-01T00:00:00.000000Z", "type": "tool_use",
                                      "name": "Bash", "summary": "late"}) + b"\n")
    t_append, s_append = timed_index(home, url, full=True)
    small = base / "small"
    if not (small / "runs").exists():
        subset(home, small, max(1, args.runs // 10))
    mem_small = peak_kib(small, f"sqlite:///{base / 'mem-small.sqlite'}")
    mem_full = peak_kib(home, f"sqlite:///{base / 'mem-full.sqlite'}")
    n = args.runs
    rows = [
        ("runs / events lines", f"{n} / {lines}", ""),
        (f"floor: read + orjson-parse every line (best of {REPEAT})", f"{t_floor:.3f} s", ""),
        ("records reader: read_run() of every run (ledger.records.scan)", f"{t_reader:.3f} s",
         f"{t_reader / t_floor:.2f}x floor"),
        (f"cold index (best of {REPEAT}, alternating with the floor)", f"{t_cold:.3f} s ({n / t_cold:.0f} runs/s)",
         f"{t_cold / t_floor:.2f}x floor (budget <= 3x): {'ok' if t_cold <= 3 * t_floor else 'OVER'}; "
         f"{t_cold / t_reader:.2f}x the records reader"),
        ("no-change re-index (sealed shards skipped; best of 3)", f"{t_none * 1000:.1f} ms",
         f"{t_cold / t_none:.0f}x faster than cold (budget >= 50x): {'ok' if t_cold >= 50 * t_none else 'UNDER'}"),
        ("no-change re-index --full (stats every run; best of 3)", f"{t_full * 1000:.1f} ms",
         f"{t_cold / t_full:.0f}x faster than cold"),
        (f"re-index --full after appending to 1% ({len(chosen)} runs)", f"{t_append * 1000:.1f} ms",
         f"{t_cold / t_append:.0f}x faster than cold; {s_append.updated} updated, {s_append.records_read} read"),
        (f"peak RSS growth, cold index of {max(1, n // 10)} runs", f"{mem_small / 1024:.1f} MiB", ""),
        (f"peak RSS growth, cold index of {n} runs", f"{mem_full / 1024:.1f} MiB",
         f"{mem_full / max(1, mem_small):.2f}x for 10x the runs"),
    ]
    print("| measure | value | ratio / budget |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
    print(f"\ncold summary: {s_cold.line()}", file=sys.stderr)
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
