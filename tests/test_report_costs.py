"""Cost basis algebra and the per-stream cost rules of the fact builder."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ledger.index.models import COUNTER_COLUMNS
from ledger.report.costs import combine_codes, group_basis, sum_known
from ledger.report.models import ESTIMATED, MIXED, REPORTED
from ledger.report.sync import FactBuilder, SyncStats


def test_sum_known_is_unknown_as_soon_as_one_part_is():
    assert sum_known([1.0, 2.0]) == 3.0
    assert sum_known([1.0, None]) is None
    assert sum_known([]) is None
    assert sum_known([0.0]) == 0.0  # a measured zero stays zero


def test_combine_codes():
    assert combine_codes([REPORTED, REPORTED]) == REPORTED
    assert combine_codes([REPORTED, ESTIMATED]) == MIXED
    assert combine_codes([ESTIMATED, None]) is None


@pytest.mark.parametrize("runs,known,lo,hi,basis", [
    (3, 3, REPORTED, REPORTED, "reported"),
    (3, 3, ESTIMATED, ESTIMATED, "estimated"),
    (3, 3, REPORTED, ESTIMATED, "mixed"),
    (3, 3, MIXED, MIXED, "mixed"),
    (3, 2, REPORTED, REPORTED, "partial"),
    (3, 0, None, None, "unknown"),
    (0, 0, None, None, "unknown"),
])
def test_group_basis(runs, known, lo, hi, basis):
    assert group_basis(runs, known, lo, hi) == basis


def _stream(sid, model, final, cost, **counters):
    values = {name: counters.get(name) for name in COUNTER_COLUMNS}
    return SimpleNamespace(stream_id=sid, provider="anthropic", model=model, final_receipt=final, cost_usd=cost,
                           slot=None, est_cost_usd=None, **values)  # (slot, estimate: imported sessions only)


def _run(**over):
    base = dict(home_id=1, run_id="run_" + "0" * 32, created_at=__import__("datetime").datetime(2026, 3, 8, 6, 30),
                harness="claude", model=None, skill=None, repo=None, host="h", provider_session_id=None,
                outcome="completed", settled=True, state="settled", evidence_gaps=0, duration_ms=1000,
                indexed_at=None, source="record")
    base.update(over)
    return SimpleNamespace(**base)


def _builder(prices):
    calls = []

    def est(provider, model, counters):
        calls.append(model)
        if model not in prices:
            return None, f"no price for model {model!r}"
        return prices[model] * counters["input_tokens"], None

    return FactBuilder("test", est, SyncStats()), calls


def test_per_stream_rules_and_run_level_totals():
    b, calls = _builder({"sonnet": 0.01, "haiku": 0.001})
    streams = [
        _stream("a1/t1/sonnet", "sonnet", True, 0.5, input_tokens=10, output_tokens=1),   # receipt: reported
        _stream("a2/t1/sonnet", "sonnet", False, None, input_tokens=20, output_tokens=2),  # no receipt: estimate
        _stream("a1/t1/haiku", "haiku", True, None, input_tokens=100, output_tokens=3),   # receipt w/o cost: estimate
    ]
    rows = b.rows(_run(), streams, {})
    by = {r["model_key"]: r for r in rows}
    assert [r["first"] for r in rows] == [1, 0] and rows[0]["model_key"] == "haiku"
    assert by["sonnet"]["cost_auto"] == pytest.approx(0.5 + 0.2) and by["sonnet"]["basis_auto"] == MIXED
    assert by["sonnet"]["cost_reported"] is None  # one sonnet stream has no provider cost
    assert by["sonnet"]["cost_estimated"] == pytest.approx(0.3)
    assert by["haiku"]["cost_auto"] == pytest.approx(0.1) and by["haiku"]["basis_auto"] == ESTIMATED
    first = rows[0]
    assert first["run_cost_auto"] == pytest.approx(0.8) and first["run_basis_auto"] == MIXED
    assert first["run_model"] == "haiku"  # no launched model: the one with most tokens
    assert by["sonnet"]["input_tokens"] == 30 and first["run_total_tokens"] == 136
    assert rows[1]["failed"] == 0 and rows[1]["run_cost_auto"] is None  # run-level facts on the first row only
    # the cache: same usage -> no pricing; changed usage -> priced again
    cached = {r["model_key"]: (r["usage_fingerprint"], r["cost_estimated"], r["unpriced"]) for r in rows}
    calls.clear()
    b.rows(_run(), streams, cached)
    assert calls == []
    streams[2].input_tokens = 101
    b.rows(_run(), streams, cached)
    assert calls == ["haiku"]


def test_unpriced_model_and_no_usage():
    b, _ = _builder({})
    rows = b.rows(_run(model="mystery"), [_stream("s", "mystery", False, None, input_tokens=5, output_tokens=1)], {})
    assert rows[0]["cost_auto"] is None and rows[0]["basis_auto"] is None
    assert rows[0]["unpriced"] == "no price for model 'mystery'" and rows[0]["run_cost_auto"] is None
    empty = b.rows(_run(harness="claude", outcome="failed"), [], {})
    assert len(empty) == 1 and empty[0]["no_usage"] == 1 and empty[0]["failed"] == 1
    assert empty[0]["input_tokens"] is None and empty[0]["run_cost_auto"] is None and empty[0]["piece"] == 1
    # a plain command can never report usage: not an unmeasured run, no cost piece (issue 12)
    cmd = b.rows(_run(harness="command", outcome="failed"), [], {})
    assert len(cmd) == 1 and cmd[0]["no_usage"] == 0 and cmd[0]["piece"] == 0 and cmd[0]["failed"] == 1
    assert cmd[0]["input_tokens"] is None and cmd[0]["run_cost_auto"] is None


@pytest.mark.parametrize("pieces", [
    [],
    [(0.25, None, REPORTED), (0.5, None, REPORTED)],
    [(0.25, None, REPORTED), (0.5, None, ESTIMATED)],
    [(0.1, None, ESTIMATED), (0.2, None, ESTIMATED), (0.3, None, ESTIMATED)],
    [(0.25, None, None), (0.5, None, REPORTED)],          # a known cost without a code: unknown basis
    [(0.25, None, 7), (0.5, None, 7)],                    # a code the names lack: unknown basis
    [(0.25, None, 7), (0.5, None, REPORTED)],             # codes differ: mixed
    [(0.25, None, REPORTED), (None, 0.125, None)],        # partly known: the known part counts
    [(0.25, None, REPORTED), (None, None, None)],
    [(None, None, None), (None, None, REPORTED)],         # nothing known
    [(1e16, None, REPORTED), (1.0, None, REPORTED), (1.0, None, REPORTED)],  # summed in order, as sum()
])
def test_pieces_cost_in_sql_is_pieces_cost(pieces):
    """The status line sums its blocks in SQL (pieces_cost_sql / pieces_cost_of): the same
    figures, float for float, as pieces_cost over the same rows in the same order."""
    import sqlite3

    from ledger.report.costs import pieces_cost, pieces_cost_of, pieces_cost_sql

    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE t (i INTEGER PRIMARY KEY, cost DOUBLE, part DOUBLE, basis SMALLINT)")
    c.executemany("INSERT INTO t (cost, part, basis) VALUES (?, ?, ?)", pieces)
    row = c.execute(f"SELECT {pieces_cost_sql('cost', 'part', 'basis')} FROM t").fetchone()
    if sqlite3.sqlite_version_info < (3, 43):  # (SUM adds in order, as sum() does)
        assert pieces_cost_of(row) == pieces_cost(pieces)
    else:  # (SQLite 3.43's SUM compensates its rounding: the last digits may differ)
        assert pieces_cost_of(row) == pytest.approx(pieces_cost(pieces), rel=1e-15)
