"""The LibreTranslate-compatible API, driven by the real clients `libretranslatepy` and
`libretranslate-aio` against a real uvicorn on a loopback port, plus raw HTTP calls
(Weblate-style JSON, form bodies, errors)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import (
    BACKBONE,
    DOMAINS,
    SEEDS,
    admin_headers,
    make_client,
    make_settings,
    publish_classifier,
    publish_module,
)
from conftest import build_store as build_plain_store
from libretranslate_aio import AsyncLibreTranslate, LibreTranslate
from libretranslate_aio.exceptions import BadRequestError
from libretranslate_aio.models import Detection, Translation
from libretranslatepy import LibreTranslateAPI
from uvicorn_live import serving

from model_store import Store
from server.api.libretranslate.errors import to_libretranslate
from server.app import create_app
from server.core.errors import Busy, DeadlineExceeded, InvalidInput, NotReady, TooLarge
from tests.tiny import tiny_backbone_files

ENGLISH = "The patient takes one tablet a day and the council adopted this regulation."
FRENCH = "Le patient prend un comprimé par jour et le conseil a adopté ce règlement."
MAX_TEXT_CHARS = 2000


def build_store(root: Path) -> Path:
    """The server tests' tiny store, its backbone declaring English -> French."""
    with Store.open(root, builtin_dir=None) as store:
        files = tiny_backbone_files()
        manifest = store.publish("backbone", BACKBONE, files,
                                 config=json.loads(files["config.json"]),
                                 provenance={"languages": {"source": "en", "target": "fr"}})
        store.activate("backbone", BACKBONE, manifest.version)
        for name in DOMAINS:
            publish_module(store, name, SEEDS[name])
        publish_classifier(store)
    return root


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = build_store(tmp_path_factory.mktemp("lt") / "store")
    app = create_app(make_settings(root, limits={"max_text_chars": MAX_TEXT_CHARS}))
    with serving(app) as url:
        yield url


@pytest.fixture(scope="module")
def http(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def lt(base: str) -> Iterator[LibreTranslate]:
    with LibreTranslate(base + "/libretranslate") as client:
        yield client


def native(http: httpx.Client, text: str, **extra: Any) -> dict[str, Any]:
    response = http.post("/translate", json={"text": text, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# -- the real clients ---------------------------------------------------------------------

def test_libretranslatepy_translates_detects_and_lists(base: str, http: httpx.Client) -> None:
    client = LibreTranslateAPI(base + "/libretranslate")
    assert client.translate(ENGLISH, "en", "fr") == native(http, ENGLISH)["translation"]
    assert client.languages() == [{"code": "en", "name": "English", "targets": ["fr"]},
                                  {"code": "fr", "name": "French", "targets": []}]
    detected = client.detect(FRENCH)
    assert detected[0]["language"] == "fr" and detected[0]["confidence"] > 90
    assert [d["language"] for d in detected] == ["fr", "en"]
    with pytest.raises(urllib.error.HTTPError) as refused:
        client.translate(ENGLISH, "en", "es")
    assert refused.value.code == 400
    assert "es is not supported" in json.loads(refused.value.read())["error"]


def test_aio_client_translates_one_text_like_the_native_api(
        lt: LibreTranslate, http: httpx.Client) -> None:
    result = lt.translate(ENGLISH, "en", "fr")
    assert result.translated_text == native(http, ENGLISH)["translation"]
    assert result.detected_language is None  # only for source "auto"
    assert result.alternatives is None  # only when asked


def test_aio_client_batch_answers_in_order(lt: LibreTranslate, http: httpx.Client) -> None:
    texts = ["Click the button.", "The council adopted this regulation.", "", "Thank you."]
    result = lt.translate(texts, "en", "fr")
    assert result.translated_text == [native(http, text)["translation"] for text in texts]


def test_auto_detects_the_source(lt: LibreTranslate) -> None:
    result = lt.translate(ENGLISH, "auto", "fr")
    assert result.detected_language is not None
    assert not isinstance(result.detected_language, list)
    assert result.detected_language.language == "en"
    assert 50 < result.detected_language.confidence <= 100
    batch = lt.translate([ENGLISH, "Click the button."], "auto", "fr")
    assert isinstance(batch.detected_language, list)
    assert [d.language for d in batch.detected_language] == ["en", "en"]


def test_auto_with_nothing_to_detect(lt: LibreTranslate) -> None:
    result = lt.translate(["", " "], "auto", "fr")
    assert result.translated_text == ["", " "]
    assert isinstance(result.detected_language, list)
    assert [(d.language, d.confidence) for d in result.detected_language] == [("en", 0.0)] * 2


def test_auto_refuses_a_text_in_a_language_the_backbone_does_not_translate(
        lt: LibreTranslate) -> None:
    with pytest.raises(BadRequestError) as refused:
        lt.translate(FRENCH, "auto", "fr")
    assert refused.value.status_code == 400
    assert "fr (detected) is not supported as a source language" in refused.value.message
    assert "English (en) into French (fr)" in refused.value.message


def test_alternatives_are_other_hypotheses(lt: LibreTranslate) -> None:
    result = lt.translate(ENGLISH, "en", "fr", alternatives=3)
    assert isinstance(result.alternatives, list) and result.alternatives
    assert len(result.alternatives) <= 3
    assert result.translated_text not in result.alternatives
    assert len(set(map(str, result.alternatives))) == len(result.alternatives)
    batch = lt.translate([ENGLISH, "Click the button."], "en", "fr", alternatives=2)
    assert isinstance(batch.alternatives, list) and len(batch.alternatives) == 2
    assert all(isinstance(found, list) for found in batch.alternatives)


def test_html_is_translated_without_alternatives(lt: LibreTranslate) -> None:
    result = lt.translate("<p>Click the <b>button</b>.</p>", "en", "fr", format="html",
                          alternatives=2)
    text = result.translated_text
    assert isinstance(text, str)
    # The native format=html path keeps the markup in place around the translated words.
    assert text.startswith("<p>") and text.endswith("</p>"), text
    assert text.count("<b>") == 1 and text.count("</b>") == 1, text
    assert result.alternatives == []  # as LibreTranslate: no alternatives for html


def test_detect_languages_settings_and_health(lt: LibreTranslate) -> None:
    assert lt.detect(ENGLISH)[0].language == "en"
    languages = lt.languages()
    assert [(x.code, x.name, x.targets) for x in languages] == [
        ("en", "English", ["fr"]), ("fr", "French", [])]
    settings = lt.frontend_settings()
    assert settings.char_limit == MAX_TEXT_CHARS
    assert (settings.api_keys, settings.key_required, settings.suggestions) == (
        False, False, True)
    assert settings.language.source.code == "auto"
    assert (settings.language.target.code, settings.language.target.name) == ("fr", "French")
    assert lt.health() is True


def test_async_client(base: str, http: httpx.Client) -> None:
    async def calls() -> tuple[Translation, list[Detection]]:
        async with AsyncLibreTranslate(base + "/libretranslate") as client:
            with pytest.raises(BadRequestError, match="missing q parameter"):
                await client.translate("", "en", "fr")
            return await asyncio.gather(
                client.translate(["Click the button.", ENGLISH], "en", "fr"),
                client.detect(FRENCH))

    result, detected = asyncio.run(calls())
    assert result.translated_text == [native(http, "Click the button.")["translation"],
                                      native(http, ENGLISH)["translation"]]
    assert detected[0].language == "fr"


@pytest.mark.parametrize(("call", "message"), [
    (lambda c: c.translate("Hello.", "en", "de"),
     "de is not supported as a target language; this server translates English (en) into "
     "French (fr)"),
    (lambda c: c.translate("Hello.", "de", "fr"), "de is not supported as a source language"),
    (lambda c: c.translate("Hello.", "en", "fr", format="xml"),
     "xml format is not supported; formats: text, html"),
    (lambda c: c.translate("Hello.", "en", "fr", alternatives=99),
     "Invalid request: alternatives parameter must be <= 7"),
    (lambda c: c.translate("x" * (MAX_TEXT_CHARS + 1), "en", "fr"),
     f"text of {MAX_TEXT_CHARS + 1} characters; at most {MAX_TEXT_CHARS}"),
    (lambda c: c.detect(""), "Invalid request: missing q parameter"),
])
def test_client_errors_are_400_with_a_message(lt: LibreTranslate, call: Any,
                                              message: str) -> None:
    with pytest.raises(BadRequestError) as refused:
        call(lt)
    assert refused.value.status_code == 400
    assert message in refused.value.message


# -- raw HTTP: what other integrations send -----------------------------------------------

def test_weblate_style_json_with_a_list(http: httpx.Client) -> None:
    texts = ["Open the file.", "Do not shake.", "Thank you very much."]
    response = http.post("/libretranslate/translate", json={
        "q": texts, "source": "en", "target": "fr", "format": "text", "api_key": ""})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["translatedText"] == [native(http, text)["translation"] for text in texts]
    assert "detectedLanguage" not in body and "alternatives" not in body
    assert [r["mode"] for r in body["routing"]] == [
        native(http, text)["routing"]["mode"] for text in texts]


def test_domain_extra_and_routing_in_the_answer(http: httpx.Client) -> None:
    response = http.post("/libretranslate/translate", json={
        "q": ENGLISH, "source": "en", "target": "fr", "domain": "medical"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["translatedText"] == native(http, ENGLISH, domain="medical")["translation"]
    assert body["routing"]["mode"] == "explicit" and body["routing"]["domain"] == "medical"
    assert body["routing"]["module_version"] == 1


def test_form_body_with_query_and_crlf(http: httpx.Client) -> None:
    response = http.post("/libretranslate/translate?target=fr",
                         data={"q": "Click the button.\r\nOpen the file.", "source": "en"})
    assert response.status_code == 200, response.text
    expected = native(http, "Click the button.\nOpen the file.")["translation"]
    assert response.json()["translatedText"] == expected


@pytest.mark.parametrize(("request_kwargs", "status", "message"), [
    ({"content": b"{not json", "headers": {"content-type": "application/json"}}, 400,
     "Invalid JSON format"),
    ({"json": ["a list"]}, 400, "Invalid JSON format"),
    ({"json": {"source": "en", "target": "fr"}}, 400, "Invalid request: missing q parameter"),
    ({"json": {"q": "Hi.", "target": "fr"}}, 400,
     "Invalid request: missing source parameter"),
    ({"json": {"q": "Hi.", "source": "en"}}, 400, "Invalid request: missing target parameter"),
    ({"json": {"q": ["Hi.", 3], "source": "en", "target": "fr"}}, 400,
     "q must be a string or a list of strings"),
    ({"json": {"q": "Hi.", "source": "en", "target": "fr", "alternatives": "many"}}, 400,
     "Invalid request: alternatives parameter is not a number"),
    ({"json": {"q": "Hi.", "source": "en", "target": "fr", "domain": "cooking"}}, 400,
     "Invalid request: domain: unknown domain 'cooking'; known: "),
    ({"json": {"q": "Hi.", "source": "en", "target": "fr", "domain": 3}}, 400,
     "domain must be a domain name"),
    ({"files": {"q": ("q.txt", b"Hi.")}, "data": {"source": "en", "target": "fr"}}, 400,
     "q must be text, not a file"),
])
def test_raw_errors(http: httpx.Client, request_kwargs: dict[str, Any], status: int,
                    message: str) -> None:
    response = http.post("/libretranslate/translate", **request_kwargs)
    assert response.status_code == status
    assert set(response.json()) == {"error"}
    assert message in response.json()["error"]


def test_health_is_get_only(http: httpx.Client) -> None:
    assert http.get("/libretranslate/health").json() == {"status": "ok"}
    assert http.post("/libretranslate/health").status_code == 405


def test_a_backbone_without_languages_is_named(tmp_path: Path) -> None:
    root = build_plain_store(tmp_path / "store", domains=(), classifier=False)
    with make_client(root) as client:
        response = client.post("/libretranslate/translate",
                               json={"q": "Hi.", "source": "en", "target": "fr"})
        assert response.status_code == 503
        assert "backbone 'tiny' does not say which languages" in response.json()["error"]
        assert client.get("/libretranslate/languages").status_code == 503


def test_openapi_documents_both_body_types(http: httpx.Client) -> None:
    paths = http.get("/openapi.json").json()["paths"]
    body = paths["/libretranslate/translate"]["post"]["requestBody"]["content"]
    assert set(body) == {"application/json", "application/x-www-form-urlencoded",
                         "multipart/form-data"}
    assert body["application/json"]["schema"]["required"] == ["q", "source", "target"]
    assert {"/libretranslate/languages", "/libretranslate/detect",
            "/libretranslate/frontend/settings", "/libretranslate/health"} <= set(paths)


@pytest.mark.parametrize(("error", "status", "message", "headers"), [
    (Busy("the queue is full", retry_after=2), 429, "Slowdown: the queue is full",
     {"Retry-After": "2"}),
    (TooLarge("65 items; at most 64", field="items"), 400,
     "Invalid request: items: 65 items; at most 64", None),
    (InvalidInput("bad", field="q"), 400, "Invalid request: q: bad", None),
    (DeadlineExceeded("too slow"), 504, "too slow", None),
    (NotReady("no backbone"), 503, "no backbone", None),
    (RuntimeError("secret detail"), 500, "internal server error; the server log has details",
     None),
])
def test_native_errors_in_libretranslate_shape(error: Exception, status: int, message: str,
                                               headers: dict[str, str] | None) -> None:
    mapped = to_libretranslate(error)
    assert (mapped.status, mapped.message, mapped.headers) == (status, message, headers)


def test_browsers_may_call_it_cross_origin(http: httpx.Client) -> None:
    preflight = http.options("/libretranslate/translate", headers={
        "Origin": "https://example.org", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == "*"
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "Content-Type" in preflight.headers["access-control-allow-headers"]
    for response in (http.get("/libretranslate/languages"),
                     http.post("/libretranslate/translate", json={"q": "Hi."})):
        assert response.headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-origin" not in http.get("/domains").headers
    assert http.post("/libretranslate/no-such-endpoint").status_code == 404


def test_api_keys_guard_this_api_as_the_native_one(tmp_path: Path) -> None:
    """With NMT_ACCESS__API_KEYS on, `api_key` (or X-API-Key) is checked against the same
    registry keys; LibreTranslate asks for a missing key with 400, refuses a bad one with
    403, and its page learns from the settings that a key is required."""
    root = build_store(tmp_path / "store")
    with make_client(root, access={"api_keys": True}) as client:
        created = client.post("/admin/keys", json={"name": "weblate"}, headers=admin_headers())
        assert created.status_code == 201, created.text
        key = created.json()["key"]
        body = {"q": "Hello.", "source": "en", "target": "fr"}
        missing = client.post("/libretranslate/translate", json=body)
        assert missing.status_code == 400 and missing.json()["error"]
        unknown = client.post("/libretranslate/translate", json={**body, "api_key": "nmt_x"})
        assert unknown.status_code == 403 and unknown.json()["error"]
        good = client.post("/libretranslate/translate", json={**body, "api_key": key})
        assert good.status_code == 200 and good.json()["translatedText"]
        by_header = client.post("/libretranslate/translate", json=body,
                                headers={"X-API-Key": key})
        assert by_header.status_code == 200
        assert client.post("/libretranslate/detect", data={"q": "Hello."}).status_code == 400
        detected = client.post("/libretranslate/detect", data={"q": "Hello there.",
                                                              "api_key": key})
        assert detected.status_code == 200 and detected.json()[0]["language"] == "en"
        settings = client.get("/libretranslate/frontend/settings").json()
        assert settings["apiKeys"] is True and settings["keyRequired"] is True


@pytest.mark.parametrize(("content_type", "body"), [
    ("multipart/form-data; boundary=xyz",
     b"--xyz\r\nContent-Disposition: form-data\r\n\r\nq\r\n--xyz--"),
    ("multipart/form-data", b"garbage"),
    ("multipart/form-data; boundary=a", b"--a\r\nbad header line\r\n\r\n\x00--a--\r\n"),
])
def test_a_malformed_form_body_is_400(http: httpx.Client, content_type: str,
                                      body: bytes) -> None:
    answer = http.post("/libretranslate/translate", content=body,
                         headers={"content-type": content_type})
    assert answer.status_code == 400
    assert answer.json()["error"].startswith("Invalid form body:")
