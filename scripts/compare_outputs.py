#!/usr/bin/env python3
"""Compare what two checkouts of ledger print for one home: `ledger runs --json --all` and
every `ledger report KIND --json --tz UTC`, each side indexing into its own fresh database.

    python scripts/compare_outputs.py --home H --before /tmp/ledger-before [--after .]

A refactoring that must not change behaviour (issue 9) is proven by identical stdout. Timing
fields (`seconds`, `elapsed...`, `*_ms` of the command itself) are removed from JSON before
comparing, should a command print any. Exit 0 when every output is identical, 1 otherwise.
Each side runs as `python3 -m ledger` with PYTHONPATH and the working directory set to its
checkout, so the modules come from that checkout only.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("daily", "weekly", "monthly", "run", "session", "model", "harness", "skill", "subject", "repo", "host")
TIMING_KEYS = frozenset({"seconds", "elapsed", "elapsed_s", "elapsed_ms", "took_ms", "query_ms"})


def _strip_timing(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _strip_timing(x) for k, x in v.items() if k not in TIMING_KEYS}
    if isinstance(v, list):
        return [_strip_timing(x) for x in v]
    return v


def _normalise(stdout: bytes) -> bytes:
    try:
        doc = orjson.loads(stdout)
    except orjson.JSONDecodeError:
        return stdout  # not JSON (an error): compared as printed
    stripped = _strip_timing(doc)
    return stdout if stripped == doc else orjson.dumps(stripped)


# options, filters, zones and formats (issue 10: the readers' SQL was rewritten)
VARIANTS = (
    ["runs", "--json"], ["runs", "--csv", "--all"], ["runs", "--all"], ["runs", "--json", "--all", "--harness", "c*",
                                                                      "--outcome", "failed", "--subject", "task:*"],
    ["report", "task", "--json", "--tz", "UTC"], ["report", "daily", "--breakdown", "--json", "--tz", "UTC"],
    ["report", "weekly", "--week-start", "sunday", "--json", "--tz", "America/New_York"],
    ["report", "monthly", "--json", "--tz", "Asia/Kathmandu"],
    ["report", "daily", "--json", "--tz", "Asia/Kolkata", "--since", "2026-10-05", "--until", "2026-10-20"],
    ["report", "model", "--breakdown", "--cost", "reported", "--json", "--tz", "UTC"],
    ["report", "model", "--cost", "estimated", "--harness", "claude", "--json", "--since", "2026-10-03", "--tz", "UTC"],
    ["report", "harness", "--outcome", "failed", "--json", "--tz", "UTC"],
    ["report", "run", "--limit", "5", "--json", "--tz", "UTC"],
    ["report", "run", "--limit", "3", "--order", "asc", "--cost", "reported", "--json", "--tz", "UTC"],
    ["report", "daily", "--by", "subject", "--subject", "task:*", "--json", "--tz", "UTC"],
    ["report", "daily", "--harness", "c*", "--model", "claude-*", "--json", "--tz", "UTC"],
    ["report", "daily", "--source", "claude-log", "--breakdown", "--json", "--tz", "UTC"],
    ["report", "repo", "--host", "*", "--skill", "review", "--json", "--tz", "UTC"],
    ["report", "daily", "--tz", "UTC"], ["report", "model", "--breakdown", "--tz", "UTC"],
    ["report", "subject", "--csv", "--tz", "UTC"],
    # issue 13: --limit chooses the groups in SQL (the page's top sessions and runs)
    ["report", "session", "--limit", "5", "--json", "--tz", "UTC"], ["report", "run", "--limit", "20", "--json"],
    ["report", "subject", "--limit", "3", "--breakdown", "--json", "--tz", "UTC"],
    ["report", "skill", "--limit", "2", "--cost", "reported", "--order", "asc", "--json", "--tz", "UTC"],
)


def commands(home: Path | None = None) -> list[tuple[str, list[str]]]:
    out = [("runs", ["runs", "--json", "--all"])]
    out += [(f"report {k}", ["report", k, "--json", "--tz", "UTC"]) for k in KINDS]
    out += [(" ".join(v), v) for v in VARIANTS]
    if home is not None:  # `show` of a few runs (settled, unsettled, damaged alike)
        names = sorted(p.name for shard in sorted((home / "runs").iterdir()) if shard.is_dir()
                       for p in shard.iterdir())[:6] if (home / "runs").is_dir() else []
        out += [(f"show {n[:12]}", ["show", n, "--json"]) for n in names]
        out += [(f"show {n[:12]} (table)", ["show", n]) for n in names[:2]]
    return out


def run_side(root: Path, home: Path, db: Path) -> dict[str, tuple[int, bytes, float]]:
    env = dict(os.environ, PYTHONPATH=str(root), LEDGER_HOME=str(home))
    env.pop("LEDGER_DB", None)
    results = {}
    for name, args in commands(home):
        t = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "ledger", *args, "--home", str(home), "--db", f"sqlite:///{db}"],
                           cwd=root, env=env, capture_output=True)
        results[name] = (p.returncode, _normalise(p.stdout), time.perf_counter() - t)
        if p.returncode != 0:
            sys.stderr.write(f"[{root}] {name}: exit {p.returncode}\n{p.stderr.decode(errors='replace')}\n")
    return results


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--before", type=Path, required=True, help="checkout of the code before the change")
    ap.add_argument("--after", type=Path, default=ROOT, help="checkout of the code after (default: this one)")
    ap.add_argument("--keep", type=Path, help="write each side's outputs into this directory")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ledger-compare-") as tmp:
        sides = {}
        for label, root in (("before", args.before), ("after", args.after)):
            t = time.perf_counter()
            sides[label] = run_side(root.resolve(), args.home.resolve(), Path(tmp) / f"{label}.sqlite")
            print(f"{label}: {root} ({time.perf_counter() - t:.1f}s)", file=sys.stderr)
    differ = 0
    print(f"| output | exit | bytes | sha256 | identical |\n|---|---|---|---|---|")
    names = [name for name, _ in commands(args.home.resolve())]
    for name in names:
        (rb, ob, _), (ra, oa, _) = sides["before"][name], sides["after"][name]
        same = rb == ra and ob == oa
        differ += not same
        digest = hashlib.sha256(oa).hexdigest()[:16]
        print(f"| {name} | {rb}/{ra} | {len(ob)}/{len(oa)} | {digest} | {'yes' if same else 'NO'} |")
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in name)
            (args.keep / f"{safe}.before.json").write_bytes(ob)
            (args.keep / f"{safe}.after.json").write_bytes(oa)
    print(f"\n{len(names) - differ}/{len(names)} identical", file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
