"""`ledger sql` is read-only for real, and answers SELECTs in JSON, CSV and a table."""

from __future__ import annotations

import hashlib
import os

import orjson
import pytest

from ledger.index import sealing

from indexhelpers import cli, make_run


def _fingerprint(db_url, home):
    """What must not change: the SQLite files' bytes (and no new files), or PG's row counts."""
    if db_url.startswith("sqlite"):
        d = os.path.dirname(db_url[len("sqlite:///"):])
        files = {}
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            if os.path.isfile(p) and not name.endswith((".lock", "-shm")) and os.path.getsize(p):
                files[name] = hashlib.sha256(open(p, "rb").read()).hexdigest()
        return files
    import sqlalchemy as sa

    eng = sa.create_engine(db_url)
    try:
        with eng.connect() as conn:
            tables = [r[0] for r in conn.exec_driver_sql(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")]
            return {t: conn.exec_driver_sql(f'SELECT count(*) FROM "{t}"').scalar() for t in tables}
    finally:
        eng.dispose()


WRITES = [
    ("INSERT INTO ledger_meta (key, value) VALUES ('x', 'y')", "INSERT"),
    ("UPDATE runs SET model = 'hacked'", "UPDATE"),
    ("DELETE FROM runs", "DELETE"),
    ("DROP TABLE runs", "DROP"),
    ("DROP VIEW runs_v", "DROP"),
    ("CREATE TABLE evil (x integer)", "CREATE"),
    ("CREATE INDEX ix_evil ON runs (cwd)", "CREATE"),
    ("ALTER TABLE runs ADD COLUMN evil integer", "ALTER"),
]
SQLITE_WRITES = [
    ("ATTACH DATABASE '{dir}/attached.sqlite' AS other", "ATTACH"),
    ("VACUUM INTO '{dir}/copy.sqlite'", "VACUUM"),
    ("VACUUM", "VACUUM"),
    ("PRAGMA user_version = 42", "PRAGMA user_version"),
    ("PRAGMA application_id = 1", "PRAGMA application_id"),
    ("PRAGMA journal_mode = DELETE", "PRAGMA journal_mode"),
    ("PRAGMA query_only = 0", "PRAGMA query_only"),
    ("REINDEX", "REINDEX"),
    ("ANALYZE", "not allowed"),
    ("REPLACE INTO ledger_meta (key, value) VALUES ('application', 'x')", "INSERT"),
]
PG_WRITES = [
    ("TRUNCATE runs CASCADE", None),
    ("COMMIT; DROP TABLE runs CASCADE", None),
    ("SET TRANSACTION READ WRITE", None),
    ("SELECT pg_catalog.set_config('default_transaction_read_only', 'off', false); DELETE FROM runs", None),
    ("WITH d AS (DELETE FROM runs RETURNING 1) SELECT count(*) FROM d", None),
    ("DO $$ BEGIN DELETE FROM runs; END $$", None),
    ("CREATE TEMP TABLE t AS SELECT 1", None),
    ("VACUUM runs", None),
]


@pytest.fixture(autouse=True)
def no_racy_window(monkeypatch):
    """Runs written a moment ago are re-checked (and rewritten) by the next pass; not here."""
    from ledger.index import indexer

    monkeypatch.setattr(sealing, "RACY_NS", 0)


@pytest.fixture
def indexed(home, db_url):
    make_run(home, model="claude-sonnet-4-5", subjects=("task:A", "task:B"), skill="review")
    make_run(home, model="gpt-5", harness="codex", outcome="failed", cost=None)
    assert cli("index", "--db", db_url).exit_code == 0
    return db_url


def test_select_json_csv_table(home, indexed):
    db_url = indexed
    q = "SELECT run_id, model, harness, outcome, input_tokens, cost_usd FROM runs_v ORDER BY model"
    res = cli("sql", q, "--json", "--db", db_url)
    assert res.exit_code == 0, res.output
    rows = orjson.loads(res.stdout)
    assert [(r["model"], r["harness"], r["outcome"], r["input_tokens"], r["cost_usd"]) for r in rows] == [
        ("claude-sonnet-4-5", "claude", "completed", 15, 0.25), ("gpt-5", "codex", "failed", 15, None)]
    res = cli("sql", q, "--csv", "--db", db_url)
    lines = res.stdout.splitlines()
    assert lines[0] == "run_id,model,harness,outcome,input_tokens,cost_usd"
    assert lines[1].endswith(",claude-sonnet-4-5,claude,completed,15,0.25")
    assert lines[2].endswith(",gpt-5,codex,failed,15,")
    res = cli("sql", q, "--db", db_url)
    assert res.exit_code == 0 and "gpt-5" in res.stdout and res.stdout.splitlines()[1].startswith(" run_id ")
    # stdin, aggregates, the other views
    res = cli("sql", "-", "--json", "--db", db_url, input="SELECT count(*) AS n, sum(input_tokens) AS tokens FROM runs_v")
    assert orjson.loads(res.stdout) == [{"n": 2, "tokens": 30}]
    res = cli("sql", "SELECT selector FROM subjects_v ORDER BY selector", "--json", "--db", db_url)
    assert orjson.loads(res.stdout) == [{"selector": "task:A"}, {"selector": "task:A"}, {"selector": "task:B"}]
    res = cli("sql", "SELECT model, cache_write_5m_tokens, final_receipt FROM usage_streams_v ORDER BY model",
              "--json", "--db", db_url)
    assert orjson.loads(res.stdout) == [
        {"model": "claude-sonnet-4-5", "cache_write_5m_tokens": 4, "final_receipt": True},
        {"model": "gpt-5", "cache_write_5m_tokens": 4, "final_receipt": False}]
    res = cli("sql", "SELECT tool_name, sum(uses) AS n FROM tool_uses_v GROUP BY tool_name", "--json", "--db", db_url)
    assert orjson.loads(res.stdout) == [{"tool_name": "Bash", "n": 2}]
    res = cli("sql", "SELECT attempt_key, provider FROM attempts_v ORDER BY run_id", "--csv", "--db", db_url)
    assert res.stdout.splitlines()[1:] == ["attempt-1,anthropic", "attempt-1,anthropic"]
    res = cli("sql", "SELECT 1 AS x WHERE 1 = 0", "--json", "--db", db_url)
    assert res.stdout == "[]\n"


def test_sql_error_shows_database_message(indexed):
    res = cli("sql", "SELECT nope FROM runs_v", "--db", indexed)
    assert res.exit_code == 1
    assert res.stderr.startswith("Error: SQL error: ") and "nope" in res.stderr
    assert "Traceback" not in res.output
    res = cli("sql", "SELEC 1", "--db", indexed)
    assert res.exit_code == 1 and "syntax error" in res.stderr


@pytest.mark.parametrize("query,word", WRITES)
def test_writes_are_refused(home, indexed, query, word):
    before = _fingerprint(indexed, home)
    res = cli("sql", query, "--db", indexed)
    assert res.exit_code == 1, res.output
    assert "read-only" in res.stderr, res.stderr
    if word:
        assert word in res.stderr
    assert _fingerprint(indexed, home) == before


@pytest.mark.parametrize("query,word", SQLITE_WRITES)
def test_sqlite_writes_are_refused(home, tmp_path, query, word):
    make_run(home)
    url = f"sqlite:///{tmp_path / 'db' / 'index.sqlite'}"
    assert cli("index", "--db", url).exit_code == 0
    before = _fingerprint(url, home)
    res = cli("sql", query.format(dir=tmp_path / "db"), "--db", url)
    assert res.exit_code == 1, res.output
    assert "ledger sql is read-only" in res.stderr and word in res.stderr
    assert _fingerprint(url, home) == before  # and no attached / vacuumed file appeared
    assert not (tmp_path / "db" / "attached.sqlite").exists()
    assert not (tmp_path / "db" / "copy.sqlite").exists()


def test_sqlite_read_pragmas_allowed(indexed):
    if not indexed.startswith("sqlite"):  # PostgreSQL has no PRAGMA: a clear error, nothing run
        res = cli("sql", "PRAGMA table_info(runs)", "--json", "--db", indexed)
        assert res.exit_code == 1 and res.stderr.startswith("Error: ") and "Hint:" in res.stderr
        assert "Traceback" not in res.output and res.stdout == ""
        return
    res = cli("sql", "PRAGMA table_info(runs)", "--json", "--db", indexed)
    assert res.exit_code == 0 and '"name": "run_id"' in res.stdout
    res = cli("sql", "PRAGMA user_version", "--json", "--db", indexed)
    assert res.exit_code == 0
    res = cli("sql", "SELECT 1; SELECT 2", "--db", indexed)
    assert res.exit_code == 1 and "one statement" in res.stderr


@pytest.mark.parametrize("query,word", PG_WRITES)
def test_postgres_writes_are_refused(home, pg_url, query, word):
    make_run(home)
    assert cli("index", "--db", pg_url).exit_code == 0
    before = _fingerprint(pg_url, home)
    res = cli("sql", query, "--db", pg_url)
    assert res.exit_code == 1, res.output
    assert _fingerprint(pg_url, home) == before
    # the session really stayed read-only: the next query still works and nothing changed
    res = cli("sql", "SELECT count(*) AS n FROM runs_v", "--json", "--db", pg_url)
    assert orjson.loads(res.stdout) == [{"n": 1}]
