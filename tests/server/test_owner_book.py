"""The owner book (server/access/owners.py) keeps what tenants own in step with the
registry by reading the claims and releases logged since its last read, on SQLite and
PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from alembic import command
from sqlalchemy import create_engine, insert

from model_store import Registry
from model_store.schema import alembic_config
from model_store.tables import tenant_resource_changes, tenant_resources
from server.access.owners import OVERLAP, OwnerBook


@pytest.fixture
def registry(registry_url: str) -> Iterator[Registry]:
    opened = Registry(registry_url)
    opened.create_tenant("acme")
    opened.create_tenant("globex")
    yield opened
    opened.close()


def test_a_replica_sees_another_ones_claims_and_releases(registry: Registry) -> None:
    here, there = OwnerBook(registry, cache_s=60), OwnerBook(registry, cache_s=60)
    here.claim("domain", "acme-law", "acme")
    there.reread()
    assert there.owners == {("domain", "acme-law"): "acme"}
    here.claim("glossary", "terms", "globex")
    here.claim("memory", "acme-tm", "acme")
    assert here.release("domain", "acme-law")
    assert not here.release("domain", "acme-law")  # owned by nobody now: nothing logged
    before = there.owners
    there.reread()
    assert there.owners == {("glossary", "terms"): "globex", ("memory", "acme-tm"): "acme"}
    assert before == {("domain", "acme-law"): "acme"}  # a scope's copy never changes
    assert registry.last_resource_change() == 4


def test_a_reread_reads_the_changes_not_the_owned_rows(registry: Registry) -> None:
    book = OwnerBook(registry, cache_s=60)
    registry.claim_resource("domain", "acme-law", "acme")
    book.reread()
    with registry.engine.begin() as conn:  # an owned row the change log does not name
        conn.execute(insert(tenant_resources).values(kind="domain", name="acme-tax",
                                                     tenant="acme", created_at=datetime.now(UTC)))
    registry.claim_resource("domain", "globex-law", "globex")
    book.reread()
    assert book.owners == {("domain", "acme-law"): "acme", ("domain", "globex-law"): "globex"}
    fresh = OwnerBook(registry, cache_s=60)  # a first read takes every owned row
    fresh.reread()
    assert ("domain", "acme-tax") in fresh.owners


def test_a_change_committed_late_under_an_earlier_id_is_still_read(registry: Registry) -> None:
    book = OwnerBook(registry, cache_s=60)
    now = datetime.now(UTC)
    with registry.engine.begin() as conn:
        conn.execute(insert(tenant_resource_changes).values(
            id=OVERLAP, kind="domain", name="acme-law", tenant="acme", at=now))
    book.reread()
    assert book.owners == {}  # the first read takes the owned rows (none yet) ...
    book.reread()
    assert book.owners == {("domain", "acme-law"): "acme"}  # ... the next, the change
    with registry.engine.begin() as conn:  # a writer that took an earlier id commits now
        conn.execute(insert(tenant_resource_changes).values(
            id=2, kind="memory", name="acme-tm", tenant="acme", at=now))
    book.reread()
    assert book.owners == {("domain", "acme-law"): "acme", ("memory", "acme-tm"): "acme"}


def test_resources_owned_before_the_change_log_are_its_first_changes(registry_url: str) -> None:
    engine = create_engine(registry_url)
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0008")
            conn.execute(insert(tenant_resources).values(
                kind="domain", name="acme-law", tenant="acme", created_at=datetime.now(UTC)))
    finally:
        engine.dispose()
    upgraded = Registry(registry_url)  # upgrades to the head
    try:
        assert [(c.kind, c.name, c.tenant) for c in upgraded.resource_changes(0)] == [
            ("domain", "acme-law", "acme")]
    finally:
        upgraded.close()
