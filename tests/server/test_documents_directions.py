"""Documents on a server of two directions (docs/DIRECTIONS.md): `source`/`target` send a
file to its direction's backbone (the same translation as that direction's
/translate/batch), `source=auto` detects the language of the document's text, a pair no
backbone serves is a 400 that lists the served directions, and a job keeps its
direction. The LibreTranslate form does the same through its real client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import make_client, make_settings
from fastapi.testclient import TestClient
from libretranslate_aio import LibreTranslate
from libretranslate_aio.exceptions import BadRequestError
from uvicorn_live import serving

from server.app import create_app
from tests.two_directions import EN_FR, build_two_directions

FRENCH = ["Le patient prend un comprimé chaque jour avec un verre d'eau.",
          "La dose est adaptée pour les enfants de moins de six ans.",
          "Demandez conseil à votre médecin avant de prendre ce médicament."]
ENGLISH = ["The patient takes one tablet every day with a glass of water.",
           "The dose is adjusted for children under six years of age."]
GERMAN = ["Der Patient nimmt jeden Tag eine Tablette mit einem Glas Wasser ein.",
          "Die Dosis wird für Kinder unter sechs Jahren angepasst."]


def text_file(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_two_directions(tmp_path_factory.mktemp("doc-directions") / "store")


@pytest.fixture(scope="module")
def client(root: Path) -> Iterator[TestClient]:
    # files above 150 characters become jobs
    with make_client(root, backbone=EN_FR, documents={"sync_chars": 150}) as client:
        yield client


def post(client: TestClient, name: str, data: bytes, **fields: str) -> httpx.Response:
    return client.post("/translate/file", files={"file": (name, data)}, data=fields)


def batch(client: TestClient, lines: list[str], **languages: str) -> list[str]:
    response = client.post("/translate/batch", json={
        "domain": "medical", "items": [{"text": line} for line in lines], **languages})
    assert response.status_code == 200, response.text
    return [r["translation"] for r in response.json()["results"]]


def written_lines(data: bytes) -> list[str]:
    return data.decode().split("\n")[:-1]


def test_source_and_target_send_the_file_to_that_directions_backbone(
        client: TestClient) -> None:
    response = post(client, "avis.txt", text_file(FRENCH[:1]), source="fr", target="en",
                    domain="medical")

    assert response.status_code == 200, response.text
    assert 'filename="avis.en.txt"' in response.headers["content-disposition"]
    assert written_lines(response.content) == batch(client, FRENCH[:1], source="fr",
                                                    target="en")
    # the default direction would have written something else
    assert written_lines(response.content) != batch(client, FRENCH[:1])
    assert "x-nmt-detected" not in response.headers


def test_source_auto_detects_the_documents_language(client: TestClient) -> None:
    response = post(client, "avis.txt", text_file(FRENCH[:1]), source="auto",
                    domain="medical")
    english = post(client, "note.txt", text_file(ENGLISH[:1]), source="auto",
                   domain="medical")

    assert response.status_code == 200, response.text
    detected = json.loads(response.headers["x-nmt-detected"])
    assert detected["language"] == "fr" and 0.5 < detected["confidence"] <= 1
    assert written_lines(response.content) == batch(client, FRENCH[:1], source="fr",
                                                    target="en")
    assert 'filename="avis.en.txt"' in response.headers["content-disposition"]
    assert english.status_code == 200, english.text
    assert json.loads(english.headers["x-nmt-detected"])["language"] == "en"
    assert written_lines(english.content) == batch(client, ENGLISH[:1])


@pytest.mark.parametrize(("name", "data", "fields", "field", "message"), [
    ("brief.txt", text_file(GERMAN), {"source": "auto"}, "source",
     "no served backbone translates from de (detected, "),
    ("a.txt", text_file(ENGLISH), {"source": "en", "target": "de"}, "source",
     "no served backbone translates from en into de"),
    ("a.txt", text_file(ENGLISH), {"target": "es"}, "target",
     "no served backbone translates into es"),
    ("a.txt", text_file(ENGLISH), {"source": "es"}, "source",
     "no served backbone translates from es"),
])
def test_a_pair_no_backbone_serves_is_refused_with_the_served_ones(
        client: TestClient, name: str, data: bytes, fields: dict[str, str], field: str,
        message: str) -> None:
    response = post(client, name, data, **fields)

    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "unsupported_language" and error["field"] == field
    assert message in error["message"]
    assert error["message"].endswith("served directions: en->fr, fr->en")


def test_a_job_keeps_its_direction_and_says_what_was_detected(client: TestClient) -> None:
    data = text_file(FRENCH)
    response = post(client, "avis.txt", data, source="auto", domain="medical")

    assert response.status_code == 202, response.text
    job = client.get(response.headers["location"], params={"wait": 30}).json()
    assert job["state"] == "done", job
    assert job["detected"]["language"] == "fr" and job["output_name"] == "avis.en.txt"
    result = client.get(job["result_url"])
    assert written_lines(result.content) == batch(client, FRENCH, source="fr", target="en")
    assert json.loads(result.headers["x-nmt-detected"])["language"] == "fr"


def test_the_libretranslate_client_translates_a_file_in_either_direction(
        root: Path, tmp_path: Path) -> None:
    french = tmp_path / "avis.txt"
    french.write_bytes(text_file(FRENCH[:1]))
    german = tmp_path / "brief.txt"
    german.write_bytes(text_file(GERMAN))
    with serving(create_app(make_settings(root, backbone=EN_FR))) as base, \
            LibreTranslate(base + "/libretranslate") as lt:
        url = lt.translate_file(french, source="auto", target="en").translated_file_url
        downloaded = httpx.get(url)
        with pytest.raises(BadRequestError) as refused:
            lt.translate_file(german, source="auto", target="fr")
        expected = httpx.post(base + "/translate/batch", json={
            "source": "fr", "target": "en", "items": [{"text": FRENCH[0]}]}).json()
    assert url.endswith(".avis.en.txt")
    assert downloaded.status_code == 200
    assert written_lines(downloaded.content) == [expected["results"][0]["translation"]]
    assert "from de (detected" in str(refused.value)
