"""LibreTranslate clients against a server of two directions (en->fr, fr->en): they list
both, translate both ways (each as the native API does in that direction), detect the
source among the served languages, and are refused a direction that is not served."""

from __future__ import annotations

import json
import urllib.error
from collections.abc import Iterator

import httpx
import pytest
from conftest import make_settings
from libretranslate_aio import LibreTranslate
from libretranslatepy import LibreTranslateAPI
from uvicorn_live import serving

from server.app import create_app
from tests.two_directions import EN_FR, ENGLISH, FRENCH, build_two_directions


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = build_two_directions(tmp_path_factory.mktemp("lt-directions") / "store")
    with serving(create_app(make_settings(root, backbone=EN_FR))) as url:
        yield url


def native(base: str, text: str, source: str, target: str) -> str:
    response = httpx.post(base + "/translate", timeout=30,
                          json={"text": text, "source": source, "target": target})
    assert response.status_code == 200, response.text
    return str(response.json()["translation"])


def test_libretranslatepy_lists_and_uses_both_directions(base: str) -> None:
    client = LibreTranslateAPI(base + "/libretranslate")

    assert client.languages() == [{"code": "en", "name": "English", "targets": ["fr"]},
                                  {"code": "fr", "name": "French", "targets": ["en"]}]
    assert client.translate(ENGLISH, "en", "fr") == native(base, ENGLISH, "en", "fr")
    assert client.translate(FRENCH, "fr", "en") == native(base, FRENCH, "fr", "en")
    assert client.translate(ENGLISH, "en", "fr") != client.translate(ENGLISH, "fr", "en")
    with pytest.raises(urllib.error.HTTPError) as refused:
        client.translate(ENGLISH, "en", "de")
    assert refused.value.code == 400
    assert json.loads(refused.value.read())["error"] == (
        "de is not supported as a target language from en; this server translates "
        "en->fr, fr->en")


def test_aio_client_detects_the_source_and_picks_its_direction(base: str) -> None:
    with LibreTranslate(base + "/libretranslate") as client:
        french = client.translate(FRENCH, "auto", "en")
        english = client.translate([ENGLISH, ENGLISH], "auto", "fr")

    assert french.detected_language is not None
    assert not isinstance(french.detected_language, list)
    assert french.detected_language.language == "fr"
    assert french.translated_text == native(base, FRENCH, "fr", "en")
    assert english.translated_text == [native(base, ENGLISH, "en", "fr")] * 2
