"""Two tiny backbones in one server (docs/DIRECTIONS.md): each direction translates with
its own modules, an admin write to one leaves the other bit-identical, `source: auto`
detects the language and refuses one that no backbone serves, and a request without
languages is served by the default direction exactly as a server of that backbone alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import admin_headers, make_client, module_archive
from fastapi.testclient import TestClient

from model_store import Store
from tests.two_directions import EN_FR, ENGLISH, FR_EN, FRENCH, build_two_directions, translate

GERMAN = "Der Patient nimmt jeden Tag eine Tablette mit einem Glas Wasser ein."


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_two_directions(tmp_path_factory.mktemp("directions") / "store")


@pytest.fixture(scope="module")
def both(root: Path) -> Iterator[TestClient]:
    with make_client(root, backbone=EN_FR) as client:
        yield client


def alone(root: Path, backbone: str, requests: list[dict[str, Any]]) -> list[str]:
    """The translations of a server that serves `backbone` only."""
    with make_client(root, backbone=backbone, all_backbones=False) as client:
        return [translate(client, **body)["translation"] for body in requests]


def test_languages_lists_exactly_the_served_directions_with_their_domains(
        both: TestClient) -> None:
    listed = both.get("/languages").json()["directions"]

    assert [(d["source"], d["target"], d["backbone"], d["default"], d["domains"])
            for d in listed] == [("en", "fr", EN_FR, True, ["law", "medical"]),
                                 ("fr", "en", FR_EN, False, ["medical"])]
    assert listed[1]["source_name"] == "French"


def test_each_direction_translates_with_its_own_backbone_and_modules(
        both: TestClient, root: Path) -> None:
    requests = [{"text": FRENCH, "domain": "medical"}, {"text": FRENCH, "domain": "generic"}]
    served = [translate(both, source="fr", target="en", **body) for body in requests]
    default = [translate(both, **body) for body in requests]

    assert [a["translation"] for a in served] == alone(root, FR_EN, requests)
    assert [a["translation"] for a in default] == alone(root, EN_FR, requests)
    assert served[0]["routing"]["module_version"] == 1
    # the default direction answers a request that names it as one that names nothing
    assert translate(both, source="en", target="fr", **requests[0]) == default[0]
    law = both.post("/translate", json={"text": FRENCH, "domain": "law", "source": "fr"})
    assert law.status_code == 404  # law is a domain of en->fr only
    assert "known: medical, generic, auto" in law.json()["error"]["message"]


def test_source_auto_detects_the_language_and_refuses_an_unserved_one(
        both: TestClient, root: Path) -> None:
    french = translate(both, text=FRENCH, source="auto", domain="medical")
    english = translate(both, text=ENGLISH, source="auto", target="fr")
    german = both.post("/translate", json={"text": GERMAN, "source": "auto"})
    wrong_way = both.post("/translate", json={"text": ENGLISH, "source": "en",
                                              "target": "de"})

    assert french["detected"]["language"] == "fr" and french["detected"]["confidence"] > 0.5
    assert french["translation"] == alone(root, FR_EN, [{"text": FRENCH,
                                                          "domain": "medical"}])[0]
    assert english["detected"]["language"] == "en"
    assert german.status_code == 400
    error = german.json()["error"]
    assert error["code"] == "unsupported_language" and error["field"] == "source"
    assert error["message"].startswith("no served backbone translates from de (detected, ")
    assert error["message"].endswith("served directions: en->fr, fr->en")
    assert wrong_way.status_code == 400
    assert "translates from en into de" in wrong_way.json()["error"]["message"]
    assert "detected" not in translate(both, text=ENGLISH)  # only with source auto


def test_batch_picks_one_direction_for_all_items(both: TestClient, root: Path) -> None:
    response = both.post("/translate/batch", json={
        "source": "auto", "target": "en", "domain": "medical",
        "items": [{"text": FRENCH}, {"text": "Le patient prend un comprimé."}]})

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["detected"]["language"] == "fr"
    assert [r["translation"] for r in body["results"]] == alone(
        root, FR_EN, [{"text": FRENCH, "domain": "medical"},
                      {"text": "Le patient prend un comprimé.", "domain": "medical"}])


def test_an_admin_write_to_one_direction_leaves_the_other_bit_identical(
        tmp_path: Path) -> None:
    store = build_two_directions(tmp_path / "store")
    probe = {"text": FRENCH, "domain": "medical", "source": "fr", "target": "en",
             "options": {"n_best": 2, "beam_size": 2}}
    with make_client(store, backbone=EN_FR) as client:
        before = translate(client, **probe)
        en_fr_before = translate(client, text=ENGLISH, domain="medical")
        # en->fr (the default direction's admin) gets medical v2 and drops law
        with Store.open(store, builtin_dir=None) as opened:
            fingerprint = opened.record("backbone", EN_FR).fingerprint
        archive = module_archive(tmp_path / "scratch", "medical", 9, fingerprint=fingerprint)
        upload = client.post("/admin/domains/medical/versions?activate=true",
                             headers=admin_headers(), content=archive)
        assert upload.status_code == 201, upload.text
        assert client.delete("/admin/domains/law", headers=admin_headers()).status_code == 200
        after = translate(client, **probe)
        en_fr_after = translate(client, text=ENGLISH, domain="medical")

    assert after == before  # translation, alternatives, scores, routing: bit-identical
    assert en_fr_after["routing"]["module_version"] == 2
    assert en_fr_before["routing"]["module_version"] == 1
    with Store.open(store, builtin_dir=None) as opened:
        assert opened.active_domains(EN_FR) == {"medical": 2}
        assert opened.active_domains(FR_EN) == {"medical": 1}


def test_admin_calls_name_their_direction_with_backbone(tmp_path: Path) -> None:
    store = build_two_directions(tmp_path / "store")
    probe = {"text": ENGLISH, "domain": "medical", "options": {"n_best": 2, "beam_size": 2}}
    with Store.open(store, builtin_dir=None) as opened:
        fingerprint = opened.record("backbone", FR_EN).fingerprint
    archive = module_archive(tmp_path / "scratch", "medical", 11, fingerprint=fingerprint)
    with make_client(store, backbone=EN_FR) as client:
        before = translate(client, **probe)
        upload = client.post(f"/admin/domains/medical/versions?activate=true&backbone={FR_EN}",
                             headers=admin_headers(), content=archive)
        wrong = client.post("/admin/domains/medical/versions?backbone=tiny-de-en",
                            headers=admin_headers(), content=archive)
        listed = client.get(f"/admin/domains?backbone={FR_EN}", headers=admin_headers())
        after = translate(client, **probe)
        french = translate(client, text=FRENCH, domain="medical", source="fr")

    assert upload.status_code == 201, upload.text
    assert upload.json()["version"] == 2
    assert wrong.status_code == 404
    assert wrong.json()["error"]["message"] == (
        "backbone 'tiny-de-en' is not served; served: tiny-en-fr, tiny-fr-en")
    assert [(d["name"], d["active_version"]) for d in listed.json()["domains"]] == [
        ("medical", 2)]
    assert after == before  # en->fr: bit-identical
    assert french["routing"]["module_version"] == 2
