"""Alembic environment for the ledger index.

ledger runs migrations from code (`ledger.index.db.upgrade`) on a connection it already
holds, passed in `config.attributes["connection"]`, inside its own transaction. Used from
the `alembic` command line instead, the URL comes from `sqlalchemy.url`.
SQLite gets `render_as_batch=True`: ALTER on SQLite is done by copy-and-move.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from ledger.index.models import Base

config = context.config
target_metadata = Base.metadata


def _configure(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def run_offline() -> None:
    url = config.get_main_option("sqlalchemy.url")
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True,
                      render_as_batch=str(url).startswith("sqlite"),
                      dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url"), poolclass=pool.NullPool)
    with engine.connect() as conn:
        _configure(conn)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
