"""A real A/B of two skills on Claude Code 2.1.328 (issue 30): `ledger run --repeat 5 --jobs 2
--arm A|B --skill ...` against the loopback mock, then `ledger report compare`.

The mock is scripted to answer each arm differently: arm `a` (skill `verbose`) with a long
answer (4,000 output tokens per call), arm `b` (skill `terse`) with a short one (100), on
the same task. Each arm has its own MockProvider (its script is what that skill makes the
model do); both log what they served. The comparison must show what was scripted: every
run ok in both arms, and b's median cost over a's equal to the ratio of the costs the client
itself reported for those runs, far below 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentenv import agent_cwd, claude_argv, claude_available, claude_env
from launchkit import REPO
from ledger.records import read_run
from ledger.records.reader import read_manifest
from mockprovider import MockProvider, answer

pytestmark = pytest.mark.agents

ARMS = {"a": ("verbose", 4000), "b": ("terse", 100)}


@pytest.fixture
def need_claude():
    if not claude_available():
        if os.environ.get("CI"):
            pytest.fail("claude is required under CI: run `npm install`")
        pytest.skip("node_modules/.bin/claude is not installed")


def _usage(output_tokens: int) -> dict:
    return {"input_tokens": 300, "output_tokens": output_tokens, "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0}


def _spans_peak(paths: list[str]) -> int:
    points = []
    for p in paths:
        snap = read_run(p)
        points += [(snap.started, 1), (snap.ended, -1)]
    live = peak = 0
    for _, d in sorted(points, key=lambda x: (x[0], x[1])):
        live += d
        peak = max(peak, live)
    return peak


def test_ab_of_two_skills_on_the_real_client(need_claude, tmp_path):
    home = tmp_path / "ledger-home"
    docs = {}
    for arm, (skill, out_tokens) in ARMS.items():
        scenario = {"anthropic": [], "after": answer(f"answer for {skill}", usage=_usage(out_tokens))}
        with MockProvider(scenario) as mp:
            env = claude_env(tmp_path, mp)
            env.update(PYTHONPATH=str(REPO), LEDGER_HOME=str(home))
            p = subprocess.run([sys.executable, "-m", "ledger", "run", "--json", "--repeat", "5", "--jobs", "2",
                                "--arm", arm, "--skill", skill, "--subject", "task:greet", "--",
                                *claude_argv("say hello", allowed_tools=None)],
                               env=env, cwd=str(agent_cwd(tmp_path)), stdin=subprocess.DEVNULL, capture_output=True,
                               timeout=600)
            assert p.returncode == 0, p.stderr[-3000:]
            docs[arm] = json.loads(p.stdout)
            assert len(mp.main_requests("anthropic")) >= 5
    for arm, doc in docs.items():
        runs = doc["runs"]
        assert len(runs) == 5 and doc["max_running"] <= 2
        assert _spans_peak([r["path"] for r in runs]) <= 2  # at most 2 at once, from the records
        manifests = [read_manifest(r["path"]) for r in runs]
        assert [m.trial for m in manifests] == [{"number": i, "of": 5} for i in range(1, 6)]
        assert {m.parent_run_id for m in manifests} == {doc["run_id"]} and {m.arm for m in manifests} == {arm}
        assert all(r["ok"] is True and r["cost_basis"] == "reported" for r in runs), runs
    cost = {arm: sorted(r["cost_usd"] for r in doc["runs"]) for arm, doc in docs.items()}
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("LF_", "LEDGER_"))},
           "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home)}
    p = subprocess.run([sys.executable, "-m", "ledger", "report", "compare", "a", "b", "--json", "--strict"], env=env,
                       capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    a, b = doc["rows"]
    assert (a["key"], a["runs"], a["ok_rate"], b["key"], b["runs"], b["ok_rate"]) == ("a", 5, 1.0, "b", 5, 1.0)
    assert a["median_cost_usd"] == pytest.approx(cost["a"][2], abs=1e-6)
    assert b["median_cost_usd"] == pytest.approx(cost["b"][2], abs=1e-6)
    assert a["cost_per_ok_usd"] == pytest.approx(sum(cost["a"]) / 5, abs=1e-6)
    ratio = doc["paired"]["median_cost_ratio"]
    assert ratio == pytest.approx(cost["b"][2] / cost["a"][2], abs=1e-4) and ratio < 0.2
    assert doc["paired"]["tasks"] == 1 and doc["paired"]["ok_rate_diff"] == 0
    assert doc["paired"]["verdict"].startswith("b costs ") and "% less" in doc["paired"]["verdict"]
    assert doc["excluded"] == 0
    # and by skill: the same two arms
    p = subprocess.run([sys.executable, "-m", "ledger", "report", "compare", "--by", "skill", "--json"], env=env,
                       capture_output=True, timeout=120)
    assert [r["key"] for r in json.loads(p.stdout)["rows"]] == ["terse", "verbose"]
