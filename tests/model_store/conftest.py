from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tiny_artifacts import publish_backbone

from model_store import Manifest, Store


@pytest.fixture
def store(tmp_path: Path, registry_url: str) -> Iterator[Store]:
    """A store on SQLite and on PostgreSQL (the test runs once on each)."""
    with Store.open(tmp_path / "store", registry_url=registry_url, builtin_dir=None) as opened:
        yield opened


@pytest.fixture
def backbone(store: Store) -> Manifest:
    manifest = publish_backbone(store)
    store.activate("backbone", manifest.name, manifest.version)
    return manifest
