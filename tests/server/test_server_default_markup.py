"""Markup, placeholders and glossaries on the embedded default model (en -> fr)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_server_api_markup import markup

from server.app import create_app
from server.settings import Settings
from server.textproc.placeholders import find_spans

PAGE = ('<article><h1>Package leaflet</h1>\n<p>Take <b>one tablet</b> a day with water. '
        'Read the <a href="/leaflet?lang=en&amp;v=2" title="Leaflet">leaflet</a> '
        '&amp; ask your doctor.</p><ul><li>Keep out of the reach of children.</li>'
        '<li>Do not use after the expiry date.<br>Store below 25&#176;C.</li></ul>'
        '<!-- end --><p>Run <code>nmt --help</code> for help.</p></article>')
GETTEXT = ["Could not open file %s: %s", "Delete %1$s from %2$s?",
           "{count} files were copied to {folder}.", "%(user)s joined %(channel)s",
           "Visit https://www.gnu.org/licenses/ for details.", "Save &amp; Close",
           "Downloaded %d of %d MB in %.1f seconds"]


@pytest.fixture(scope="module")
def default_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = Settings(store_dir=tmp_path_factory.mktemp("default") / "store",
                        builtin_artifacts=True, decoding={"beam_size": 1},
                        scheduler={"request_timeout_s": 600})  # a busy CI machine
    with TestClient(create_app(settings)) as client:
        yield client


def post(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/translate", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_html_page_round_trip(default_client: TestClient) -> None:
    out = post(default_client, {"text": PAGE, "format": "html"})["translation"]
    assert markup(out) == markup(PAGE)
    assert "<code>nmt --help</code>" in out and "25&#176;C" in out
    assert "children" not in out and "enfants" in out  # the text was translated


def test_inline_tag_kept_by_the_model(default_client: TestClient) -> None:
    out = post(default_client, {"text": "<p>The <b>patient</b> is sick.</p>",
                                "format": "html", "domain": "medical"})["translation"]
    assert out.startswith("<p>") and out.endswith("</p>")
    assert "<b>patient</b>" in out


@pytest.mark.parametrize("text", GETTEXT)
def test_gettext_placeholders_round_trip(default_client: TestClient, text: str) -> None:
    out = post(default_client, {"text": text, "domain": "it"})["translation"]
    for start, end in find_spans(text):
        assert text[start:end] in out


def test_glossary_terms_enforced(default_client: TestClient) -> None:
    result = post(default_client, {"text": "Take one tablet twice a day with a meal.",
                                   "domain": "medical",
                                   "glossary": {"tablet": "cachet", "meal": "repas"}})
    assert "cachet" in result["translation"] and "repas" in result["translation"]
    assert result["glossary"] == {"applied": ["tablet", "meal"], "missed": []}

