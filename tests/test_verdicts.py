"""Verdicts (issue 14): the one rule (ledger.records.verdict), tool result statuses from a
recorded MCP stream, the evaluation view's new columns against hand-counted values on a
generated home (SQLite and PostgreSQL), and an index at 0003 upgraded to 0004 in place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from indexhelpers import cli
from launchkit import replay, stream_bytes
from ledger.index import db as dbmod
from ledger.records import RunCapture, read_run
from ledger.records.verdict import judge, tool_status
from reporthelpers import report_json

SETTLED = dict(state="settled", evidence_gaps=0, skill_invoked=None)


@pytest.mark.parametrize("kw, want", [
    (dict(state="running", outcome=None, result=None, evidence_gaps=0, skill_invoked=None), (None, None)),
    (dict(state="abandoned", outcome=None, result=None, evidence_gaps=0, skill_invoked=None), (False, "abandoned")),
    (dict(SETTLED, outcome=None, result=None), (False, "evidence-unverified")),
    # ledger's stops come before everything the run itself did
    (dict(SETTLED, outcome="interrupted", result={"stop_reason": "timeout", "evidence": "unverifiable"}),
     (False, "timeout")),
    (dict(SETTLED, outcome="interrupted", result={"stop_reason": "max_cost"}), (False, "max-cost")),
    (dict(SETTLED, outcome="interrupted", result={"stop_reason": "signal", "stopped_by": "signal:SIGINT"}),
     (False, "cancelled")),
    (dict(SETTLED, outcome="interrupted", result=None), (False, "cancelled")),
    (dict(state="settled", outcome="failed", result={"error": "boom", "evidence": "unverifiable"}, evidence_gaps=2,
          skill_invoked=False), (False, "session-error")),
    (dict(state="settled", outcome="completed", result={"evidence": "unverifiable", "evidence_reason": "no result"},
          evidence_gaps=0, skill_invoked=False), (False, "evidence-unverified")),
    (dict(state="settled", outcome="completed", result=None, evidence_gaps=1, skill_invoked=False),
     (False, "evidence-unverified")),
    (dict(state="settled", outcome="completed", result={"expected_skill": "deploy"}, evidence_gaps=0,
          skill_invoked=False), (False, "skill-not-invoked")),
    (dict(state="settled", outcome="completed", result={"evidence": "verified"}, evidence_gaps=0,
          skill_invoked=True), (True, None)),
    (dict(SETTLED, outcome="completed", result=None), (True, None)),
])
def test_the_rule_first_match_wins(kw, want):
    v = judge(**kw)
    assert (v.ok, v.error_kind) == want
    assert (v.error_detail is None) == (want[1] is None)


def test_rule_details():
    assert judge(**dict(SETTLED, outcome="failed", result={"error": "API Error: 500\n  overloaded"})).error_detail \
        == "API Error: 500 overloaded"
    assert judge(**dict(SETTLED, outcome="failed", result={"exit_code": 3})).error_detail \
        == "the run failed (exit code 3)"
    assert judge(state="settled", outcome="completed", result={"expected_skill": "deploy"}, evidence_gaps=0,
                 skill_invoked=False).error_detail == "expected skill deploy was not invoked"
    assert len(judge(**dict(SETTLED, outcome="failed", result={"error": "x" * 500})).error_detail) == 200


@pytest.mark.parametrize("name, is_error, content, want", [
    ("Bash", True, "Exit code 3", "error"),
    ("mcp__gn__query", True, '{"error": "x"}', "error"),
    ("mcp__gn__query", False, '{"error": "no such repo"}', "semantic-error"),
    ("mcp__gn__query", False, [{"type": "text", "text": '  {"error": "stale"}'}], "semantic-error"),
    ("mcp__gn__query", False, [{"type": "text", "text": "Error: index is stale"}], "semantic-error"),
    ("mcp__gn__query", False, '{"error": {"code": 1}}', "ok"),  # not a string `error`
    ("mcp__gn__query", False, '{"result": "error: in a field"}', "ok"),
    ("mcp__gn__query", False, [{"type": "image"}], "ok"),
    ("Bash", False, "error: printed by the command", "ok"),  # only MCP tools carry envelopes
])
def test_tool_status(name, is_error, content, want):
    assert tool_status(name, is_error, content) == want


def test_recorded_mcp_stream_gives_semantic_errors(home, tmp_path):
    """tests/data/streams/claude-mcp-error-envelope.jsonl (real Claude Code 2.1.328 with a real
    stdio MCP server) replayed through `ledger run`: two error envelopes, one plain answer."""
    result, snap = replay(home, tmp_path, "claude", stream_bytes("claude-mcp-error-envelope.jsonl"))
    assert result.outcome == "completed" and result.evidence == "verified"
    assert snap.tool_uses == {"mcp__errsrv__lookup": 3}
    assert snap.tool_status == {"mcp__errsrv__lookup": [1, 0, 2]}
    assert (snap.ok, snap.error_kind) == (True, None)


# --------------------------------------------------------------------------------------
# a generated home: every run's verdict facts written with the real writer


def _run(home: Path, *, skill: str, subjects: list[str], outcome: str | None, result: dict,
         tools: list[tuple[str, str | None]], created_at: str, cost: float | None = 0.5,
         parent: RunCapture | None = None) -> str:
    env = {"LEDGER_RUN_ID": parent.run_id, "LEDGER_RUN_DIR": str(parent.path)} if parent else {}
    cap = RunCapture(home, harness="claude", model="claude-sonnet-4-5", subjects=subjects, skill=skill,
                     created_at=created_at, env=env)
    attempt = cap.start_attempt("anthropic", "claude-sonnet-4-5")
    usage = {"input_tokens": 10, "output_tokens": 2} | ({"cost_usd": cost} if cost is not None else {})
    cap.usage_stream(provider="anthropic", model="claude-sonnet-4-5", attempt_key=attempt,
                     turn_key="turn-1").observe(usage, final_receipt=cost is not None)
    for i, (name, status) in enumerate(tools):
        cap.emit("tool_use", name=name, summary="x")
        if status is not None:
            cap.emit("conversation", event={"type": "tool_result", "turn_id": "turn-1", "tool_use_id": f"t{i}",
                                            "name": name, "status": status})
    if outcome is None:
        cap.detach()
        return cap.run_id
    cap.emit("result", outcome=outcome, duration_secs=1.0, **result)
    cap.settle(outcome)
    _CAPS[cap.run_id] = cap
    return cap.run_id


_CAPS: dict[str, RunCapture] = {}


def generated_home(home: Path) -> dict[str, str]:
    """Six runs; the expected verdicts and counts are written out by hand in the tests."""
    t = "2026-03-08T10:0{}:00Z"
    return {
        "r1": _run(home, skill="deploy", subjects=["task:A"], outcome="completed", created_at=t.format(1),
                   result={"evidence": "verified", "expected_skill": "deploy", "skill_invoked": True},
                   tools=[("Skill", "ok"), ("Bash", "error")]),
        "r2": _run(home, skill="deploy", subjects=["task:A"], outcome="completed", created_at=t.format(2),
                   result={"evidence": "verified", "expected_skill": "deploy", "skill_invoked": False}, tools=[]),
        "r3": _run(home, skill="deploy", subjects=["task:A", "task:B"], outcome="failed", created_at=t.format(3),
                   result={"evidence": "verified", "error": "boom", "expected_skill": "deploy",
                           "skill_invoked": True},
                   tools=[("mcp__gn__query", "semantic-error"), ("Bash", None)]),
        "r4": _run(home, skill="review", subjects=["task:B"], outcome="completed", created_at=t.format(4),
                   result={"evidence": "verified"}, tools=[("Read", "ok")] * 3),
        "r5": _run(home, skill="review", subjects=["task:B"], outcome="interrupted", created_at=t.format(5),
                   result={"evidence": "unverifiable", "stop_reason": "timeout"}, tools=[]),
        "r6": _run(home, skill="review", subjects=["task:B"], outcome=None, created_at=t.format(6),
                   result={}, tools=[("Bash", None)]),
    }


VERDICTS = {"r1": (True, None), "r2": (False, "skill-not-invoked"), "r3": (False, "session-error"),
            "r4": (True, None), "r5": (False, "timeout"), "r6": (None, None)}


def _eval(row: dict) -> tuple:
    return tuple(row[k] for k in ("runs", "judged_runs", "ok_runs", "ok_rate", "skill_expected_runs",
                                  "skill_invoked_runs", "skill_invoked_rate", "tool_calls", "tool_errors",
                                  "tool_error_rate"))


def test_evaluation_view_equals_hand_counts(home, db_url):
    ids = generated_home(home)
    runs = {r["id"]: r for r in json.loads(cli("runs", "--json", "--all", "--db", db_url).stdout)}
    assert {k: (runs[v]["ok"], runs[v]["error_kind"]) for k, v in ids.items()} == VERDICTS
    # the records path says the same
    for k, rid in ids.items():
        snap = read_run(runs[rid]["path"] if "path" in runs[rid] else next(home.glob(f"runs/*/{rid}")))
        assert (snap.ok, snap.error_kind) == VERDICTS[k]
    doc, _ = report_json("skill", "--db", db_url)
    rows = {r["key"]: _eval(r) for r in doc["rows"]}
    # deploy: r1 ok, r2 skill-not-invoked, r3 session-error; skills expected 3, invoked 2 (r1, r3);
    # tool uses 2 + 0 + 2, errors: r1's Bash error + r3's semantic error
    assert rows["deploy"] == (3, 3, 1, 0.333333, 3, 2, 0.666667, 4, 2, 0.5)
    # review: r6 is running (no verdict); no skill expected; tool uses 3 + 0 + 1, no error
    assert rows["review"] == (3, 2, 1, 0.5, 0, 0, None, 4, 0, 0.0)
    assert _eval(doc["totals"]) == (6, 5, 2, 0.4, 3, 2, 0.666667, 8, 2, 0.25)
    doc, _ = report_json("subject", "--db", db_url)
    rows = {r["key"]: _eval(r) for r in doc["rows"]}
    assert rows["task:A"] == (3, 3, 1, 0.333333, 3, 2, 0.666667, 4, 2, 0.5)  # r1 r2 r3
    # r3 (its second subject), r4, r5, r6
    assert rows["task:B"] == (4, 3, 1, 0.333333, 1, 1, 1.0, 6, 1, 0.166667)
    assert _eval(doc["totals"]) == (6, 5, 2, 0.4, 3, 2, 0.666667, 8, 2, 0.25)  # every run once
    # the same counts in SQL
    q = cli("sql", "SELECT count(*) AS n, sum(CASE WHEN ok THEN 1 ELSE 0 END) AS ok, sum(tool_calls) AS calls, "
            "sum(tool_errors + tool_semantic_errors) AS errors, sum(tool_unknown) AS unknown FROM runs_v",
            "--json", "--db", db_url)
    assert q.exit_code == 0, q.stderr
    assert json.loads(q.stdout) == [{"n": 6, "ok": 2, "calls": 8, "errors": 2, "unknown": 2}]
    q = cli("sql", "SELECT tool_name, sum(uses) AS uses, sum(ok) AS ok, sum(errors) AS errors, "
            "sum(semantic_errors) AS sem, sum(unknown) AS unknown FROM tool_uses_v GROUP BY tool_name "
            "ORDER BY tool_name", "--json", "--db", db_url)
    assert json.loads(q.stdout) == [
        {"tool_name": "Bash", "uses": 3, "ok": 0, "errors": 1, "sem": 0, "unknown": 2},
        {"tool_name": "Read", "uses": 3, "ok": 3, "errors": 0, "sem": 0, "unknown": 0},
        {"tool_name": "Skill", "uses": 1, "ok": 1, "errors": 0, "sem": 0, "unknown": 0},
        {"tool_name": "mcp__gn__query", "uses": 1, "ok": 0, "errors": 0, "sem": 1, "unknown": 0}]


def test_index_at_0003_is_upgraded_and_every_record_reread(home, db_url):
    from alembic import command

    ids = generated_home(home)
    assert cli("index", "--db", db_url).exit_code == 0
    before, _ = report_json("skill", "--db", db_url)
    eng = dbmod.engine(db_url, mode="write")
    try:
        with eng.connect() as conn:
            with conn.begin():
                command.downgrade(dbmod.alembic_config(connection=conn), "0003_partial_costs")
            with conn.begin():
                assert dbmod.current_revision(conn) == "0003_partial_costs"
                assert "ok" not in {c["name"] for c in sa.inspect(conn).get_columns("runs")}
            with conn.begin():
                dbmod.upgrade(conn)
            with conn.begin():
                # the columns are there, the verdicts not yet: the records must be read again
                oks = conn.execute(sa.text("SELECT ok, error_kind FROM runs")).fetchall()
                assert len(oks) == 6 and all(r == (None, None) for r in oks)
                assert conn.execute(sa.text("SELECT count(*) FROM index_cursors WHERE fold_state IS NULL")).scalar() == 6
    finally:
        eng.dispose()
    res = cli("index", "--db", db_url, "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["rewritten"] == 0  # a re-read, not a rewrite
    runs = {r["id"]: r for r in json.loads(cli("runs", "--json", "--all", "--db", db_url).stdout)}
    assert {k: (runs[v]["ok"], runs[v]["error_kind"]) for k, v in ids.items()} == VERDICTS
    assert all(r["evidence_gaps"] == 0 for r in runs.values())
    after, _ = report_json("skill", "--db", db_url)  # the facts were rebuilt
    assert after["rows"] == before["rows"] and after["totals"] == before["totals"]


def test_runs_and_show_say_the_verdict(home, tmp_path):
    import os
    import subprocess
    import sys

    from launchkit import REPO

    ids = generated_home(home)
    env = {**os.environ, "COLUMNS": "120", "LEDGER_HOME": str(home), "PYTHONPATH": str(REPO)}

    def ledger(*args: str) -> str:
        p = subprocess.run([sys.executable, "-m", "ledger", *args], env=env, capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, p.stderr
        return p.stdout

    table = {line.split()[0]: line for line in ledger("runs", "--all").splitlines() if line.startswith(" run_")
             or line.startswith("run_")}
    cell = {k: table[ids[k][:12]] for k in ids}
    assert "completed · skill-not-invoked" in cell["r2"] and "interrupted · timeout" in cell["r5"]
    assert " · " not in cell["r1"] and " · " not in cell["r3"]  # ok / failed: the outcome says it
    shown = ledger("show", ids["r2"])
    assert "verdict: not ok: skill-not-invoked (expected skill deploy was not invoked)" in shown
    shown = ledger("show", ids["r3"])
    assert "verdict: not ok: session-error (boom)" in shown
    assert "tool results: Bash unknown ×1; mcp__gn__query semantic-error ×1" in shown
    assert "verdict: ok" in ledger("show", ids["r1"])
    assert "verdict: none yet" in ledger("show", ids["r6"])
    env["COLUMNS"] = "200"
    report = {line.split()[0]: line.split() for line in ledger("report", "skill").splitlines() if line.strip()}
    assert report["skill"][-8:] == ["ok", "invoked", "tool", "err", "failed", "intr.", "aband.", "unverified"]
    # the rates as whole percentages (r6 is running: no verdict yet)
    assert report["deploy"][-7:-3] == ["33%", "67%", "50%", "1"]
    assert report["review"][-7:-3] == ["50%", "—", "0%", "0"]
    assert report["Total"][-7:-3] == ["40%", "67%", "25%", "1"]
    env["COLUMNS"] = "120"
    csv_lines = ledger("runs", "--all", "--csv").splitlines()
    assert csv_lines[0].endswith(",subjects,ok,error_kind,error_detail,skill_invoked,exit_code,command")  # (issue 12)


def test_report_task_combines_runs_by_the_rules(home, db_url):
    """Tasks: runs sharing their first subject, and a parent with its child. Hand-counted."""
    ids = generated_home(home)
    parent = _run(home, skill="review", subjects=[], outcome="completed", created_at="2026-03-08T11:00:00Z",
                  result={"evidence": "verified"}, tools=[("Bash", "ok")])
    child = _run(home, skill="deploy", subjects=["task:C"], outcome="failed", created_at="2026-03-08T11:01:00Z",
                 result={"evidence": "verified", "error": "child broke", "expected_skill": "deploy",
                         "skill_invoked": False},
                 tools=[("Bash", "error")], cost=None, parent=_CAPS[parent])
    assert read_run(next(home.glob(f"runs/*/{child}"))).parent_run_id == parent
    doc, _ = report_json("task", "--cost", "reported", "--db", db_url)
    rows = {r["key"]: r for r in doc["rows"]}
    assert set(rows) == {"task:A", "task:B", parent}

    def pick(r):
        return (r["runs"], r["cost_usd"], r["cost_usd_known"], r["ok"], r["error_kind"], r["error_detail"],
                r["skill_invoked"], r["tool_calls"], r["tool_errors"], r["started"])

    # r1 ok, r2 skill-not-invoked (the first error), r3 session-error; skills True, False, True
    assert pick(rows["task:A"]) == (3, 1.5, 1.5, False, "skill-not-invoked", "expected skill deploy was not invoked",
                                    False, 4, 2, "2026-03-08T10:01:00Z")
    # r4 ok, r5 timeout, r6 running (no verdict): not ok all the same; no skill expected
    assert pick(rows["task:B"]) == (3, 1.5, 1.5, False, "timeout", "stopped by ledger run --timeout", None, 4, 0,
                                    "2026-03-08T10:04:00Z")
    # the child's cost is unknown (no provider cost): so is the task's; its known part is kept apart
    assert pick(rows[parent]) == (2, None, 0.5, False, "session-error", "child broke", False, 2, 1,
                                  "2026-03-08T11:00:00Z")
    assert doc["totals"]["runs"] == 8
    assert ids["r1"] != parent


def test_verdict_follows_liveness_running_then_abandoned(home, db_url):
    """A running run has no verdict; once its launcher is gone it is `abandoned`: in
    `ledger runs` (recomputed when read) and in the stored row (the next pass's re-check)."""
    import subprocess
    import sys

    from ledger.index.ops import index_homes

    code = ("import sys; from ledger.records import publish_run; m = publish_run(sys.argv[1], harness='command');"
            "print(m.run_id, flush=True); sys.stdin.read()")
    child = subprocess.Popen([sys.executable, "-c", code, str(home)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    run_id = child.stdout.readline().decode().strip()

    def stored():
        q = cli("sql", f"SELECT ok, error_kind FROM runs_v WHERE run_id = '{run_id}'", "--json", "--db", db_url)
        return json.loads(q.stdout)

    try:
        index_homes([home], db_url)
        rows = json.loads(cli("runs", "--json", "--db", db_url).stdout)
        assert [(r["ok"], r["error_kind"]) for r in rows if r["id"] == run_id] == [(None, None)]
        assert stored() == [{"ok": None, "error_kind": None}]
    finally:
        child.stdin.close()
        child.wait()
    rows = json.loads(cli("runs", "--json", "--db", db_url).stdout)
    assert [(r["ok"], r["error_kind"]) for r in rows if r["id"] == run_id] == [(False, "abandoned")]
    assert stored() == [{"ok": False, "error_kind": "abandoned"}]


def test_report_task_total_sums_the_tool_counts_of_every_task(home, db_url, monkeypatch):
    """Issue 34: the Total row said `tool err 0/0` under rows of `2/4` and `1/2`."""
    generated_home(home)
    parent = _run(home, skill="review", subjects=[], outcome="completed", created_at="2026-03-08T11:00:00Z",
                  result={"evidence": "verified"}, tools=[("Bash", "ok")])
    _run(home, skill="deploy", subjects=["task:C"], outcome="failed", created_at="2026-03-08T11:01:00Z",
         result={"evidence": "verified", "error": "child broke"}, tools=[("Bash", "error")], parent=_CAPS[parent])
    doc, _ = report_json("task", "--db", db_url)
    assert [(r["tool_errors"], r["tool_calls"]) for r in sorted(doc["rows"], key=lambda r: r["key"])] == [
        (1, 2), (2, 4), (0, 4)]  # (the parent's task, task:A, task:B)
    assert (doc["totals"]["tool_errors"], doc["totals"]["tool_calls"]) == (3, 10)
    doc, _ = report_json("task", "--db", db_url, "--limit", "1")  # the totals cover every task
    assert (doc["totals"]["tool_errors"], doc["totals"]["tool_calls"]) == (3, 10)
    monkeypatch.setenv("COLUMNS", "240")
    res = cli("report", "task", "--db", db_url)
    total = next(line for line in res.stdout.splitlines() if line.strip().startswith("Total"))
    assert total.rstrip().endswith(" 3/10"), res.stdout
