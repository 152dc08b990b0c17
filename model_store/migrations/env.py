"""Alembic environment: migrations run on the connection `model_store.schema` hands over
(inside its locked transaction), never on a connection of their own."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from model_store.tables import metadata


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if not isinstance(connection, Connection):
        raise RuntimeError("registry migrations run through model_store.schema.upgrade_schema, "
                           "which passes the connection in config.attributes['connection']")
    # render_as_batch: SQLite cannot ALTER most things; batch mode recreates the table.
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("offline (--sql) migrations are not supported; the registry upgrades "
                       "itself when a server or trainer opens it")
run_migrations_online()
