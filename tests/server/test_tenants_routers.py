"""A tenant's own router on a live server: once `acme-router` is active, `auto` routes
acme's requests with it (among acme's and the shared domains); other tenants and keys of
no tenant keep the shared router, filtered to what they see."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import BACKBONE, make_settings
from fasttext_tiny import classifier_bytes
from tenant_world import World, build_tenant_store, make_world
from uvicorn_live import serving

from model_store import Store
from server.app import create_app

TEXT = "patient tablet dose"  # medical's words for the shared router
# acme's router learnt those words as its own domain's
ACME_WORDS = {"medical": ["contract", "clause", "tenancy"],
              "acme-legal": ["patient", "tablet", "dose"]}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, Path]]:
    root = build_tenant_store(tmp_path_factory.mktemp("tenant-routers") / "store")
    settings = make_settings(root, access={"api_keys": True, "cache_s": 0.0})
    with serving(create_app(settings)) as base:
        yield make_world(base), root


def routed(world: World, key: str) -> dict[str, object]:
    answer = httpx.post(world.base + "/translate", headers={"X-API-Key": key},
                        json={"text": TEXT, "explain": True}, timeout=30)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def domain(answer: dict[str, object]) -> object:
    return answer["routing"]["domain"]  # type: ignore[index]


def test_a_tenants_router_routes_its_requests(served: tuple[World, Path]) -> None:
    world, root = served
    assert domain(routed(world, world.acme)) == "medical"  # the shared router, filtered
    with Store.open(root, builtin_dir=None) as store:
        fingerprint = store.record("backbone", BACKBONE).fingerprint
        router = store.publish("classifier", "acme-router",
                               {"classifier.bin": classifier_bytes(ACME_WORDS)},
                               config={"labels": list(ACME_WORDS)},
                               backbone_fingerprint=fingerprint)
        store.activate("classifier", "acme-router", router.version)
    deadline = time.monotonic() + 15
    while domain(answer := routed(world, world.acme)) != "acme-legal":
        assert time.monotonic() < deadline, "acme's router was never used"
        time.sleep(0.1)
    assert set(answer["explanation"]["posteriors"]) <= {  # type: ignore[index]
        "medical", "acme-legal", "generic"}
    for other in (world.beta, world.shared):
        assert domain(routed(world, other)) == "medical"
