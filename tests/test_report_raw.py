"""Reports and listings read through the database driver (issue 10): the check that the
report's tables are already synced (ledger.report.synced) is held to the sync itself, the
readers' home lookup to ledger.index.homes, and the constants they repeat to their homes.
(That the outputs are byte-identical to the SQLAlchemy readers they replace was shown with
scripts/compare_outputs.py; the report tests run them on SQLite and PostgreSQL.)"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from indexhelpers import cli, make_run
from reporthelpers import make, make_abandoned

from ledger.index import db as dbmod
from ledger.index import ops, rawread
from ledger.report import synced


def dump(path: Path) -> dict[str, list[str]]:
    con = sqlite3.connect(path)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: sorted(map(repr, con.execute(f'SELECT * FROM "{t}"'))) for t in tables}
    finally:
        con.close()


def current(url: str) -> bool:
    with rawread.reading(url) as c:
        return synced.facts_current(c)


def held_to_the_sync(url: str) -> bool:
    """facts_current(), and when it says True, a sync writes nothing."""
    from ledger.report.service import sync

    said = current(url)
    path = dbmod.sqlite_path(url)
    before = dump(path)
    sync(url)
    if said:
        assert dump(path) == before, "facts_current said current, the sync wrote"
    return said


def test_facts_current_is_what_the_sync_decides(home, monkeypatch):
    url = dbmod.default_url(home)
    make(home, "2026-03-08T10:00:00Z")
    ops.index_homes([home], url)
    assert not held_to_the_sync(url)  # (never synced)
    assert held_to_the_sync(url)

    make(home, "2026-03-09T10:00:00Z")  # a new run: logged by the triggers
    ops.index_homes([home], url)
    assert not held_to_the_sync(url)
    assert held_to_the_sync(url)

    make_abandoned(home, "2026-03-10T10:00:00Z")
    ops.index_homes([home], url)
    assert not held_to_the_sync(url)
    assert held_to_the_sync(url)

    import ledger.pricing

    monkeypatch.setattr(ledger.pricing, "price_data_version", lambda: "other prices 9")
    assert not held_to_the_sync(url)  # every run re-priced
    assert held_to_the_sync(url)


def test_a_running_run_the_facts_hold_is_rechecked(home):
    url = dbmod.default_url(home)
    make(home, "2026-03-08T10:00:00Z", outcome=None)  # running (this process is its launcher)
    ops.index_homes([home], url)
    held_to_the_sync(url)
    assert held_to_the_sync(url)
    con = sqlite3.connect(dbmod.sqlite_path(url))
    with con:  # as if the row changed without the change log (the sync's safety net)
        con.execute("UPDATE runs SET state = 'abandoned'")
        con.execute("DELETE FROM report_changes")
    con.close()
    assert not held_to_the_sync(url)
    assert held_to_the_sync(url)


def test_a_changed_settled_run_is_seen_through_the_change_log(home):
    url = dbmod.default_url(home)
    make(home, "2026-03-08T10:00:00Z")
    ops.index_homes([home], url)
    held_to_the_sync(url)
    assert current(url)
    con = sqlite3.connect(dbmod.sqlite_path(url))
    with con:  # (what a pass writes for a rewritten record: the triggers log it)
        con.execute("UPDATE runs SET evidence_gaps = evidence_gaps + 1")
    con.close()
    assert not held_to_the_sync(url)
    assert held_to_the_sync(url)


def test_missing_triggers_or_state_are_never_current(home):
    url = dbmod.default_url(home)
    make(home, "2026-03-08T10:00:00Z")
    ops.index_homes([home], url)
    held_to_the_sync(url)
    assert current(url)
    con = sqlite3.connect(dbmod.sqlite_path(url))
    with con:
        con.execute("DROP TRIGGER report_changes_insert")
    assert not current(url)
    con.close()


def test_a_count_that_moved_is_not_current(home):
    url = dbmod.default_url(home)
    make(home, "2026-03-08T10:00:00Z")
    ops.index_homes([home], url)
    held_to_the_sync(url)
    con = sqlite3.connect(dbmod.sqlite_path(url))
    with con:
        con.execute("UPDATE report_state SET value = '7' WHERE key = 'fact_runs'")
    con.close()
    assert not held_to_the_sync(url)


def test_the_repeated_constants_agree_with_their_homes():
    from ledger.index import report_tables
    from ledger.report import kinds, sync

    assert (kinds.SLOT_SECONDS, kinds.REPORTED, kinds.ESTIMATED, kinds.MIXED) == (
        report_tables.SLOT_SECONDS, report_tables.REPORTED, report_tables.ESTIMATED, report_tables.MIXED)
    assert kinds.TOKEN_COLUMNS == sync.TOKEN_COLUMNS and kinds.VERDICT_FACTS == sync.VERDICT_FACTS
    assert synced.FACT_RULES == sync.FACT_RULES and synced.CHANGE_TRIGGERS == report_tables.CHANGE_TRIGGERS


def test_the_readers_find_the_home_row_the_indexer_keeps(home, tmp_path, monkeypatch):
    from ledger.home import ensure_home_uid
    from ledger.index import homes

    url = dbmod.default_url(home)
    make_run(home)
    ops.index_homes([home], url, stale_ok=True)  # a reader: no id written into the home

    def both() -> tuple[int | None, int | None]:
        with ops.reading(url) as conn:
            want = homes.lookup(conn, homes.locate(home, create=False))
        with rawread.reading(url) as c:
            return rawread.home_id(c, home), want

    got, want = both()
    assert got == want is not None
    ensure_home_uid(home)  # now it has an id: the row without one is still its own
    got, want = both()
    assert got == want is not None
    ops.index_homes([home], url)  # (adopted by a pass)
    assert both()[0] == both()[1] is not None
    monkeypatch.setenv("LEDGER_MACHINE_ID", "another-machine")
    assert both()[0] == both()[1]  # (not this machine's row)


@pytest.mark.parametrize("args", [("runs", "--json"), ("runs",), ("show", "RUN", "--json"), ("report", "--json"),
                                  ("report",), ("report", "subject", "--breakdown", "--json")])
def test_reading_an_unchanged_index_loads_no_sqlalchemy(home, args):
    import os

    from test_fresh import age

    run = make_run(home)
    age(home / "runs")  # (quiet records: a pass over them writes nothing)
    assert cli("report").exit_code == 0  # indexed, synced
    env = dict(os.environ, LEDGER_HOME=str(home), COLUMNS="200")
    env.pop("LEDGER_DB", None)
    argv = [a.replace("RUN", run.name) for a in args]

    def probe() -> tuple[str, str]:
        # (-X importtime logs each import as it happens, whatever way the process exits)
        p = subprocess.run([sys.executable, "-X", "importtime", "-m", "ledger", *argv], env=env, capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
        return p.stdout, "SQLALCHEMY" if re.search(r"\| +sqlalchemy$", p.stderr, re.M) else "LIGHT"

    out, loaded = probe()
    assert loaded == "LIGHT", out
    if "--json" in argv:
        assert json.loads(out) == json.loads(cli(*argv).stdout)
    # the probe sees SQLAlchemy where it is loaded: an index to create (its schema is
    # Alembic's; a pass over changed records runs on the driver alone, issue 27)
    make_run(home)
    (home / "index.sqlite").unlink()
    assert probe()[1] == "SQLALCHEMY"
