#!/usr/bin/env python3
"""Team benchmark (issue 11): `python scripts/bench.py team [--homes 4] [--runs 5000] [--keep DIR]`.
(`--store s3`: the record store in a bucket vs a directory, scripts/bench_team_store.py.)

Generates HOMES homes of RUNS settled runs each (the records writer, as `bench.py index`)
and one home holding all of their runs (hard links), then times `ledger index --db URL`,
each step a separate `ledger` process as a user runs it, into a PostgreSQL database created
for the step (`ledger_bench_team` on 127.0.0.1:5432, trust auth, user $PGUSER, postgres or
root; dropped afterwards):

- the first load of the one big home into an empty database (the backfill), and the same
  load into a database already holding a few hundred runs of another home;
- the HOMES homes indexed one after another (HOMES processes in turn) into an empty
  database, and HOMES processes started at once (one per home) into another empty one:
  the ratio says whether homes are indexed in parallel or wait for each other.

Each figure is the best of --repeat, the steps alternating (the machine is shared).
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DB = "ledger_bench_team"
SEED_RUNS = 300  # "a database already holding a few hundred runs"
BUDGET = 2000  # runs/s, first load (issue 11)


def admin_connect():
    """An autocommit connection to the server's `postgres` database (127.0.0.1 only)."""
    import psycopg

    users = [u for u in (os.environ.get("PGUSER"), "postgres", "root") if u]
    last: Exception | None = None
    for user in users:
        try:
            return psycopg.connect(host="127.0.0.1", port=5432, user=user, dbname="postgres",
                                   autocommit=True, connect_timeout=5), user
        except psycopg.OperationalError as exc:
            last = exc
    raise SystemExit(f"bench.py team: no PostgreSQL at 127.0.0.1:5432 for users {users}: {last}")


def fresh_db(admin) -> None:
    admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    admin.execute(f'CREATE DATABASE "{DB}"')


def count_runs(user: str) -> int:
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=5432, user=user, dbname=DB) as c:
        return c.execute("SELECT count(*) FROM runs").fetchone()[0]


def index_cmd(homes: list[Path], url: str) -> list[str]:
    args = [sys.executable, "-m", "ledger", "index", "--json", "--db", url]
    for h in homes:
        args += ["--home", str(h)]
    return args


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT)] + sys.path))
    env.pop("LEDGER_DB", None)
    return env


def _summary(returncode: int, out: bytes, err: bytes) -> dict:
    if returncode != 0:
        raise SystemExit(f"bench.py team: ledger index failed ({returncode}):\n{err.decode()[-3000:]}")
    return json.loads(out)


def run_index(homes: list[Path], url: str) -> tuple[float, dict]:
    """One `ledger index` process: (wall seconds, its JSON summary)."""
    t = time.perf_counter()
    p = subprocess.run(index_cmd(homes, url), env=_env(), capture_output=True)
    dt = time.perf_counter() - t
    return dt, _summary(p.returncode, p.stdout, p.stderr)


def run_concurrently(homes: list[Path], url: str) -> tuple[float, list[dict]]:
    """One `ledger index` process per home, all started at once: (wall seconds until the last
    one is done, their summaries)."""
    t = time.perf_counter()
    procs = [subprocess.Popen(index_cmd([h], url), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for h in homes]
    outs = [p.communicate() for p in procs]
    dt = time.perf_counter() - t
    return dt, [_summary(p.returncode, o, e) for p, (o, e) in zip(procs, outs)]


def merge_homes(homes: list[Path], into: Path) -> None:
    """One home holding every run of `homes` (hard links: no copy of the data)."""
    for h in homes:
        for shard in (h / "runs").iterdir():
            for run in shard.iterdir():
                target = into / "runs" / shard.name / run.name
                if not target.exists():
                    shutil.copytree(run, target, copy_function=os.link)


def verdict(ratio: float) -> str:
    # (within 5 %: the machine is shared, that much is noise)
    return "faster at once" if ratio > 1.05 else "slower at once" if ratio < 0.95 else "about the same"


def main(argv: list[str]) -> int:
    if any(a == "--store" or a.startswith("--store=") for a in argv):  # (issue 31: directory vs bucket)
        import bench_team_store

        return bench_team_store.main(argv)
    ap = argparse.ArgumentParser(prog="bench.py team")
    ap.add_argument("--homes", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5_000, help="runs per home")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many of each step")
    ap.add_argument("--keep", type=Path, help="generate into / reuse this directory")
    args = ap.parse_args(argv)
    from bench_index import generate

    base = args.keep or Path(tempfile.mkdtemp(prefix="ledger-bench-team-"))
    homes = [base / f"home{i}" for i in range(args.homes)]
    seed_home, big = base / "seed", base / "all"
    total = args.homes * args.runs
    t = time.perf_counter()
    for i, h in enumerate(homes):
        if not (h / "runs").exists():
            generate(h, args.runs, seed=11 + i)
    if not (seed_home / "runs").exists():
        generate(seed_home, SEED_RUNS, seed=5)
    if not (big / "runs").exists():
        merge_homes(homes, big)
    print(f"homes ready ({args.homes} x {args.runs} runs, and one of {total}) in {time.perf_counter() - t:.1f}s",
          file=sys.stderr)

    admin, user = admin_connect()
    url = f"postgresql+psycopg://{user}@127.0.0.1:5432/{DB}"
    first: list[float] = []
    populated: list[float] = []
    seq: list[float] = []
    conc: list[float] = []
    try:
        for k in range(args.repeat):
            fresh_db(admin)
            dt, s = run_index([big], url)
            assert s["new"] == total == count_runs(user), (s["new"], total)
            first.append(dt)

            fresh_db(admin)
            run_index([seed_home], url)
            dt, s = run_index([big], url)
            assert s["new"] == total, (s["new"], total)
            populated.append(dt)

            fresh_db(admin)
            dt = 0.0
            for h in homes:
                d, s = run_index([h], url)
                assert s["new"] == args.runs, (s["new"], args.runs)
                dt += d
            assert count_runs(user) == total
            seq.append(dt)

            fresh_db(admin)
            dt, ss = run_concurrently(homes, url)
            assert [s["new"] for s in ss] == [args.runs] * args.homes and count_runs(user) == total
            conc.append(dt)
            print(f"round {k + 1}: first load {first[-1]:.2f} s, populated {populated[-1]:.2f} s, "
                  f"sequential {seq[-1]:.2f} s, concurrent {conc[-1]:.2f} s, load {os.getloadavg()[0]:.1f}",
                  file=sys.stderr)
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        admin.close()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)

    t_first, t_pop, t_seq, t_conc = min(first), min(populated), min(seq), min(conc)
    rate = total / t_first
    n = args.homes
    rows = [
        (f"first load: one home of {total} runs into an empty database", f"{t_first:.2f} s ({rate:.0f} runs/s)",
         f"budget >= {BUDGET} runs/s: {'ok' if rate >= BUDGET else 'UNDER'}"),
        (f"the same load into a database holding {SEED_RUNS} runs", f"{t_pop:.2f} s ({total / t_pop:.0f} runs/s)",
         f"empty vs populated: {t_pop / t_first:.2f}x as fast"),
        (f"{n} homes x {args.runs} runs, one `ledger index` after another", f"{t_seq:.2f} s ({total / t_seq:.0f} runs/s)",
         ""),
        (f"{n} homes x {args.runs} runs, {n} `ledger index` at once", f"{t_conc:.2f} s ({total / t_conc:.0f} runs/s)",
         f"sequential / concurrent: {t_seq / t_conc:.2f}x ({verdict(t_seq / t_conc)})"),
    ]
    print(f"| measure (best of {args.repeat}; each step `ledger index` processes) | value | ratio / budget |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
