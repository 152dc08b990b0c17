"""Routing per source language: a direction with no router of its own (en->de) routes with
the router of a served direction that reads the same language (en->fr's), when that
router's labels are all domains it has; a direction of another source language (fr->en)
never borrows it; a direction's own router, once published, wins; `explain` and
/health/ready say which router decided (server/routing/shared_router.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import KEYWORDS, make_client
from fastapi.testclient import TestClient
from fasttext_tiny import classifier_bytes

from model_store import Store
from server.engine.artifacts import module_files
from tests.tiny import random_module, tiny_config
from tests.two_directions import EN_DE, EN_FR, FR_EN, build_two_directions, translate

MEDICAL = "The patient takes one tablet every day."  # keywords: patient, tablet
ROUTED = {"source": "en", "target": "de", "explain": True}
EN_FR_ROUTER = {"medical": KEYWORDS["medical"], "law": KEYWORDS["law"]}


def publish_router(root: Path, backbone: str, keywords: dict[str, list[str]]) -> int:
    with Store.open(root, builtin_dir=None) as store:
        fingerprint = store.record("backbone", backbone).fingerprint
        manifest = store.publish("classifier", "router", {"classifier.bin": classifier_bytes(
            keywords)}, config={"labels": list(keywords)}, backbone_fingerprint=fingerprint,
            backbone=backbone)
        store.activate("classifier", "router", manifest.version, backbone=backbone)
        return manifest.version


def add_domain(root: Path, backbone: str, domain: str, seed: int) -> None:
    with Store.open(root, builtin_dir=None) as store:
        fingerprint = store.record("backbone", backbone).fingerprint
        config, params = random_module(tiny_config(), "adapter", seed=seed, bottleneck=4)
        manifest = store.publish("module", domain, module_files(params), config=config,
                                 backbone_fingerprint=fingerprint)
        store.activate("module", domain, manifest.version, backbone=backbone)


def three_directions(root: Path, *, german_law: bool) -> Path:
    """en->fr (medical, law; the only router), fr->en (medical), en->de (medical, and law
    when `german_law`)."""
    build_two_directions(root, german=True)
    if german_law:
        add_domain(root, EN_DE, "law", seed=8)
    publish_router(root, EN_FR, EN_FR_ROUTER)
    return root


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return three_directions(tmp_path_factory.mktemp("shared") / "store", german_law=True)


@pytest.fixture(scope="module")
def client(root: Path) -> Iterator[TestClient]:
    with make_client(root, backbone=EN_FR) as client:
        yield client


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def test_a_direction_without_a_router_routes_with_one_of_its_source_language(
        client: TestClient) -> None:
    routed = translate(client, text=MEDICAL, **ROUTED)
    named = translate(client, text=MEDICAL, source="en", target="de", domain="medical")
    french = translate(client, text=MEDICAL, source="en", target="fr", explain=True)

    assert routed["routing"]["mode"] == "classifier"
    assert routed["routing"]["domain"] == "medical"
    assert routed["translation"] == named["translation"]  # en->de's own medical module
    assert routed["explanation"]["router"] == {"backbone": EN_FR, "name": "router",
                                               "version": 1, "shared": True}
    # the same router, its own direction's: not shared, the same posteriors
    assert french["explanation"]["router"] == {"backbone": EN_FR, "name": "router",
                                               "version": 1, "shared": False}
    assert french["explanation"]["posteriors"] == routed["explanation"]["posteriors"]


def test_source_auto_into_german_routes_with_the_shared_router(client: TestClient) -> None:
    detected = translate(client, text=MEDICAL, source="auto", target="de", explain=True)
    named = translate(client, text=MEDICAL, **ROUTED)

    assert detected["detected"]["language"] == "en"
    assert detected["routing"] == named["routing"]
    assert detected["explanation"]["router"]["shared"] is True
    assert detected["translation"] == named["translation"]


def test_another_source_language_never_borrows_it(client: TestClient) -> None:
    answer = translate(client, text="Le patient prend un comprimé.", source="fr",
                       target="en", explain=True)
    ready = client.get("/health/ready").json()["checks"]["directions"]

    assert answer["routing"]["mode"] == "generic"
    assert answer["explanation"] == {"posteriors": None, "router": None, "threshold": 0.5}
    assert ready[FR_EN].endswith("; router absent: no router of its own, nor has another "
                                 "direction from fr; auto-routed requests use the generic "
                                 "backbone")
    assert "; router shared: tiny-en-fr's router (v1;" in ready[EN_DE]
    assert "router" not in ready[EN_FR]  # its own: the line is as it was


def test_a_router_that_knows_a_domain_the_direction_lacks_is_not_shared(
        tmp_path: Path) -> None:
    root = three_directions(tmp_path / "store", german_law=False)  # en->de: medical only
    with make_client(root, backbone=EN_FR) as client:
        answer = translate(client, text=MEDICAL, **ROUTED)
        line = client.get("/health/ready").json()["checks"]["directions"][EN_DE]

    assert answer["routing"] == {"mode": "generic", "domain": "generic", "confidence": None,
                                 "weights": None, "module_version": None,
                                 "module_versions": None}
    assert "none to share (tiny-en-fr's v1 knows law, not domains here)" in line


def test_the_directions_own_router_wins_as_soon_as_it_is_published(tmp_path: Path) -> None:
    root = three_directions(tmp_path / "store", german_law=True)
    with make_client(root, backbone=EN_FR) as client:
        before = translate(client, text=MEDICAL, **ROUTED)["explanation"]["router"]
        # its own, as the sidecar or a recipe publishes it: it knows medical alone
        version = publish_router(root, EN_DE, {"medical": KEYWORDS["medical"]})
        wait_for(lambda: translate(client, text=MEDICAL, **ROUTED)["explanation"][
            "router"]["backbone"] == EN_DE)
        after = translate(client, text=MEDICAL, **ROUTED)

    assert before["backbone"] == EN_FR and before["shared"] is True
    assert after["explanation"]["router"] == {"backbone": EN_DE, "name": "router",
                                              "version": version, "shared": False}
    assert set(after["explanation"]["posteriors"]) == {"medical"}
    assert after["routing"]["domain"] == "medical"
