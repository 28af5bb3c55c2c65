"""The full sync through the sqlite3 driver (ledger.report.fullsync, issue 10) builds the
report's tables exactly as the SQLAlchemy Core path does: value for value, type for type.

- generated homes with every shape of run the report knows (no usage, a plain command,
  several models and streams, unknown counters, an unpriced model, receipts with and
  without cost, retried attempts, subjects, verdicts, unsettled and abandoned runs, a
  damaged record) plus imported Claude Code sessions (streams in several slots, each with
  its own estimate: the FactBuilder.rows fallback);
- `record_rows`, the tuple builder of a run record, equals FactBuilder.rows on random runs.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import claudehistory
from ledger.cli.app import app
from ledger.index.ops import index_homes
from ledger.report import fullsync, service
from ledger.report import sync as S
from reporthelpers import claude_stream, make, make_abandoned
from test_report_top import generated_home

REPORT_TABLES = ("report_facts", "report_slots", "report_days", "report_groups", "report_group_days", "report_state")


def _tables(path: Path, skip: tuple[str, ...] = ()) -> dict[str, list[tuple]]:
    """Every row of the report's tables with each value's SQLite type, in key order."""
    db = sqlite3.connect(path)
    try:
        out = {}
        for t in REPORT_TABLES:
            cols = [r[1] for r in db.execute(f"PRAGMA table_info({t})") if r[1] not in skip]
            sel = ", ".join(f'"{c}", typeof("{c}")' for c in cols)
            out[t] = sorted(db.execute(f"SELECT {sel} FROM {t}").fetchall(), key=repr)
        out["schema"] = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name").fetchall()
        return out
    finally:
        db.close()


def _odd_runs(home: Path) -> None:
    """The shapes generated_home may not hold."""
    make(home, "2026-03-04T09:00:00Z", [], harness="command")  # a plain command: no cost piece
    make(home, "2026-03-04T09:05:00Z", [])  # an agent run that reported no usage
    make(home, "2026-03-04T09:10:00Z", [claude_stream(model="no-such-model-xyz")])  # unpriced
    make(home, "2026-03-04T09:15:00Z", [claude_stream(), claude_stream(stream_id="s2", model="claude-haiku-4-5")])
    make(home, "2026-03-04T09:20:00Z", [claude_stream(final_receipt=False), claude_stream(stream_id="s2")])
    make(home, "2026-03-04T09:25:00Z", [claude_stream(cost_usd=None)])
    make(home, "2026-03-04T09:30:00Z", [claude_stream(input_tokens=None)])  # input unknown
    make_abandoned(home, "2026-03-04T09:35:00Z")
    bad = home / "runs" / "zz" / "run_zz0000000000000000000000000000"
    bad.mkdir(parents=True)
    (bad / "manifest.json").write_text("{not json")


@pytest.fixture
def both(home, tmp_path, monkeypatch):
    """(index synced through Core, the same index synced through the driver)."""
    generated_home(home, 120)
    _odd_runs(home)
    src = tmp_path / "claude"
    claudehistory.generate(src, sessions=6, seed=3)
    res = CliRunner().invoke(app, ["import", "claude", "--from", str(src)])
    assert res.exit_code == 0, res.output
    core = tmp_path / "core.sqlite"
    index_homes([home], f"sqlite:///{core}")
    driver = tmp_path / "driver.sqlite"
    shutil.copyfile(core, driver)
    monkeypatch.setattr(S, "DRIVER_FULL_SYNC", False)
    a = service.sync(f"sqlite:///{core}", full=True)
    monkeypatch.setattr(S, "DRIVER_FULL_SYNC", True)
    b = service.sync(f"sqlite:///{driver}", full=True)
    assert a.full and b.full and a.rebuilt == b.rebuilt > 130
    return core, driver


def test_driver_full_sync_builds_the_same_tables_as_core(both):
    core, driver = both
    want, got = _tables(core), _tables(driver)
    db = sqlite3.connect(core)
    # the shapes are there: imported sessions (in several slots), runs without usage, a plain
    # command, unpriced rows, runs of several models, abandoned runs, subjects
    one = lambda sql: db.execute(sql).fetchone()[0]  # noqa: E731
    assert one("SELECT count(DISTINCT slot) FROM report_facts WHERE source = 'claude-log' GROUP BY run_id "
               "ORDER BY 1 DESC LIMIT 1") > 1
    assert one("SELECT count(*) FROM report_facts WHERE no_usage = 1") > 0
    assert one("SELECT count(*) FROM report_facts WHERE harness = 'command' AND piece = 0") > 0
    assert one("SELECT count(*) FROM report_facts WHERE unpriced IS NOT NULL") > 0
    assert one("SELECT count(*) FROM report_facts WHERE first = 0") > 0
    assert one("SELECT count(*) FROM report_facts WHERE abandoned = 1") > 0
    assert one("SELECT count(*) FROM report_facts WHERE subject IS NOT NULL") > 0
    for t in want:
        assert got[t] == want[t], t


def test_a_dead_syncs_scratch_is_removed_by_the_next_sync(both, tmp_path, monkeypatch):
    """A sync killed while its fork's scratch file exists leaves it; the next one removes it."""
    core, driver = both
    stale = driver.parent / ".ledger-index-parts-999999999-x"  # (no such pid)
    stale.mkdir()
    (stale / "facts.sqlite").write_bytes(b"left by a killed sync")
    monkeypatch.setattr(fullsync, "PARALLEL_AT", 50)
    monkeypatch.setattr(fullsync, "_busy", lambda: False)
    service.sync(f"sqlite:///{driver}", full=True)
    assert not stale.exists()
    assert _tables(driver) == _tables(core)


@pytest.mark.parametrize("child", ["builds", "refuses", "dies"])
def test_two_processes_build_the_same_tables(both, tmp_path, monkeypatch, child):
    """A home of PARALLEL_AT runs or more is split with a forked process; when that process
    refuses (it sees other runs than the writer) or dies, the writer builds its part too."""
    core, driver = both
    again = tmp_path / "again.sqlite"
    shutil.copyfile(driver, again)
    monkeypatch.setattr(fullsync, "PARALLEL_AT", 50)
    monkeypatch.setattr(fullsync, "_busy", lambda: False)  # (whatever else runs on this machine)
    forks = []
    real_init = fullsync._Part.__init__

    def counting_init(self, *a, **k):
        forks.append(1)
        real_init(self, *a, **k)

    monkeypatch.setattr(fullsync._Part, "__init__", counting_init)
    if child == "refuses":  # the child counts another number of runs than the writer did
        real_child = fullsync._Part._child
        monkeypatch.setattr(fullsync._Part, "_child", lambda self, path, b, home, start, sig: real_child(
            self, path, b, home, start, (sig[0] + 1, *sig[1:])))
    elif child == "dies":
        def die(self, *a):
            os._exit(3)

        monkeypatch.setattr(fullsync._Part, "_child", die)
    results = []
    real_result = fullsync._Part.result
    monkeypatch.setattr(fullsync._Part, "result", lambda self: results.append(real_result(self)) or results[-1])
    st = service.sync(f"sqlite:///{again}", full=True)
    assert forks, "no process was forked"
    assert [r["ok"] for r in results] == [child == "builds"] * len(forks)
    assert st.rebuilt == sqlite3.connect(again).execute("SELECT count(*) FROM runs").fetchone()[0]
    assert _tables(again) == _tables(core)
    assert not list(again.parent.glob(".ledger-index-parts-*"))  # the scratch files are gone


def test_an_incremental_sync_after_the_driver_full_sync_matches_core(both, home):
    """The facts the driver wrote serve as the estimate cache of later syncs exactly like Core's."""
    core, driver = both
    make(home, "2026-03-05T10:00:00Z", [claude_stream()])
    for path in (core, driver):
        index_homes([home], f"sqlite:///{path}")
        st = service.sync(f"sqlite:///{path}")
        assert not st.full and st.rebuilt >= 1  # (the new run, and any the pass saw change)
    # (each index stamped the new run when it indexed it: the facts hold their own run's stamp)
    for path in (core, driver):
        db = sqlite3.connect(path)
        assert db.execute("SELECT count(*) FROM report_facts f JOIN runs r USING (home_id, run_id) "
                          "WHERE f.indexed_at IS NOT r.indexed_at").fetchone()[0] == 0
    assert _tables(driver, skip=("indexed_at",)) == _tables(core, skip=("indexed_at",))


# -- record_rows against FactBuilder.rows on random runs --------------------------------------

def _estimator(provider, model, counters):
    if model == "unpriced":
        return None, "no price"
    if counters.get("input_tokens") is None or counters.get("output_tokens") is None:
        return None, "input or output tokens unknown"
    return counters["input_tokens"] * 3e-6 + counters["output_tokens"] * 1.5e-5 + counters.get("cache_read_tokens", 0) * 3e-7, None


counts = st.one_of(st.none(), st.integers(0, 10**7))
costs = st.one_of(st.none(), st.floats(0, 50, allow_nan=False), st.just(0.0))
stream = st.fixed_dictionaries({
    "provider": st.sampled_from(["anthropic", "openai", None]),
    "model": st.sampled_from(["m1", "m2", "unpriced", None]),
    "final_receipt": st.sampled_from([True, False, None]),
    "cost_usd": costs,
    **{c: counts for c in S.COUNTER_COLUMNS},
})
run = st.fixed_dictionaries({
    "harness": st.sampled_from(["claude", "codex", "command"]),
    "model": st.sampled_from(["m1", "m3", None]),
    "outcome": st.sampled_from(["completed", "failed", "interrupted", "weird", None]),
    "settled": st.booleans(),
    "state": st.sampled_from(["running", "abandoned", "settled", None]),
    "evidence_gaps": st.one_of(st.none(), st.integers(0, 3)),
    "duration_ms": st.one_of(st.none(), st.integers(0, 10**6)),
    "ok": st.sampled_from([True, False, None]),
    "skill_invoked": st.sampled_from([True, False, None]),
    "tool_calls": st.one_of(st.none(), st.integers(0, 9)),
    "tool_errors": st.one_of(st.none(), st.integers(0, 9)),
    "tool_semantic_errors": st.one_of(st.none(), st.integers(0, 9)),
    "minute": st.integers(0, 60 * 24 * 3),
})


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run, st.lists(stream, max_size=4), st.lists(st.sampled_from(["task:a", "task:b", "x"]), max_size=3))
def test_record_rows_equal_factbuilder_rows(r, streams, subjects):
    minute = r.pop("minute")
    values = {**dict.fromkeys(fullsync.RUN_NAMES), **r, "home_id": 1, "run_id": "run_x", "source": "record",
              "created_at": datetime(2026, 3, 1) + timedelta(minutes=minute, seconds=minute % 7, microseconds=minute),
              "indexed_at": "2026-03-04 00:00:00.000000", "skill": "s", "repo": "r", "host": "h",
              "provider_session_id": "sess"}
    run_row = fullsync.RunRow(**values)
    rows = [fullsync.StreamRow(**{**dict.fromkeys(fullsync.STREAM_NAMES), **s, "home_id": 1, "run_id": "run_x",
                                  "stream_id": f"s{i}"}) for i, s in enumerate(streams)]
    fast = fullsync.record_rows(S.FactBuilder("v", _estimator, S.SyncStats()), run_row, rows, subjects)
    from types import SimpleNamespace

    ref_builder = S.FactBuilder("v", _estimator, S.SyncStats())
    ref = [fullsync._as_tuple(d) for d in ref_builder.rows(SimpleNamespace(**values), rows, {}, subjects)]
    assert repr(fast) == repr(ref)  # (repr: NaN-free, and 0.0 / -0.0 and int / float told apart)

