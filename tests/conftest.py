"""Shared fixtures. `db_url` runs a test on SQLite and on the real PostgreSQL server.

PostgreSQL: LEDGER_TEST_PG (default postgresql+psycopg://postgres@127.0.0.1:5432/test).
Each test gets a fresh database, dropped afterwards. Under CI (CI=true) a missing server
fails the test instead of skipping it.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

import pytest

PG_URL = os.environ.get("LEDGER_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REPO = Path(__file__).resolve().parent.parent
# the kept price rates (ledger.price_rates) of this test session, not the user's cache dir
os.environ.setdefault("LEDGER_CACHE_DIR", os.path.join(tempfile.mkdtemp(prefix="ledger-test-cache-"), "cache"))
# the platform's default home (platformdirs: $XDG_DATA_HOME/ledger) of this test session,
# never the user's: the README's set-up command creates ~/.local/share/ledger before the
# tests run, and a test that leaves --home out must not read or index it (issue 32)
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="ledger-test-data-")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """An empty ledger home, also exported as LEDGER_HOME (and no LEDGER_DB)."""
    h = tmp_path / "home"
    monkeypatch.setenv("LEDGER_HOME", str(h))
    monkeypatch.delenv("LEDGER_DB", raising=False)
    return h


def _pg_admin():
    import psycopg

    base = PG_URL.replace("postgresql+psycopg://", "postgresql://")
    return psycopg.connect(base, autocommit=True, connect_timeout=5)


@pytest.fixture
def pg_url():
    """A fresh PostgreSQL database for this test; its SQLAlchemy URL."""
    try:
        admin = _pg_admin()
    except Exception as exc:  # noqa: BLE001 - any connection failure
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required under CI and did not answer: {exc}")
        pytest.skip(f"PostgreSQL not available: {exc}")
    name = f"ledger_t_{uuid.uuid4().hex[:12]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = PG_URL.rsplit("/", 1)[0] + "/" + name
    try:
        yield url
    finally:
        with _pg_admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """The index URL: SQLite in tmp, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'index.sqlite'}"
    return request.getfixturevalue("pg_url")
