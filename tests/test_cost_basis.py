"""Money must not go missing (issue 17, item 12): a cost that is only partly known counts its
known part, with basis `partial`; and `ledger run` and `ledger report` apply one `auto` rule
and speak one vocabulary (`reported`, never `provider`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ledger.launch.runner import running_cost
from ledger.pricing import estimate_cost
from ledger.records.costbasis import auto_cost, combine_bases, receipt_cost
from ledger.report.costs import group_basis, split_known
from reporthelpers import claude_stream, make, report_json

SONNET = "claude-sonnet-4-5"
TOKENS = {"input_tokens": 1000, "output_tokens": 100}


def _stream(cost=None, final=True, model=SONNET):
    st = claude_stream(model=model, final=final)
    st["counters"] = {**TOKENS, "cost_usd": cost}  # these tokens only: the estimate is checked by hand
    return st


def _sonnet_estimate() -> float:
    est, why = estimate_cost("anthropic", SONNET, TOKENS)
    assert why is None and est == pytest.approx(1000 * 3e-6 + 100 * 15e-6)  # $3 / $15 per Mtok
    return est


def _runs_by_key(doc):
    return {r["key"]: r for r in doc["rows"]}


def test_reported_cost_of_part_of_a_run_is_counted_as_partial(home, db_url):
    # A: attempt 1 retried before its receipt (no cost), attempt 2's receipt says $0.25
    a = make(home, "2026-03-08T10:00:00Z", [_stream(cost=None, final=False), _stream(cost=0.25)]).name
    # B: one receipt, $0.5
    b = make(home, "2026-03-08T11:00:00Z", [_stream(cost=0.5)]).name
    # C: killed before its result: the provider's cost of its only stream ($0.125) is not a
    # final receipt, but it is the provider's figure: --cost reported counts it
    c = make(home, "2026-03-08T12:00:00Z", [_stream(cost=0.125, final=False)], outcome="interrupted").name

    runs, _ = report_json("run", "--cost", "reported", "--db", db_url, "--tz", "UTC")
    rows = _runs_by_key(runs)
    assert rows[a]["cost_basis"] == "partial" and rows[a]["cost_usd"] is None
    assert rows[a]["cost_usd_known"] == pytest.approx(0.25) and rows[a]["unmeasured_cost_runs"] == 1
    assert rows[b]["cost_basis"] == "reported" and rows[b]["cost_usd"] == pytest.approx(0.5)
    assert rows[c]["cost_basis"] == "reported" and rows[c]["cost_usd"] == pytest.approx(0.125)
    # hand-checked: 0.25 + 0.5 + 0.125; one run not fully measured
    expected = {"runs": 3, "cost_usd": None, "cost_basis": "partial", "unmeasured_cost_runs": 1}
    assert {k: runs["totals"][k] for k in expected} == expected
    assert runs["totals"]["cost_usd_known"] == pytest.approx(0.875)
    # the most expensive two, chosen in SQL: a partial run ranks by its known part
    top, _ = report_json("run", "--cost", "reported", "--limit", "2", "--db", db_url, "--tz", "UTC")
    assert [r["key"] for r in top["rows"]] == [b, a]

    # every table a report reads (slots, days, facts, per-model rows) says the same
    for kind in ("daily", "monthly", "model", "harness", "subject", "skill"):
        doc, _ = report_json(kind, "--cost", "reported", "--breakdown", "--db", db_url, "--tz", "UTC")
        assert len(doc["rows"]) == 1, kind
        for d in (doc["rows"][0], doc["totals"]):
            assert d["cost_basis"] == "partial" and d["cost_usd"] is None, kind
            assert d["cost_usd_known"] == pytest.approx(0.875) and d["unmeasured_cost_runs"] == 1, kind
        (m,) = doc["rows"][0]["models"]
        assert m["cost_basis"] == "partial" and m["cost_usd_known"] == pytest.approx(0.875), kind

    # auto: receipts where there are receipts, else the estimate: A is reported + estimated
    # (mixed), B reported, C estimated (its cost is not a final receipt)
    est = _sonnet_estimate()
    auto, _ = report_json("run", "--db", db_url, "--tz", "UTC")
    rows = _runs_by_key(auto)
    assert rows[a]["cost_basis"] == "mixed" and rows[a]["cost_usd"] == pytest.approx(0.25 + est)
    assert rows[c]["cost_basis"] == "estimated" and rows[c]["cost_usd"] == pytest.approx(est)
    assert auto["totals"]["cost_basis"] == "mixed"
    assert auto["totals"]["cost_usd"] == pytest.approx(0.25 + est + 0.5 + est)


def test_an_unpriced_model_beside_a_priced_one_keeps_the_priced_part(home, db_url):
    # one run, two models: Sonnet priced, an unknown model not (no receipt on either)
    r = make(home, "2026-03-08T10:00:00Z", [_stream(final=False), _stream(final=False, model="mystery-9")]).name
    est = _sonnet_estimate()
    for mode in ("auto", "estimated"):
        doc, _ = report_json("run", "--cost", mode, "--breakdown", "--db", db_url, "--tz", "UTC")
        row = _runs_by_key(doc)[r]
        assert row["cost_basis"] == "partial" and row["cost_usd"] is None, mode
        assert row["cost_usd_known"] == pytest.approx(est) and row["unmeasured_cost_runs"] == 1, mode
        models = {m["model"]: m for m in row["models"]}
        assert models[SONNET]["cost_basis"] == "estimated" and models[SONNET]["cost_usd"] == pytest.approx(est)
        assert models["mystery-9"]["cost_basis"] == "unknown" and models["mystery-9"]["cost_usd_known"] is None
        daily, _ = report_json("daily", "--cost", mode, "--db", db_url, "--tz", "UTC")
        assert daily["totals"]["cost_basis"] == "partial"
        assert daily["totals"]["cost_usd_known"] == pytest.approx(est)


def test_the_rule_pieces():
    assert split_known([1.0, 2.0]) == (3.0, None)
    assert split_known([1.0, None, 2.0]) == (None, 3.0)
    assert split_known([None]) == (None, None) and split_known([]) == (None, None)
    assert group_basis(2, 0, None, None) == "unknown"
    assert group_basis(2, 0, None, None, partly_known=True) == "partial"
    assert group_basis(2, 2, 1, 1) == "reported"
    assert receipt_cost(True, 0.5) == 0.5
    assert receipt_cost(False, 0.5) is None and receipt_cost(True, None) is None
    assert combine_bases(["reported", "reported"]) == "reported"
    assert combine_bases(["reported", "estimated"]) == "mixed"


def _adapter(*books):
    return SimpleNamespace(provider="anthropic", books={i: b for i, b in enumerate(books)})


def _book(cost=None, final=False, model=SONNET):
    return SimpleNamespace(cost=cost, final=final, model=model, counters=dict(TOKENS))


def test_ledger_run_applies_the_report_rule_and_says_reported():
    est = _sonnet_estimate()
    # a receipt: the provider's cost, basis `reported` (the report's word, not "provider")
    assert running_cost(_adapter(_book(0.5, final=True)))[:2] == (0.5, "reported")
    # a cost not marked final is not a receipt: estimated, exactly as the report takes it
    cost, basis, note = running_cost(_adapter(_book(0.3, final=False)))
    assert basis == "estimated" and cost == pytest.approx(est) and note.startswith("genai-prices")
    # a receipt and an estimate in one run: mixed, like the report
    cost, basis, _ = running_cost(_adapter(_book(0.5, final=True), _book()))
    assert basis == "mixed" and cost == pytest.approx(0.5 + est)
    # an unknown model: unknown, never 0, and why
    cost, basis, note = running_cost(_adapter(_book(0.5, final=True), _book(model="mystery-9")))
    assert cost is None and basis is None and "mystery-9" in note
    # the same rule, from the one place both use
    streams = [(True, 0.5), (False, None)]
    assert auto_cost(streams, lambda s: s[0], lambda s: s[1], lambda s: (est, None)) == (
        pytest.approx(0.5 + est), "mixed", None)
