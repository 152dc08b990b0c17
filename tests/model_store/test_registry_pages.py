"""The registry at many modules: pages by name with a cursor, and lookups that read an
index, never the whole table (SQLite's query plans; PostgreSQL runs the same queries)."""

from __future__ import annotations

import re

import pytest
from tiny_artifacts import publish_module

from model_store import Manifest, Store
from tests.model_store.query_plans import query_plans

NAMES = [f"client-{i:03d}" for i in range(23)]


@pytest.fixture
def many(store: Store, backbone: Manifest) -> Store:
    """23 modules; every third with a second version, every other one active."""
    for index, name in enumerate(NAMES):
        publish_module(store, name, backbone.backbone_fingerprint)
        if index % 3 == 0:
            publish_module(store, name, backbone.backbone_fingerprint, seed=0.7)
        if index % 2 == 0:
            store.activate("module", name, 2 if index % 3 == 0 else 1)
    return store


def test_pages_follow_the_cursor_through_every_name_once(many: Store) -> None:
    registry = many.registry
    seen: list[str] = []
    after: str | None = None
    pages = 0
    while True:
        page = registry.artifact_page("module", after=after, limit=10)
        pages += 1
        names = list(dict.fromkeys(r.name for r in page.records))
        assert len(names) <= 10 and names == sorted(names)
        for name in names:
            versions = [r.version for r in page.records if r.name == name]
            assert versions == registry.list_versions("module", name)
            assert page.active.get(name) == registry.get_active("module", name)
        seen += names
        if page.next_after is None:
            break
        assert page.next_after == names[-1]
        after = page.next_after
    assert seen == NAMES and pages == 3
    assert registry.artifact_page("module", after=NAMES[-1]).records == []
    with pytest.raises(ValueError, match="at least 1"):
        registry.artifact_page("module", limit=0)


def test_hot_lookups_read_an_index_not_the_table(many: Store) -> None:
    registry = many.registry
    if registry.dialect != "sqlite":
        pytest.skip("query plans are read from SQLite; PostgreSQL gets the same indexes")
    name = NAMES[6]
    calls = [
        lambda: registry.default_backbone(),
        lambda: registry.get_active("module", name),
        lambda: registry.get_artifact("module", name, 2),
        lambda: registry.list_versions("module", name),
        lambda: registry.next_version("module", name),
        lambda: registry.active_versions("module"),
        lambda: registry.list_names("module"),
        lambda: registry.latest_event_id(),
        lambda: registry.artifact_page("module", after=NAMES[3], limit=5),
        lambda: many.record("module", name),
    ]
    found = query_plans(registry, calls)
    assert len(found) >= len(calls)
    full_scans = [(statement, plan) for statement, plan in found for step in plan
                  if re.match(r"SCAN (artifacts|active)\b(?! USING (COVERING )?INDEX)", step)]
    assert full_scans == []
