"""The estimate cache (report_facts): priced once, re-priced only when usage or prices change."""

from __future__ import annotations

import shutil

import pytest
import sqlalchemy as sa

from ledger.index.ops import index_homes
from ledger.pricing import estimate_cost
from ledger.records import read_run
from ledger.records.writer import settle
from ledger.report.query import ReportQuery
from ledger.report.models import ReportFact
from indexhelpers import sa_writing as writing
from ledger.report.service import query
from ledger.report.sync import sync_facts
from reporthelpers import claude_stream, make, make_abandoned

facts = ReportFact.__table__


class Counting:
    def __init__(self):
        self.calls = []

    def __call__(self, provider, model, counters):
        self.calls.append(model)
        return estimate_cost(provider, model, counters)


def _sync(url, pv="prices v1", **kw):
    est = Counting()
    with writing(url) as conn:
        stats = sync_facts(conn, estimator=est, price_version=pv, **kw)
    return stats, est


def _runs(url, kind="run"):
    rep = query(url, ReportQuery(kind=kind))
    return {r["key"]: r for r in rep.rows}, rep


def test_estimates_are_cached_and_repriced_only_when_needed(home, db_url):
    a = make(home, "2026-03-08T10:00:00Z", [claude_stream(final=False, counters={"cost_usd": None})])
    b = make(home, "2026-03-08T11:00:00Z", [claude_stream(model="gpt-5.5", provider="openai", final=False,
                                                          counters={"cost_usd": None})], model="gpt-5.5")
    index_homes([home], db_url)
    stats, est = _sync(db_url)
    assert stats.full and stats.rebuilt == 2 and len(est.calls) == 2
    # nothing changed: nothing is re-read or re-priced
    stats, est = _sync(db_url)
    assert not stats.full and stats.rebuilt == 0 and est.calls == []
    # a new run: only it is priced
    c = make(home, "2026-03-08T12:00:00Z", [claude_stream(final=False, counters={"cost_usd": None,
                                                                                  "input_tokens": 999})])
    index_homes([home], db_url)
    stats, est = _sync(db_url)
    assert len(est.calls) == 1  # (runs the indexer re-read keep their cached estimates)
    assert stats.rebuilt == 1 + stats.reused_estimates
    rows, _ = _runs(db_url)
    assert rows[read_run(c).id]["input_tokens"] == 999
    # the price data changed: everything is re-priced
    stats, est = _sync(db_url, pv="prices v2")
    assert stats.full and stats.rebuilt == 3 and len(est.calls) == 3
    # a run removed from the home leaves the report
    shutil.rmtree(b)
    index_homes([home], db_url)
    stats, est = _sync(db_url, pv="prices v2")
    assert stats.removed == 1 and est.calls == []
    rows, _ = _runs(db_url)
    assert set(rows) == {read_run(a).id, read_run(c).id}
    with writing(db_url) as conn:  # the views `ledger sql` documents say which prices
        pv = {r[0] for r in conn.exec_driver_sql("SELECT price_version FROM run_costs_v")}
        bases = {r[0] for r in conn.exec_driver_sql("SELECT cost_basis FROM model_costs_v")}
    assert pv == {"prices v2"} and bases == {"estimated"}


def test_a_running_run_that_settles_and_grows_is_updated(home, db_url):
    from ledger.records.writer import EventWriter

    run = make(home, "2026-03-08T10:00:00Z", [claude_stream(final=False, counters={"cost_usd": None})],
               outcome=None)
    index_homes([home], db_url)
    _sync(db_url)
    rows, _ = _runs(db_url)
    r = rows[read_run(run).id]
    assert r["failed"] == 0 and r["cost_basis"] == "estimated"
    # the run goes on: more usage, then its receipt with the client's cost, then it fails
    w = EventWriter(run)
    w._seq = 100
    w.emit("usage", usage_stream_id="attempt-1/turn-1/claude-sonnet-4-5", provider="anthropic",
           model="claude-sonnet-4-5", attempt_key="attempt-1", turn_key="turn-1", observation_seq=9,
           counter_kind="cumulative", start_known=True, final_receipt=True,
           usage={"input_tokens": 500, "output_tokens": 50, "cost_usd": 0.5})
    w.close()
    settle(run, "failed")
    index_homes([home], db_url)
    stats, est = _sync(db_url)
    assert stats.rebuilt == 1
    rows, _ = _runs(db_url)
    r = rows[read_run(run).id]
    assert r["failed"] == 1 and r["input_tokens"] == 500 and r["cost_usd"] == 0.5 and r["cost_basis"] == "reported"


def test_liveness_changes_reach_the_report(home, db_url):
    make_abandoned(home, "2026-03-08T10:00:00Z")
    index_homes([home], db_url)
    _sync(db_url)
    _, rep = _runs(db_url, "daily")
    assert rep.totals["abandoned"] == 1


def test_a_run_written_with_an_older_timestamp_is_synced_and_a_missed_change_reconciled(home, db_url):
    """Another machine with a slow clock indexes a run into a shared index: the change log
    hands it to the sync whatever its indexed_at (tests/test_report_clock.py). A change that
    missed the log (written with the triggers off) is still given away by the run count."""
    from datetime import datetime, timezone

    from ledger.index.models import Run

    runs = Run.__table__
    other = "run_" + "ab" * 16
    make(home, "2026-03-08T10:00:00Z", [claude_stream()])
    index_homes([home], db_url)
    _sync(db_url)

    def add(clear_log: bool) -> None:
        with writing(db_url) as conn:
            row = dict(conn.execute(sa.select(runs)).mappings().first())
            row.update(run_id=other, indexed_at=datetime(2001, 1, 1, tzinfo=timezone.utc))
            conn.execute(sa.insert(runs), [row])
            if clear_log:
                conn.exec_driver_sql("DELETE FROM report_changes")

    def remove(clear_log: bool) -> None:
        with writing(db_url) as conn:
            conn.execute(sa.delete(runs).where(runs.c.run_id == other))
            if clear_log:
                conn.exec_driver_sql("DELETE FROM report_changes")

    for missed in (False, True):
        add(missed)
        stats, est = _sync(db_url)
        assert stats.rebuilt == 1 and stats.reconciled == missed and stats.checked == (0 if missed else 1)
        rows, rep = _runs(db_url)
        assert other in rows and rep.totals["runs"] == 2
        remove(missed)  # and a run deleted from the index leaves the report the same way
        stats, _ = _sync(db_url)
        assert stats.removed == 1 and stats.reconciled == missed
        assert _runs(db_url)[1].totals["runs"] == 1


@pytest.mark.parametrize("mode", ["auto", "estimated"])
def test_unpriced_model_reason_is_kept_with_the_cache(home, mode):
    url = f"sqlite:///{home.parent / 'idx.sqlite'}"
    make(home, "2026-03-08T10:00:00Z", [claude_stream(model="nope-1", final=False, counters={"cost_usd": None})],
         model="nope-1")
    index_homes([home], url)
    _sync(url)
    _sync(url)  # the cached row keeps its reason
    rep = query(url, ReportQuery(kind="daily", cost=mode))
    assert rep.pricing["unpriced"][0]["model"] == "nope-1"
    assert rep.rows[0]["cost_basis"] == "unknown"


def test_rollups_answer_exactly_like_the_facts(home, db_url):
    """report_slots / report_days (fast paths) == report_facts (the reference), for every
    zone, range and filter they serve; and after changes that touch some slots only."""
    import random

    from zoneinfo import ZoneInfo

    from ledger.index.ops import reading
    from ledger.report.aggregate import _source, run_report
    from ledger.report.buckets import parse_day

    rnd = random.Random(5)
    models = ["claude-sonnet-4-5", "claude-haiku-4-5", "mystery-2"]
    for i in range(40):
        day = rnd.choice([7, 8, 9])
        t = f"2026-03-{day:02d}T{rnd.randrange(24):02d}:{rnd.randrange(60):02d}:{rnd.randrange(60):02d}Z"
        m = rnd.choice(models)
        streams = [claude_stream(model=m, final=rnd.random() < 0.5, counters={"input_tokens": rnd.randrange(1, 999)})]
        if rnd.random() < 0.3:
            streams.append(claude_stream(model="claude-haiku-4-5", final=False, counters={"cost_usd": None}))
        make(home, t, streams if rnd.random() < 0.9 else [], model=m, harness=rnd.choice(["claude", "codex"]),
             outcome=rnd.choice(["completed", "completed", "failed", "interrupted"]))

    def check():
        index_homes([home], db_url)
        _sync(db_url)
        queries = []
        for zone in ("UTC", "America/New_York", "Asia/Kathmandu"):
            for since, until in ((None, None), ("2026-03-08", "2026-03-08"), ("2026-03-08", None), (None, "2026-03-08")):
                for kind in ("daily", "weekly", "monthly", "model", "harness"):
                    for extra in ({}, {"breakdown": True}, {"filters": {"harness": ["codex"], "outcome": ["failed"]}},
                                  {"cost": "estimated"}, {"cost": "reported"}):
                        queries.append(ReportQuery(
                            kind=kind, zone=ZoneInfo(zone), zone_name=zone,
                            since=parse_day(since) if since else None, until=parse_day(until) if until else None,
                            **extra))
        served = 0
        with reading(db_url) as conn:
            for q in queries:
                if _source(q) == "facts":
                    continue
                served += 1
                fast, ref = run_report(conn, q).to_dict(), run_report(conn, q, source="facts").to_dict()
                assert fast == ref, (q, fast, ref)
        assert served > 100

    check()
    # touch a few slots: a new run, a settled run re-indexed, a run removed
    make(home, "2026-03-08T12:00:00Z", [claude_stream()])
    shutil.rmtree(next(p for p in (home / "runs").glob("*/run_*")))
    check()
