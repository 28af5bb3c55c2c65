"""The first load into an empty PostgreSQL database (issue 11, "fast backfill").

Batches reach PostgreSQL through COPY, and the first batch of a pass into a database whose
`runs` has no statistics is followed by ANALYZE (ledger/index/bulk.py). These tests prove
the rows are exactly those of every other way in (a populated database, Core's executemany,
a rebuild in one transaction), that the statistics are taken (and only while missing), that
a taken ANALYZE lock does not stall the pass, and (slow) that an empty database loads about
as fast as a populated one.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from conftest import PG_URL, _pg_admin
from indexhelpers import cli, damaged_home, make_run, records_runs_json

from ledger.index import bulk
from ledger.index import db as dbmod
from ledger.index import ops
from ledger.index.ops import index_homes

COMPARED = ("runs", "subjects", "attempts", "usage_streams", "tool_uses", "index_cursors")
PASS_TIME = {"home_id", "indexed_at"}  # which database's home row / when: differ by construction

# strings COPY's text format must escape (tab, newline, carriage return, backslash, its
# NULL marker) and others
AWKWARD = ["tab\there", "line\nbreak", "cr\rhere", "back\\slash", "\\N", "naïve ✓", "quote'\"", "", " "]


@pytest.fixture
def more_pg(pg_url):
    """A factory of further fresh databases next to pg_url's (dropped afterwards)."""
    names: list[str] = []

    def make() -> str:
        name = f"ledger_t_{uuid.uuid4().hex[:12]}"
        with _pg_admin() as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        names.append(name)
        return PG_URL.rsplit("/", 1)[0] + "/" + name

    yield make
    with _pg_admin() as admin:
        for name in names:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def awkward_home(home: Path, n: int) -> None:
    """`n` runs (more than a first batch) with every kind of record and awkward values."""
    damaged_home(home)
    for i in range(n):
        s = AWKWARD[i % len(AWKWARD)]
        make_run(home, model=f"m-{i % 3}{s}", subjects=(f"task:{s}{i}", f"b{s}"), skill=s or None,
                 tools=("Bash", f"tool{s}", "Édit"), usage=((2 ** 62 + i, 3), (2 ** 62 + i + 7, 4 + i)),
                 cost=(0.1 + 0.2) * (i + 1) if i % 5 else None, outcome=None if i % 50 == 7 else "completed",
                 created_at=f"2026-0{1 + i % 9}-1{i % 10}T0{i % 10}:00:00.{i:06d}Z")


def dump(url: str, home: Path) -> dict[str, list[tuple]]:
    """Every row of `home` in the compared tables, without the pass-time columns, sorted."""
    eng = dbmod.engine(url)
    try:
        with eng.connect() as conn:
            hid = ops.home_id(conn, home)
            assert hid is not None
            out = {}
            for table in COMPARED:
                res = conn.execute(sa.text(f'SELECT * FROM "{table}" WHERE home_id = :h'), {"h": hid})
                keep = [i for i, k in enumerate(res.keys()) if k not in PASS_TIME]
                out[table] = sorted((tuple(r[i] for i in keep) for r in res), key=repr)
            return out
    finally:
        eng.dispose()


def stats(url: str) -> tuple[float, int]:
    """(reltuples, analyze_count) of `runs`."""
    eng = dbmod.engine(url)
    try:
        with eng.connect() as conn:
            return tuple(conn.execute(sa.text(
                "SELECT c.reltuples, s.analyze_count FROM pg_class c JOIN pg_stat_user_tables s "
                "ON s.relid = c.oid WHERE c.oid = CAST('runs' AS regclass)")).one())
    finally:
        eng.dispose()


def analyze(url: str) -> None:
    eng = dbmod.engine(url)
    try:
        with eng.connect() as conn, conn.begin():
            conn.exec_driver_sql("ANALYZE")
    finally:
        eng.dispose()


def test_first_load_stores_the_same_rows_as_every_other_way_in(tmp_path, pg_url, more_pg, monkeypatch):
    home, other = tmp_path / "home", tmp_path / "other"
    awkward_home(home, 300)
    for _ in range(5):
        make_run(other)

    # an empty database, COPY
    s = index_homes([home], pg_url, racy_ns=0)
    assert s.new == 307 and len(s.skipped) == 2
    empty = dump(pg_url, home)
    assert len(empty["runs"]) == 307 and len(empty["tool_uses"]) == 3 * 300 + 6
    res = cli("runs", "--json", "--all", "--home", str(home), "--db", pg_url)
    assert res.exit_code == 0, res.output
    assert res.stdout == records_runs_json(home)

    # a database already holding another home's runs
    populated_url = more_pg()
    index_homes([other], populated_url, racy_ns=0)
    index_homes([home], populated_url, racy_ns=0)
    assert dump(populated_url, home) == empty

    # a rebuild: the whole load in one transaction (ANALYZE inside it)
    rebuilt_url = more_pg()
    assert index_homes([home], rebuilt_url, racy_ns=0, rebuild=True).rebuilt
    assert dump(rebuilt_url, home) == empty

    # Core's executemany, as before COPY: COPY stores exactly what INSERT stored
    monkeypatch.setattr(bulk, "PG_COPY", False)
    insert_url = more_pg()
    index_homes([home], insert_url, racy_ns=0)
    assert dump(insert_url, home) == empty


def test_statistics_are_taken_after_the_first_batch_only_while_missing(tmp_path, pg_url, monkeypatch):
    home = tmp_path / "home"
    for _ in range(300):
        make_run(home)
    index_homes([], pg_url)  # the schema, no rows
    rows, analyzed = stats(pg_url)
    assert rows <= 0 and analyzed == 0

    index_homes([home], pg_url, racy_ns=0)
    rows, analyzed = stats(pg_url)
    assert analyzed == 1 and 64 <= rows < 300  # (taken after the first batch, not at the end)

    # statistics that count enough rows are left to autovacuum
    monkeypatch.setattr(bulk, "STATS_MIN_ROWS", 64)
    for _ in range(3):
        make_run(home)
    assert index_homes([home], pg_url, racy_ns=0).new == 3
    assert stats(pg_url)[1] == 1


def test_a_taken_analyze_lock_does_not_stall_the_pass(tmp_path, pg_url, monkeypatch):
    """Another session holds the lock ANALYZE needs (a rebuild in progress, someone's
    ANALYZE): the pass goes on without statistics after ANALYZE_WAIT_MS, its rows complete."""
    import psycopg

    home = tmp_path / "home"
    for _ in range(100):
        make_run(home)
    index_homes([], pg_url)
    monkeypatch.setattr(bulk, "ANALYZE_WAIT_MS", 200)
    holder = psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://"))
    try:
        holder.execute("LOCK TABLE runs IN SHARE UPDATE EXCLUSIVE MODE")
        done: list = []
        t = threading.Thread(target=lambda: done.append(index_homes([home], pg_url, racy_ns=0)), daemon=True)
        t.start()
        t.join(60)
        assert done and done[0].new == 100, "the pass waited for the ANALYZE lock"
        assert stats(pg_url)[1] == 0
    finally:
        holder.rollback()
        holder.close()
    res = cli("runs", "--json", "--all", "--home", str(home), "--db", pg_url)
    assert res.stdout == records_runs_json(home)


def test_a_taken_analyze_lock_is_classified_from_the_driver_and_through_sqlalchemy(tmp_path, pg_url, monkeypatch):
    """bulk.analyze_if_unknown on psycopg's own connection (the data layer's) gives up on a
    taken lock as it does on SQLAlchemy's, which wraps the same error (sqlstate on `.orig`)."""
    import psycopg

    lock = psycopg.errors.LockNotAvailable("canceling statement due to lock timeout")
    assert bulk.lock_not_available(lock)
    assert bulk.lock_not_available(sa.exc.OperationalError("ANALYZE", {}, lock))
    assert not bulk.lock_not_available(psycopg.errors.UndefinedTable("no such table"))
    assert not bulk.lock_not_available(sa.exc.OperationalError("x", {}, psycopg.errors.UndefinedTable("x")))

    index_homes([], pg_url)
    monkeypatch.setattr(bulk, "ANALYZE_WAIT_MS", 200)
    plain = pg_url.replace("postgresql+psycopg://", "postgresql://")
    holder = psycopg.connect(plain)
    try:
        holder.execute("LOCK TABLE runs IN SHARE UPDATE EXCLUSIVE MODE")
        with psycopg.connect(plain) as conn:
            with conn.transaction():
                bulk.analyze_if_unknown(conn, lambda: conn.transaction(), ["runs", "subjects"])
                assert conn.execute("SELECT current_setting('lock_timeout')").fetchone()[0] == "0"
    finally:
        holder.rollback()
        holder.close()
    assert stats(pg_url)[1] == 0


@pytest.mark.slow
def test_an_empty_database_loads_about_as_fast_as_a_populated_one(tmp_path, pg_url, more_pg):
    """Before: a foreign-key plan made while `runs` had no statistics made every child row
    read the home's runs so far (quadratic: 257 runs/s at 20,000). The populated database is
    analyzed by the test: its plans are good whatever the indexer does. Bounded at 3,000
    runs (LEDGER_STRESS=1: 20,000); best of two each, alternating (the machine is shared)."""
    n = 20_000 if os.environ.get("LEDGER_STRESS") else 3_000
    home, seed = tmp_path / "home", tmp_path / "seed"
    for i in range(n):
        make_run(home, subjects=(f"task:{i % 97}",), tools=("Bash", "Edit", "Read"))
    for _ in range(300):
        make_run(seed)
    empty, populated = [], []
    for _ in range(2):
        url = more_pg()
        index_homes([], url)  # the schema (its migrations are not what is compared)
        t = time.perf_counter()
        assert index_homes([home], url, racy_ns=0).new == n
        empty.append(time.perf_counter() - t)
        url = more_pg()
        index_homes([seed], url, racy_ns=0)
        analyze(url)  # (planned with statistics whatever the indexer does)
        t = time.perf_counter()
        assert index_homes([home], url, racy_ns=0).new == n
        populated.append(time.perf_counter() - t)
    assert min(empty) <= 1.5 * min(populated), (empty, populated)
