"""A third direction (en->de beside en->fr and fr->en) through every door: the native API
(languages, /translate, batch), LibreTranslate, DeepL, ModernMT and documents list it and
translate with its own backbone (the answer a server of en->de alone gives); `source: auto`
sends English to German only when the target says German; a pair no backbone serves is a
400 that names the served ones."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_client
from fastapi.testclient import TestClient

from tests.two_directions import (
    EN_DE,
    EN_FR,
    ENGLISH,
    FRENCH,
    GERMAN,
    build_two_directions,
    translate,
)

# the default direction first, then the others by backbone name
SERVED = "en->fr, en->de, fr->en"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_two_directions(tmp_path_factory.mktemp("three") / "store", german=True)


@pytest.fixture(scope="module")
def client(root: Path) -> Iterator[TestClient]:
    with make_client(root, backbone=EN_FR) as client:
        yield client


@pytest.fixture(scope="module")
def german_alone(root: Path) -> Iterator[TestClient]:
    """A server of the en->de backbone alone: what every door must answer for en->de."""
    with make_client(root, backbone=EN_DE, all_backbones=False) as client:
        yield client


def alone(client: TestClient, text: str) -> str:
    return str(translate(client, text=text, domain="generic")["translation"])


def test_native_languages_list_the_third_direction(client: TestClient) -> None:
    listed = client.get("/languages").json()["directions"]

    assert [(d["source"], d["target"], d["backbone"], d["default"]) for d in listed] == [
        ("en", "fr", EN_FR, True), ("en", "de", EN_DE, False),
        ("fr", "en", "tiny-fr-en", False)]
    assert listed[1]["target_name"] == "German" and listed[2]["domains"] == ["medical"]


def test_native_translate_and_batch_use_the_german_backbone(
        client: TestClient, german_alone: TestClient) -> None:
    expected = alone(german_alone, ENGLISH)
    named = translate(client, text=ENGLISH, source="en", target="de", domain="generic")
    batch = client.post("/translate/batch", json={
        "source": "en", "target": "de", "domain": "generic",
        "items": [{"text": ENGLISH}, {"text": "The dose is adjusted for children."}]})

    assert named["translation"] == expected
    assert named["translation"] != translate(client, text=ENGLISH, domain="generic")[
        "translation"]  # the default direction (en->fr) writes something else
    assert batch.status_code == 200, batch.text
    assert [r["translation"] for r in batch.json()["results"]] == [
        expected, alone(german_alone, "The dose is adjusted for children.")]


def test_source_auto_picks_german_only_when_the_target_says_german(
        client: TestClient, german_alone: TestClient) -> None:
    into_german = translate(client, text=ENGLISH, source="auto", target="de",
                            domain="generic")
    no_target = translate(client, text=ENGLISH, source="auto", domain="generic")

    assert into_german["detected"]["language"] == "en"
    assert into_german["translation"] == alone(german_alone, ENGLISH)
    # English without a target: the default direction (en->fr), never German
    assert no_target["translation"] == translate(client, text=ENGLISH, source="en",
                                                 target="fr", domain="generic")["translation"]


@pytest.mark.parametrize(("body", "field", "wanted"), [
    ({"text": GERMAN, "source": "auto"}, "source", "from de (detected, "),
    ({"text": ENGLISH, "source": "en", "target": "es"}, "source", "from en into es"),
    ({"text": FRENCH, "source": "fr", "target": "de"}, "source", "from fr into de"),
])
def test_an_unserved_pair_is_a_400_naming_the_three_served_ones(
        client: TestClient, body: dict[str, str], field: str, wanted: str) -> None:
    response = client.post("/translate", json=body)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "unsupported_language" and error["field"] == field
    assert wanted in error["message"]
    assert error["message"].endswith(f"served directions: {SERVED}")


def test_libretranslate_lists_german_and_translates_into_it(
        client: TestClient, german_alone: TestClient) -> None:
    languages = client.get("/libretranslate/languages").json()
    answer = client.post("/libretranslate/translate",
                         json={"q": ENGLISH, "source": "en", "target": "de"})
    detected = client.post("/libretranslate/translate",
                           json={"q": ENGLISH, "source": "auto", "target": "de"})
    refused = client.post("/libretranslate/translate",
                          json={"q": FRENCH, "source": "fr", "target": "de"})

    # German is listed although nothing is translated from it: Weblate's LibreTranslate
    # backend takes the listed codes as the languages it may ask for, target ones included
    assert {entry["code"]: entry["targets"] for entry in languages} == {
        "en": ["fr", "de"], "fr": ["en"], "de": []}
    assert answer.status_code == 200, answer.text
    assert answer.json()["translatedText"] == alone(german_alone, ENGLISH)
    assert detected.json()["detectedLanguage"]["language"] == "en"
    assert detected.json()["translatedText"] == answer.json()["translatedText"]
    assert refused.status_code == 400
    assert refused.json()["error"].endswith(f"this server translates {SERVED}")


def test_deepl_lists_de_as_a_target_and_translates_into_it(
        client: TestClient, german_alone: TestClient) -> None:
    targets = client.get("/deepl/v2/languages", params={"type": "target"}).json()
    sources = client.get("/deepl/v2/languages", params={"type": "source"}).json()
    pairs = client.get("/deepl/v2/glossary-language-pairs").json()["supported_languages"]
    # as Weblate sends it: lower-case codes, a JSON list, XML placeables
    answer = client.post("/deepl/v2/translate", json={
        "text": [ENGLISH], "source_lang": "en", "target_lang": "de",
        "tag_handling": "xml", "ignore_tags": ["x"]})
    detected = client.post("/deepl/v2/translate", json={"text": [ENGLISH],
                                                        "target_lang": "DE"})

    assert [t["language"] for t in targets] == ["FR", "DE", "EN-GB", "EN-US"]
    assert [s["language"] for s in sources] == ["EN", "FR"]
    assert {(p["source_lang"], p["target_lang"]) for p in pairs} == {
        ("EN", "FR"), ("FR", "EN"), ("EN", "DE")}
    assert answer.status_code == 200, answer.text
    assert answer.json()["translations"][0]["text"] == alone(german_alone, ENGLISH)
    assert detected.json()["translations"][0]["detected_source_language"] == "EN"
    assert detected.json()["translations"][0]["text"] == alone(german_alone, ENGLISH)


def test_modernmt_lists_german_and_translates_into_it(
        client: TestClient, german_alone: TestClient) -> None:
    languages = client.get("/modernmt/languages").json()["data"]
    answer = client.get("/modernmt/translate",
                        params={"q": ENGLISH, "source": "en", "target": "de"})
    refused = client.get("/modernmt/translate",
                         params={"q": FRENCH, "source": "fr", "target": "de"})

    assert languages == {"en": ["fr", "de"], "fr": ["en"]}
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"]["translation"] == alone(german_alone, ENGLISH)
    assert refused.json()["status"] == 400
    assert SERVED in refused.json()["error"]["message"]


def test_a_document_goes_to_the_german_backbone(
        client: TestClient, german_alone: TestClient) -> None:
    lines = [ENGLISH, "The dose is adjusted for children."]
    data = ("\n".join(lines) + "\n").encode()
    response = client.post("/translate/file", files={"file": ("leaflet.txt", data)},
                           data={"source": "en", "target": "de", "domain": "generic"})
    refused = client.post("/translate/file", files={"file": ("leaflet.txt", data)},
                          data={"source": "fr", "target": "de"})

    assert response.status_code == 200, response.text
    assert 'filename="leaflet.de.txt"' in response.headers["content-disposition"]
    assert response.content.decode().split("\n")[:-1] == [alone(german_alone, line)
                                                           for line in lines]
    assert refused.status_code == 400
    assert SERVED in refused.json()["error"]["message"]


def test_a_deepl_document_into_de_uses_the_german_backbone(
        client: TestClient, german_alone: TestClient) -> None:
    data = (ENGLISH + "\n").encode()
    started = client.post("/deepl/v2/document", files={"file": ("leaflet.txt", data)},
                          data={"source_lang": "EN", "target_lang": "DE"})
    assert started.status_code == 200, started.text
    ids = started.json()
    deadline = time.monotonic() + 60
    status = ""
    while status not in ("done", "error"):
        assert time.monotonic() < deadline, "the document job did not finish"
        status = client.post(f"/deepl/v2/document/{ids['document_id']}",
                             data={"document_key": ids["document_key"]}).json()["status"]
        time.sleep(0.05)
    result = client.post(f"/deepl/v2/document/{ids['document_id']}/result",
                         data={"document_key": ids["document_key"]})

    assert status == "done"
    assert result.content.decode() == alone(german_alone, ENGLISH) + "\n"
