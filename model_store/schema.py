"""Bring a registry database to the newest schema (Alembic revisions in `migrations/`).

Every process that opens the registry (server replicas, trainers) calls `upgrade_schema`
first; they may start at the same moment, so the upgrade runs in one transaction under a
lock that only one holder gets at a time:

- PostgreSQL: a transaction-scoped advisory lock (`pg_advisory_xact_lock`); DDL is
  transactional, so a crash midway leaves the previous revision intact;
- SQLite: `BEGIN IMMEDIATE` (the registry's write transactions), which takes the database's
  single write lock.

The second process waits for the lock, then finds the schema current and does nothing.

Registries made before migrations existed (tables created from the metadata, no
`alembic_version` table) hold exactly the baseline revision's tables: they are stamped
with it, then upgraded like any other, keeping every row.
"""

from __future__ import annotations

import logging
from functools import cache

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, inspect, select
from sqlalchemy import func as sql_func

from .errors import StoreError

log = logging.getLogger(__name__)

SCRIPT_LOCATION = "model_store:migrations"
BASELINE_REVISION = "0001"
# Any fixed 64-bit number; it only has to differ from the application's other advisory locks.
SCHEMA_LOCK_KEY = 0x6E6D_7473_6368_656D  # "nmtschem"
LEGACY_TABLES = frozenset({"artifacts", "active", "jobs", "events"})


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config for the registry's migrations (on `connection`, if given)."""
    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@cache
def script_directory() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    """The newest revision shipped with this code."""
    head = script_directory().get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations found in {SCRIPT_LOCATION}")
    return head


def current_revision(connection: Connection) -> str | None:
    """The revision a database is at (None: unversioned, i.e. empty or pre-migrations)."""
    return MigrationContext.configure(connection).get_current_revision()


def upgrade_schema(connection: Connection) -> str:
    """Upgrade the database of `connection` to the head revision and return it.

    `connection` must be inside a transaction that the caller commits: on SQLite one begun
    with `BEGIN IMMEDIATE`; on PostgreSQL the advisory lock is taken here.
    """
    if connection.dialect.name == "postgresql":
        connection.execute(select(sql_func.pg_advisory_xact_lock(SCHEMA_LOCK_KEY)))
    revision = current_revision(connection)
    if revision == head_revision():
        return revision
    if revision is not None and not _known(revision):
        raise StoreError(f"the registry's schema is at revision {revision!r}, which this "
                         f"code does not know (its newest is {head_revision()!r}): run a "
                         "release at least as new as the one that upgraded the registry")
    if revision is None and LEGACY_TABLES <= set(inspect(connection).get_table_names()):
        log.info("registry predates migrations: stamping it with the baseline revision %s",
                 BASELINE_REVISION)
        command.stamp(alembic_config(connection), BASELINE_REVISION)
    command.upgrade(alembic_config(connection), "head")
    log.info("registry schema upgraded from %s to %s", revision or "empty", head_revision())
    return head_revision()


def _known(revision: str) -> bool:
    try:
        return script_directory().get_revision(revision) is not None
    except CommandError:
        return False
