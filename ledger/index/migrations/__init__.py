"""Alembic migrations of the index (run from code by ledger.index.db; see migrations/README.md)."""
