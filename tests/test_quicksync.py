"""The small sync through the sqlite3 driver (ledger.report.quicksync, issue 10) writes the
report's tables exactly as sync_facts (SQLAlchemy Core, not `full`) does: row for row, value
for value, type for type, on generated homes with every shape of run, after random changes
(new runs of every shape, running runs that grow, settle or turn abandoned, removed runs,
imported sessions, a second home). When the case is not a small one it declines and writes
nothing, and the report falls back to the Core path. It never imports SQLAlchemy.
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

import claudehistory
from ledger.cli.app import app
from ledger.index.ops import index_homes
from ledger.records.writer import EventWriter, settle
from ledger.report import facts, quicksync, schema, service, sync, synced
from ledger.report.quicksync import sync_small
from reporthelpers import claude_stream, make, make_abandoned
from test_fullsync import _odd_runs
from test_report_top import generated_home

TABLES = ("report_facts", "report_slots", "report_days", "report_groups", "report_group_days", "report_state",
          "report_changes")


def tables(path: Path) -> dict[str, list[tuple]]:
    """Every row of the report's tables (and its change log) with each value's SQLite type."""
    db = sqlite3.connect(path)
    try:
        out = {}
        for t in TABLES:
            cols = [r[1] for r in db.execute(f"PRAGMA table_info({t})")]
            sel = ", ".join(f'"{c}", typeof("{c}")' for c in cols)
            out[t] = sorted(db.execute(f"SELECT {sel} FROM {t}").fetchall(), key=repr)
        return out
    finally:
        db.close()


def url(path: Path) -> str:
    return f"sqlite:///{path}"


def import_sessions(home: Path, src: Path, seed: int, sessions: int) -> None:
    claudehistory.generate(src, sessions=sessions, seed=seed)
    res = CliRunner().invoke(app, ["import", "claude", "--from", str(src)])
    assert res.exit_code == 0, res.output


class World:
    """A home (and a second one) with every shape of run, indexed and synced through Core."""

    def __init__(self, home: Path, tmp: Path, seed: int) -> None:
        self.home, self.tmp = home, tmp
        self.other = tmp / "other-home"
        self.rnd = random.Random(seed)
        self.running: list[Path] = []  # unsettled runs this process launched (running)
        self.n = 0
        generated_home(home, 50)
        _odd_runs(home)
        import_sessions(home, tmp / "claude-0", seed, 3)
        for i in range(3):
            self.running.append(make(home, f"2026-03-0{3 + i}T08:0{i}:00Z",
                                     [claude_stream(final=False, counters={"cost_usd": None})],
                                     outcome=None, skill=self.rnd.choice(["deploy", None])))
        self.homes = [home]
        self.core = tmp / "core.sqlite"
        index_homes(self.homes, url(self.core))
        service.sync(url(self.core))

    def runs(self) -> list[Path]:
        return sorted(p for h in self.homes for p in (h / "runs").glob("*/run_*") if (p / "manifest.json").is_file()
                      and p.name != "run_zz0000000000000000000000000000")

    # -- changes ---------------------------------------------------------------------------

    def new_run(self, shape: int | None = None) -> None:
        r, self.n = self.rnd, self.n + 1
        day, minute = r.randrange(1, 28), r.randrange(60)
        at = f"2026-03-{day:02d}T{r.randrange(24):02d}:{minute:02d}:{r.randrange(60):02d}Z"
        home = self.other if self.other in self.homes and r.random() < 0.4 else self.home
        shape = r.randrange(8) if shape is None else shape
        skill = r.choice(["deploy", "review", "fix", "brand-new", None])
        kw = dict(skill=skill, subjects=r.choice([[], ["task:A"], ["task:Z", "task:A"]]),
                  repo=r.choice(["r1", None]))
        if shape == 0:
            make(home, at, [], harness="command", **kw)
        elif shape == 1:
            make(home, at, [], **kw)
        elif shape == 2:
            make(home, at, [claude_stream(model="no-such-model-xyz")], **kw)
        elif shape == 3:
            make(home, at, [claude_stream(), claude_stream(model="claude-haiku-4-5")], **kw)
        elif shape == 4:
            make(home, at, [claude_stream(final=False), claude_stream(cost_usd=None)],
                 outcome=r.choice(["failed", "interrupted"]), **kw)
        elif shape == 5:
            make(home, at, [claude_stream(counters={"input_tokens": r.randrange(1, 10**6)})], **kw)
        elif shape == 6:
            make_abandoned(home, at)
        else:
            self.running.append(make(home, at, [claude_stream(final=False, counters={"cost_usd": None})],
                                     outcome=None, **kw))

    def grow(self) -> None:
        """A running run reports more usage (its fingerprint changes: re-priced)."""
        if not self.running:
            return self.new_run()
        run = self.rnd.choice(self.running)
        w = EventWriter(run)
        w._seq = 100 + self.n
        self.n += 1
        w.emit("usage", usage_stream_id=f"attempt-1/turn-{self.n}/claude-sonnet-4-5", provider="anthropic",
               model="claude-sonnet-4-5", attempt_key="attempt-1", turn_key=f"turn-{self.n}", observation_seq=1,
               counter_kind="cumulative", start_known=True, final_receipt=self.rnd.random() < 0.5,
               usage={"input_tokens": 100 * self.n, "output_tokens": 7, "cost_usd": 0.25})
        w.close()

    def settle(self) -> None:
        if not self.running:
            return self.new_run()
        run = self.running.pop(self.rnd.randrange(len(self.running)))
        settle(run, self.rnd.choice(["completed", "failed", "interrupted"]))

    def abandon(self) -> None:
        """A running run whose launcher's boot is over: the next pass turns it abandoned."""
        if not self.running:
            return self.new_run()
        run = self.running.pop(self.rnd.randrange(len(self.running)))
        mpath = run / "manifest.json"
        m = orjson.loads(mpath.read_bytes())
        m["boot_id"] = "00000000-0000-0000-0000-000000000000"
        os.chmod(mpath, 0o600)
        mpath.write_bytes(orjson.dumps(m))

    def remove(self) -> None:
        run = self.rnd.choice(self.runs())
        if run in self.running:
            self.running.remove(run)
        shutil.rmtree(run)

    def second_home(self) -> None:
        if self.other not in self.homes:
            self.homes.append(self.other)
        make(self.other, "2026-03-09T09:00:00Z", [claude_stream()], skill="deploy")

    def sessions(self) -> None:
        self.n += 1
        import_sessions(self.home, self.tmp / f"claude-{self.n}", 100 + self.n, 1)

    CHANGES = ("new_run", "new_run", "grow", "settle", "abandon", "remove", "second_home")

    # -- one round -------------------------------------------------------------------------

    def round(self, changes: list[str]) -> tuple[dict, dict]:
        """Apply `changes`, index, then sync a copy of the index each way: (Core's, the driver's)."""
        for change in changes:
            name, _, arg = change.partition(":")
            getattr(self, name)(*([int(arg)] if arg else []))
        index_homes(self.homes, url(self.core))
        mine = self.tmp / "mine.sqlite"
        shutil.copyfile(self.core, mine)
        st = service.sync(url(self.core))
        assert not st.full and not st.reconciled
        assert sync_small(url(mine)) is True, changes
        return tables(self.core), tables(mine)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_small_sync_writes_what_sync_facts_writes(home, tmp_path, seed):
    w = World(home, tmp_path, seed)
    # every shape of new run first (a plain command, no usage, unpriced, two models, failed
    # with a mix of receipts, big counters, abandoned, running), in a second home too
    rounds = [[f"new_run:{i}" for i in range(4)], ["second_home"] + [f"new_run:{i}" for i in range(4, 8)],
              ["grow"], ["settle", "new_run"], ["abandon"], ["remove"], ["sessions"] if seed == 1 else ["grow"]]
    rounds += [[w.rnd.choice(World.CHANGES) for _ in range(w.rnd.randrange(1, 5))] for _ in range(5)]
    for i, changes in enumerate(rounds):
        want, got = w.round(changes)
        for t in TABLES:
            assert got[t] == want[t], (t, changes)
        if i == 1:  # the shapes were there (before any removal)
            db = sqlite3.connect(w.core)
            one = lambda sql: db.execute(sql).fetchone()[0]  # noqa: E731
            assert one("SELECT count(DISTINCT home_id) FROM report_facts") == 2
            assert one("SELECT count(*) FROM report_facts WHERE first = 0") > 0
            assert one("SELECT count(*) FROM report_facts WHERE source = 'claude-log'") > 0
            assert one("SELECT count(*) FROM report_facts WHERE abandoned = 1") > 0
            assert one("SELECT count(*) FROM report_facts WHERE no_usage = 1") > 0
            assert one("SELECT count(*) FROM report_facts WHERE outcome = 'running'") > 0
            assert one("SELECT count(*) FROM report_facts WHERE unpriced IS NOT NULL") > 0
            assert one("SELECT count(*) FROM report_group_days") > 0
            db.close()


def test_a_run_that_keeps_its_usage_keeps_its_estimates(home, tmp_path):
    """A (run, model) row is re-priced only when its fingerprint changed: the estimator is not
    called for a run re-indexed without new usage (it settles), and is for one that grew."""
    w = World(home, tmp_path, 5)
    calls: list[str | None] = []

    def counting(provider, model, counters):
        from ledger.pricing import estimate_cost

        calls.append(model)
        return estimate_cost(provider, model, counters)

    time.sleep(0.2)  # (past the racy window: a record the first pass read young is read again now)
    index_homes(w.homes, url(w.core))
    assert sync_small(url(w.core)) is True
    run = w.running[0]
    settle(run, "completed")
    w.running.remove(run)
    index_homes(w.homes, url(w.core))
    assert sync_small(url(w.core), estimator=counting) is True
    assert calls == []
    w.grow()
    index_homes(w.homes, url(w.core))
    assert sync_small(url(w.core), estimator=counting) is True
    assert calls  # (the run that grew)



def test_a_running_run_changed_outside_the_log_is_rebuilt(home, tmp_path):
    """The net under the change log (sync._running_changed): a run the facts hold as running
    whose row changed without a log row is rebuilt by both paths alike."""
    w = World(home, tmp_path, 11)
    db = sqlite3.connect(w.core)
    (rid,) = db.execute("SELECT run_id FROM report_facts WHERE outcome = 'running' AND first = 1 LIMIT 1").fetchone()
    db.execute("UPDATE runs SET state = 'abandoned' WHERE run_id = ?", (rid,))
    db.execute("DELETE FROM report_changes")
    db.commit()
    db.close()
    mine = tmp_path / "mine.sqlite"
    shutil.copyfile(w.core, mine)
    st = service.sync(url(w.core))
    assert st.rebuilt == 1 and not st.reconciled
    assert sync_small(url(mine)) is True
    assert tables(mine) == tables(w.core)

# -- declining ---------------------------------------------------------------------------------

@pytest.fixture
def changed(home, tmp_path):
    """A synced index with one new run indexed, not synced."""
    w = World(home, tmp_path, 7)
    w.new_run()
    w.new_run()
    w.new_run()
    index_homes(w.homes, url(w.core))
    return w


def declines(path: Path, reason: str, **kw) -> None:
    """Declined for `reason` (a crash would not say it), nothing written."""
    before = tables(path)
    why: list[str] = []
    assert sync_small(url(path), why=why, **kw) is False
    assert why == [reason]
    assert tables(path) == before  # nothing written


def test_declines_when_the_prices_changed(changed):
    declines(changed.core, "a full rebuild", price_version="other prices 9")


def test_declines_when_a_trigger_is_missing(changed):
    db = sqlite3.connect(changed.core)
    db.execute("DROP TRIGGER report_changes_update")
    db.commit()
    db.close()
    declines(changed.core, "a full rebuild")


@pytest.mark.parametrize("key, value", [("fact_rules", "0"), ("group_rules", "0"), ("fact_runs", None),
                                        ("fact_runs", "x")])
def test_declines_when_the_state_is_not_current(changed, key, value):
    db = sqlite3.connect(changed.core)
    if value is None:
        db.execute("DELETE FROM report_state WHERE key = ?", (key,))
    else:
        db.execute("UPDATE report_state SET value = ? WHERE key = ?", (value, key))
    db.commit()
    db.close()
    declines(changed.core, {"group_rules": "the group tables to build", "x": "fact_runs unreadable"}.get(
        key if key == "group_rules" else value, "a full rebuild"))


def test_declines_too_many_changes(changed):
    db = sqlite3.connect(changed.core)
    (n,) = db.execute("SELECT count(*) FROM (SELECT DISTINCT home_id, run_id FROM report_changes)").fetchone()
    db.close()
    assert n >= 3  # (the new runs, and any the pass saw change)
    declines(changed.core, "too many changed runs", limit=n - 1)
    assert sync_small(url(changed.core), limit=n) is True


def test_declines_when_a_running_run_changed_too_many(changed, monkeypatch):
    monkeypatch.setattr(quicksync, "_running_changed", lambda con: [(1, "run_x")] * 3)
    declines(changed.core, "too many changed runs", limit=5)


def test_declines_when_the_facts_need_a_reconcile(changed):
    """A run that reached `runs` without the change log (written with the triggers off)."""
    db = sqlite3.connect(changed.core)
    gone = db.execute("DELETE FROM report_changes WHERE run_id = (SELECT c.run_id FROM report_changes AS c WHERE NOT "
                      "EXISTS (SELECT 1 FROM report_facts AS f WHERE f.run_id = c.run_id) LIMIT 1)").rowcount
    assert gone  # (a new run's)
    db.commit()
    db.close()
    declines(changed.core, "the facts need a reconcile")
    st = service.sync(url(changed.core))  # (the Core path reconciles)
    assert st.reconciled


def test_declines_when_a_groups_figures_do_not_add_up(changed):
    db = sqlite3.connect(changed.core)
    db.execute("UPDATE report_groups SET values_cost_auto = x'', values_cost_reported = x'', "
               "values_cost_estimated = x'', values_duration_ms = x'' WHERE kind = 'skill'")
    db.commit()
    db.close()
    changed.remove()  # (a run leaves its group: a figure to remove that is not there)
    changed.remove()
    changed.remove()
    index_homes(changed.homes, url(changed.core))
    declines(changed.core, "a group's figures do not add up")


def test_an_index_not_at_head_is_not_touched(tmp_path):
    from ledger.index.rawwrite import NotAtHead

    bogus = tmp_path / "x.sqlite"
    sqlite3.connect(bogus).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(NotAtHead):
        sync_small(url(bogus))


# -- the report uses it ------------------------------------------------------------------------

def test_the_report_syncs_a_new_run_without_the_core_path(home, monkeypatch):
    make(home, "2026-03-08T10:00:00Z", [claude_stream()], skill="deploy")
    res = CliRunner().invoke(app, ["report", "skill", "--json"])  # (the group tables: made once, by Core)
    assert res.exit_code == 0, res.output
    make(home, "2026-03-08T11:00:00Z", [claude_stream()], skill="deploy")

    def no_core(*a, **k):
        raise AssertionError("the Core sync ran")

    monkeypatch.setattr(service, "sync", no_core)
    res = CliRunner().invoke(app, ["report", "skill", "--json"])
    assert res.exit_code == 0, res.output
    assert '"runs": 2' in res.output


def test_the_report_falls_back_when_declined(home, monkeypatch):
    make(home, "2026-03-08T10:00:00Z", [claude_stream()])
    assert CliRunner().invoke(app, ["report", "--json"]).exit_code == 0
    make(home, "2026-03-08T11:00:00Z", [claude_stream()])
    seen = []
    monkeypatch.setattr(quicksync, "sync_small", lambda u, **k: seen.append("small") or False)
    real = service.sync
    monkeypatch.setattr(service, "sync", lambda *a, **k: seen.append("core") or real(*a, **k))
    res = CliRunner().invoke(app, ["report", "--json"])
    assert res.exit_code == 0, res.output
    assert seen == ["small", "core"] and '"runs": 2' in res.output



def test_a_read_only_index_is_read_as_it_is(home, monkeypatch):
    """The small sync meets a read-only index (another user's): the report warns and answers
    from the tables as they are, as when the Core sync meets one."""
    make(home, "2026-03-08T10:00:00Z", [claude_stream()])
    assert CliRunner().invoke(app, ["report", "--json"]).exit_code == 0
    make(home, "2026-03-08T11:00:00Z", [claude_stream()])

    def read_only(u, **kw):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(quicksync, "sync_small", read_only)
    monkeypatch.setattr(service, "sync", lambda *a, **k: pytest.fail("the Core sync ran"))
    res = CliRunner().invoke(app, ["report", "--json"])
    assert res.exit_code == 0, res.output
    assert "cannot update the report's tables" in res.stderr

def test_sync_small_loads_no_sqlalchemy(changed):
    code = ("import sys; from ledger.report.quicksync import sync_small; "
            f"assert sync_small({url(changed.core)!r}) is True; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'alembic')); "
            "assert not bad, bad")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent)))
    assert p.returncode == 0, p.stderr[-2000:]


def test_the_repeated_constants_agree():
    from ledger.report.models import schema_disagreements

    assert schema_disagreements() == []  # (the plain writers' column lists: ledger.report.schema)
    assert (synced.FACT_RULES, synced.GROUP_RULES, synced.CHANGE_TRIGGERS) == (
        facts.FACT_RULES, facts.GROUP_RULES, schema.CHANGE_TRIGGERS)
    assert sync.FactBuilder is facts.FactBuilder and sync.VALUE_KINDS == schema.VALUE_KINDS
