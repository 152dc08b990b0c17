"""Registry schema migrations: from a registry made before migrations existed, from an
empty database, by several processes at once, and the migrated schema equals tables.py."""

from __future__ import annotations

import multiprocessing
import re
import shutil
import sqlite3
import threading
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, text

from model_store import Registry, Store, StoreError
from model_store.database import registry_url as parse_registry_url
from model_store.database import switch_to_wal
from model_store.schema import BASELINE_REVISION, head_revision, script_directory
from model_store.tables import metadata

SPAWN = multiprocessing.get_context("spawn")
# Made by the code before migrations (main at cce4940, `metadata.create_all`): a backbone,
# module `medical` v1 and v2 (v1 active after a rollback), `law` v1 deleted, a published
# job and a queued one, nine events.
BEFORE_MIGRATIONS = Path(__file__).parent / "fixtures" / "registry-before-migrations.sqlite"


def revision_of(url: str) -> str | None:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def test_revisions_form_one_line_from_the_baseline() -> None:
    revisions = list(script_directory().walk_revisions())  # newest first

    assert [r.revision for r in revisions][-1] == BASELINE_REVISION
    assert script_directory().get_heads() == [head_revision()]
    pairs = zip(revisions, revisions[1:], strict=False)
    assert all(r.down_revision == older.revision for r, older in pairs)


def test_registry_made_before_migrations_is_upgraded_and_keeps_its_rows(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    shutil.copy(BEFORE_MIGRATIONS, root / "registry.sqlite")

    with Store.open(root, builtin_dir=None) as store:
        registry = store.registry
        versions = {(r.kind, r.name, r.version) for r in registry.list_artifacts()}
        jobs = {job.id: job for job in registry.list_jobs()}
        events = registry.events_since(0)
        registry.set_active("module", "law", 1)  # the upgraded registry takes writes

        assert versions == {("backbone", "default-en-fr", 1), ("module", "medical", 1),
                            ("module", "medical", 2), ("module", "law", 1)}
        assert registry.active_versions("backbone") == {"default-en-fr": 1}
        assert store.active_domains() == {"medical": 1, "law": 1}
        assert jobs["job-published"].state == "published"
        assert jobs["job-published"].scores == {"bleu": 12.5}
        assert (jobs["job-queued"].state, jobs["job-queued"].domain) == ("queued", "news")
        assert [e.action for e in events][-3:] == ["publish", "activate", "deactivate"]
        assert registry.latest_event_id() == 10  # ids go on after the old ones
        assert registry.claim_next_job("w").id == "job-queued"  # type: ignore[union-attr]
    assert revision_of(f"sqlite:///{root / 'registry.sqlite'}") == head_revision()


def test_migrated_schema_matches_the_tables(registry_url: str) -> None:
    Registry(registry_url).close()
    engine = create_engine(registry_url)
    try:
        with engine.connect() as conn:
            differences = compare_metadata(MigrationContext.configure(conn), metadata)
    finally:
        engine.dispose()

    # Non-empty: model_store/tables.py changed without a revision in migrations/versions/.
    assert differences == []
    assert revision_of(registry_url) == head_revision()


def test_registry_newer_than_the_code_is_refused(registry_url: str) -> None:
    Registry(registry_url).close()
    engine = create_engine(registry_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'from-the-future'"))
    engine.dispose()

    with pytest.raises(StoreError, match="revision 'from-the-future', which this code does not"):
        Registry(registry_url)


def _open_registry(url: str, barrier: Barrier, out: Queue[object]) -> None:
    barrier.wait(timeout=60)
    registry = Registry(url)
    out.put(registry.latest_event_id())
    registry.close()


def test_processes_starting_at_once_upgrade_the_schema_once(registry_url: str) -> None:
    barrier, out = SPAWN.Barrier(3), SPAWN.Queue()
    workers = [SPAWN.Process(target=_open_registry, args=(registry_url, barrier, out))
               for _ in range(3)]
    for process in workers:
        process.start()
    seen = [out.get(timeout=120) for _ in workers]
    for process in workers:
        process.join(timeout=60)

    assert [p.exitcode for p in workers] == [0, 0, 0]
    assert seen == [0, 0, 0]
    assert revision_of(registry_url) == head_revision()


@pytest.mark.parametrize(("url", "expected"), [
    ("sqlite:///var/store/registry.sqlite", "sqlite:///var/store/registry.sqlite"),
    ("postgresql+psycopg://nmt:pw@db:5432/nmt", "postgresql+psycopg://nmt:pw@db:5432/nmt"),
    ("postgresql://nmt:pw@db/nmt", "postgresql+psycopg://nmt:pw@db/nmt"),  # the driver we ship
])
def test_registry_urls_name_a_supported_database(url: str, expected: str) -> None:
    assert parse_registry_url(url).render_as_string(hide_password=False) == expected


@pytest.mark.parametrize(("url", "problem"), [
    ("mysql://db/nmt", "scheme 'mysql' is not supported; use sqlite:///PATH or postgresql"),
    ("postgresql+asyncpg://db/nmt", "scheme 'postgresql+asyncpg' is not supported"),
    ("registry.sqlite", "'registry.sqlite' is not a database URL"),
])
def test_other_registry_urls_are_refused_with_what_is_supported(url: str, problem: str) -> None:
    with pytest.raises(StoreError, match=re.escape(problem)):
        Registry(url)


def test_switching_to_wal_waits_out_a_lock_that_sqlite_will_not_wait_for(
        tmp_path: Path) -> None:
    """Processes opening a fresh file at once get 'database is locked' at once from the
    WAL switch (SQLite will not wait where waiting could deadlock). A connection without a
    busy timeout gets the same immediate answer while another holds the file: the switch
    fails without retry time and succeeds once the lock goes."""
    path = tmp_path / "registry.sqlite"
    holder = sqlite3.connect(path, isolation_level=None, timeout=0, check_same_thread=False)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    opening = sqlite3.connect(path, isolation_level=None, timeout=0)
    cursor = opening.cursor()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        switch_to_wal(cursor, timeout_s=0)
    release = threading.Timer(0.2, holder.execute, ("COMMIT",))
    release.start()
    switch_to_wal(cursor, timeout_s=60)
    release.join()
    assert opening.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    holder.close()
    opening.close()
