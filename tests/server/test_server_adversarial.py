"""Adversarial requests (issue #19 and more): each is answered with a 4xx or a 200 that
says what is wrong, decided before the expensive step; none is a 5xx."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import admin_headers, build_store, make_client, make_settings
from fastapi.testclient import TestClient
from starlette.types import Message, Receive, Scope, Send
from uvicorn_live import serving

from benchmarks.speed.adversarial.adversaries import raw_post
from server.api.body_limit import BodyLimitMiddleware
from server.app import create_app
from server.core.metrics import Metrics

LIMIT = 4096


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    root = build_store(tmp_path_factory.mktemp("adversarial") / "store", domains=("law",),
                       classifier=False)
    with make_client(root, limits={"max_body_bytes": LIMIT, "max_request_sentences": 20,
                                   "max_request_tokens": 300}) as client:
        yield client


def error_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


def test_a_declared_body_over_the_limit_is_413(guarded: TestClient) -> None:
    body = json.dumps({"text": "x" * (2 * LIMIT)})
    error = error_of(guarded.post("/translate", content=body,
                                  headers={"content-type": "application/json"}), 413)
    assert error["field"] == "body" and str(LIMIT) in error["message"]
    assert "NMT_LIMITS__MAX_BODY_BYTES" in error["message"]


def test_a_chunked_body_over_the_limit_is_413(guarded: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"text": "'
        for _ in range(100):
            yield b"x" * 1000
        yield b'"}'

    error = error_of(guarded.post("/translate", content=chunks(),
                                  headers={"content-type": "application/json"}), 413)
    assert error["code"] == "too_large" and error["field"] == "body"


def test_a_lying_content_length_is_cut_at_the_limit() -> None:
    """The body says 10 bytes and never ends: refused once `limit` bytes were read, the
    app never ran, and the rest is dropped for at most `linger_bytes`."""
    reads = 0
    reads_when_answered = 0
    sent: list[Message] = []

    async def endless() -> Message:
        nonlocal reads
        reads += 1
        return {"type": "http.request", "body": b"x" * 1000, "more_body": True}

    async def record(message: Message) -> None:
        nonlocal reads_when_answered
        if message["type"] == "http.response.start":
            reads_when_answered = reads
        sent.append(message)

    async def app(_scope: Scope, _receive: Receive, _send: Send) -> None:
        raise AssertionError("the app must not see an oversized body")

    middleware = BodyLimitMiddleware(app, limit=LIMIT, metrics=Metrics(),
                                     streams_itself=lambda _method, _path: False,
                                     linger_bytes=20_000)
    scope = {"type": "http", "method": "POST", "path": "/translate",
             "headers": [(b"content-length", b"10")]}
    asyncio.run(middleware(scope, endless, record))
    assert sent[0]["status"] == 413
    assert reads_when_answered == LIMIT // 1000 + 1
    assert json.loads(sent[1]["body"])["error"]["code"] == "too_large"
    assert sent[-1] == {"type": "http.response.body", "body": b""}  # then the close
    assert reads == reads_when_answered + 21  # lingered on 21,000 more bytes, no more


def test_a_body_within_the_limit_passes_unchanged(guarded: TestClient) -> None:
    response = guarded.post("/translate", json={"text": "Hello.", "domain": "law"})
    assert response.status_code == 200, response.text


def test_deeply_nested_json_is_422(guarded: TestClient) -> None:
    body = b"[" * 2000 + b"]" * 2000
    error = error_of(guarded.post("/translate", content=body,
                                  headers={"content-type": "application/json"}), 422)
    assert error["field"] == "body"


def test_too_many_sentences_is_413_naming_the_cap(guarded: TestClient) -> None:
    error = error_of(guarded.post("/translate", json={"text": "A.\n" * 30}), 413)
    assert "more than 20 sentences" in error["message"] and "(30 so far" in error["message"]
    assert "NMT_LIMITS__MAX_REQUEST_SENTENCES" in error["message"]


def test_sentences_are_counted_over_the_whole_batch(guarded: TestClient) -> None:
    body = {"items": [{"text": "Yes. " * 7}] * 3}
    error = error_of(guarded.post("/translate/batch", json=body), 413)
    assert error["field"] == "items[2].text" and "(21 so far" in error["message"]


def test_too_many_tokens_is_413_naming_the_cap(guarded: TestClient) -> None:
    text = "\n".join(" ".join(["zq"] * 50) for _ in range(4))  # 4 sentences, ~400 tokens
    error = error_of(guarded.post("/translate", json={"text": text}), 413)
    assert "more than 300 source tokens" in error["message"]
    assert "NMT_LIMITS__MAX_REQUEST_TOKENS" in error["message"]


@pytest.mark.parametrize("text", [
    "." * 2000,  # a run of dots: one "sentence"
    "a" * 1000 + "). b" * 200,  # the splitter text (quadratic before)
    "Dr. " * 300,  # abbreviations only
    "(" * 1000 + ")" * 1000,  # brackets
    "中日。" * 300 + "Жж. " * 100,  # mixed scripts without spaces
])
def test_adversarial_texts_get_an_answer(guarded: TestClient, text: str) -> None:
    response = guarded.post("/translate", json={"text": text, "domain": "law"})
    assert response.status_code in (200, 413), response.text


def test_a_batch_of_many_large_texts_is_413(tmp_path_factory: pytest.TempPathFactory) -> None:
    root = build_store(tmp_path_factory.mktemp("big") / "store", domains=(), classifier=False)
    with make_client(root) as client:  # default limits
        body = {"items": [{"text": "x" * 9000}] * 30}
        error = error_of(client.post("/translate/batch", json=body), 413)
        assert error["field"] == "items" and "at most 100000" in error["message"]
        # 200,000 empty items (2.4 MB): refused while the body streams, never parsed
        items = {"items": [{"text": ""}] * 200_000}
        assert error_of(client.post("/translate/batch", json=items), 413)["field"] == "body"
        # 2,000 empty items fit the body: the schema's 1,024-item bound refuses them
        items = {"items": [{"text": ""}] * 2000}
        assert error_of(client.post("/translate/batch", json=items), 422)["field"] == "items"


@pytest.mark.parametrize("version", [2**31, 2**63, 2**64, 10**30])
def test_huge_versions_are_422_not_500(guarded: TestClient, version: int) -> None:
    response = guarded.post("/admin/domains/law/activate", json={"version": version},
                            headers=admin_headers())
    error = error_of(response, 422)
    assert error["field"] == "version"


def test_overlong_names_are_422(guarded: TestClient) -> None:
    response = guarded.post(f"/admin/domains/{'a' * 65}/activate", json={"version": 1},
                            headers=admin_headers())
    assert error_of(response, 422)["field"] == "path.name"
    response = guarded.post("/translate", json={"text": "Hi.", "domain": "d" * 65})
    assert error_of(response, 422)["field"].startswith("domain")


def test_the_openapi_schema_states_the_bounds(guarded: TestClient) -> None:
    schemas = guarded.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["TranslateRequest"]["properties"]["text"]["maxLength"] == 1_000_000
    assert schemas["BatchRequest"]["properties"]["items"]["maxItems"] == 1024
    assert schemas["ActivateRequest"]["properties"]["version"]["maximum"] == 2**31 - 1


@pytest.mark.parametrize("chunked", [False, True])
def test_a_huge_body_over_real_http_gets_its_413(tmp_path: Path, chunked: bool) -> None:
    """24 MB to a real uvicorn server: the client reads the 413 while still sending (the
    server lingers on the rest instead of resetting the connection under it)."""
    root = build_store(tmp_path / "store", domains=(), classifier=False)
    with serving(create_app(make_settings(root))) as base_url:
        outcome = asyncio.run(raw_post(base_url, "huge", size=24 * 1024 * 1024,
                                       chunked=chunked))
    assert outcome.status == 413, outcome
