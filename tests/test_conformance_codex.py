"""Conformance with what the real Codex CLI wrote (issue 25): the captures under
tests/data/captures/codex/ (made by scripts/capture_codex.py against tests/mockprovider.py,
see its README) imported with `ledger import codex`, and every token counter and the cost
(auto) per model, per UTC day and per session compared with the truth, the responses the mock
served, less what no log holds (the TUI's thread-title calls: no rollout names them).

The client is not run here: the committed capture is the test data.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from launchkit import REPO

CAPTURES = Path(__file__).parent / "data" / "captures" / "codex"
# a held-out capture (scripts/capture_codex.py --out DIR), compared the same way when named
HELD_OUT = [d for d in os.environ.get("LEDGER_CODEX_HELD_OUT", "").split(os.pathsep) if d]
COUNTERS = ("input_tokens", "cache_read_tokens", "output_tokens", "reasoning_tokens")


def truth(capture: str) -> dict[str, Any]:
    return json.loads((CAPTURES / capture / "truth.json").read_text())  # (an absolute path: itself)


def held(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The served responses a log holds: all but the ones no kept rollout names (0.169 names
    every call it logged by its response id; 0.130 names none, and logs every call)."""
    return [r for r in doc["responses"] if r["logged"] is not False]


def truth_cost(r: dict[str, Any]) -> float:
    """The response priced by genai-prices itself, at the tier it was served at."""
    from genai_prices import Usage, calc_price

    usage = Usage(input_tokens=r["input_tokens"], cache_read_tokens=r["cached_input_tokens"] or None,
                  output_tokens=r["output_tokens"])
    tier = r.get("service_tier")
    ctx = {"service_tier": tier} if tier and tier != "default" else None
    return float(calc_price(usage, r["model"], provider_id="openai", price_context=ctx).total_price)


def ledger_shape(r: dict[str, Any]) -> dict[str, int]:
    return {"input_tokens": r["input_tokens"] - r["cached_input_tokens"],
            "cache_read_tokens": r["cached_input_tokens"], "output_tokens": r["output_tokens"],
            "reasoning_tokens": r["reasoning_output_tokens"]}


def expected(doc: dict[str, Any], key) -> dict[Any, dict[str, float]]:
    out: dict[Any, dict[str, float]] = defaultdict(lambda: dict.fromkeys((*COUNTERS, "cost_usd"), 0))
    for r in held(doc):
        row = out[key(r)]
        for c, v in ledger_shape(r).items():
            row[c] += v
        row["cost_usd"] += truth_cost(r)
    return dict(out)


def got(rows: list[dict[str, Any]]) -> dict[Any, dict[str, float]]:
    return {k: {c: r[c] for c in (*COUNTERS, "cost_usd")} for k, r in rows}


def assert_equal(actual: dict[Any, dict[str, float]], want: dict[Any, dict[str, float]]) -> None:
    assert sorted(actual) == sorted(want), (sorted(actual), sorted(want))
    for k in want:
        for c in COUNTERS:
            assert actual[k][c] == want[k][c], (k, c, actual[k][c], want[k][c])
        assert actual[k]["cost_usd"] == pytest.approx(want[k]["cost_usd"], abs=1e-7), (k, actual[k], want[k])


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    h = tmp_path / "ledger-home"
    monkeypatch.setenv("LEDGER_HOME", str(h))
    monkeypatch.delenv("LEDGER_DB", raising=False)
    return h


def ledger(home: Path, *args: str) -> Any:
    env = {**os.environ, "PYTHONPATH": str(REPO), "LEDGER_HOME": str(home)}
    p = subprocess.run([sys.executable, "-m", "ledger", *args], env=env, capture_output=True, timeout=300,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, (args, p.stdout[-2000:], p.stderr[-2000:])
    return json.loads(p.stdout)


def imported(home: Path, capture: str, db: str) -> None:
    ledger(home, "import", "codex", "--from", str(CAPTURES / capture), "--json")  # (the archive; the index: --db)


@pytest.mark.parametrize("capture", ["v0169", "v0130", *HELD_OUT])
def test_each_model_day_and_session_equals_what_the_mock_served(home, db_url, capture):
    doc = truth(capture)
    imported(home, capture, db_url)
    daily = ledger(home, "report", "daily", "--tz", "UTC", "--breakdown", "--json", "--db", db_url)
    assert_equal(got((r["key"], r) for r in daily["rows"]), expected(doc, lambda r: r["time"][:10]))
    per_model = [((d["key"], m["model"]), m) for d in daily["rows"] for m in d["models"]]
    assert_equal(got(per_model), expected(doc, lambda r: (r["time"][:10], r["model"])))
    sessions = ledger(home, "report", "session", "--tz", "UTC", "--breakdown", "--json", "--db", db_url)
    assert_equal(got((r["key"], r) for r in sessions["rows"]), expected(doc, lambda r: r["thread"]))
    per_session_model = [((r["key"], m["model"]), m) for r in sessions["rows"] for m in r["models"]]
    assert_equal(got(per_session_model), expected(doc, lambda r: (r["thread"], r["model"])))


def test_what_no_log_holds_is_only_the_tuis_title_calls():
    """The truth the tests leave out (logged false) is the thread-title calls, and every other
    served response is named in a rollout (0.169)."""
    doc = truth("v0169")
    missing = [r for r in doc["responses"] if r["logged"] is False]
    assert missing and {r["purpose"] for r in missing} == {"title"}
    assert {r["scenario"] for r in missing} <= {"tui-turn", "tui-model", "tui-fork", "codex-fork"}
    assert all(r["logged"] for r in doc["responses"] if r["purpose"] != "title")


def test_the_capture_holds_every_scenario():
    """The corpus covers what issue 25 lists (a guard against a re-capture that lost one)."""
    v169 = truth("v0169")["scenarios"]
    for name in ("exec-tools", "exec-resume", "exec-resume-model", "exec-fork", "exec-fork-resume",
                 "exec-priority", "tui-turn", "tui-model", "tui-fork", "codex-fork", "archive"):
        assert name in v169, name
    assert {r["model"] for r in held(truth("v0169"))} == {"gpt-5.5", "gpt-5.6-luna"}
    assert any(r["service_tier"] == "priority" for r in held(truth("v0169")))
    files = truth("v0169")["files"]
    assert any(f.startswith("archived_sessions/") and f.count("/") == 1 for f in files)
    assert "fork" in truth("v0130")["scenarios"]


PEER = Path(__file__).parent / "data" / "peer-shapes" / "codex"


def test_rollouts_not_named_rollout_are_read_as_the_peers_read_them(home, db_url):
    """ccusage reads every *.jsonl below sessions/ (its own Codex test data:
    `sessions/<project>/<name>.jsonl`, no session_meta, the model in `info.model`); ledger
    imported such files as 0 files without a word. tests/data/peer-shapes/codex is written in
    that shape (two files of the same name in two project folders: two logs, not one)."""
    doc = ledger(home, "import", "codex", "--from", str(PEER), "--json")
    assert doc["totals"]["files"] == 2 and doc["totals"]["new_files"] == 2
    daily = ledger(home, "report", "daily", "--tz", "UTC", "--breakdown", "--json", "--db", db_url)
    got = {(d["key"], m["model"]): (m["input_tokens"], m["cache_read_tokens"], m["output_tokens"],
                                    m["reasoning_tokens"]) for d in daily["rows"] for m in d["models"]}
    # day 1: one call (its token_count written twice); day 2: the other model's call as the
    # delta of the cumulative total, and the second file's own call
    assert got == {("2026-04-02", "gpt-5.5"): (1000, 200, 80, 30),
                   ("2026-04-03", "gpt-5.6-luna"): (2000, 1000, 400, 100),
                   ("2026-04-03", "gpt-5.5"): (500, 0, 50, 0)}
    sessions = ledger(home, "report", "session", "--tz", "UTC", "--json", "--db", db_url)
    assert {r["key"]: r["output_tokens"] for r in sessions["rows"]} == {
        "sessions/project-beta/session-beta.jsonl": 480, "sessions/project-gamma/session-beta.jsonl": 50}
