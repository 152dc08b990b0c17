"""The published OpenAPI schema and the validation agree: the X-API-Key header is required
only when keys are on, a JSON boolean is not an integer (nor a weight), and a JSON document
sent as a CSV/TSV glossary is refused rather than split into odd terms."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import admin_headers, build_store, make_client
from fastapi.testclient import TestClient

KEYED_OPERATIONS = [("post", "/translate"), ("post", "/translate/batch"),
                    ("post", "/libretranslate/translate"), ("post", "/libretranslate/detect")]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("truth") / "store", domains=("law",),
                       classifier=False)


@pytest.fixture(scope="module")
def client(store: Path) -> Iterator[TestClient]:
    with make_client(store) as client:
        yield client


def security(client: TestClient, method: str, path: str) -> list[dict[str, Any]]:
    requirements: list[dict[str, Any]] = client.get("/openapi.json").json()[
        "paths"][path][method]["security"]
    return requirements


@pytest.mark.parametrize(("method", "path"), KEYED_OPERATIONS)
def test_the_key_header_is_optional_while_keys_are_off(client: TestClient, method: str,
                                                       path: str) -> None:
    assert security(client, method, path) == [{"APIKeyHeader": []}, {}]
    # and so it is: no header, an answer
    assert client.post("/translate", json={"text": "Hello.", "domain": "law"}).status_code == 200


def test_the_key_header_is_required_when_keys_are_on(store: Path) -> None:
    with make_client(store, access={"api_keys": True}) as keyed:
        for method, path in KEYED_OPERATIONS:
            assert security(keyed, method, path) == [{"APIKeyHeader": []}], path
        refused = keyed.post("/translate", json={"text": "Hello.", "domain": "law"})
        assert refused.status_code == 401


def test_admin_operations_still_require_the_bearer_token(client: TestClient) -> None:
    assert security(client, "post", "/admin/keys") == [{"HTTPBearer": []}]


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/admin/keys", {"name": "team", "chars_per_minute": True}, "chars_per_minute"),
    ("/admin/keys", {"name": "team", "requests_per_minute": "5"}, "requests_per_minute"),
    ("/admin/domains/law/activate", {"version": True}, "version"),
    ("/translate", {"text": "Hello.", "options": {"beam_size": True}}, "beam_size"),
    ("/translate", {"text": "Hello.", "domain": {"law": True}}, "domain"),
    ("/translate", {"text": "Hello.", "explain": 1}, "explain"),
])
def test_booleans_and_strings_are_not_numbers(client: TestClient, path: str,
                                              body: dict[str, Any], field: str) -> None:
    answer = client.post(path, json=body, headers=admin_headers())
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert field in (error["field"] or "") + error["message"]
    if path == "/admin/keys":  # nothing was created
        assert client.get("/admin/keys", headers=admin_headers()).json()["keys"] == []


def test_libretranslate_weights_are_numbers(client: TestClient) -> None:
    answer = client.post("/libretranslate/translate", json={
        "q": "Hello.", "source": "en", "target": "fr", "domain": {"law": True}})
    assert answer.status_code == 400
    assert "domain" in answer.json()["error"]


@pytest.mark.parametrize("path", ["/libretranslate/translate", "/libretranslate/detect"])
def test_libretranslate_api_key_is_a_string(client: TestClient, path: str) -> None:
    answer = client.post(path, json={"q": "Hello.", "source": "en", "target": "fr",
                                     "api_key": {"not": "a key"}})
    assert answer.status_code == 400
    assert "api_key must be a string" in answer.json()["error"]


@pytest.mark.parametrize(("media_type", "body"), [
    ("text/csv", "[null, null]"),
    ("text/csv", '{"a": "b", "c": "d"}'),
    ("text/tab-separated-values", '["source",\t"target"]'),
])
def test_a_json_document_is_not_a_glossary_table(client: TestClient, media_type: str,
                                                 body: str) -> None:
    answer = client.put("/admin/glossaries/terms", content=body.encode(),
                        headers={**admin_headers(), "Content-Type": media_type})
    assert answer.status_code == 422, answer.text
    assert "the body is JSON" in answer.json()["error"]["message"]
    assert client.get("/admin/glossaries/terms", headers=admin_headers()).status_code == 404


def test_a_table_is_still_a_glossary(client: TestClient) -> None:
    answer = client.put("/admin/glossaries/table", content=b"tablet,comprime\nnull,nul\n",
                        headers={**admin_headers(), "Content-Type": "text/csv"})
    assert answer.status_code == 201, answer.text
    assert answer.json()["entries"] == {"tablet": "comprime", "null": "nul"}
