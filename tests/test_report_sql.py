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
    per_day, per_model, per_subject, top = (_sql(db_url, q) for q in _doc_queries())
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
