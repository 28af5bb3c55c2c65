"""report_groups (migration 0009, issue 13): `report session|skill` without filters read each
group whole from a rollup the sync keeps in step, the evaluation view's medians from the
skills' sorted figures; `report run --limit N` walks the run-cost indexes.

The reference is the facts path (`run_report(..., source="facts")`: what every report did
before), on generated homes, SQLite and PostgreSQL, after a first sync and after runs were
added, changed (skill, session, cost, outcome), deleted and re-keyed, each followed by an
incremental sync; and the rollup itself equals one rebuilt from scratch.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa

from indexhelpers import sa_reading as reading, sa_writing as writing
from ledger.index.ops import index_homes
from ledger.report import service
from ledger.report.aggregate import _source, run_report
from ledger.report.medians import _kth, _merged_middle, _middle
from ledger.report.query import ReportQuery
from test_report_top import generated_home

QUERIES = [ReportQuery(kind=kind, limit=limit, cost=cost, order=order, evaluation=evaluation)
           for kind in ("session", "skill") for limit in (None, 0, 1, 2, 5, 40)
           for cost in ("auto", "reported", "estimated") for order in (None, "asc")
           for evaluation in ((None,) if kind == "skill" else (None, False))]
RUN_QUERIES = [ReportQuery(kind="run", limit=limit, order=order, cost=cost)
               for limit in (0, 1, 3, 10, 500) for order in (None, "asc") for cost in ("auto", "reported")]


def _groups(url: str) -> list[tuple]:
    with reading(url) as conn:
        return [tuple(r) for r in conn.execute(sa.text(
            "SELECT * FROM report_groups ORDER BY kind, gnull, gkey")).fetchall()]


def _check(url: str) -> int:
    """Every query answered from report_groups (and the run-cost walk) equals the facts'."""
    served = 0
    with reading(url) as conn:
        for q in QUERIES + RUN_QUERIES:
            fast, ref = run_report(conn, q).to_dict(), run_report(conn, q, source="facts").to_dict()
            assert fast == ref, q
            served += _source(q) == "groups"
    # the rollup kept incrementally is the one a full rebuild makes
    kept = _groups(url)
    from ledger.report.sync import refresh_groups

    with writing(url) as conn:
        refresh_groups(conn, None)
    assert _same(_groups(url), kept)
    return served


def _same(a: list[tuple], b: list[tuple]) -> bool:
    """Equal rows; a cost sum may differ in its last bits (PostgreSQL sums in any order)."""
    import math

    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert len(x) == len(y)
        for u, v in zip(x, y):
            if isinstance(u, float) and isinstance(v, float):
                assert math.isclose(u, v, rel_tol=1e-12, abs_tol=1e-15), (x, y)
            else:
                assert (bytes(u) if isinstance(u, memoryview) else u) == (bytes(v) if isinstance(v, memoryview) else v), (x, y)
    return True


def _sql(url: str, *statements: str) -> None:
    """Change `runs` as any writer could (the change log's triggers see it)."""
    with writing(url) as conn:
        for stmt in statements:
            conn.execute(sa.text(stmt))


def test_groups_answer_like_the_facts_through_changes(home, db_url):
    generated_home(home, 90)
    index_homes([home], db_url)
    stats = service.sync(db_url)
    assert stats.full
    assert _check(db_url) == len(QUERIES)
    with reading(db_url) as conn:
        kinds = dict(conn.execute(sa.text("SELECT kind, count(*) FROM report_groups GROUP BY kind")).fetchall())
        nulls = conn.execute(sa.text("SELECT count(*) FROM report_groups WHERE gnull = 1")).scalar_one()
    assert set(kinds) == {"session", "skill"} and kinds["skill"] == 4 and nulls == 2  # runs without one

    # new runs, a deleted record (re-indexed), then changes written straight into `runs`
    generated = sorted((home / "runs").glob("*/run_*"))
    rnd = random.Random(3)
    from test_report_top import _run

    for i in range(200, 206):
        _run(home, rnd, i)
    shutil.rmtree(generated[0])
    index_homes([home], db_url)
    stats = service.sync(db_url)
    assert not stats.full and stats.rebuilt >= 6
    _check(db_url)

    ids = [p.name for p in generated[1:]]
    with reading(db_url) as conn:
        streamed = {r[0] for r in conn.execute(sa.text("SELECT DISTINCT run_id FROM usage_streams"))}
    # ids[5] gets the top cost through its streams: a run with some (a `command` run has none;
    # the run ids, and so their order, are random)
    k = next(i for i in range(5, len(ids)) if ids[i] in streamed)
    ids[5], ids[k] = ids[k], ids[5]
    _sql(db_url,
         f"UPDATE runs SET skill = 'brand-new' WHERE run_id = '{ids[0]}'",  # a group appears
         f"UPDATE runs SET skill = NULL WHERE run_id = '{ids[1]}'",  # joins the no-skill group
         f"UPDATE runs SET provider_session_id = 'top-a' WHERE run_id = '{ids[2]}'",  # joins a top session
         f"UPDATE runs SET provider_session_id = NULL WHERE run_id = '{ids[3]}'",
         f"UPDATE runs SET outcome = 'failed', duration_ms = 123456789 WHERE run_id = '{ids[4]}'",
         f"UPDATE usage_streams SET cost_usd = 99.5, final_receipt = TRUE WHERE run_id = '{ids[5]}'",
         f"UPDATE runs SET evidence_gaps = evidence_gaps WHERE run_id = '{ids[5]}'",  # (logs the stream change)
         f"DELETE FROM runs WHERE run_id IN ('{ids[6]}', '{ids[7]}')")
    service.sync(db_url)
    _check(db_url)
    with reading(db_url) as conn:
        q = ReportQuery(kind="skill")
        rows = {r["key"]: r for r in run_report(conn, q).to_dict()["rows"]}
        assert rows["brand-new"]["runs"] == 1
        top = run_report(conn, ReportQuery(kind="run", limit=1)).to_dict()["rows"]
    assert top[0]["key"] == ids[5] and top[0]["cost_usd"] % 99.5 == 0  # (99.5 per stream)

    # one run changed: its groups (old and new) are recomputed, no other
    with reading(db_url) as conn:
        session, skill = conn.execute(sa.text(
            f"SELECT provider_session_id, skill FROM runs WHERE run_id = '{ids[8]}'")).one()
    _sql(db_url, f"UPDATE runs SET skill = 'review' WHERE run_id = '{ids[8]}'")
    stats = service.sync(db_url)
    assert stats.rebuilt == 1 and stats.groups == len({("session", session), ("skill", skill), ("skill", "review")})
    _check(db_url)

    # every run of a group gone: the group goes too
    _sql(db_url, f"DELETE FROM runs WHERE run_id = '{ids[0]}'")
    service.sync(db_url)
    assert "brand-new" not in {r[2] for r in _groups(db_url)}
    _check(db_url)


def test_medians_are_the_runs_own(home, db_url):
    """The skills' medians and the totals' are statistics.median of the runs' figures."""
    import statistics

    generated_home(home, 70)
    index_homes([home], db_url)
    service.sync(db_url)
    with reading(db_url) as conn:
        facts = conn.execute(sa.text("SELECT skill, run_cost_auto, duration_ms FROM report_facts WHERE first = 1")).fetchall()
        doc = run_report(conn, ReportQuery(kind="skill")).to_dict()
    assert _source(ReportQuery(kind="skill")) == "groups"

    def med(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    for row in doc["rows"]:
        mine = [f for f in facts if f[0] == row["key"]]
        assert row["median_cost_usd"] == round(med(f[1] for f in mine), 10)
        assert row["median_duration_ms"] == int(med(f[2] for f in mine))
    assert doc["totals"]["median_cost_usd"] == round(med(f[1] for f in facts), 10)
    assert doc["totals"]["median_duration_ms"] == int(med(f[2] for f in facts))


def test_kth_of_sorted_lists():
    rnd = random.Random(11)
    for _ in range(300):
        lists = [sorted(rnd.choice([rnd.random, lambda: rnd.randrange(5)])() for _ in range(rnd.randrange(6)))
                 for _ in range(rnd.randrange(1, 5))]
        union = sorted(v for s in lists for v in s)
        for k in range(len(union)):
            assert _kth([s for s in lists if s], k) == union[k]
        assert _merged_middle(lists) == _middle(union)


def test_group_kinds_agree():
    from ledger.index import report_tables
    from ledger.report import groups, sync, synced

    assert groups.GROUP_KINDS == report_tables.GROUP_KINDS
    assert groups.VALUE_KINDS == sync.VALUE_KINDS
    assert synced.GROUP_RULES == sync.GROUP_RULES


def test_a_sync_fills_the_groups_of_an_index_synced_before_them(home, tmp_path):
    """An index whose facts were synced before migration 0009: the next sync builds the
    groups from the facts, without re-pricing anything, and the fast check says so first."""
    from ledger.index.rawread import reading as raw_reading
    from ledger.report.synced import facts_current

    url = f"sqlite:///{tmp_path / 'index.sqlite'}"
    generated_home(home, 30)
    index_homes([home], url)
    service.sync(url)
    _sql(url, "DELETE FROM report_groups", "DELETE FROM report_state WHERE key = 'group_rules'")
    with raw_reading(url) as c:
        assert not facts_current(c)
    stats = service.sync(url)
    assert not stats.full and stats.priced_streams == 0
    with raw_reading(url) as c:
        assert facts_current(c)
    assert _check(url) == len(QUERIES)
