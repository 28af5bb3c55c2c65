"""`ledger report compare` over a fixture of runs with hand-computed answers (issue 30).

Arm a and arm b each ran tasks t1..t3 twice (trials 1 and 2); the provider reported every
cost (final receipts). Hand-computed:

    arm a: t1 ok $0.10, ok $0.20 | t2 ok $0.30, failed $0.40 | t3 failed $0.50, failed $0.60
    arm b: t1 ok $0.05, ok $0.05 | t2 ok $0.10, ok $0.20    | t3 ok $0.30, failed $0.10

    a: 6 runs, 3 ok: ok rate 0.5, Wilson [0.187616, 0.812384]; median cost (0.3+0.4)/2 = 0.35;
       cost per solved task 2.10 / 3 = 0.70; pass@2 mean(1, 1, 0) = 2/3, pass^2 mean(1, 0, 0) = 1/3
    b: 6 runs, 5 ok: ok rate 0.8333, Wilson [0.436497, 0.969947]; median cost (0.1+0.1)/2 = 0.1;
       cost per solved task 0.80 / 5 = 0.16; pass@2 1, pass^2 mean(1, 1, 0) = 2/3
    paired over 3 tasks: ok rates a (1, .5, 0), b (1, 1, .5): diff mean(0, .5, .5) = 1/3;
       task medians a (.15, .35, .55), b (.05, .15, .20): ratio .15 / .35 = 0.428571

Excluded, one of each kind the view names and never in a figure: arm a one run whose cost
is unknown (an unpriced model, no receipt cost: never read as $0), arm b one abandoned run
and one with an evidence gap.
"""

from __future__ import annotations

import json
import os

import orjson
import pytest

from ledger.records import RunCapture
from reporthelpers import add_gap, cli

COSTS = {
    "a": {"task:t1": [(True, 0.10), (True, 0.20)], "task:t2": [(True, 0.30), (False, 0.40)],
          "task:t3": [(False, 0.50), (False, 0.60)]},
    "b": {"task:t1": [(True, 0.05), (True, 0.05)], "task:t2": [(True, 0.10), (True, 0.20)],
          "task:t3": [(True, 0.30), (False, 0.10)]},
}


def _run(home, arm, task, ok, cost, trial=None, model="claude-sonnet-4-5", settle=True, minute=0):
    cap = RunCapture(home, harness="claude", model=model, subjects=[task], arm=arm, trial=trial,
                     created_at=f"2026-03-08T06:{minute:02d}:00Z")
    att = cap.start_attempt("anthropic", model)
    st = cap.usage_stream(provider="anthropic", model=model, attempt_key=att, turn_key="turn-1")
    counters = {"input_tokens": 100, "output_tokens": 10}
    if cost is not None:
        counters["cost_usd"] = cost
    st.observe(counters, final_receipt=True)
    if settle:
        cap.settle("completed" if ok else "failed", ended_at=f"2026-03-08T06:{minute:02d}:30Z")
    else:
        cap.detach()
    return cap.path


@pytest.fixture
def fixture_home(home):
    minute = 0
    for arm, tasks in COSTS.items():
        for task, trials in tasks.items():
            for i, (ok, cost) in enumerate(trials, 1):
                minute += 1
                _run(home, arm, task, ok, cost, trial={"number": i, "of": 2}, minute=minute)
    # cannot count: an unpriced model without a receipt cost (unknown, not $0) ...
    unknown = _run(home, "a", "task:t1", True, None, model="acme-unpriced-9", minute=40)
    # ... an abandoned run (its launcher's boot is over) and one with an evidence gap
    abandoned = _run(home, "b", "task:t2", True, 0.01, settle=False, minute=41)
    mpath = abandoned / "manifest.json"
    m = orjson.loads(mpath.read_bytes())
    m["boot_id"] = "00000000-0000-0000-0000-000000000000"
    os.chmod(mpath, 0o600)
    mpath.write_bytes(orjson.dumps(m))
    gap = _run(home, "b", "task:t3", True, 0.02, minute=42)
    add_gap(gap)
    # a run of no arm: in no row, counted as unkeyed
    _run(home, None, "task:t1", True, 9.0, minute=43)
    return {"unknown": unknown.name, "abandoned": abandoned.name, "gap": gap.name}


def _compare(*args, db=None):
    res = cli("report", "compare", *args, "--json", *(["--db", db] if db else []))
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return json.loads(res.stdout)


def test_hand_computed_answers(fixture_home, db_url):
    doc = _compare(db=db_url)
    a, b = doc["rows"]
    assert (a["key"], b["key"]) == ("a", "b")
    assert (a["runs"], a["tasks"], a["ok_runs"], b["runs"], b["tasks"], b["ok_runs"]) == (6, 3, 3, 6, 3, 5)
    assert a["ok_rate"] == 0.5 and b["ok_rate"] == 0.8333
    assert a["ok_rate_ci"] == [0.1876, 0.8124] and b["ok_rate_ci"] == [0.4365, 0.9699]
    assert a["median_cost_usd"] == pytest.approx(0.35, abs=1e-12)
    assert b["median_cost_usd"] == pytest.approx(0.1, abs=1e-12)
    assert a["cost_usd"] == pytest.approx(2.1) and a["cost_per_ok_usd"] == pytest.approx(0.7)
    assert b["cost_usd"] == pytest.approx(0.8) and b["cost_per_ok_usd"] == pytest.approx(0.16)
    assert (a["k"], a["pass_at_k"], a["pass_hat_k"]) == (2, 0.6667, 0.3333)
    assert (b["k"], b["pass_at_k"], b["pass_hat_k"]) == (2, 1.0, 0.6667)
    for row in (a, b):  # a median's interval holds the median and stays within the runs' costs
        lo, hi = row["median_cost_ci"]
        assert lo <= row["median_cost_usd"] <= hi
    assert 0.1 <= a["median_cost_ci"][0] and a["median_cost_ci"][1] <= 0.6
    p = doc["paired"]
    assert (p["a"], p["b"], p["tasks"]) == ("a", "b", 3)
    assert p["ok_rate_diff"] == 0.3333 and p["median_cost_ratio"] == 0.4286
    lo, hi = p["ok_rate_diff_ci"]
    assert 0 <= lo <= 0.3333 <= hi <= 0.5  # three tasks' diffs are 0, .5, .5
    lo, hi = p["median_cost_ratio_ci"]
    assert lo <= 0.4286 <= hi
    per_task = {(t["key"], t["task"]): (t["runs"], t["ok_runs"], t["pass_at_k"], t["pass_hat_k"]) for t in doc["tasks"]}
    assert per_task[("a", "task:t2")] == (2, 1, 1.0, 0.0) and per_task[("b", "task:t1")] == (2, 2, 1.0, 1.0)


def test_excluded_runs_are_counted_and_listed_never_dropped(fixture_home, db_url):
    doc = _compare(db=db_url)
    a, b = doc["rows"]
    assert a["excluded"] == 1 and a["excluded_by"] == {"unknown-cost": 1}
    assert b["excluded"] == 2 and b["excluded_by"] == {"abandoned": 1, "evidence-gaps": 1}
    listed = {e["run_id"]: e["reason"] for e in doc["excluded_runs"]}
    assert listed == {fixture_home["unknown"]: "unknown-cost", fixture_home["abandoned"]: "abandoned",
                      fixture_home["gap"]: "evidence-gaps"}
    assert doc["excluded"] == 3 and doc["unkeyed_runs"] == 1
    # the unknown cost was not read as $0: arm a's figures are the six priced runs' alone
    assert a["runs"] == 6 and a["median_cost_usd"] == pytest.approx(0.35)


def test_output_is_stable(fixture_home):
    first = cli("report", "compare", "--json")
    again = cli("report", "compare", "--json")
    assert first.exit_code == 0 and first.stdout == again.stdout


def test_strict_exits_1_when_a_run_is_excluded(fixture_home):
    res = cli("report", "compare", "--strict")
    assert res.exit_code == 1
    assert "Error: 3 runs excluded" in res.stderr and "Hint:" in res.stderr
    assert "b costs 57% less" in res.stdout  # the comparison is still printed


def test_strict_passes_when_nothing_is_excluded(home):
    for i, (arm, cost) in enumerate((("a", 0.2), ("b", 0.1))):
        _run(home, arm, "task:t1", True, cost, minute=i)
    res = cli("report", "compare", "--strict")
    assert res.exit_code == 0, res.stderr


def test_verdict_line_and_table_at_80_columns(fixture_home):
    res = cli("report", "compare", "a", "b")
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), res.stdout
    assert any(line.startswith("b costs 57% less (95% CI ") for line in lines), res.stdout
    assert "excluded: 3 runs (a: unknown-cost 1; b: abandoned 1, evidence-gaps 1)" in res.stdout


def test_named_arms_in_either_order_and_unknown_arm(fixture_home):
    doc = _compare("b", "a")
    assert [r["key"] for r in doc["rows"]] == ["b", "a"]
    assert doc["paired"]["median_cost_ratio"] == pytest.approx(0.35 / 0.15, abs=1e-4)
    res = cli("report", "compare", "a", "zz")
    assert res.exit_code == 1 and "no runs of arm 'zz'" in res.stderr and "Hint:" in res.stderr
    res = cli("report", "compare", "a")
    assert res.exit_code == 2


def test_csv(fixture_home):
    res = cli("report", "compare", "--csv")
    assert res.exit_code == 0
    head, a, b = res.stdout.splitlines()
    assert head.startswith("key,runs,tasks,ok_runs,ok_rate,ok_rate_low,ok_rate_high,median_cost_usd")
    assert a.startswith("a,6,3,3,0.5,0.1876,0.8124,0.35")


def test_by_skill_and_by_subject_kind(home):
    # the arm from --skill, and from a subject kind (variant:x); the task from --task-by
    for i, (v, cost) in enumerate((("x", 0.4), ("x", 0.2), ("y", 0.1), ("y", 0.1))):
        cap = RunCapture(home, harness="claude", model="claude-sonnet-4-5", skill=f"skill-{v}",
                         subjects=[f"variant:{v}", f"task:t{i % 2}"], created_at=f"2026-03-08T06:0{i}:00Z")
        att = cap.start_attempt("anthropic", "claude-sonnet-4-5")
        cap.usage_stream(provider="anthropic", model="claude-sonnet-4-5", attempt_key=att, turn_key="t").observe(
            {"input_tokens": 1, "cost_usd": cost}, final_receipt=True)
        cap.settle("completed")
    by_skill = _compare("--by", "skill", "--task-by", "task")
    assert [r["key"] for r in by_skill["rows"]] == ["skill-x", "skill-y"]
    assert by_skill["paired"]["tasks"] == 2 and by_skill["paired"]["median_cost_ratio"] == pytest.approx(1 / 3, abs=1e-4)
    by_kind = _compare("--by", "variant", "--task-by", "task")
    assert [r["key"] for r in by_kind["rows"]] == ["x", "y"]
    assert by_kind["rows"][0]["median_cost_usd"] == pytest.approx(0.3)
    # without --task-by the task is the first subject (the variant here): nothing to pair
    assert _compare("--by", "variant")["paired"]["tasks"] == 0


def test_the_sql_views_give_the_same(fixture_home, db_url):
    db = ["--db", db_url]
    cli("report", "compare", "--json", *db)  # (prices the runs: the views read the report's costs)
    res = cli("sql", "SELECT task, arm, runs, counted_runs, excluded_runs, ok_runs, ok_rate, cost_usd, "
                     "cost_per_ok_usd FROM compare_v WHERE arm IS NOT NULL ORDER BY arm, task", "--json", *db)
    assert res.exit_code == 0, res.stderr
    rows = {(r["arm"], r["task"]): r for r in json.loads(res.stdout)}
    assert rows[("a", "task:t1")]["runs"] == 3 and rows[("a", "task:t1")]["excluded_runs"] == 1
    assert rows[("a", "task:t2")]["ok_runs"] == 1 and rows[("a", "task:t2")]["cost_per_ok_usd"] == pytest.approx(0.7)
    assert rows[("b", "task:t3")]["counted_runs"] == 2 and rows[("b", "task:t3")]["cost_usd"] == pytest.approx(0.4)
    res = cli("sql", "SELECT run_id, excluded FROM compare_runs_v WHERE excluded IS NOT NULL", "--json", *db)
    assert {r["run_id"]: r["excluded"] for r in json.loads(res.stdout)} == {
        fixture_home["unknown"]: "unknown-cost", fixture_home["abandoned"]: "abandoned",
        fixture_home["gap"]: "evidence-gaps"}


@pytest.mark.parametrize("ratio,rci,diff,dci,want", [
    (0.69, [0.53, 0.88], 0.02, [-0.05, 0.09], "b costs 31% less (95% CI 12–47%); ok rate unchanged (−5 to +9 pp) over 4 tasks"),
    (1.25, [1.1, 1.4], -0.12, [-0.2, -0.03], "b costs 25% more (95% CI 10–40%); ok rate down 12 pp (95% CI −20 to −3 pp) over 4 tasks"),
    (0.97, [0.92, 1.15], 0.12, [0.03, 0.2], "b's cost unchanged (−8 to +15%); ok rate up 12 pp (95% CI +3 to +20 pp) over 4 tasks"),
    (None, None, 0.0, [0.0, 0.0], "cost not comparable (a median cost of 0 or none); ok rate unchanged (0 to 0 pp) over 4 tasks"),
])
def test_the_verdict_claims_a_difference_only_when_its_interval_excludes_none(ratio, rci, diff, dci, want):
    from ledger.report.compare import verdict_line

    assert verdict_line({"a": "a", "b": "b", "tasks": 4, "median_cost_ratio": ratio, "median_cost_ratio_ci": rci,
                         "ok_rate_diff": diff, "ok_rate_diff_ci": dci}) == want
    assert verdict_line({"a": "a", "b": "b", "tasks": 0}) == "no task that both a and b ran: nothing to pair"
