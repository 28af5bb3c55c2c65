"""`ledger report project` (issue 29): cost and usage per project, from the report facts.

ccusage 20.0.24's `claude daily --instances --json --offline --timezone UTC` on the
hazard-free history of tests/blockfixture.py is committed as test data; its project key is
the directory Claude Code files the transcripts under (the cwd, every non-alphanumeric `-`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import blockfixture
from ledger.records import RunCapture
from reporthelpers import claude_stream, cli, make

DATA = Path(__file__).resolve().parent / "data" / "ccusage" / "daily-instances-clean.json"


def _slug(path: str) -> str:
    return "".join(ch if ch.isascii() and ch.isalnum() else "-" for ch in path)


def _projects(*args: str) -> dict:
    res = cli("report", "project", *args, "--json")
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return json.loads(res.stdout)


def test_project_equals_ccusage_daily_instances(home, tmp_path):
    blockfixture.write(tmp_path / "claude")
    assert cli("import", "claude", "--from", str(tmp_path / "claude")).exit_code == 0
    ours = {_slug(r["project"]): r for r in _projects("--tz", "UTC")["rows"]}
    theirs = json.loads(DATA.read_text())["projects"]
    assert set(ours) == set(theirs) == {"-work-proj0", "-work-proj1"}
    for name, days in theirs.items():
        assert [(d["day"], d["input_tokens"], d["output_tokens"], d["cache_write_tokens"], d["cache_read_tokens"],
                 d["total_tokens"], d["cost_usd"]) for d in ours[name]["days"]] == [
            (d["date"], d["inputTokens"], d["outputTokens"], d["cacheCreationTokens"], d["cacheReadTokens"],
             d["totalTokens"], d["totalCost"]) for d in days]
        assert ours[name]["total_tokens"] == sum(d["totalTokens"] for d in days)
        assert ours[name]["cost_basis"] == "reported" and ours[name]["runs"] == 0
    assert ours["-work-proj0"]["sessions"] == 3 and ours["-work-proj0"]["last_activity"] == "2026-01-13T05:15:00Z"


def test_records_by_worktree_else_cwd_and_sessions_alike(home, tmp_path):
    cap = RunCapture(home, harness="claude", model="claude-sonnet-4-5", worktree="/src/app", created_at="2026-03-02T10:00:00Z")
    st = cap.usage_stream(provider="anthropic", model="claude-sonnet-4-5", attempt_key=cap.start_attempt("anthropic", "claude-sonnet-4-5"),
                          turn_key="t1")
    st.observe(dict(claude_stream()["counters"]), final_receipt=True)
    cap.settle("completed")
    make(home, "2026-03-02T11:00:00Z", [claude_stream()])  # no worktree: the cwd it was recorded in
    rows = {r["project"]: r for r in _projects()["rows"]}
    assert rows["/src/app"]["runs"] == 1 and rows["/src/app"]["total_tokens"] == 3396
    assert rows["/src/app"]["cost_usd"] == pytest.approx(0.0027165)
    assert rows[os.getcwd()]["runs"] == 1 and rows[os.getcwd()]["sessions"] == 0
    res = cli("report", "project")
    assert res.exit_code == 0 and "/src/app" in res.stdout
    res = cli("report", "project", "--csv")
    assert res.stdout.splitlines()[0].startswith("project,runs,sessions,input_tokens")
