"""TBX termbases through the native glossary API and the DeepL door, on the tiny models:
stored with their forbidden target terms, enforced and reported per request, refused
whole (4xx, nothing stored) when the file is not usable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import admin_headers, make_client
from fastapi.testclient import TestClient
from test_libretranslate import build_store

from model_store import Registry
from server.core.settings import LimitSettings
from server.serving.glossaries import GlossaryBook, GlossaryChoice
from server.textproc.document import build_document
from server.textproc.glossary import build_glossary

DATA = Path(__file__).parent / "data"
TBX = {"content-type": "application/x-tbx"}
EN_FR = {"source_lang": "en", "target_lang": "fr"}


def put_tbx(client: TestClient, name: str, data: bytes, params: dict[str, str] | None = None,
            ) -> Any:
    return client.put(f"/admin/glossaries/{name}", headers=admin_headers() | TBX,
                      content=data, params=EN_FR if params is None else params)


def test_a_tbx_glossary_is_stored_enforced_and_its_forbidden_terms_reported(
        client: TestClient) -> None:
    created = put_tbx(client, "terms", (DATA / "tbx2019-basic.tbx").read_bytes())
    assert created.status_code == 201, created.text
    detail = client.get("/admin/glossaries/terms", headers=admin_headers()).json()
    assert detail["entries"]["hard drive"] == "disque dur"
    assert detail["entries"]["Kubernetes"] == "Kubernetes"
    assert detail["forbidden"] == ["disque rigide", "download"]
    # the URL is copied verbatim, so the output holds the superseded "download"
    answer = client.post("/translate", json={
        "text": "Kubernetes fills the hard drive. See https://example.org/download",
        "glossary_id": "terms"}).json()
    assert "Kubernetes" in answer["translation"] and "disque dur" in answer["translation"]
    assert sorted(answer["glossary"]["applied"]) == ["Kubernetes", "hard drive"]
    assert answer["glossary"]["forbidden"] == ["download"]
    clean = client.post("/translate", json={"text": "Kubernetes runs.",
                                            "glossary_id": "terms"}).json()
    assert "forbidden" not in clean["glossary"]  # none held: the field is left out


@pytest.mark.parametrize(("data", "params", "words"), [
    (b'<!DOCTYPE martif [<!ENTITY a "b">]><martif>&a;</martif>', EN_FR, "declares entities"),
    (b"<martif><text>", EN_FR, "not well-formed"),
    (None, {"source_lang": "en", "target_lang": "de"}, "no terms in de"),
    (None, {"source_lang": "en"}, "needs the query parameters source_lang"),
])
def test_bad_tbx_uploads_store_nothing(client: TestClient, data: bytes | None,
                                       params: dict[str, str], words: str) -> None:
    body = data if data is not None else (DATA / "weblate-style.tbx").read_bytes()
    response = put_tbx(client, "terms", body, params)
    assert response.status_code == 422, response.text
    assert words in response.json()["error"]["message"]
    assert client.get("/admin/glossaries", headers=admin_headers()).json()[
        "glossaries"] == []


def test_the_deepl_door_takes_a_tbx_glossary(tmp_path: Path) -> None:
    with make_client(build_store(tmp_path / "store")) as client:
        deepl_door_takes_a_tbx_glossary(client)


def deepl_door_takes_a_tbx_glossary(client: TestClient) -> None:
    form = {"name": "weblate", "source_lang": "EN", "target_lang": "FR",
            "entries_format": "tbx",
            "entries": (DATA / "weblate-style.tbx").read_text(encoding="utf-8")}
    created = client.post("/deepl/v2/glossaries", data=form,
                          headers={"Authorization": "DeepL-Auth-Key any"})
    assert created.status_code == 201, created.text
    info = created.json()
    assert info["entry_count"] == 3 and info["glossary_id"] == "weblate.en-fr"
    translated = client.post("/deepl/v2/translate", json={
        "text": ["Weblate sends e-mail."], "target_lang": "FR",
        "glossary_id": info["glossary_id"], "source_lang": "EN"},
        headers={"Authorization": "DeepL-Auth-Key any"}).json()
    assert "Weblate" in translated["translations"][0]["text"]
    assert "courriel" in translated["translations"][0]["text"]
    refused = client.post("/deepl/v2/glossaries", data=form | {"entries": "<martif>"},
                          headers={"Authorization": "DeepL-Auth-Key any"})
    assert refused.status_code == 400 and "not well-formed" in refused.json()["message"]


def test_forbidden_targets_per_request_for_the_search(tmp_path: Path) -> None:
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    book = GlossaryBook(registry, LimitSettings())
    book.put("med", [("tablet", "comprimé")], default_for="medical", field="entries",
             forbidden=["cachet"])
    assert registry.get_glossary("med").forbidden == ("cachet",)  # type: ignore[union-attr]
    assert book.forbidden_targets(GlossaryChoice(glossary_id="med"), None) == ("cachet",)
    assert book.forbidden_targets(GlossaryChoice(), "medical") == ("cachet",)
    assert book.forbidden_targets(GlossaryChoice(), "law") == ()
    assert book.forbidden_targets(GlossaryChoice(entries={"a": "b"}), "medical") == ()
    book.put("med", [("tablet", "comprimé")], default_for="medical", field="entries")
    assert book.forbidden_targets(GlossaryChoice(), "medical") == ()  # replaced whole
    registry.close()


def test_the_report_checks_the_whole_output() -> None:
    glossary = build_glossary([("tablet", "comprimé")], field="g", max_entries=5,
                              max_term_chars=40, forbidden=["cachet"])
    document = build_document("One tablet. Two pills.", glossary=glossary, terms="inline")
    report = document.glossary_report(["Un comprimé.", "Deux cachets, un Cachet."])
    assert report.applied == ["tablet"] and report.forbidden == ["cachet"]
