"""`ledger runs` / `ledger show` over record homes: JSON content, errors, and 10,000 runs.

Written against the JSON the commands print, not against how they compute it (records scan
today, an SQLite index later: the JSON must stay the same).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import recordkit as rk
from ledger.records import RunCapture, read_run

REPO = Path(__file__).resolve().parent.parent


def invoke(*args: str):
    from ledger.cli.app import app

    return CliRunner().invoke(app, list(args))


def golden_capture(home, subject="task:LOO-265"):
    """The spec's golden case, through the writer."""
    with RunCapture(home, harness="claude", model="claude-sonnet-4-5", subjects=[subject], env={}) as run:
        a1 = run.start_attempt("anthropic", "claude-sonnet-4-5")
        s1 = run.usage_stream(provider="anthropic", model="claude-sonnet-4-5", attempt_key=a1, turn_key="turn-1")
        s1.observe({"input_tokens": 10})
        s1.observe({"input_tokens": 15, "output_tokens": 4})
        a2 = run.start_attempt("anthropic", "claude-sonnet-4-5")
        s2 = run.usage_stream(provider="anthropic", model="claude-sonnet-4-5", attempt_key=a2, turn_key="turn-1")
        s2.observe({"input_tokens": 12, "output_tokens": 3})
        s2.observe({"input_tokens": 12, "output_tokens": 3, "cost_usd": 0.25}, final_receipt=True)
        run.emit("result", outcome="completed", duration_secs=1.0)
    return run


def test_runs_json_all_on_an_empty_home_prints_an_empty_array(home):
    home.mkdir()  # an existing home with no runs yet (a missing home is an error: test_hostile_input.py)
    res = invoke("runs", "--json", "--all", "--home", str(home))
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == "[]"
    assert json.loads(res.stdout) == []


def test_runs_json_lists_every_run_with_its_snapshot(home):
    a = golden_capture(home)
    b = golden_capture(home, subject="task:LOO-266")
    hand = rk.write_record(home, events=rk.golden_events(), term=rk.terminal("failed"))
    bad = rk.write_record(home, events=b"{broken\n")
    res = invoke("runs", "--json", "--all", "--home", str(home))
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    # the damaged record stays visible (issue 17: damage is seen, not hidden), as `unreadable`
    assert sorted(r["id"] for r in rows) == sorted([a.run_id, b.run_id, hand.name, bad.name])
    by_id = {r["id"]: r for r in rows}
    assert by_id[bad.name]["state"] == "unreadable" and by_id[bad.name]["outcome"] is None
    rows = [r for r in rows if r["id"] != bad.name]
    assert [r["started"] for r in rows] == sorted((r["started"] for r in rows), reverse=True)  # newest first
    for rid in (a.run_id, hand.name):
        u = by_id[rid]["usage"]
        assert (u["streams"], u["final_streams"], u["input_tokens"], u["output_tokens"], u["cost_usd"], u["gaps"]) == (
            2, 1, 27, 7, 0.25, 0)
        assert u["reasoning_tokens"] is None
    assert by_id[a.run_id]["outcome"] == "completed" and by_id[a.run_id]["state"] == "settled"
    assert by_id[hand.name]["outcome"] == "failed"
    assert by_id[b.run_id]["subjects"] == ["task:LOO-266"]
    assert by_id[hand.name]["started"] == "2026-03-08T06:30:00.000000Z"
    assert set(rows[0]) >= {"id", "parent_run_id", "repo", "worktree", "subjects", "skill", "outcome", "state",
                            "started", "ended", "usage", "evidence_gaps", "harness", "model", "surface", "host"}
    assert bad.name in res.stderr and "line 1" in res.stderr  # the damaged record is reported, not fatal


def test_runs_without_all_hides_old_settled_runs_but_never_unterminated_ones(home):
    recent = golden_capture(home)
    old_settled = rk.write_record(home, created_at="2020-01-01T00:00:00Z", term=rk.terminal())
    old_open = rk.write_record(home, created_at="2020-01-02T00:00:00Z")
    res = invoke("runs", "--json", "--home", str(home))
    assert res.exit_code == 0, res.output
    ids = [r["id"] for r in json.loads(res.stdout)]
    assert ids == [recent.run_id, old_open.name]
    assert old_settled.name not in ids


@pytest.mark.parametrize("how", ["bare-prefix", "run_-prefix", "full-id"])
def test_show_by_prefix_json(home, how):
    run = golden_capture(home)
    golden_capture(home)
    sel = {"bare-prefix": run.run_id[4:14], "run_-prefix": run.run_id[:14], "full-id": run.run_id}[how]
    res = invoke("show", sel, "--json", "--home", str(home))
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["id"] == run.run_id
    assert doc["usage"]["input_tokens"] == 27 and doc["usage"]["cost_usd"] == 0.25
    assert doc["evidence_gaps"] == 0 and doc["outcome"] == "completed"
    assert len(doc["streams"]) == 2
    assert {s["attempt_key"] for s in doc["streams"]} == {"attempt-1", "attempt-2"}
    assert [a["attempt_key"] for a in doc["attempts"]] == ["attempt-1", "attempt-2"]
    assert doc["subjects"] == ["task:LOO-265"]
    snap = read_run(run.path).to_dict()
    # the record's own figures, except the cost: show prints the report's (auto, with its
    # basis: issue 26), which is the record's reported cost plus what was estimated
    cost = ("cost_usd", "cost_basis", "cost_usd_known")
    assert {k: doc[k] for k in snap if k not in cost} == {k: v for k, v in snap.items() if k not in cost}
    rep = json.loads(invoke("report", "run", "--json", "--home", str(home)).stdout)
    row = next(r for r in rep["rows"] if r["key"] == run.run_id)
    assert [doc[k] for k in cost] == [row[k] for k in cost] and doc["cost_usd"] >= 0.25


def test_show_unknown_run_exits_1_with_error_and_hint(home):
    golden_capture(home)
    res = invoke("show", "zzzz", "--json", "--home", str(home))
    assert res.exit_code == 1
    assert res.stdout == ""
    assert "Error: Run zzzz was not found" in res.stderr
    assert "Hint:" in res.stderr and "ledger runs" in res.stderr


def test_show_ambiguous_and_empty_selectors_exit_1(home):
    rk.write_record(home, "run_abcd" + "0" * 28)
    rk.write_record(home, "run_abce" + "0" * 28)
    res = invoke("show", "abc", "--home", str(home))
    assert res.exit_code == 1 and "Error: Run prefix abc is ambiguous" in res.stderr and "Hint:" in res.stderr
    res = invoke("show", "  ", "--home", str(home))
    assert res.exit_code == 1 and "Error: Run id cannot be empty" in res.stderr


# --- 10,000 runs --------------------------------------------------------------------------

def write_many_runs(home: Path, n: int) -> set[str]:
    """n small settled runs, written directly in the exact record format (no fsync)."""
    ids = set()
    runs = home / "runs"
    for i in range(n):
        rid = rk.new_id()
        ids.add(rid)
        d = runs / rid[4:6] / rid
        os.makedirs(d, mode=0o700)
        m = rk.manifest(rid, created_at=f"2026-03-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
                        subjects=[{"selector": f"task:LOO-{i}", "source": "declared"}])
        with open(d / "manifest.json", "wb") as f:
            f.write(rk.pretty(m))
        with open(d / "events.jsonl", "wb") as f:
            f.write(rk.events_bytes(rk.golden_events()))
        with open(d / "terminal.json", "wb") as f:
            f.write(rk.pretty(rk.terminal()))
    return ids


MEASURE = textwrap.dedent("""
    import resource, subprocess, sys
    with open(sys.argv[1], "wb") as out:
        p = subprocess.run([sys.executable, "-m", "ledger", "runs", "--json", "--all", "--home", sys.argv[2]],
                           stdout=out, stderr=subprocess.PIPE)
    sys.stderr.buffer.write(p.stderr)
    print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
""")


def test_runs_json_all_over_10000_runs_prints_all_under_200mb(tmp_path):
    home = tmp_path / "home"
    t0 = time.monotonic()
    ids = write_many_runs(home, 10_000)
    t_gen = time.monotonic() - t0
    out = tmp_path / "runs.json"
    env = {k: v for k, v in os.environ.items() if k not in ("LEDGER_HOME", "LEDGER_DB")}
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", MEASURE, str(out), str(home)], capture_output=True, text=True,
                       env=env, cwd=REPO, timeout=600)
    t_cli = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    rc, maxrss_kb = map(int, p.stdout.split())
    assert rc == 0, p.stderr
    rows = json.loads(out.read_bytes())
    assert len(rows) == 10_000
    assert {r["id"] for r in rows} == ids
    assert all(r["usage"]["input_tokens"] == 27 and r["evidence_gaps"] == 0 for r in rows)
    peak_mb = maxrss_kb / 1024
    print(f"\n10,000 runs: generated in {t_gen:.1f}s, `ledger runs --json --all` {t_cli:.1f}s, peak RSS {peak_mb:.0f} MB")
    assert peak_mb < 200, f"peak RSS {peak_mb:.0f} MB"
