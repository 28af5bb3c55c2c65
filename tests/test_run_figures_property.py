"""Acceptance of issue 26 (the views half): on generated homes that mix run records
(tests/reporthelpers.py, the real writer) and imported Claude Code sessions
(tests/claudehistory.py), several days each, several models, unpriced models, every view
gives a run the same figures:

- for every report kind, `--limit N` is the first N rows of the whole report (same totals);
- the documented views' sums are the report's totals (run_costs_v, model_costs_v);
- runs per day are the same in `report daily`, `ledger runs --json` and SQL (runs_v);
- each run's figures are the same in `runs --json`, `show --json`, `report run --json` and
  the HTML page's data.

Seeded random homes (bounded for CI: LEDGER_PROPERTY_SEEDS, default 3 seeds).
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import claudehistory
from reporthelpers import cli, make, make_abandoned, report_json

from ledger.report.kinds import KINDS

SEEDS = range(int(os.environ.get("LEDGER_PROPERTY_SEEDS", "3")))
MODELS = ("claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1", "mystery-7")  # (the last has no price)
T0 = datetime(2026, 1, 9, 6, 0, tzinfo=timezone.utc)  # the sessions' days (claudehistory.T0)


def ok(*args: str) -> Any:
    res = cli(*args)
    assert res.exit_code == 0, (args, res.stdout, res.stderr)
    return res


def _counters(rng: random.Random, cost: bool) -> dict[str, Any]:
    c = {"input_tokens": rng.randint(1, 5000), "output_tokens": rng.randint(1, 3000),
         "cache_read_tokens": rng.choice([0, rng.randint(1, 90_000)]),
         "cache_write_tokens": rng.choice([0, rng.randint(1, 20_000)])}
    c["cost_usd"] = round(rng.uniform(0.0001, 2.0), 6) if cost else None
    return c


def build_home(home: Path, tmp: Path, seed: int) -> None:
    rng = random.Random(seed)
    claudehistory.generate(tmp / "claude", sessions=rng.randint(5, 9), seed=seed)
    ok("import", "claude", "--from", str(tmp / "claude"))
    for _ in range(rng.randint(8, 14)):
        at = T0 + timedelta(days=rng.randint(0, 4), minutes=rng.randint(0, 1200), seconds=rng.randint(0, 59))
        created = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        kind = rng.random()
        if kind < 0.1:
            make_abandoned(home, created)
            continue
        if kind < 0.18:  # a plain command: no usage can exist
            make(home, created, [], harness="command", model=None)
            continue
        model = rng.choice(MODELS)
        streams = []
        for m in [model] + ([rng.choice(MODELS)] if rng.random() < 0.4 else []):  # a subagent on another model
            final = m != "mystery-7" and rng.random() < 0.6
            streams.append({"provider": "anthropic", "model": m, "counters": _counters(rng, final), "final": final})
        if rng.random() < 0.1:
            streams = []  # an agent run that reported no usage
        make(home, created, streams, model=model if rng.random() < 0.7 else None,
             outcome=rng.choice(["completed", "completed", "failed", "interrupted"]),
             subjects=rng.choice([(), ("task:A",), ("task:B", "task:A")]), skill=rng.choice([None, "fix", "review"]),
             ended_at=(at + timedelta(seconds=rng.randint(1, 5000))).strftime("%Y-%m-%dT%H:%M:%SZ"))


def _day(column: str) -> str:
    """A timestamp column's UTC day as text, in the dialect of the index (docs/report.md)."""
    if os.environ.get("LEDGER_DB", "").startswith("postgresql"):
        return f"to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
    return f"substr({column}, 1, 10)"


def _sql(query: str) -> list[dict[str, Any]]:
    return json.loads(ok("sql", query, "--json").stdout)


def _epoch(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 1e-9


# every seed on SQLite, the first on the real PostgreSQL server too (the views and the SQL
# recipes are the same text on both: a dialect difference would show here)
CASES = [("sqlite", s) for s in SEEDS] + [("postgresql", s) for s in SEEDS[:1]]


@pytest.mark.parametrize(("backend", "seed"), CASES, ids=[f"{b}-{s}" for b, s in CASES])
def test_every_view_gives_a_run_the_same_figures(home, tmp_path, monkeypatch, request, backend, seed):
    if backend == "postgresql":
        monkeypatch.setenv("LEDGER_DB", request.getfixturevalue("pg_url"))
    build_home(home, tmp_path, seed)
    ok("report")  # (a first report prices the runs: the views read the prices)

    # --limit N is the first N rows of the whole report, with the same totals
    for kind in KINDS:
        for extra in ((), ("--breakdown",)):
            full, _ = report_json(kind, "--tz", "UTC", *extra)
            assert full["rows"], kind
            for n in (1, 2, 5):
                top, _ = report_json(kind, "--tz", "UTC", "--limit", str(n), *extra)
                assert top["rows"] == full["rows"][:n], (kind, extra, n)
                assert top["totals"] == full["totals"], (kind, extra, n)
            # no view counts pieces: a group never has more unknown-cost runs than cost-bearing runs
            for row in full["rows"]:
                if kind not in ("daily", "weekly", "monthly"):  # (a day holds the spend of runs started earlier)
                    assert row["unmeasured_cost_runs"] <= row["runs"], (kind, row["key"])
                for m in row.get("models", ()):
                    assert m["unmeasured_cost_runs"] <= m["runs"], (kind, row["key"], m["model"])
            t = full["totals"]
            assert t["unmeasured_cost_runs"] <= t["runs"], kind

    run_doc, _ = report_json("run", "--tz", "UTC")
    totals = run_doc["totals"]
    rows = {r["key"]: r for r in run_doc["rows"]}

    # the documented views' sums are the report's totals
    costs = _sql("SELECT run_id, created_at, cost_usd, cost_basis FROM run_costs_v")
    assert len(costs) == totals["runs"] == len(rows)
    for r in costs:
        want = rows[r["run_id"]]
        assert _close(r["cost_usd"], want["cost_usd"]), r
        assert r["cost_basis"] == (want["cost_basis"] if want["cost_basis"] in ("reported", "estimated", "mixed")
                                   else "unknown"), r
    known = [r["cost_usd"] for r in costs if r["cost_usd"] is not None]
    assert _close(sum(known), sum(r["cost_usd"] for r in rows.values() if r["cost_usd"] is not None))
    if totals["cost_usd"] is not None:
        assert _close(sum(known), totals["cost_usd"])
    per_model = _sql("SELECT model, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, "
                     "sum(cost_usd) AS cost_usd, count(*) - count(cost_usd) AS unknown, "
                     "count(DISTINCT run_id) AS runs FROM model_costs_v GROUP BY model")
    models, _ = report_json("model", "--tz", "UTC")
    by_model = {r["key"]: r for r in models["rows"]}
    for r in per_model:
        want = by_model[r["model"]]
        assert (r["input_tokens"], r["output_tokens"], r["runs"]) == (want["input_tokens"], want["output_tokens"],
                                                                      want["runs"]), r
        if not r["unknown"] and r["model"] is not None:
            assert _close(r["cost_usd"], want["cost_usd"]), r
    for name in ("input_tokens", "output_tokens"):
        assert sum(r[name] or 0 for r in per_model) == (totals[name] or 0)
    daily, _ = report_json("daily", "--tz", "UTC")
    spent = {r["day"]: r for r in _sql(f"SELECT {_day('spent_at')} AS day, sum(cost_usd) AS cost_usd, "
                                       "count(*) - count(cost_usd) AS unknown FROM model_costs_v GROUP BY 1")}
    for row in daily["rows"]:
        day = spent.get(row["key"])
        if day is not None and not day["unknown"] and row["cost_usd"] is not None:
            assert _close(day["cost_usd"], row["cost_usd"]), row["key"]

    # runs per day: report daily, ledger runs --json, SQL
    listed = json.loads(ok("runs", "--all", "--json").stdout)
    by_day_runs = Counter(d["started"][:10] for d in listed)
    by_day_sql = {r["day"]: r["runs"] for r in _sql(f"SELECT {_day('created_at')} AS day, count(*) AS runs "
                                                    "FROM runs_v GROUP BY 1")}
    by_day_report = {r["key"]: r["runs"] for r in daily["rows"] if r["runs"]}
    assert by_day_report == dict(by_day_runs) == by_day_sql

    # each run's figures: runs --json, show --json, report run --json, the HTML page's data
    page = tmp_path / "page.html"
    ok("report", "run", "--tz", "UTC", "--html", str(page))
    doc = _page_data(page)
    assert doc["runs"]["rows"] == run_doc["rows"][:len(doc["runs"]["rows"])]
    in_page = {r["key"]: r for r in doc["report"]["rows"]}
    assert len(in_page) == min(len(rows), 100)
    assert {d["id"] for d in listed} == set(rows)
    for d in listed:
        r = rows[d["id"]]
        shown = json.loads(ok("show", d["id"], "--json").stdout)
        for view in (d, shown):
            assert (view["cost_usd"], view["cost_basis"], view["cost_usd_known"]) == (
                r["cost_usd"], r["cost_basis"], r["cost_usd_known"]), d["id"]
            assert _epoch(view["started"]) == _epoch(r["started"]), d["id"]
            assert view["model"] == r["model"], d["id"]
            u = view["usage"]
            assert (u["input_tokens"], u["output_tokens"]) == (r["input_tokens"], r["output_tokens"]), d["id"]
            if view["ended"] is not None and r["duration_ms"] is not None:
                assert abs(_epoch(view["ended"]) - _epoch(view["started"]) - r["duration_ms"] / 1000) < 1.0, d["id"]
        if d["id"] in in_page:
            assert {k: v for k, v in in_page[d["id"]].items() if k != "models"} == r, d["id"]


def _page_data(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    marker = '<script type="application/json" id="ledger-data">'
    start = text.index(marker) + len(marker)
    return json.loads(text[start:text.index("</script>", start)])
