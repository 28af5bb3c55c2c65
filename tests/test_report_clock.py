"""Reports see every update whatever the indexing machine's clock says (issue 11).

`runs.indexed_at` comes from the clock of the machine that indexed a run. The report sync
used to rebuild the runs with `indexed_at` at or after its last high-water mark (minus 2 s):
an update indexed by a machine 1 h behind, or by an index pass committing after a later
one, was in `runs_v` and missing from every later report. The sync now takes the runs to
rebuild from `report_changes`, filled by triggers on `runs` in the writer's transaction.
"""

from __future__ import annotations

import os
import re
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

import sqlalchemy as sa

from ledger.index import db as dbmod
from ledger.index.models import Run
from indexhelpers import sa_writing as writing
from ledger.index.ops import index_homes
from ledger.records import read_run
from ledger.records.writer import EventWriter, settle
from reporthelpers import claude_stream, make, make_abandoned, report_json

BIG = 1_000_000
CREATED = "2026-03-08T10:00:00Z"


def _clock_behind(monkeypatch, hours: float = 1.0, only_thread: int | None = None) -> None:
    """The indexer's clock (ledger.index.db.now_utc, which stamps runs.indexed_at) `hours`
    behind; with `only_thread`, only for that thread (another indexer in this process keeps
    the right time)."""
    import threading

    real = dbmod.now_utc

    def now_utc() -> datetime:
        if only_thread is not None and threading.get_ident() != only_thread:
            return real()
        return real() - timedelta(hours=hours)

    monkeypatch.setattr(dbmod, "now_utc", now_utc)


def _grow_and_settle(run: Path) -> None:
    """The run gets a final usage receipt of BIG input tokens, then its outcome. Its files
    are dated a minute back: no later pass takes them as possibly still being written and
    reads them again (that would restamp the row with the reader's clock and hide the bug)."""
    w = EventWriter(run)
    w._seq = 100
    w.emit("usage", usage_stream_id="attempt-1/turn-1/claude-sonnet-4-5", provider="anthropic",
           model="claude-sonnet-4-5", attempt_key="attempt-1", turn_key="turn-1", observation_seq=9,
           counter_kind="cumulative", start_known=True, final_receipt=True,
           usage={"input_tokens": BIG, "output_tokens": 50, "cost_usd": 0.5})
    w.close()
    settle(run, "completed")
    _backdate(run)


def _backdate(run: Path) -> None:
    past = time.time() - 60
    for p in [run, *run.iterdir()]:
        os.utime(p, (past, past))


def _indexed_input_tokens(url: str, run_id: str) -> int:
    with writing(url) as conn:
        return conn.execute(sa.text("SELECT input_tokens FROM runs_v WHERE run_id = :r"), {"r": run_id}).scalar_one()


def _report_input(url: str, *args: str) -> int:
    doc, _ = report_json("daily", "--db", url, "--tz", "UTC", *args)
    return doc["totals"]["input_tokens"]


def test_an_update_indexed_with_a_clock_1h_behind_is_in_the_next_report(home, db_url, monkeypatch):
    """An abandoned run (the facts hold it as abandoned, so no 'running' check looks at it
    again) later receives a receipt of 1,000,000 input tokens and settles; a machine whose
    clock is 1 h behind indexes that. The next `ledger report` counts it."""
    run = make_abandoned(home, CREATED)
    before = _report_input(db_url)  # indexed and synced with the right clock
    assert before < BIG
    _grow_and_settle(run)
    with monkeypatch.context() as m:
        _clock_behind(m)
        summary = index_homes([home], db_url)
    assert summary.updated == 1
    run_id = read_run(run).id
    assert _indexed_input_tokens(db_url, run_id) == BIG  # the index has it ...
    with writing(db_url) as conn:  # ... stamped an hour before the facts' last sync
        runs = Run.__table__
        stamped = conn.execute(sa.select(runs.c.indexed_at).where(runs.c.run_id == run_id)).scalar_one()
    if stamped.tzinfo is None:
        stamped = stamped.replace(tzinfo=timezone.utc)
    assert stamped < datetime.now(timezone.utc) - timedelta(minutes=50)
    assert _report_input(db_url) == BIG  # ... and so has the report (the receipt replaces the estimate)
    doc, _ = report_json("run", "--db", db_url, "--tz", "UTC")
    (row,) = doc["rows"]
    assert row["key"] == run_id and row["input_tokens"] == BIG and row["outcome"] == "completed"


def test_a_rewritten_run_row_is_reported_whatever_its_timestamp(home, db_url):
    """Whatever code rewrites a run's row (delete + insert, as the indexer does), with any
    indexed_at, the change log hands it to the next sync: no clock, no margin."""
    runs = Run.__table__
    run = make(home, CREATED, [claude_stream()])
    _backdate(run)  # (so the report's own index pass leaves the row as written here)
    assert report_json("daily", "--db", db_url)[0]["totals"]["failed"] == 0
    with writing(db_url) as conn:
        row = dict(conn.execute(sa.select(runs)).mappings().one())
        conn.execute(sa.delete(runs).where(runs.c.run_id == row["run_id"]))
        row.update(outcome="failed", indexed_at=datetime(2001, 1, 1, tzinfo=timezone.utc))
        conn.execute(sa.insert(runs), [row])
    totals = report_json("daily", "--db", db_url)[0]["totals"]
    assert totals["runs"] == 1 and totals["failed"] == 1


class _HoldCommit:
    """Holds the commit of the first transaction that wrote `runs` in one thread (an index
    pass on a laptop that is slow to commit) until released. The pass's psycopg connection
    (ledger.index.serverpass.server_connect's) is watched: its statements and its
    transactions' commits."""

    # rows of `runs` go in by INSERT, or by psycopg's COPY; either way the batch's
    # transaction then takes the copy locks of its run ids (pglocks)
    WRITES_RUNS = re.compile(r'^\s*((INSERT\s+INTO|COPY)\s+"?runs"?[\s(]|SELECT pg_advisory_xact_lock\(\d+, hashtext)',
                             re.I)

    def __init__(self) -> None:
        self.thread: int | None = None
        self.wrote = False
        self.held = threading.Event()
        self.release = threading.Event()

    def __enter__(self) -> "_HoldCommit":
        from ledger.index import serverpass

        self._connect = serverpass.server_connect
        serverpass.server_connect = lambda *a, **kw: _Watched(self._connect(*a, **kw), self)
        return self

    def __exit__(self, *exc: object) -> None:
        from ledger.index import serverpass

        self.release.set()
        serverpass.server_connect = self._connect

    def statement(self, statement: object) -> None:
        if threading.get_ident() == self.thread and self.WRITES_RUNS.match(str(statement)):
            self.wrote = True

    def committing(self) -> None:
        if threading.get_ident() == self.thread and self.wrote and not self.held.is_set():
            self.held.set()
            self.release.wait(120)


class _Watched:
    """A psycopg connection (or cursor) whose statements, and commits of its transaction
    blocks, a _HoldCommit sees first."""

    def __init__(self, raw, hold: _HoldCommit) -> None:
        object.__setattr__(self, "_raw", raw)
        object.__setattr__(self, "_hold", hold)

    def __getattr__(self, name):
        return getattr(self._raw, name)

    def __setattr__(self, name, value) -> None:
        setattr(self._raw, name, value)

    def __enter__(self):
        self._raw.__enter__()
        return self

    def __exit__(self, *exc):
        return self._raw.__exit__(*exc)

    def cursor(self, *args, **kw):
        return _Watched(self._raw.cursor(*args, **kw), self._hold)

    def execute(self, sql, *args, **kw):
        self._hold.statement(sql)
        return self._raw.execute(sql, *args, **kw)

    def executemany(self, sql, *args, **kw):
        self._hold.statement(sql)
        return self._raw.executemany(sql, *args, **kw)

    def copy(self, sql, *args, **kw):
        self._hold.statement(sql)
        return self._raw.copy(sql, *args, **kw)

    @contextmanager
    def transaction(self, *args, **kw):
        with self._raw.transaction(*args, **kw) as tx:
            yield tx
            self._hold.committing()


def test_two_indexers_the_one_with_the_earlier_clock_committing_later(home, tmp_path, pg_url, monkeypatch):
    """PostgreSQL, two homes indexed at once (one lock per home): indexer 1, its clock 1 h
    behind, writes home A's update and is slow to commit; meanwhile indexer 2 (right clock)
    indexes home B and commits, and a report syncs; then indexer 1 commits. The report in
    between does not see A's update (not committed) and does not lose it: the next one has
    it. (With a high-water mark of indexer 2's time, A's row, stamped an hour earlier, was
    never looked at again.)"""
    monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=30s")  # a lock wait fails the test, never hangs it
    home_b = tmp_path / "home-b"
    run_a = make_abandoned(home, CREATED)
    make_abandoned(home_b, "2026-03-08T11:00:00Z")
    index_homes([home_b], pg_url)
    before = _report_input(pg_url)  # both homes indexed and synced
    _grow_and_settle(run_a)
    make_abandoned(home_b, "2026-03-08T12:00:00Z")  # something new for indexer 2
    errors: list[BaseException] = []
    go = threading.Event()

    def indexer_1() -> None:
        go.wait(60)
        try:
            index_homes([home], pg_url)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    with _HoldCommit() as hold:
        t = threading.Thread(target=indexer_1)
        t.start()
        hold.thread = t.ident
        _clock_behind(monkeypatch, only_thread=t.ident)
        go.set()
        assert hold.held.wait(60), errors
        assert index_homes([home_b], pg_url).new == 1  # indexer 2 commits first
        mid = _report_input(pg_url, "--home", str(home_b))
        assert before < mid < BIG  # B's new run is in; A's update is not committed yet
        hold.release.set()
        t.join(60)
    assert not t.is_alive() and not errors, errors
    assert _indexed_input_tokens(pg_url, read_run(run_a).id) == BIG
    after = _report_input(pg_url, "--home", str(home_b))
    one = mid - before  # one abandoned run's tokens
    assert after == mid - one + BIG


def test_resync_rebuilds_the_report_tables_from_the_index(home, db_url):
    """`ledger report --resync`: facts that no longer match the index (here: edited behind the
    sync's back, as a bug or an index written without the triggers would leave them) are
    rebuilt whole from the index; a plain report keeps them."""
    _backdate(make(home, CREATED, [claude_stream()]))
    doc, _ = report_json("daily", "--db", db_url)
    truth = doc["totals"]["input_tokens"]
    with writing(db_url) as conn:
        conn.exec_driver_sql("UPDATE report_facts SET input_tokens = 7")
        conn.exec_driver_sql("UPDATE report_slots SET input_tokens = 7")
        conn.exec_driver_sql("UPDATE report_days SET input_tokens = 7")  # (UTC days are read from it)
    assert report_json("daily", "--db", db_url)[0]["totals"]["input_tokens"] == 7
    doc, _ = report_json("daily", "--db", db_url, "--resync")
    assert doc["totals"]["input_tokens"] == truth


def test_without_the_change_triggers_every_report_is_rebuilt_and_says_so(home, db_url):
    """A `runs` table that lost its triggers (e.g. copied by hand) logs nothing: the sync
    rebuilds everything each time, right but slow, and says how to fix it."""
    from ledger.report.models import CHANGE_TRIGGERS

    runs = Run.__table__
    run = make(home, CREATED, [claude_stream()])
    _backdate(run)
    report_json("daily", "--db", db_url)
    with writing(db_url) as conn:
        on = " ON runs" if conn.dialect.name == "postgresql" else ""
        for name in CHANGE_TRIGGERS:
            conn.exec_driver_sql(f"DROP TRIGGER {name}{on}")
        conn.execute(sa.update(runs).values(outcome="failed", indexed_at=datetime(2001, 1, 1, tzinfo=timezone.utc)))
    doc, stderr = report_json("daily", "--db", db_url)
    assert doc["totals"]["failed"] == 1
    assert "change log triggers" in stderr and "ledger index --rebuild" in stderr
