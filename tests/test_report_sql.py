"""docs/report.md's `ledger sql` examples answer like `ledger report` (run_costs_v, model_costs_v)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reporthelpers import CLAUDE_RESULT, claude_stream, cli, make, report_json

DOC = Path(__file__).resolve().parent.parent / "docs" / "report.md"


def _doc_queries() -> list[str]:
    text = DOC.read_text()
    block = text[text.index("## The same with `ledger sql`"):]
    return [re.sub(r"\s+", " ", q) for q in re.findall(r'ledger sql "(.*?)"', block, flags=re.S)]


def _sql(db_url: str, query: str) -> list[dict]:
    if db_url.startswith("postgresql"):
        query = query.replace("substr(created_at, 1, 10)", "created_at::date")
        query = query.replace("substr(spent_at, 1, 10)", "spent_at::date")
    res = cli("sql", query, "--db", db_url, "--json")
    assert res.exit_code == 0, (query, res.stdout, res.stderr)
    return json.loads(res.stdout)


def test_sql_examples_agree_with_the_report(home, db_url):
    make(home, "2026-03-08T10:00:00Z", [claude_stream()], subjects=["task:A"])
    make(home, "2026-03-08T11:00:00Z", [claude_stream(counters={"cost_usd": 0.5})], subjects=["task:A"],
         outcome="failed")
    make(home, "2026-03-09T11:00:00Z", [claude_stream(model="mystery-3", final=False, counters={"cost_usd": None})],
         model="mystery-3", subjects=["task:B"])
    daily, _ = report_json("daily", "--db", db_url, "--tz", "UTC")  # a report prices the runs
    per_day, spent, per_model, per_subject, top = (_sql(db_url, q) for q in _doc_queries())
    # cost spent per day: the report's own cost column, day for day
    assert [(str(r["day"])[:10], r["unknown_cost_rows"]) for r in spent] == [("2026-03-08", 0), ("2026-03-09", 1)]
    assert spent[0]["cost_usd"] == pytest.approx(daily["rows"][0]["cost_usd"])
    assert [(str(r["day"])[:10], r["runs"], r["unknown_cost_runs"]) for r in per_day] == [
        ("2026-03-08", 2, 0), ("2026-03-09", 1, 1)]
    assert per_day[0]["cost_usd"] == pytest.approx(daily["rows"][0]["cost_usd"])
    models = {r["model"]: r for r in per_model}
    assert models["claude-sonnet-4-5"]["runs"] == 2 and models["mystery-3"]["cost_usd"] is None
    assert models["claude-sonnet-4-5"]["input_tokens"] == 2 * CLAUDE_RESULT["input_tokens"]
    subjects = {r["selector"]: r for r in per_subject}
    assert subjects["task:A"]["runs"] == 2 and subjects["task:A"]["failed"] == 1
    assert subjects["task:A"]["cost_usd"] == pytest.approx(0.5 + CLAUDE_RESULT["cost_usd"])
    assert [r["cost_usd"] for r in top] == [0.5, CLAUDE_RESULT["cost_usd"]]
    assert {r["cost_basis"] for r in top} == {"reported"}


def test_sql_examples_agree_with_the_report_on_imported_sessions(home, tmp_path):
    """Sessions that span days (15-minute pieces in the report's tables): each recipe gives
    the report's own answer (issue 26; main: run_costs_v had each session's first 15 minutes)."""
    import claudehistory

    claudehistory.generate(tmp_path / "claude", sessions=12, seed=3)
    assert cli("import", "claude", "--from", str(tmp_path / "claude")).exit_code == 0
    make(home, "2026-01-10T10:00:00Z", [claude_stream()])
    daily, _ = report_json("daily", "--tz", "UTC")
    models, _ = report_json("model", "--tz", "UTC")
    runs, _ = report_json("run", "--tz", "UTC")
    queries = [q.replace("WHERE created_at >= '2026-03-01' ", "") for q in _doc_queries()]
    per_day, spent, per_model, _, top = (_sql("sqlite:///" + str(home / "index.sqlite"), q) for q in queries)
    assert {r["day"]: r["runs"] for r in per_day} == {r["key"]: r["runs"] for r in daily["rows"] if r["runs"]}
    assert sum(r["cost_usd"] for r in per_day) == pytest.approx(daily["totals"]["cost_usd"], abs=1e-9)
    assert {r["day"]: pytest.approx(r["cost_usd"], abs=1e-9) for r in spent} == {
        r["key"]: r["cost_usd"] for r in daily["rows"]}
    assert {r["model"]: (r["runs"], r["input_tokens"], pytest.approx(r["cost_usd"], abs=1e-9)) for r in per_model} == {
        r["key"]: (r["runs"], r["input_tokens"], r["cost_usd"]) for r in models["rows"]}
    assert [r["run_id"] for r in top] == [r["key"] for r in runs["rows"][:10]]
    assert [r["cost_usd"] for r in top] == [pytest.approx(r["cost_usd"], abs=1e-9) for r in runs["rows"][:10]]
