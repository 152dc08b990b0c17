"""The admin lists read a page at a time in SQL (model_store/admin_pages.py), on SQLite and
PostgreSQL: paging through more entries than a page holds returns each exactly once, in
the list's order, filtered in the query exactly as `TenantScope` filters (names owned by
prefix, given to a tenant, given away from a prefix's tenant, and shared), and SQLite's
query plans read an index, never the whole table."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, TypeVar

import pytest
from sqlalchemy import update

from model_store import NewPair, Page, Registry, Viewer
from model_store.tables import api_keys, jobs
from server.core.tenancy import Kind, TenantScope
from tests.model_store.query_plans import query_plans

T = TypeVar("T")
BACKBONE = "b"
# sorted the same by code point and by any linguistic collation (no case, no leading dash)
NAMES = ["acme-a", "acme-b", "acme-c", "acme-d", "acme-lent", "acmex-terms", "beta-a",
         "beta-b", "court", "legal-terms", "nobody-x", "zeta"]
GIVEN = {"legal-terms": "acme", "acme-lent": "beta"}  # claimed, whatever the prefix says
DOMAINS = ["acme-legal", "beta-legal", "medical", "contracts", "acme-lent"]
VIEWERS = [None, Viewer("acme"), Viewer("beta"), Viewer(None)]


@pytest.fixture
def registry(registry_url: str) -> Iterator[Registry]:
    opened = Registry(registry_url)
    for tenant in ("acme", "beta"):
        opened.create_tenant(tenant)
    for kind in ("glossary", "memory", "domain"):
        for name, tenant in GIVEN.items():
            opened.claim_resource(kind, name, tenant)
    opened.claim_resource("domain", "contracts", "acme")
    try:
        yield opened
    finally:
        opened.close()


def scope_of(registry: Registry, viewer: Viewer | None) -> TenantScope:
    """The scope the server would give this viewer (the operator's for None)."""
    owners = {(r.kind, r.name): r.tenant for r in registry.tenant_resources()}
    tenants = frozenset(registry.list_tenants())
    if viewer is None:
        return TenantScope(None, "operator", owners, tenants)
    return TenantScope(viewer.tenant, "admin" if viewer.tenant else "shared", owners, tenants)


def every_page(read: Callable[..., Page[T]], cursor: Callable[[T], Any],
               limit: int) -> list[list[T]]:
    """The pages `read(after=..., limit=...)` gives, following each page's last cursor."""
    pages: list[list[T]] = []
    after = None
    while True:
        page = read(after=after, limit=limit)
        assert len(page.entries) <= limit
        pages.append(page.entries)
        if not page.more:
            return pages
        assert len(page.entries) == limit and len(pages) < 50
        after = cursor(page.entries[-1])


def sees(scope: TenantScope, kind: Kind) -> Callable[[str], bool]:
    return lambda name: scope.sees(kind, name)


@pytest.mark.parametrize("viewer", VIEWERS)
def test_glossaries_and_memories_page_by_name_as_the_scope_sees_them(
        registry: Registry, viewer: Viewer | None) -> None:
    for name in reversed(NAMES):  # written out of order: the page sorts
        registry.put_glossary(name, [("court", "tribunal")], default_for=None,
                              backbone=BACKBONE)
        registry.create_memory(name, backbone=BACKBONE)
    registry.create_memory("acme-other", backbone="elsewhere")  # another direction's
    scope = scope_of(registry, viewer)
    expected = {kind: [n for n in NAMES if scope.sees(kind, n)]
                for kind in ("glossary", "memory")}
    assert 4 <= len(expected["memory"]) <= len(NAMES)
    for limit in (1, 3, 100):
        glossary_pages = every_page(partial(registry.glossary_page, viewer=viewer),
                                    lambda r: r.name, limit)
        assert [r.name for p in glossary_pages for r in p] == expected["glossary"]
        memory_pages = every_page(partial(registry.memory_page, backbone=BACKBONE,
                                          viewer=viewer), lambda r: r.name, limit)
        assert [r.name for p in memory_pages for r in p] == expected["memory"]
    assert registry.glossary_page(viewer=viewer, after=NAMES[-1]) == Page([], False)


def test_a_page_of_memories_counts_its_memories_pairs_as_the_whole_list(
        registry: Registry) -> None:
    for index, name in enumerate(NAMES[:5]):
        memory = registry.create_memory(name, backbone=BACKBONE)
        for pair in range(index):
            registry.add_pair(memory.id, NewPair(f"s{pair}", f"t{pair}", f"k{pair}"))
    whole = registry.list_memories(backbone=BACKBONE)
    paged = [r for p in every_page(partial(registry.memory_page, backbone=BACKBONE),
                                   lambda r: r.name, 2) for r in p]
    assert paged == whole and [r.pairs for r in paged] == [0, 1, 2, 3, 4]
    assert all(r.version > 0 for r in paged[1:])


def test_keys_page_oldest_first_through_equal_times_by_id(registry: Registry) -> None:
    made = [registry.create_api_key(name=f"k{i}", key_hash=f"{i:064d}", prefix=f"p{i}")
            for i in range(9)]
    tie = datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)
    with registry.engine.begin() as conn:  # five keys made in the same microsecond
        for index, key in enumerate(made):
            at = tie if index in (1, 2, 4, 6, 7) else tie + timedelta(seconds=index - 4)
            conn.execute(update(api_keys).where(api_keys.c.id == key.id).values(created_at=at))
    owned = {"acme": [made[i].id for i in (0, 2, 3, 4, 7)], "beta": [made[i].id for i in (1, 6)]}
    for owner, ids in owned.items():
        for key_id in ids:
            registry.add_tenant_key(key_id, owner, "member")
    whole = registry.list_api_keys()
    assert len({r.created_at for r in whole}) == 5  # the ties are there
    for tenant in (None, "acme", "beta"):
        expected = [r.id for r in whole if tenant is None or r.id in owned[tenant]]
        for limit in (1, 2, 4):
            pages = every_page(partial(registry.api_key_page, tenant=tenant),
                               lambda r: (r.created_at, r.id), limit)
            assert [r.id for p in pages for r in p] == expected
    assert [r.id for r in registry.api_key_page().entries] == [r.id for r in whole]


@pytest.mark.parametrize("viewer", VIEWERS)
def test_jobs_page_oldest_first_those_of_the_viewers_domains(
        registry: Registry, viewer: Viewer | None) -> None:
    made = [registry.create_job(DOMAINS[i % len(DOMAINS)], config={}, data_location=f"d{i}",
                                backbone=BACKBONE) for i in range(12)]
    tie = datetime(2026, 1, 1, tzinfo=UTC)
    with registry.engine.begin() as conn:  # pairs of jobs made at the same time
        for index, job in enumerate(made):
            conn.execute(update(jobs).where(jobs.c.id == job.id)
                         .values(created_at=tie + timedelta(seconds=index // 2)))
    for job in made[::3]:
        registry.update_job(job.id, state="failed")
    scope = scope_of(registry, viewer)
    for state in (None, "failed", "queued"):
        expected = [j.id for j in registry.list_jobs(state)
                    if scope.follows_job_of("domain", j.domain)]
        assert expected or state == "failed"
        for limit in (1, 2, 5):
            pages = every_page(partial(registry.job_page, state=state, viewer=viewer),
                               lambda j: (j.created_at, j.id), limit)
            assert [j.id for p in pages for j in p] == expected


def test_a_page_of_no_entries_is_refused(registry: Registry) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        registry.glossary_page(limit=0)


def test_pages_read_an_index_not_the_table(registry: Registry) -> None:
    if registry.dialect != "sqlite":
        pytest.skip("query plans are read from SQLite; PostgreSQL gets the same indexes")
    key = registry.create_api_key(name="k", key_hash="0" * 64, prefix="p")
    job = registry.create_job("medical", config={}, data_location="d", backbone=BACKBONE)
    cursor = (key.created_at, key.id)
    calls: list[Callable[[], object]] = []
    for viewer in VIEWERS:
        calls += [partial(registry.glossary_page, viewer=viewer, after="m", limit=5),
                  partial(registry.memory_page, backbone=BACKBONE, viewer=viewer, after="m",
                          limit=5),
                  partial(registry.job_page, viewer=viewer, after=(job.created_at, job.id),
                          limit=5)]
    calls += [lambda: registry.api_key_page(after=cursor, limit=5),
              lambda: registry.api_key_page(tenant="acme", after=cursor, limit=5)]
    plans = query_plans(registry, calls)
    assert len(plans) >= len(calls)
    full_scans = [(statement, plan) for statement, plan in plans for step in plan
                  if re.match(r"SCAN (api_keys|jobs|glossaries|memories|memory_pairs|"
                              r"memory_changes|tenant_resources|tenants)\b"
                              r"(?! USING (COVERING )?INDEX)", step)]
    assert full_scans == []
    # read in the index's order, not every matching row sorted (a tenant's keys may be: they
    # are found through `ix_tenant_keys_tenant`, and only they are sorted)
    sorted_whole = [(statement, plan) for statement, plan in plans
                    if "LIMIT" in statement and "tenant_keys" not in statement
                    and any("TEMP B-TREE" in step for step in plan)]
    assert sorted_whole == []


