"""Every user mistake is a clear 4xx with the field at fault, in one error shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import build_store, make_client, make_settings
from fastapi.testclient import TestClient

from server.api.deps import get_translator
from server.app import create_app
from server.core.errors import Busy, DeadlineExceeded, NotReady


def error_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert isinstance(body, dict) and set(body) == {"error"}
    assert set(body["error"]) <= {"code", "message", "field"}
    error: dict[str, Any] = body["error"]
    assert error["message"]
    return error


def test_unknown_domain_is_404_naming_the_known_ones(shared_client: TestClient) -> None:
    error = error_of(shared_client.post("/translate", json={"text": "x", "domain": "cooking"}),
                     404)
    assert error["code"] == "unknown_domain" and error["field"] == "domain"
    assert all(name in error["message"] for name in ("cooking", "medical", "law", "it",
                                                     "generic"))


def test_unknown_domain_in_a_batch_names_the_item(shared_client: TestClient) -> None:
    body = {"items": [{"text": "a"}, {"text": "b", "domain": "cooking"}]}
    error = error_of(shared_client.post("/translate/batch", json=body), 404)
    assert error["field"] == "items[1].domain"


@pytest.mark.parametrize(("body", "field"), [
    ({"domain": "law"}, "text"),
    ({"text": 5}, "text"),
    ({"text": ["a"]}, "text"),
    ({"text": "x", "domain": 5}, "domain"),
    ({"text": "x", "domain": {"law": "much"}}, "domain.law"),
    ({"text": "x", "domain": {"law": -1}}, "domain.law"),
    ({"text": "x", "domain": {"law": 0, "generic": 0}}, "domain"),
    ({"text": "x", "domain": {"cooking": 1}}, "domain.cooking"),
    ({"text": "x", "domain": {}}, "domain"),
    ({"text": "x", "domian": "law"}, "domian"),
    ({"text": "x", "options": {"beam_size": 0}}, "options.beam_size"),
    ({"text": "x", "options": {"beam_size": 9}}, "options.beam_size"),
    ({"text": "x", "options": {"beam_size": 2, "n_best": 3}}, "options.n_best"),
    ({"text": "x", "options": {"n_best": 20}}, "options.n_best"),
    ({"text": "x", "options": {"max_length": 9}}, "options.max_length"),
    ({"text": "x", "options": {"max_length": "long"}}, "options.max_length"),
])
def test_invalid_requests_are_422_with_the_field(shared_client: TestClient,
                                                 body: dict[str, Any], field: str) -> None:
    error = error_of(shared_client.post("/translate", json=body), 422)
    assert error["code"] == "invalid_request" and error["field"] == field


def test_a_top_level_decoding_option_says_where_it_belongs(shared_client: TestClient) -> None:
    error = error_of(shared_client.post("/translate", json={"text": "x", "beam_size": 4}), 422)
    assert error["field"] == "beam_size"
    assert 'decoding options go in "options": {"beam_size": ...}' in error["message"]


def test_nan_weight_is_422(shared_client: TestClient) -> None:
    raw = b'{"text": "x", "domain": {"law": NaN}}'
    error = error_of(shared_client.post("/translate", content=raw,
                                        headers={"content-type": "application/json"}), 422)
    assert error["field"] == "domain.law" and "finite" in error["message"]


def test_lone_surrogate_is_422(shared_client: TestClient) -> None:
    raw = b'{"text": "ok \\ud800"}'
    error = error_of(shared_client.post("/translate", content=raw,
                                        headers={"content-type": "application/json"}), 422)
    assert error["field"] == "text" and "unicode" in error["message"].lower()


@pytest.mark.parametrize("raw", [b"{not json", b"", b"[1, 2", b'"text"'])
def test_malformed_json_is_422(shared_client: TestClient, raw: bytes) -> None:
    error = error_of(shared_client.post("/translate", content=raw,
                                        headers={"content-type": "application/json"}), 422)
    assert error["code"] == "invalid_request" and error["field"] == "body"


@pytest.mark.parametrize(("body", "field"), [
    ({"items": []}, "items"),
    ({"items": [{"text": "a"}, {"txt": "b"}]}, "items[1].text"),
    ({"items": [{"text": "a", "domain": {"law": -2}}]}, "items[0].domain.law"),
    ({"items": "text"}, "items"),
])
def test_invalid_batches_name_the_item(shared_client: TestClient, body: dict[str, Any],
                                       field: str) -> None:
    assert error_of(shared_client.post("/translate/batch", json=body), 422)["field"] == field


@pytest.fixture(scope="module")
def limited_client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = build_store(tmp_path_factory.mktemp("limited") / "store", domains=("law",),
                       classifier=False)
    with make_client(root, limits={"max_text_chars": 50, "max_batch_items": 3,
                                   "max_request_chars": 80}) as client:
        yield client


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/translate", {"text": "x" * 51}, "text"),
    ("/translate/batch", {"items": [{"text": "a"}] * 4}, "items"),
    ("/translate/batch", {"items": [{"text": "a"}, {"text": "b" * 51}]}, "items[1].text"),
    ("/translate/batch", {"items": [{"text": "a" * 45}, {"text": "b" * 45}]}, "items"),
])
def test_size_limits_are_413(limited_client: TestClient, path: str, body: dict[str, Any],
                             field: str) -> None:
    error = error_of(limited_client.post(path, json=body), 413)
    assert error["code"] == "too_large" and error["field"] == field


def test_limits_allow_texts_at_the_limit(limited_client: TestClient) -> None:
    assert limited_client.post("/translate", json={"text": "x" * 50}).status_code == 200


def test_a_sentence_longer_than_the_model_allows_is_413(limited_client: TestClient,
                                                        tmp_path: Path) -> None:
    root = build_store(tmp_path / "store", domains=(), classifier=False)
    with make_client(root) as client:
        text = " ".join(["zq"] * 200)  # > 128 positions of the tiny backbone
        error = error_of(client.post("/translate", json={"text": text}), 413)
        assert "tokens" in error["message"] and error["field"] == "text"


def test_unknown_route_and_method(shared_client: TestClient) -> None:
    assert error_of(shared_client.get("/nowhere"), 404)["code"] == "not_found"
    assert error_of(shared_client.get("/translate"), 405)["code"] == "method_not_allowed"


def test_errors_are_counted(shared_client: TestClient) -> None:
    shared_client.post("/translate", json={"text": "x", "domain": "cooking"})
    metrics = shared_client.get("/metrics").text
    assert 'nmt_api_errors_total{code="unknown_domain"}' in metrics
    assert 'nmt_api_requests_total{route="/translate",status="404"}' in metrics


class FailingTranslator:
    """Stands in for the translator through `dependency_overrides`."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def translate(self, items: object, request: object, *,
                        proportions: bool = False, explain: bool = False,
                        quality: object = None, deadline_s: float | None = None) -> list[object]:
        raise self.error


@pytest.mark.parametrize(("error", "status", "code"), [
    (Busy("full", retry_after=7), 429, "queue_full"),
    (DeadlineExceeded("late"), 504, "timeout"),
    (NotReady("loading"), 503, "not_ready"),
    (RuntimeError("secret internals"), 500, "internal"),
])
def test_one_exception_mapping(store_root: Path, error: Exception, status: int,
                               code: str) -> None:
    app = create_app(make_settings(store_root))
    app.dependency_overrides[get_translator] = lambda: FailingTranslator(error)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.post("/translate", json={"text": "x"})
        body = error_of(response, status)
        assert body["code"] == code
        assert "secret" not in response.text
        if status == 429:
            assert response.headers["retry-after"] == "7"
        metrics = client.get("/metrics").text
        assert f'nmt_api_errors_total{{code="{code}"}} 1.0' in metrics
