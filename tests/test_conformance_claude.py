"""ledger on what the real Claude Code 2.1.328 wrote (issue 25): the committed captures under
tests/data/captures/claude/ (made by scripts/capture_claude.py against tests/mockprovider.py,
see its README) imported with `ledger import claude --from`, and every token counter and the
cost (auto) per model, per UTC day and per session compared with the truth (what the mock
served), on SQLite and PostgreSQL.

The truth counts every response served except the `max_tokens: 1` probe calls the client
sends on `/model` (model_tui): no transcript line and no `cost-state` holds them, so no log
can count them (not knowable). Everything else is counted, including the `/compact` calls
(compact), which no assistant line shows: only the next `cost-state`'s `modelUsage` holds them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ledger.cli.app import app

# (LEDGER_CLAUDE_CAPTURES: another directory of captures, e.g. held-out ones, see capturekit)
CAPTURES = Path(os.environ.get("LEDGER_CLAUDE_CAPTURES") or Path(__file__).parent / "data" / "captures" / "claude")
SCENARIOS = sorted(p.name for p in CAPTURES.iterdir() if (p / "truth.json").exists())
TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
SPLIT = ("cache_write_5m_tokens", "cache_write_1h_tokens")
runner = CliRunner()


def cli(*args: str) -> Any:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return res


def counters(u: dict[str, Any]) -> dict[str, int]:
    cc = u.get("cache_creation") or {}
    return {"input_tokens": u["input_tokens"], "output_tokens": u["output_tokens"],
            "cache_read_tokens": u["cache_read_input_tokens"], "cache_write_tokens": u["cache_creation_input_tokens"],
            "cache_write_5m_tokens": cc.get("ephemeral_5m_input_tokens", u["cache_creation_input_tokens"]),
            "cache_write_1h_tokens": cc.get("ephemeral_1h_input_tokens", 0)}


def knowable(truth: dict[str, Any]) -> list[dict[str, Any]]:
    """The responses a log can count: all but the `max_tokens: 1` probes."""
    return [r for r in truth["responses"] if r["max_tokens"] != 1]


def expected(truth: dict[str, Any], key: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for r in knowable(truth):
        k = {"day": r["time"][:10], "session": r["session"], "model": r["model"]}[key]
        acc = out.setdefault(k, dict.fromkeys((*TOKENS, *SPLIT, "cost_usd"), 0))
        for c, v in counters(r["usage"]).items():
            acc[c] += v
        assert r["cost_usd"] is not None, r  # (every knowable response has a truth cost)
        acc["cost_usd"] += r["cost_usd"]
    return out


def report(db: str, *args: str) -> dict[str, Any]:
    return json.loads(cli("report", *args, "--tz", "UTC", "--json", "--db", db).stdout)


def check(got: dict[str, dict[str, Any]], want: dict[str, dict[str, float]], what: str,
          fields: tuple[str, ...] = TOKENS) -> None:
    assert set(got) == set(want), (what, sorted(got), sorted(want))
    for k, w in want.items():
        for c in fields:
            assert got[k][c] == w[c], (what, k, c, got[k][c], w[c])
        assert got[k]["cost_usd"] == pytest.approx(w["cost_usd"], abs=1e-9), (what, k, got[k]["cost_usd"], w)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_capture_reports_equal_the_truth(home, db_url, scenario):
    truth = json.loads((CAPTURES / scenario / "truth.json").read_text())
    cli("import", "claude", "--from", str(CAPTURES / scenario), "--json")

    daily = {r["key"]: r for r in report(db_url, "daily")["rows"]}
    check(daily, expected(truth, "day"), "day")
    sessions = {r["key"]: r for r in report(db_url, "session")["rows"]}
    check(sessions, expected(truth, "session"), "session")
    # per model, from the facts (every stream is one model's; the 5m/1h split kept there)
    rows = json.loads(cli("sql", "--json", "--db", db_url,
                          "SELECT model, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,"
                          " sum(cache_read_tokens) AS cache_read_tokens, sum(cache_write_tokens) AS cache_write_tokens,"
                          " sum(cache_write_5m_tokens) AS cache_write_5m_tokens,"
                          " sum(cache_write_1h_tokens) AS cache_write_1h_tokens,"
                          " sum(CASE WHEN final_receipt THEN cost_usd ELSE est_cost_usd END) AS cost_usd"
                          " FROM usage_streams GROUP BY model").stdout)
    check({r["model"]: r for r in rows}, expected(truth, "model"), "model (facts)", TOKENS + SPLIT)
    # and the report's own per-model figures (`--breakdown`: by the model that served them)
    totals = {m["model"]: m for m in report(db_url, "daily", "--breakdown")["totals"]["models"]}
    check(totals, expected(truth, "model"), "model (daily --breakdown)")
