#!/usr/bin/env python3
"""Every JSON/CSV/table output of ledger on one generated home, saved to files, on SQLite and
PostgreSQL; and a comparison of two such captures (issue 27's safety net: a refactoring that
must not change behaviour is proven by byte-identical outputs).

    python scripts/compare_outputs.py --home H --out DIR [--code ROOT] [--backends sqlite,postgresql]
    python scripts/compare_outputs.py --compare DIR_A DIR_B
    python scripts/compare_outputs.py --generate --home H [--runs N] [--sessions N] [--seed S]

A refactoring's before and after (the same home, two checkouts, one list of outputs: this
script's):

    git worktree add /tmp/before COMMIT
    python scripts/compare_outputs.py --home /tmp/h --out /tmp/A --code /tmp/before
    python scripts/compare_outputs.py --home /tmp/h --out /tmp/B
    python scripts/compare_outputs.py --compare /tmp/A /tmp/B

`--home H`: the home (generated here first when H does not exist: run records of every
harness, outcome and damage, and imported Claude Code and Codex sessions, from fixed seeds
and a fixed clock, so two generations are byte-identical). `--out DIR`: for each backend,
DIR/<backend>/<NN>-<output>.out holds the command's stdout and .err its exit code and
stderr. Each side runs as `python -m ledger` with PYTHONPATH and the working directory set
to `--code` (default: this checkout), so a before/after comparison is two captures of the
same home with two checkouts, then `--compare`. Exit 1 when any output differs (each one
named, with its first differing line), 0 otherwise.

Determinism (what is fixed, what is masked):
- every capture indexes a fresh copy of the home (files aged to one fixed time) into a fresh
  database (a new SQLite file, a new PostgreSQL database dropped afterwards), with its own
  price-rates cache, TZ=UTC, COLUMNS=80 and LEDGER_NOW fixed (`report blocks`);
- generated runs start between 2026-03 and 2026-09, long before any clock that runs this, so
  `ledger runs`' default window (last 7 days) holds only the unsettled runs;
- masked in every output: the copy's path (`$HOME`), the database URL/name (`$DB`), the
  temporary directory (`$TMP`) and this machine's host name (`$HOSTNAME`); a command's own
  duration (`in 1.64s`, `took 3ms`: DURATION); and, in JSON, the values of TIMING_KEYS
  (timings, and `added_at` / `last_indexed_at`: when the index saw the home);
- the copy's `home-id.json` is written with a fixed id (HOME_UID) before the first command.
"""

from __future__ import annotations

import argparse
import difflib
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN = os.environ.get("LEDGER_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
NOW = "2026-11-01T12:00:00Z"  # LEDGER_NOW of every capture
FILE_TIME = 1_790_000_000  # (2026-09-21) mtime of every file of a capture's home copy
KINDS = ("daily", "weekly", "monthly", "run", "session", "model", "harness", "skill", "subject", "repo", "host",
         "task", "home", "blocks", "project")
TIMING_KEYS = frozenset({"seconds", "elapsed", "elapsed_s", "elapsed_ms", "took_ms", "query_ms", "added_at",
                         "last_indexed_at"})
DURATION = re.compile(rb"\b(in|took) \d+(\.\d+)?(s|ms)\b")  # "... 0 updated in 1.64s" on stderr
HOME_UID = "27272727-0000-4000-8000-000000000027"  # the copy's home-id.json

# ---------------------------------------------------------------------------- the home


def _clock(start: int):
    """A deterministic now_rfc3339: one microsecond later at every call."""
    t = [start * 1_000_000]

    def now_rfc3339() -> str:
        t[0] += 1
        s, us = divmod(t[0], 1_000_000)
        from datetime import datetime, timezone

        return datetime.fromtimestamp(s, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{us:06d}000Z"
    return now_rfc3339


def generate(home: Path, runs: int = 40, sessions: int = 6, threads: int = 6, seed: int = 27) -> None:
    """The generated home (_generate), made in a child process: the writer's clock and ids are
    patched there, never in the caller."""
    subprocess.run([sys.executable, __file__, "--generate", "--home", str(home), "--runs", str(runs),
                    "--sessions", str(sessions), "--threads", str(threads), "--seed", str(seed)], check=True)


def _generate(home: Path, runs: int, sessions: int, threads: int, seed: int) -> None:
    """`runs` records written with the real writer (its clock, ids, host, boot and launcher
    fixed), then `sessions` Claude Code sessions and `threads` Codex threads (the tests'
    generators, every duplication hazard) imported with `ledger import`."""
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    from datetime import datetime, timedelta, timezone

    from ledger.records import writer

    rnd = random.Random(seed)
    writer.mint_run_id = lambda: "run_" + uuid.UUID(int=rnd.getrandbits(128), version=4).hex
    writer.launcher_identity = lambda: {"pid": 999_999, "start_ticks": 1}
    writer.boot_id = lambda: "00000000-0000-0000-0000-000000000027"  # not this boot: abandoned
    here = socket.gethostname()
    hosts = ("build-1", "laptop-2", here)
    models = {"claude": ("anthropic", ("claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5")),
              "codex": ("openai", ("gpt-5", "gpt-5-mini")), "gemini": ("google", ("gemini-2.5-pro",)),
              "command": ("acme", ("internal-model-x", None))}
    start = datetime(2026, 3, 2, 7, 30, tzinfo=timezone.utc)
    made: list[tuple[str, Path]] = []
    for i in range(runs):
        harness = ("claude", "claude", "codex", "gemini", "command")[i % 5]
        provider, names = models[harness]
        model = names[i % len(names)]
        created = start + timedelta(hours=i * 4800 // runs + rnd.randint(0, 90) / 60)  # over 200 days, any hour
        writer.now_rfc3339 = _clock(int(created.timestamp()))
        kw: dict[str, Any] = {}
        if made and i % 7 == 3:  # a child of an earlier run (replays, runs inside the agent)
            pid, ppath = made[rnd.randrange(len(made))]
            kw["env"] = {"LEDGER_RUN_ID": pid, "LEDGER_RUN_DIR": str(ppath)}
        else:
            kw["env"] = {}
        writer.hostname = lambda h=hosts[i % 3]: h
        cap = writer.RunCapture(
            home, harness=harness, model=model, created_at=created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            cwd=f"/src/repo-{i % 3}", repo=(f"/src/repo-{i % 3}" if i % 4 else None),
            subjects=[f"task:T-{i % 6}"] + ([f"issue:{i % 4}"] if i % 3 == 0 else []),
            skill=(None, "review", "fix", "refactor")[i % 4], arm=("A", "B", None)[i % 3],
            surface=("headless", "interactive")[i % 2], **kw)
        for turn in range(1 + i % 3):
            attempt = cap.start_attempt(provider, model)
            cap.provider_session(attempt, f"sess-{i}-{turn}")
            stream = cap.usage_stream(provider=provider, model=model, attempt_key=attempt, turn_key=f"turn-{turn}")
            inp = out = 0
            for j in range(3):
                inp += rnd.randint(100, 5000)
                out += rnd.randint(10, 900)
                counters: dict[str, Any] = {"input_tokens": inp, "output_tokens": out, "cache_read_tokens": inp // 3,
                                            "cache_write_tokens": inp // 7}
                last = j == 2
                if last and i % 4 != 1:  # a provider receipt; else only an estimate
                    counters["cost_usd"] = round(inp * 3e-6 + out * 15e-6, 6)
                stream.observe(counters, final_receipt=last and i % 4 != 1)
            if i % 6 == 2:  # a subagent's side stream on another model
                side = cap.usage_stream(provider=provider, model=names[-1] or "side-model", attempt_key=attempt,
                                        turn_key=f"side-{turn}")
                side.observe({"input_tokens": 321 + i, "output_tokens": 12})
            for k in range(2 + i % 4):
                cap.emit("tool_use", name=("Bash", "Edit", "Read", "Grep")[k % 4], summary=f"step {k}")
            cap.emit("provider_attempt_finished", attempt_key=attempt, outcome="completed")
        outcome = ("completed", "completed", "failed", "interrupted", "completed", None)[i % 6]
        if outcome is None and i % 12 == 11:
            outcome = "completed"
        ended = (created + timedelta(minutes=3 + i % 50)).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
        if outcome is None:
            cap.detach()  # unsettled: on this host (not this boot) abandoned, elsewhere unknown
        else:
            cap.emit("result", outcome=outcome, duration_secs=60.0 + i)
            cap.settle(outcome, ended_at=ended)
        made.append((cap.run_id, Path(cap.path)))
    for n, (_rid, path) in enumerate(made):
        if n % 13 == 5:  # an evidence gap: a torn last line
            with open(path / "events.jsonl", "ab") as f:
                f.write(b'{"schema_version":1,"seq":999')
        if n % 17 == 9:  # an unreadable record
            os.chmod(path / "manifest.json", 0o600)
            (path / "manifest.json").write_bytes(b"{not json")
    _import_sessions(home, sessions, threads, seed)


def _import_sessions(home: Path, sessions: int, threads: int, seed: int) -> None:
    import claudehistory
    import codexhistory

    with tempfile.TemporaryDirectory(prefix="ledger-compare-src-") as tmp:
        claudehistory.generate(Path(tmp) / "claude", sessions=sessions, seed=seed)
        codexhistory.generate(Path(tmp) / "codex", threads=threads, seed=seed)
        _age(Path(tmp), FILE_TIME)  # past the archive's racy window
        env = _env(ROOT, home, Path(tmp))
        for client in ("claude", "codex"):
            subprocess.run([sys.executable, "-m", "ledger", "import", client, "--from", str(Path(tmp) / client)],
                           cwd=ROOT, env=env, check=True, capture_output=True)


def _age(root: Path, t: int) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + dirnames:
            os.utime(os.path.join(dirpath, name), (t, t), follow_symlinks=False)
    os.utime(root, (t, t))

# ---------------------------------------------------------------------------- the outputs


def _run_ids(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "runs").glob("*/run_*") if p.is_dir())


def commands(home: Path) -> list[tuple[str, list[str]]]:
    """(name, argv) of every output captured, in order (the first indexes the copy)."""
    out: list[tuple[str, list[str]]] = [("index --json", ["index", "--json"]),
                                        ("index --json (no change)", ["index", "--json"])]
    fmts = (("json", ["--json"]), ("csv", ["--csv"]), ("table", []))
    for f, opt in fmts:
        out += [(f"runs {f}", ["runs", *opt]), (f"runs --all {f}", ["runs", "--all", *opt])]
    out += [("runs --tree --all", ["runs", "--tree", "--all"]),
            ("runs filters", ["runs", "--json", "--all", "--harness", "c*", "--outcome", "failed",
                              "--subject", "task:*"]),
            ("runs since-until", ["runs", "--json", "--since", "2026-05-01", "--until", "2026-07-31", "--tz", "UTC"]),
            ("runs --limit --source", ["runs", "--all", "--limit", "7", "--source", "record"])]
    for kind in KINDS:
        for f, opt in fmts:
            out.append((f"report {kind} {f}", ["report", kind, *opt, "--tz", "UTC"]))
    variants = (
        ["daily", "--breakdown", "--json"], ["weekly", "--week-start", "sunday", "--json", "--tz", "America/New_York"],
        ["monthly", "--json", "--tz", "Asia/Kathmandu"],
        ["daily", "--json", "--tz", "Asia/Kolkata", "--since", "2026-05-05", "--until", "2026-08-20"],
        ["model", "--breakdown", "--cost", "reported", "--json"],
        ["model", "--cost", "estimated", "--harness", "claude", "--json", "--since", "2026-04-03"],
        ["harness", "--outcome", "failed", "--json"], ["run", "--limit", "5", "--json"],
        ["run", "--limit", "3", "--order", "asc", "--cost", "reported", "--json"],
        ["daily", "--by", "subject", "--subject", "task:*", "--json"],
        ["daily", "--harness", "c*", "--model", "claude-*", "--json"],
        ["daily", "--source", "claude-log", "--breakdown", "--json"],
        ["daily", "--source", "codex-log", "--breakdown", "--csv"],
        ["repo", "--host", "*", "--skill", "review", "--json"], ["model", "--breakdown"],
        ["session", "--limit", "5", "--json"], ["subject", "--limit", "3", "--breakdown", "--json"],
        ["skill", "--limit", "2", "--cost", "reported", "--order", "asc", "--json"],
        ["blocks", "--recent", "--json"], ["blocks", "--token-limit", "max", "--json"],
        ["blocks", "--session-length", "2.5"], ["project", "--breakdown", "--json"],
        ["compare", "--json"], ["compare", "--csv"], ["compare"], ["compare", "--by", "skill", "--json"],
        ["compare", "A", "B", "--task-by", "task", "--json"],
    )
    for v in variants:
        argv = ["report", *v] + ([] if "--tz" in v or v[0] == "compare" else ["--tz", "UTC"])
        out.append(("report " + " ".join(v), argv))
    ids = _run_ids(home)
    for rid in ids[:5] + ids[-3:]:  # settled, unsettled, damaged and unreadable alike
        out += [(f"show {rid[:12]} json", ["show", rid, "--json"]), (f"show {rid[:12]} table", ["show", rid])]
    if ids:
        out.append((f"show {ids[1][:12]} --events", ["show", ids[1], "--events"]))
    query = ("SELECT harness, count(*) AS n, sum(input_tokens) AS inp FROM runs "
             "GROUP BY harness ORDER BY harness")
    for f, opt in fmts:
        out.append((f"sql {f}", ["sql", query, *opt]))
    out += [("sql error", ["sql", "SELECT nope FROM nowhere", "--json"]),
            ("verify --json", ["verify", "--json"]), ("verify table", ["verify"])]
    if ids:
        out.append(("verify one --json", ["verify", ids[0], "--json"]))
    out += [("homes list --json", ["homes", "list", "--json"]), ("homes list", ["homes", "list"]),
            ("db current", ["db", "current"])]
    return out


def _strip_timing(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: ("<masked>" if k in TIMING_KEYS else _strip_timing(x)) for k, x in v.items()}
    if isinstance(v, list):
        return [_strip_timing(x) for x in v]
    return v


def mask(data: bytes, subs: list[tuple[str, str]]) -> bytes:
    """The documented masking rule (module docstring): paths, database, host, timing keys."""
    for old, new in subs:
        if old:
            data = data.replace(old.encode(), new.encode())
    data = DURATION.sub(rb"\1 <t>\3", data)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return data  # not JSON (a table, CSV or an error): compared as printed
    stripped = _strip_timing(doc)
    return data if stripped == doc else orjson.dumps(stripped, option=orjson.OPT_INDENT_2) + b"\n"


def _env(code: Path, home: Path, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(PYTHONPATH=str(code), LEDGER_HOME=str(home), LEDGER_CACHE_DIR=str(tmp / "cache"),
               LEDGER_NOW=NOW, TZ="UTC", COLUMNS="80", LC_ALL="C.UTF-8", XDG_DATA_HOME=str(tmp / "xdg"),
               NO_COLOR="1")
    return env


def _pg_database() -> tuple[str, str]:
    import psycopg

    name = f"ledger_cmp_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN.replace("postgresql+psycopg://", "postgresql://"), autocommit=True,
                         connect_timeout=5) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return name, PG_ADMIN.rsplit("/", 1)[0] + "/" + name


def _pg_drop(name: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN.replace("postgresql+psycopg://", "postgresql://"), autocommit=True,
                         connect_timeout=5) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _home_id(home: Path) -> None:
    """A fixed home id, made on this machine for this copy (an id made anew would differ)."""
    sys.path.insert(0, str(ROOT))
    from ledger.home import machine_id

    doc = {"schema_version": 1, "home_id": HOME_UID, "created_on": socket.gethostname(),
           "path": os.path.realpath(home), "machine": machine_id()}
    (home / "home-id.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    os.chmod(home / "home-id.json", 0o600)


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in name)


def capture(home: Path, out: Path, code: Path = ROOT, backend: str = "sqlite", select: str | None = None) -> int:
    """Run every command on a fresh copy of `home` and database; write out/<NN>-<name>.out/.err.
    Returns how many commands crashed (a traceback on stderr)."""
    out.mkdir(parents=True, exist_ok=True)
    crashed = 0
    with tempfile.TemporaryDirectory(prefix="ledger-compare-") as t:
        tmp = Path(t)
        copy = tmp / "home"
        shutil.copytree(home, copy, symlinks=True)
        _home_id(copy)
        _age(copy, FILE_TIME)
        pg = None
        if backend == "postgresql":
            pg, url = _pg_database()
        else:
            url = f"sqlite:///{tmp / 'index.sqlite'}"
        subs = [(url, "$DB"), (pg or "\0", "$DB"), (str(copy), "$HOME"), (str(tmp), "$TMP"),
                (socket.gethostname(), "$HOSTNAME")]
        env = _env(code, copy, tmp)
        try:
            for n, (name, argv) in enumerate(commands(copy)):
                if select and n > 0 and not re.search(select, name):
                    continue  # (the first command, the cold index, always runs)
                full = [sys.executable, "-m", "ledger", *argv]
                if argv[0] not in ("verify",):
                    full += ["--db", url]
                p = subprocess.run(full, cwd=code, env=env, capture_output=True, timeout=600)
                stem = out / f"{n:03d}-{_safe(name)}"
                stem.with_suffix(".out").write_bytes(mask(p.stdout, subs))
                stem.with_suffix(".err").write_bytes(b"exit %d\n" % p.returncode + mask(p.stderr, subs))
                if b"Traceback" in p.stderr:
                    crashed += 1
                    sys.stderr.write(f"[{backend}] {name}: traceback\n{p.stderr.decode(errors='replace')[-2000:]}\n")
        finally:
            if pg:
                _pg_drop(pg)
    return crashed


def compare(a: Path, b: Path) -> int:
    """Every file under a and b (same relative name) byte-identical? Prints each difference."""
    fa = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    fb = {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    differ = 0
    for rel in sorted(fa | fb):
        if rel not in fa or rel not in fb:
            differ += 1
            print(f"only in {a if rel in fa else b}: {rel}")
            continue
        da, db = (a / rel).read_bytes(), (b / rel).read_bytes()
        if da != db:
            differ += 1
            diff = list(difflib.unified_diff(da.decode(errors="replace").splitlines(),
                                             db.decode(errors="replace").splitlines(), lineterm="", n=0))
            print(f"DIFFERS: {rel}\n  " + "\n  ".join(diff[2:8]))
    total = len(fa | fb)
    print(f"{total - differ}/{total} identical", file=sys.stderr)
    return 1 if differ else 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, help="the home (generated first when missing)")
    ap.add_argument("--out", type=Path, help="write the outputs under DIR/<backend>/")
    ap.add_argument("--code", type=Path, default=ROOT, help="checkout whose ledger runs (default: this one)")
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--runs", type=int, default=40, help="generated run records")
    ap.add_argument("--sessions", type=int, default=6, help="generated Claude Code sessions (and Codex threads)")
    ap.add_argument("--threads", type=int, help="generated Codex threads (default: as --sessions)")
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--generate", action="store_true", help="only generate --home (which must not exist)")
    ap.add_argument("--select", metavar="REGEX", help="only the outputs whose name matches (and the cold index)")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("DIR_A", "DIR_B"))
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if args.home is None or (args.out is None and not args.generate):
        ap.error("--home and --out (or --compare DIR_A DIR_B)")
    home = args.home.resolve()
    threads = args.sessions if args.threads is None else args.threads
    if args.generate:
        _generate(home, args.runs, args.sessions, threads, args.seed)
        return 0
    if not home.exists():
        generate(home, runs=args.runs, sessions=args.sessions, threads=threads, seed=args.seed)
    crashed = 0
    for backend in args.backends.split(","):
        crashed += capture(home, args.out.resolve() / backend, args.code.resolve(), backend, args.select)
    n = len(commands(home))
    print(f"{n} outputs per backend written under {args.out}" + (f"; {crashed} crashed" if crashed else ""),
          file=sys.stderr)
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
