"""`ledger demo` (issue 12): real client streams shipped with ledger, recorded through
`ledger run`'s own path, give `runs`, `show` and `report` real-looking costs without a key."""

from __future__ import annotations

import json

from indexhelpers import cli


def test_demo_records_runs_with_costs(tmp_path):
    home = tmp_path / "demo"
    res = cli("demo", "--home", str(home))
    assert res.exit_code == 0, res.output
    assert f"ledger runs --home {home}" in res.stderr and "ledger report model" in res.stderr
    runs = json.loads(cli("runs", "--json", "--home", str(home)).stdout)
    assert sorted(r["harness"] for r in runs) == ["claude", "claude", "codex"]
    assert all(r["outcome"] == "completed" and r["model"] for r in runs)
    doc = json.loads(cli("report", "model", "--json", "--home", str(home)).stdout)
    t = doc["totals"]
    assert t["runs"] == 3 and t["cost_basis"] == "mixed" and t["cost_usd"] > 0.0060  # Claude's own $0.0060 + an estimate
    show = cli("show", runs[0]["id"][:12], "--home", str(home))
    assert show.exit_code == 0 and runs[0]["id"] in show.stdout
