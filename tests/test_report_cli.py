"""`ledger report` end to end (CLI -> index -> report facts -> SQL), on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
import os
from datetime import datetime, timezone

import pytest

from ledger.pricing import estimate_cost, price_data_version
from ledger.records import read_run
from reporthelpers import (
    CLAUDE_RESULT, STREAMS, add_gap, claude_stream, cli, make, make_abandoned, report_json,
)

TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")


def _launch_recorded(home, name, harness, model, subjects=()):
    """A run made by the real launcher (`ledger run`'s code path) from a recorded client stream."""
    from ledger.launch.runner import RunOptions, launch

    fd = os.open(os.devnull, os.O_WRONLY)
    try:
        res = launch(RunOptions(argv=["cat", str(STREAMS / name)], home=home, harness=harness, model=model,
                                progress=False, stdout_fd=fd, subjects=list(subjects)))
    finally:
        os.close(fd)
    return read_run(res.path)


def _expected_cost(snap):
    """auto: the stream's receipt cost when it has one, else the price-table estimate."""
    total = 0.0
    for st in snap.streams:
        if st.final_receipt and st.cost_usd is not None:
            total += st.cost_usd
        else:
            cost, why = estimate_cost(st.provider, st.model, {k: v for k, v in st.counters.items() if v is not None})
            assert cost is not None, why
            total += cost
    return total


def test_runs_from_real_client_streams_match_their_own_totals(home, db_url):
    snaps = [
        _launch_recorded(home, "claude-tool-then-answer.jsonl", "claude", "claude-sonnet-4-5", ["task:A"]),
        _launch_recorded(home, "claude-three-tools.jsonl", "claude", "claude-sonnet-4-5", ["task:A"]),
        _launch_recorded(home, "claude-max-turns.jsonl", "claude", "claude-sonnet-4-5", ["task:B"]),
        _launch_recorded(home, "claude-subagent.jsonl", "claude", "claude-sonnet-4-5", ["task:B"]),
        _launch_recorded(home, "codex-tool-then-answer.jsonl", "codex", "gpt-5.5", ["task:A"]),
    ]
    doc, _ = report_json("run", "--db", db_url, "--tz", "UTC")
    rows = {r["key"]: r for r in doc["rows"]}
    assert set(rows) == {s.id for s in snaps}
    for s in snaps:
        r = rows[s.id]
        for t in TOKENS:
            assert r[t] == getattr(s.usage, t), (s.id, t)
        assert r["cost_usd"] == pytest.approx(_expected_cost(s), abs=1e-12)
        if s.harness == "claude":
            # a completed Claude run's cost is exactly what the client reported
            assert r["cost_basis"] == "reported" and r["cost_usd"] == pytest.approx(s.usage.cost_usd, abs=1e-12)
        else:
            assert r["cost_basis"] == "estimated" and s.usage.cost_usd is None
        assert r["outcome"] == s.outcome and r["runs"] == 1
    by_file = {s.usage.cost_usd: s for s in snaps}
    assert rows[by_file[0.0027165].id]["cost_usd"] == pytest.approx(0.0027165)   # README's hand-checked totals
    assert rows[by_file[0.003282].id]["input_tokens"] == 604                     # main 204 + subagent 400
    # daily: the totals are the sum of the runs
    daily, _ = report_json("daily", "--db", db_url, "--tz", "UTC")
    assert sum(r["runs"] for r in daily["rows"]) == daily["totals"]["runs"] == 5
    for t in TOKENS + ("total_tokens",):
        assert daily["totals"][t] == sum(rows[s.id][t] for s in snaps)
    assert daily["totals"]["cost_usd"] == pytest.approx(sum(rows[s.id]["cost_usd"] for s in snaps), abs=1e-12)
    assert daily["totals"]["cost_basis"] == "mixed"  # reported Claude receipts + the Codex estimate
    assert daily["totals"]["failed"] == 1            # error_max_turns is not a success
    assert daily["pricing"]["price_data"] == price_data_version() == "genai-prices 0.2.3"
    # per model that served the usage (issue 25): the subagent's haiku is its own row, its
    # run also in sonnet's; the rows' tokens add up to the totals', the runs to more
    models, _ = report_json("model", "--breakdown", "--db", db_url)
    by = {r["key"]: r for r in models["rows"]}
    assert {"claude-sonnet-4-5", "claude-haiku-5-5"} <= set(by)
    assert by["claude-haiku-5-5"]["runs"] == 1 and by["claude-haiku-5-5"]["input_tokens"] == 400
    assert sum(r["input_tokens"] for r in models["rows"]) == models["totals"]["input_tokens"]
    assert sum(r["runs"] for r in models["rows"]) > models["totals"]["runs"] == 5
    # --breakdown under the Claude harness still shows both models of the one run
    harness, _ = report_json("harness", "--breakdown", "--db", db_url)
    claude = next(r for r in harness["rows"] if r["key"] == "claude")
    assert {"claude-sonnet-4-5", "claude-haiku-5-5"} <= {m["model"] for m in claude["models"]}


def test_time_zones_dst_and_inclusive_ranges(home, db_url):
    early = make(home, "2026-03-08T06:30:00Z", [claude_stream()])  # 01:30 EST, 15:30 JST
    late = make(home, "2026-03-08T07:30:00Z", [claude_stream()])   # 03:30 EDT, 16:30 JST
    make(home, "2026-03-08T04:59:00Z", [claude_stream()])          # 23:59 EST on the 7th
    make(home, "2026-03-09T03:59:00Z", [claude_stream()])          # 23:59 EDT on the 8th (a 23-hour day)
    make(home, "2026-03-09T04:00:00Z", [claude_stream()])          # 00:00 EDT on the 9th
    make(home, "2026-03-08T15:00:00Z", [claude_stream()])          # 00:00 JST on the 9th

    def days(*args):
        doc, _ = report_json("daily", "--db", db_url, *args)
        return {r["key"]: r["runs"] for r in doc["rows"]}

    assert days("--tz", "America/New_York") == {"2026-03-07": 1, "2026-03-08": 4, "2026-03-09": 1}
    assert days("--tz", "Asia/Tokyo") == {"2026-03-08": 3, "2026-03-09": 3}
    assert days("--tz", "UTC") == {"2026-03-08": 4, "2026-03-09": 2}
    # the two DST-morning runs: the same local day in both zones
    doc, _ = report_json("run", "--db", db_url, "--tz", "America/New_York", "--since", "2026-03-08",
                         "--until", "20260308")
    assert {read_run(early).id, read_run(late).id} <= {r["key"] for r in doc["rows"]}
    # --since/--until are inclusive local days of the chosen zone
    assert days("--tz", "America/New_York", "--since", "2026-03-08", "--until", "2026-03-08") == {"2026-03-08": 4}
    assert days("--tz", "Asia/Tokyo", "--since", "20260309") == {"2026-03-09": 3}
    assert days("--tz", "Asia/Tokyo", "--until", "2026-03-08") == {"2026-03-08": 3}
    assert days("--tz", "America/New_York", "--since", "2026-03-10") == {}
    # a :45 zone buckets on 15-minute slots
    assert days("--tz", "Asia/Kathmandu") == {"2026-03-08": 4, "2026-03-09": 2}
    # weeks (the 8th is a Sunday) and months
    doc, _ = report_json("weekly", "--db", db_url, "--tz", "America/New_York", "--week-start", "sunday")
    assert {r["key"]: r["runs"] for r in doc["rows"]} == {"2026-03-01": 1, "2026-03-08": 5}
    doc, _ = report_json("weekly", "--db", db_url, "--tz", "America/New_York")
    assert {r["key"]: r["runs"] for r in doc["rows"]} == {"2026-03-02": 5, "2026-03-09": 1}
    doc, _ = report_json("monthly", "--db", db_url, "--tz", "Asia/Tokyo")
    assert [(r["key"], r["runs"]) for r in doc["rows"]] == [("2026-03", 6)]
    assert doc["query"]["tz"] == "Asia/Tokyo"


def test_unknown_model_is_unknown_never_zero(home, db_url):
    known = make(home, "2026-03-08T10:00:00Z", [claude_stream()])
    mystery = make(home, "2026-03-08T11:00:00Z", [claude_stream(model="mystery-model-9", final=False,
                                                                 counters={"cost_usd": None})],
                   model="mystery-model-9")
    res = cli("report", "run", "--db", db_url, "--json")
    assert res.exit_code == 0
    assert "mystery-model-9" in res.stderr and "warning" in res.stderr
    doc = json.loads(res.stdout)
    rows = {r["key"]: r for r in doc["rows"]}
    m = rows[read_run(mystery).id]
    assert m["cost_usd"] is None and m["cost_basis"] == "unknown" and m["cost_usd_known"] is None
    assert m["input_tokens"] == CLAUDE_RESULT["input_tokens"]  # tokens are still known
    assert rows[read_run(known).id]["cost_basis"] == "reported"
    assert doc["totals"]["cost_basis"] == "partial" and doc["totals"]["cost_usd"] is None
    assert doc["totals"]["cost_usd_known"] == pytest.approx(CLAUDE_RESULT["cost_usd"])
    assert doc["totals"]["unmeasured_cost_runs"] == 1
    assert doc["pricing"]["unpriced"] == [{"model": "mystery-model-9", "runs": 1,
                                           "reason": "no price for model 'mystery-model-9' in genai-prices 0.2.3"}]
    daily, err = report_json("daily", "--db", db_url, "--tz", "UTC")
    assert daily["rows"][0]["cost_basis"] == "partial" and daily["rows"][0]["cost_usd"] is None
    assert "mystery-model-9" in err
    # the table shows the known part as a lower bound and says why
    res = cli("report", "--db", db_url, "--tz", "UTC")
    assert res.exit_code == 0 and "partial" in res.stdout and "≥" in res.stdout
    assert "mystery-model-9" in res.stderr
    # estimated-only: the same; reported-only: the mystery run has no provider cost either
    doc, _ = report_json("run", "--db", db_url, "--cost", "reported")
    assert {r["cost_basis"] for r in doc["rows"]} == {"reported", "unknown"}


def test_cost_modes_and_mixed_runs(home, db_url):
    # one run, two streams: a receipt with the client's cost, and a fallback attempt killed
    # before its receipt (estimated from its tokens)
    make(home, "2026-03-08T10:00:00Z", [claude_stream(), claude_stream(final=False, counters={"cost_usd": None})])
    est, why = estimate_cost("anthropic", "claude-sonnet-4-5",
                             {k: v for k, v in CLAUDE_RESULT.items() if k != "cost_usd"})
    assert why is None
    auto, _ = report_json("run", "--db", db_url)
    assert auto["rows"][0]["cost_basis"] == "mixed"
    assert auto["rows"][0]["cost_usd"] == pytest.approx(CLAUDE_RESULT["cost_usd"] + est)
    estimated, _ = report_json("run", "--db", db_url, "--cost", "estimated")
    assert estimated["rows"][0]["cost_basis"] == "estimated"
    assert estimated["rows"][0]["cost_usd"] == pytest.approx(2 * est)
    reported, _ = report_json("run", "--db", db_url, "--cost", "reported")
    # the provider reported a cost for one stream only: the run's provider cost is not fully
    # known, but the reported part is counted (issue 17: it used to be `unknown`, known null)
    row = reported["rows"][0]
    assert row["cost_basis"] == "partial" and row["cost_usd"] is None
    assert row["cost_usd_known"] == pytest.approx(CLAUDE_RESULT["cost_usd"]) and row["unmeasured_cost_runs"] == 1
    assert reported["pricing"]["cost"] == "reported"


def test_evaluation_view_by_subject_and_skill(home, db_url):
    def run(t, subject, cost, outcome="completed", skill="fix", secs=10):
        start = datetime.fromisoformat(t.replace("Z", "+00:00"))
        end = datetime.fromtimestamp(start.timestamp() + secs, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return make(home, t, [claude_stream(counters={"cost_usd": cost})], subjects=[subject], skill=skill,
                    outcome=outcome, ended_at=end)

    run("2026-03-08T10:00:00Z", "task:A", 0.10, secs=10)
    run("2026-03-08T10:01:00Z", "task:A", 0.30, secs=30)
    run("2026-03-08T10:02:00Z", "task:A", 0.20, outcome="failed", secs=20)
    gap = run("2026-03-08T10:03:00Z", "task:B", 0.50, outcome="interrupted", skill="plain", secs=50)
    add_gap(gap)
    make(home, "2026-03-08T10:04:00Z", [claude_stream(model="mystery-x", final=False, counters={"cost_usd": None})],
         subjects=["task:B"], skill="plain", model="mystery-x")
    make_abandoned(home, "2026-03-08T10:05:00Z")
    doc, _ = report_json("subject", "--db", db_url)
    rows = {r["key"]: r for r in doc["rows"]}
    a, b = rows["task:A"], rows["task:B"]
    assert a["runs"] == 3 and a["median_cost_usd"] == pytest.approx(0.20) and a["median_duration_ms"] == 20000
    assert a["failed"] == 1 and a["unmeasured_cost_runs"] == 0 and a["cost_usd"] == pytest.approx(0.60)
    # unmeasured costs are left out of the median and counted
    assert b["runs"] == 2 and b["median_cost_usd"] == pytest.approx(0.50) and b["unmeasured_cost_runs"] == 1
    assert b["interrupted"] == 1 and b["unverified"] == 1 and b["evidence_gaps"] == 1
    assert b["cost_basis"] == "partial"
    none = rows[None]  # the abandoned run has no subject
    assert none["abandoned"] == 1 and none["runs"] == 1
    assert doc["totals"]["runs"] == 6 and doc["totals"]["abandoned"] == 1
    # --by skill is the skill report
    by, _ = report_json("--by", "skill", "--db", db_url)
    assert {r["key"] for r in by["rows"]} == {"fix", "plain", None} and by["report"] == "skill"
    assert {r["key"]: r["runs"] for r in by["rows"]}["fix"] == 3
    assert "median_cost_usd" in by["rows"][0]


def test_filters_order_limit(home, db_url):
    make(home, "2026-03-08T10:00:00Z", [claude_stream(counters={"cost_usd": 1.0})], harness="claude",
         subjects=["task:A"], skill="s1", repo="r1")
    make(home, "2026-03-08T11:00:00Z", [claude_stream(counters={"cost_usd": 3.0})], harness="claude",
         subjects=["task:B"], skill="s2", repo="r2", outcome="failed")
    make(home, "2026-03-09T11:00:00Z", [{"provider": "openai", "model": "gpt-5.5", "final": True,
                                         "counters": {"input_tokens": 1000, "output_tokens": 100}}],
         harness="codex", model="gpt-5.5", subjects=["task:A", "task:C"])

    def keys(*args):
        doc, _ = report_json(*args, "--db", db_url, "--tz", "UTC")
        return [r["key"] for r in doc["rows"]], doc

    assert keys("harness")[0] == ["claude", "codex"]                      # most expensive first
    assert keys("harness", "--order", "asc")[0] == ["codex", "claude"]
    assert keys("run", "--limit", "1")[1]["rows"][0]["cost_usd"] == 3.0  # top 1 most expensive run
    ks, doc = keys("run", "--limit", "1")
    assert doc["totals"]["runs"] == 3                                     # totals cover every match
    assert keys("daily", "--harness", "codex")[0] == ["2026-03-09"]
    assert keys("daily", "--model", "gpt-*")[0] == ["2026-03-09"]
    assert keys("daily", "--subject", "task:A")[0] == ["2026-03-08", "2026-03-09"]
    assert keys("daily", "--subject", "task:C", "--subject", "task:B")[0] == ["2026-03-08", "2026-03-09"]
    assert keys("daily", "--outcome", "failed")[0] == ["2026-03-08"]
    assert keys("repo", "--repo", "r*")[0] == ["r2", "r1"]
    assert keys("skill", "--skill", "s1")[0] == ["s1"]
    assert keys("subject")[0] == ["task:B", "task:A", "task:C"]  # a run's second subject counts there too
    assert sorted(keys("subject", "--subject", "task:C")[0]) == ["task:A", "task:C"]
    _, doc = keys("subject")
    assert doc["totals"]["runs"] == 3  # a run with two subjects counts once in the totals
    import socket

    assert keys("host")[0] == [socket.gethostname()]
    assert keys("session")[0] == [None]  # no provider session was observed


def test_json_and_csv_fields_are_stable(home, db_url):
    make(home, "2026-03-08T10:00:00Z", [claude_stream()], subjects=["task:A"])
    doc, _ = report_json("daily", "--breakdown", "--db", db_url, "--tz", "UTC")
    assert list(doc) == ["report", "query", "rows", "totals", "pricing", "unreadable_runs", "unreadable"]
    assert doc["unreadable_runs"] == 0 and doc["unreadable"] == []
    assert list(doc["query"]) == ["tz", "since", "until", "week_start", "filters", "cost", "breakdown", "order", "limit"]
    assert list(doc["pricing"]) == ["cost", "price_data", "unpriced"]
    row_fields = ["key", "runs", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                  "reasoning_tokens", "total_tokens", "unmeasured_usage_runs", "cost_usd", "cost_basis",
                  "cost_usd_known", "unmeasured_cost_runs", "failed", "interrupted", "abandoned", "unverified",
                  "evidence_gaps"]
    assert list(doc["rows"][0]) == row_fields + ["models"]
    assert list(doc["totals"]) == row_fields[1:] + ["models"]
    assert list(doc["rows"][0]["models"][0]) == [
        "model", "runs", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
        "reasoning_tokens", "total_tokens", "cost_usd", "cost_basis", "cost_usd_known", "unmeasured_cost_runs"]
    ev, _ = report_json("subject", "--db", db_url)
    assert list(ev["rows"][0]) == row_fields + ["median_cost_usd", "median_duration_ms", "judged_runs", "ok_runs",
                                                "ok_rate", "skill_expected_runs", "skill_invoked_runs",
                                                "skill_invoked_rate", "tool_calls", "tool_errors", "tool_error_rate"]
    run, _ = report_json("run", "--db", db_url)
    assert list(run["rows"][0]) == row_fields + ["started", "harness", "model", "outcome", "duration_ms"]
    assert run["rows"][0]["started"] == "2026-03-08T10:00:00Z"
    res = cli("report", "daily", "--csv", "--breakdown", "--db", db_url, "--tz", "UTC")
    assert res.exit_code == 0
    lines = list(csv.reader(io.StringIO(res.stdout)))
    assert lines[0] == ["key", "model"] + row_fields[1:]
    assert lines[1][:3] == ["2026-03-08", "*", "1"]
    assert lines[2][:3] == ["2026-03-08", "claude-sonnet-4-5", "1"]
    res = cli("report", "model", "--csv", "--db", db_url)
    lines = list(csv.reader(io.StringIO(res.stdout)))
    assert lines[0] == row_fields and lines[1][0] == "claude-sonnet-4-5"
    assert lines[1][row_fields.index("reasoning_tokens")] == ""  # unknown is empty, not 0
    # an empty report is still one document
    empty, _ = report_json("daily", "--db", db_url, "--since", "2030-01-01")
    assert empty["rows"] == [] and empty["totals"]["runs"] == 0 and empty["totals"]["cost_basis"] == "unknown"


def test_unknown_token_sums_stay_null(home, db_url):
    # an agent run that reported no usage at all (a plain command is not applicable, not
    # unknown: tests/test_report_commands.py)
    make(home, "2026-03-08T10:00:00Z", [], harness="codex", model=None)
    make(home, "2026-03-08T11:00:00Z", [claude_stream()])
    doc, err = report_json("harness", "--db", db_url)
    rows = {r["key"]: r for r in doc["rows"]}
    cmd = rows["codex"]
    assert all(cmd[t] is None for t in TOKENS + ("total_tokens",))
    assert cmd["unmeasured_usage_runs"] == 1 and cmd["cost_basis"] == "unknown"
    assert rows["claude"]["reasoning_tokens"] is None  # nobody reported it
    assert doc["totals"]["input_tokens"] == CLAUDE_RESULT["input_tokens"]  # a sum of what is known ...
    assert doc["totals"]["unmeasured_usage_runs"] == 1                     # ... saying how many runs it misses
    assert "no usage reported" in err


def test_usage_errors(home, db_url):
    make(home, "2026-03-08T10:00:00Z", [claude_stream()])
    # every usage mistake exits 2 (issue 17: bad dates, zones and outcomes used to exit 1)
    res = cli("report", "--since", "03/08/2026", "--db", db_url)
    assert res.exit_code == 2 and "YYYY-MM-DD" in res.stderr
    res = cli("report", "--tz", "Nowhere/Land", "--db", db_url)
    assert res.exit_code == 2 and "unknown time zone" in res.stderr
    assert cli("report", "yearly", "--db", db_url).exit_code == 2
    assert cli("report", "--json", "--csv", "--db", db_url).exit_code == 2
    assert cli("report", "--outcome", "exploded", "--db", db_url).exit_code == 2
    assert cli("report", "harness", "--by", "subject", "--db", db_url).exit_code == 2
    res = cli("report", "--since", "2026-03-09", "--until", "2026-03-08", "--db", db_url)
    assert res.exit_code == 2 and "before" in res.stderr


def test_table_output(home, db_url, monkeypatch):
    make(home, "2026-03-08T10:00:00Z", [claude_stream()], subjects=["task:A"])
    monkeypatch.setenv("COLUMNS", "200")
    res = cli("report", "daily", "--breakdown", "--db", db_url, "--tz", "UTC")
    assert res.exit_code == 0
    assert "2026-03-08" in res.stdout and "Total" in res.stdout and "└ claude-sonnet-4-5" in res.stdout
    assert "cache read" in res.stdout and "reported" in res.stdout
    monkeypatch.setenv("COLUMNS", "70")
    res = cli("report", "daily", "--db", db_url, "--tz", "UTC")
    # (issue 29: the compact daily table keeps the split, abbreviated; the full labels and the total when wide)
    assert res.exit_code == 0 and "cache read" not in res.stdout and "cache rd" in res.stdout and "tokens" not in res.stdout
