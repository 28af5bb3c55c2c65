"""Plain commands in reports (issue 12): a command can never report usage, so its cost is
not applicable: no warning, no `+` / `≥` marks, no unknown or partial basis because of it."""

from __future__ import annotations

from reporthelpers import CLAUDE_RESULT, claude_stream, cli, make, report_json

T = "2026-03-02T10:00:00.000000Z"


def _home(tmp_path):
    home = tmp_path / "home"
    make(home, T, [claude_stream()])
    make(home, T, harness="command", model=None)
    make(home, T, harness="command", model=None, outcome="failed")
    make(home, T)  # an agent run that reported no usage: still unknown, still warned about
    return home


def test_commands_are_not_applicable_agents_without_usage_stay_unknown(tmp_path):
    home = _home(tmp_path)
    doc, err = report_json("--home", str(home), "daily", "--since", "2026-03-01", "--tz", "UTC")
    t = doc["totals"]
    assert t["runs"] == 4 and t["unmeasured_usage_runs"] == 1 and t["unmeasured_cost_runs"] == 1
    assert t["cost_basis"] == "partial" and t["cost_usd_known"] == CLAUDE_RESULT["cost_usd"]
    assert doc["pricing"]["unpriced"] == [{"model": None, "reason": "no usage reported", "runs": 1}]


def test_a_report_over_commands_and_priced_agents_warns_about_nothing(tmp_path):
    home = tmp_path / "home"
    make(home, T, [claude_stream()])
    make(home, T, harness="command", model=None)
    make(home, T, harness="command", model=None, outcome="failed")
    for cost in ("auto", "reported"):
        doc, _ = report_json("--home", str(home), "daily", "--since", "2026-03-01", "--tz", "UTC", "--cost", cost)
        t = doc["totals"]
        assert (t["runs"], t["unmeasured_usage_runs"], t["unmeasured_cost_runs"]) == (3, 0, 0), cost
        assert t["cost_basis"] == "reported" and t["cost_usd"] == CLAUDE_RESULT["cost_usd"], cost
        assert doc["pricing"]["unpriced"] == [], cost
    by = {r["key"]: r for r in report_json("--home", str(home), "harness", "--since", "2026-03-01")[0]["rows"]}
    assert by["command"]["cost_basis"] == "not_applicable" and by["command"]["cost_usd"] is None
    assert by["command"]["runs"] == 2 and by["command"]["failed"] == 1
    assert by["claude"]["cost_basis"] == "reported"
    res = cli("report", "--home", str(home), "daily", "--since", "2026-03-01", "--tz", "UTC")
    assert res.exit_code == 0 and "warning" not in res.stderr and "note" not in res.stderr, res.stderr
    assert "≥" not in res.stdout and "+" not in res.stdout
